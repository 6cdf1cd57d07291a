"""Time a SCAN training step of the zoo `transformer` (SCAN recipe: batch 256) on CPU, by how the batch is run:
its length groups in one forward pass (`length_groups`, the default for the zoo Transformer), length-sorted
micro-batches one forward pass each (`micro_batches`, the default before), or the whole padded batch.

The same batches of SCAN `simple` (seeded, as in training) are run by each variant in turn within one process, so
load from other processes hits all alike; the median step times and their ratios are printed.

Run: .venv/bin/python benchmarks/scan_step_time.py [--steps 12] [--work /tmp/scan-bench]
"""

from __future__ import annotations

import argparse
import platform
import statistics
from pathlib import Path

import torch
from scan_step import BATCH, ScanStep

from benchbuild.zoo.recipe import TrainingRecipe

# name: (one forward pass over all parts?, number of parts)
VARIANTS = {
    "8 length groups, one pass (default)": (True, 8),
    "4 length groups, one pass": (True, 4),
    "4 micro-batches, one pass each": (False, 4),
    "whole padded batch": (False, 1),
}
BASELINE = "4 micro-batches, one pass each"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--work", type=Path, default=Path("/tmp/scan-bench"))
    args = parser.parse_args()

    scan = ScanStep(args.work)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for step in range(args.steps + 2):  # the first two rounds warm up
        for name, (grouped, parts) in VARIANTS.items():
            scan.network.accepts_length_groups = grouped  # the instance's switch; the class default is True
            recipe = TrainingRecipe(steps=1, batch_size=BATCH, learning_rate=1e-3, micro_batches=parts,
                                    length_groups=parts)
            seconds = scan.run(step, recipe)
            if step >= 2:
                times[name].append(seconds)
    print(f"machine: {platform.machine()} {platform.node()}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, CPU capability {torch.backends.cpu.get_cpu_capability()}; "
          f"{args.steps} steps of batch 256 on SCAN simple per variant")
    baseline = statistics.median(times[BASELINE])
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"{name:38s} median {median * 1000:7.1f} ms/step   speed-up vs micro-batches {baseline / median:4.2f}x")


if __name__ == "__main__":
    main()
