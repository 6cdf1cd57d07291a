"""Evaluate a trained run on a benchmark split: decode, score, write `predictions.jsonl` and `metrics.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from benchbuild.device import resolve_device
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.scoring import benchmark_label, score_rows, split_rows, write_json
from benchbuild.training.run_folder import load_model, read_run
from benchbuild.zoo.decoding import decoding_limit, generate_predictions

PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"


def evaluate_run(run_dir: str | Path, data: str | Path, *, split: str = "test", beam: int = 1, batch_size: int = 64,
                 out: str | Path | None = None, device: str = "auto", max_new_tokens: int | None = None,
                 lexicon: str | Path | None = None, compound: str | None = None,
                 progress: bool = False) -> dict[str, Any]:
    """Decode `split` of benchmark `data` with the run's selected checkpoint and score it; files go to `out`
    (default: the run folder). Returns the metrics as written to `metrics.json`."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as transformers_logging

    from benchbuild import zoo
    from benchbuild.evaluation.cter import read_compounds, read_lexicon

    transformers_logging.disable_progress_bar()
    zoo.register()
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    if not (run_dir / "config.json").is_file():
        raise BenchbuildError(f"{run_dir} holds no selected checkpoint yet (no config.json): train it first")
    rows = split_rows(data, split)
    # CTER's inputs are checked before the long decoding, so a wrong path fails at once.
    compounds = read_compounds(compound, rows) if lexicon is not None else None
    if lexicon is not None:
        read_lexicon(lexicon)
    target = torch.device(resolve_device(device))
    model = load_model(run_dir).to(target)
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    limit = max_new_tokens or decoding_limit(tokenizer, [row["target"] for row in rows])
    predictions = generate_predictions(model, tokenizer, [row["source"] for row in rows], beam=beam,
                                       batch_size=batch_size, max_new_tokens=limit, device=target, progress=progress)
    scores = score_rows(rows, predictions, lexicon=lexicon, compounds=compounds)
    result = {
        "run": str(run_dir), "model": run.get("model"), "seed": run.get("seed"),
        "selected_step": run.get("selected_step"), "benchmark": benchmark_label(data),
        "benchmark_path": str(Path(data).resolve()), "split": split, "beam": beam, "max_new_tokens": limit,
        **scores,
    }
    destination = Path(out) if out is not None else run_dir
    destination.mkdir(parents=True, exist_ok=True)
    # A killed evaluation leaves neither file half written, nor new predictions beside an older metrics.json.
    (destination / METRICS_FILE).unlink(missing_ok=True)
    partial = destination / (PREDICTIONS_FILE + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        for row, prediction in zip(rows, predictions):
            record = {"id": row.get("id"), "source": row["source"], "target": row["target"], "prediction": prediction,
                      "correct": " ".join(prediction.split()) == " ".join(row["target"].split())}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    partial.replace(destination / PREDICTIONS_FILE)
    write_json(destination / METRICS_FILE, result)
    return result
