"""Time grouped training's CPU attention backends (`benchbuild.zoo.attention`): the compiled packed kernel (which
also lets the zoo Transformer lay the batch out with no padding) against attending group by group in torch (the
path without a C compiler, or with BENCHBUILD_PACKED_ATTENTION=0), and, where the kernel does not apply, SDPA with
hashed dropout against torch's own SDPA with dropout.

Three comparisons, each alternating its variants within one process so that load from other processes hits all
alike: (1) one attention layer alone, forward + backward, on a SCAN decoder batch's shapes (256 sequences of 16
positions, causal, attention dropout 0.1); (2) SCAN training steps of the zoo `transformer` (SCAN recipe, batch 256,
8 length groups); (3) the same steps of `relative_transformer`, whose self-attention has distance terms, with the
hashed-dropout backend and with `F.scaled_dot_product_attention` in its place. Medians and ratios are printed.

Run: .venv/bin/python benchmarks/attention_step_time.py [--steps 15] [--work /tmp/scan-bench] [--only 1,2,3]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import time
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from scan_step import BATCH, ScanStep

from benchbuild.zoo.recipe import TrainingRecipe
from benchbuild.zoo.attention import hashed_dropout, packed, sdpa
from benchbuild.zoo.attention.layouts import SequenceLayout

HEADS, HEAD_DIM, ROWS, LENGTH = 8, 16, 256, 16


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def time_layer(rounds: int) -> None:
    starts = np.arange(ROWS) * LENGTH
    lengths = np.full(ROWS, LENGTH)
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=True)
    fused = torch.randn(ROWS * LENGTH, 3 * HEADS * HEAD_DIM, requires_grad=True)

    def kernel() -> None:
        packed.attend_projections(fused, None, layout, HEADS, 0.1).sum().backward()

    def per_group() -> None:  # what the torch path does for one group of this shape
        q, k, v = (part.view(ROWS, LENGTH, HEADS, HEAD_DIM).transpose(1, 2) for part in fused.chunk(3, dim=1))
        out = hashed_dropout.attend(q, k, v, None, True, 0.1)
        out.transpose(1, 2).reshape(ROWS * LENGTH, -1).sum().backward()

    times: dict[str, list[float]] = {"packed kernel": [], "torch, one group": []}
    for round_ in range(rounds + 3):
        for name, function in (("packed kernel", kernel), ("torch, one group", per_group)):
            start = time.perf_counter()
            function()
            if round_ >= 3:
                times[name].append(time.perf_counter() - start)
    packed_ms, torch_ms = median_ms(times["packed kernel"]), median_ms(times["torch, one group"])
    print(f"one causal self-attention layer ({ROWS} x {LENGTH}, {HEADS} heads of {HEAD_DIM}), forward + backward: "
          f"packed {packed_ms:.2f} ms, torch {torch_ms:.2f} ms, ratio torch/packed {torch_ms / packed_ms:.2f}")


def time_steps(steps: int, work: Path) -> None:
    step = ScanStep(work)
    recipe = TrainingRecipe(steps=1, batch_size=BATCH, learning_rate=1e-3, length_groups=8)
    for number in range(3):  # warm-up: compiles the kernels, fills the caches
        step.run(number, recipe)
        with packed.disabled():
            step.run(number, recipe)
    times: dict[str, list[float]] = {"packed kernel": [], "torch, group by group": []}
    for number in range(3, 3 + steps):
        times["packed kernel"].append(step.run(number, recipe))
        with packed.disabled():
            times["torch, group by group"].append(step.run(number, recipe))
    packed_ms, torch_ms = median_ms(times["packed kernel"]), median_ms(times["torch, group by group"])
    print(f"SCAN training step (batch {BATCH}, 8 length groups), median of {steps}: packed {packed_ms:.1f} ms, "
          f"torch group by group {torch_ms:.1f} ms, ratio {torch_ms / packed_ms:.2f}")


def time_hashed_dropout(steps: int, work: Path) -> None:
    step = ScanStep(work, "relative_transformer")
    recipe = TrainingRecipe(steps=1, batch_size=BATCH, learning_rate=1e-3, length_groups=8)
    variants = {"hashed dropout": contextlib.nullcontext, "torch SDPA": lambda: mock.patch.object(
        hashed_dropout, "attend", sdpa.attend)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for number in range(2 + steps):  # the first two rounds warm up
        for name, context in variants.items():
            with context():
                seconds = step.run(number, recipe)
            if number >= 2:
                times[name].append(seconds)
    hashed_ms, torch_ms = median_ms(times["hashed dropout"]), median_ms(times["torch SDPA"])
    print(f"relative_transformer SCAN step (batch {BATCH}, 8 length groups), median of {steps}: hashed dropout "
          f"{hashed_ms:.1f} ms, torch SDPA with dropout {torch_ms:.1f} ms, ratio {torch_ms / hashed_ms:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--work", type=Path, default=Path("/tmp/scan-bench"))
    parser.add_argument("--only", default="1,2,3", help="which comparisons to run, e.g. 3")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not packed.available():
        raise SystemExit("the packed attention kernel could not be built here (no C compiler?)")
    print(f"machine: {platform.machine()} {platform.processor() or ''}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    if "1" in only:
        time_layer(args.steps * 2)
    if "2" in only:
        time_steps(args.steps, args.work)
    if "3" in only:
        time_hashed_dropout(args.steps, args.work)


if __name__ == "__main__":
    main()
