"""Time the zoo's CPU dropout (`benchbuild.zoo.dropout`: one numba pass per mask) against PyTorch's `F.dropout`.

Two comparisons, each alternating its variants within one process so that load from other processes hits all
alike: (1) forward + backward of dropout alone on tensors of a SCAN step's shapes; (2) SCAN training steps of the
zoo `transformer` (SCAN recipe, batch 256, length groups) with the zoo's dropout and with `F.dropout` swapped in
everywhere (sub-layer outputs, the residual add, the feed-forward ReLU, attention weights). Medians and ratios
are printed.

Run: .venv/bin/python benchmarks/dropout_step_time.py [--steps 12] [--work /tmp/scan-bench]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from scan_step import BATCH, ScanStep

import benchbuild.zoo.dropout as zoo_dropout
from benchbuild.zoo.recipe import TrainingRecipe
from benchbuild.zoo.attention import hashed_dropout

KERNELS = {name: getattr(zoo_dropout, name) for name in ("dropout", "dropout_add", "relu_dropout")}
TORCH = {
    "dropout": F.dropout,
    "dropout_add": lambda residual, x, p, training: residual + F.dropout(x, p, training),
    "relu_dropout": lambda x, p, training: F.dropout(F.relu(x), p, training),
}
VARIANTS = {"zoo dropout (numba, fused)": KERNELS, "torch F.dropout": TORCH}
REFERENCE = "torch F.dropout"


def use(functions: dict) -> None:
    """Route the zoo's dropout entry points (module globals, looked up at call time; the attention backend's
    `dropout` too) to `functions`."""
    for name, function in functions.items():
        setattr(zoo_dropout, name, function)
    hashed_dropout.dropout = functions["dropout"]


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def time_alone(rounds: int) -> None:
    shapes = {"hidden (4300, 128)": (4300, 128), "feed-forward (4300, 256)": (4300, 256),
              "attention weights (37, 8, 28, 28)": (37, 8, 28, 28)}
    for label, shape in shapes.items():
        x = torch.randn(shape, requires_grad=True)
        upstream = torch.randn(shape)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for round_ in range(rounds + 3):
            for name, functions in VARIANTS.items():
                start = time.perf_counter()
                for _ in range(20):
                    functions["dropout"](x, 0.1, True).backward(upstream)
                if round_ >= 3:
                    times[name].append((time.perf_counter() - start) / 20)
        reference = median_ms(times[REFERENCE])
        print(f"dropout forward + backward, {label}: " + "; ".join(
            f"{name} {median_ms(measured) * 1000:.0f} us ({reference / median_ms(measured):.2f}x)"
            for name, measured in times.items()))


def time_steps(steps: int, work: Path) -> None:
    scan = ScanStep(work)
    recipe = TrainingRecipe(steps=1, batch_size=BATCH, learning_rate=1e-3)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for step in range(steps + 2):  # the first two rounds warm up (and compile the kernels)
        for name, functions in VARIANTS.items():
            use(functions)
            seconds = scan.run(step, recipe)
            if step >= 2:
                times[name].append(seconds)
    use(KERNELS)
    reference = median_ms(times[REFERENCE])
    for name, measured in times.items():
        print(f"SCAN step, {name:28s} median {median_ms(measured):7.1f} ms   speed-up vs F.dropout "
              f"{reference / median_ms(measured):4.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--work", type=Path, default=Path("/tmp/scan-bench"))
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.node()}, torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    time_alone(rounds=5)
    time_steps(args.steps, args.work)


if __name__ == "__main__":
    main()
