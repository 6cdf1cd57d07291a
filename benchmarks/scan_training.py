"""Train the zoo `transformer` with its SCAN recipe on one SCAN splitting for a fixed step budget, then score it.

Prints the steps, the training wall time, the selected step and the test exact match, so RESULTS.md can record
whether `transformer` reaches >= 99% on `simple` within 15 minutes on this machine (and the same run on
`addprim_jump`, where 000 Table 3 reports ~3%).

Run: .venv/bin/python benchmarks/scan_training.py --split simple --max-steps 800 --work /tmp/scan-bench
     .venv/bin/python benchmarks/scan_training.py --split simple --max-minutes 15 --eval-every 100
(`--max-minutes`: the recipe's step budget, stopped after that much training and validation time.)
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from benchbuild.evaluation.evaluate import evaluate_run
from benchbuild.scan.build import build_scan
from benchbuild.scan.parameters import ScanParameters
from benchbuild.training.loop import train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="simple")
    parser.add_argument("--max-steps", type=int, default=None, help="default: 800, or the recipe's with --max-minutes")
    parser.add_argument("--max-minutes", type=float, default=None)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/scan-bench"))
    args = parser.parse_args()

    data = args.work / "scan" / args.split
    if not data.exists():
        for name, benchmark in build_scan(ScanParameters(split=[args.split])):
            benchmark.save(args.work / "scan" / name)
    run = args.work / f"run-{args.split}-seed{args.seed}"
    start = time.perf_counter()
    max_steps = args.max_steps if args.max_steps is not None or args.max_minutes is not None else 800
    result = train("transformer", data, run, seed=args.seed, max_steps=max_steps, max_minutes=args.max_minutes,
                   device="cpu", overrides={"eval_every": args.eval_every}, progress=False, overwrite=True)
    trained = time.perf_counter() - start
    start = time.perf_counter()
    metrics = evaluate_run(run, data, split="test", beam=1, batch_size=256, device="cpu", progress=False)
    decoded = time.perf_counter() - start
    summary = {
        "machine": f"{platform.machine()} {platform.node()}, torch threads {torch.get_num_threads()}",
        "split": args.split, "steps": result.steps, "selected_step": result.selected_step,
        "validation_exact_match": result.validation_exact_match, "train_seconds": round(trained, 1),
        "training_and_validation_seconds": json.loads((run / "run.json").read_text())["elapsed_s"],
        "test_rows": metrics.get("rows"), "test_exact_match": metrics.get("exact_match"),
        "decode_seconds": round(decoded, 1),
        "validation_by_step": [f"{line['step']}: {line['validation_exact_match']:.2f}% at {line['elapsed_s'] / 60:.1f} min"
                               for line in map(json.loads, (run / "train_log.jsonl").read_text().splitlines())
                               if "validation_exact_match" in line],
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
