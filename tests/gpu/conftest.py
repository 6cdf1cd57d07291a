"""Fixtures of the `gpu` tests: a small real SCAN benchmark, IEEE float32 arithmetic for comparisons across devices,
and the zoo tests' helpers (`tiny_zoo`, the incremental-decoding helpers), whose CPU tests these tests repeat on CUDA.

Every module here skips itself when torch sees no CUDA device; `benchmarks/gpu/run.sh` runs them on a GPU machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import datasets
import pytest
import torch

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts

# The zoo's tiny sizes and its incremental-decoding helpers live beside the CPU tests in tests/zoo, which pytest puts
# on sys.path only when it collects that folder; `pytest tests/gpu` alone needs it here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "zoo"))


def scan_rows(path: Path, prefix: str, limit: int, max_actions: int) -> list[dict]:
    """The first `limit` SCAN lines (`IN: … OUT: …`) of `path` whose action sequence has at most `max_actions`."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        if len(target.split()) <= max_actions:
            rows.append({"id": f"{prefix}-{len(rows)}", "source": source, "target": target})
        if len(rows) == limit:
            break
    return rows


@pytest.fixture(scope="session")
def tiny_scan(shared_data: Path, tmp_path_factory) -> Path:
    """A SCAN benchmark folder (family `scan`: word tokenizer, SCAN recipe) of 160 train and 24 test rows of
    `simple` with at most 4 actions; training holds 16 train rows out for validation."""
    folder = shared_data / "scan" / "simple_split"
    splits = {"train": scan_rows(folder / "tasks_train_simple.txt", "train", 160, 4),
              "test": scan_rows(folder / "tasks_test_simple.txt", "test", 24, 4)}
    out = tmp_path_factory.mktemp("gpu-bench") / "simple"
    info = BuildInfo(family="scan", name="simple", parameters={"rows": {k: len(v) for k, v in splits.items()}})
    card = CardFacts(pretty_name="tiny SCAN", summary="test data", languages=["en"], license="BSD")
    benchmark = Benchmark.from_splits(splits, info, card)
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(out))  # the card is not needed to train
    (out / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    return out


@pytest.fixture
def ieee_float32():
    """float32 matrix products, convolutions and LSTMs in full precision (no TF32), so logits computed on CUDA and on
    CPU from the same weights agree to float32 rounding; restored afterwards."""
    backends = [torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn]
    before = [backend.fp32_precision for backend in backends]
    for backend in backends:
        backend.fp32_precision = "ieee"
    yield
    for backend, precision in zip(backends, before):
        backend.fp32_precision = precision
