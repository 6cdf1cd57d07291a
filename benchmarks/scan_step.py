"""One SCAN training step of a zoo model (default `transformer`; SCAN recipe sizes, batch 256), shared by the step
benchmarks.

`ScanStep(work, model)` builds SCAN `simple` under `work` if needed, the word vocabulary, the seeded model (a
catalogue entry's name), a fused AdamW and a CPU accelerator; `ScanStep.run(step, recipe)` times one step (seeded
batch, forward + backward, clipping, update) and returns its seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from accelerate import Accelerator

from benchbuild.benchmark import load_splits
from benchbuild.scan.build import build_scan
from benchbuild.scan.parameters import ScanParameters
from benchbuild.training.batching import batch_indices, encode_rows
from benchbuild.training.loop import backward_batch
from benchbuild.zoo.recipe import TrainingRecipe
from benchbuild.training.tokenization import build_tokenizer
from benchbuild.zoo import build_model, load_entry

BATCH = 256


class ScanStep:
    def __init__(self, work: Path, model: str = "transformer"):
        data = work / "scan" / "simple"
        if not data.exists():
            for name, benchmark in build_scan(ScanParameters(split=["simple"])):
                benchmark.save(work / "scan" / name)
        rows = list(load_splits(data)["train"])
        self.tokenizer = build_tokenizer([text for row in rows for text in (row["source"], row["target"])], "word",
                                         None)
        self.encoded = encode_rows(self.tokenizer, rows)
        torch.manual_seed(0)
        self.network = build_model(load_entry(model), vocab_size=len(self.tokenizer),
                                   pad_token_id=self.tokenizer.pad_token_id, bos_token_id=self.tokenizer.bos_token_id,
                                   eos_token_id=self.tokenizer.eos_token_id)
        self.network.train()
        self.optimizer = torch.optim.AdamW(self.network.parameters(), lr=1e-3, fused=True)
        self.accelerator = Accelerator(cpu=True)

    def run(self, step: int, recipe: TrainingRecipe) -> float:
        indices = batch_indices(step, BATCH, len(self.encoded.sources), 0)
        start = time.perf_counter()
        backward_batch(self.accelerator, self.network, self.encoded, indices, self.tokenizer, recipe)
        torch.nn.utils.clip_grad_norm_(self.network.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start
