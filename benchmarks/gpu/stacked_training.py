"""Model-steps per second of 000's `sag_t5` at 000's point (SCAN addprim_jump, batches of 256 rows) trained one run
per process, six processes at once, and K runs stacked in one process (`benchbuild.training.stack`), in float32 and
in TF32 (CUDA only); peak GPU memory per member. Issue #44: the goal on an H100 / H200 is at least 5x the six-process
figure. The same script on the CPU prints its figures too (a stack is expected to gain nothing there).

A "model-step" is one optimizer step of one run: a stack of K runs doing s steps/s does K·s model-steps/s. Each
figure is timed over `--steps` steps after `--warmup` steps, with no validation or checkpoint in the timed part.
CUDA graphs (or torch.compile's reduce-overhead) are not implemented yet: only eager figures are printed.

    python3 benchmarks/gpu/stacked_training.py [--device cuda] [--stacks 8,24,72] [--processes 6] [--steps 30]
    .venv/bin/python benchmarks/gpu/stacked_training.py --smoke   # CPU, 32-wide model, K = 2, 2 steps: checks it
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import platform
import tempfile
import time
from pathlib import Path

import torch

from benchbuild.device import cpu_threads, resolve_device
from benchbuild.scan.build import build_scan
from benchbuild.scan.parameters import ScanParameters
from benchbuild.training.loop import RunOptions, plan_run, prepare, step
from benchbuild.training.stack import Stack

MODEL = "sag_t5"
SMOKE_SIZES = {"d_model": 32, "num_heads": 4, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}


def _options(seed: int, device: str, smoke: bool, stacked: bool) -> RunOptions:
    return RunOptions(seed=seed, device=device, max_steps=10**6, progress=False, stacked=stacked,
                      overrides={"batch_size": 32} if smoke else None,
                      architecture_overrides=SMOKE_SIZES if smoke else None)


def _tf32(on: bool) -> None:
    """float32 matrix products in TF32 (`on`) or in full precision."""
    if torch.cuda.is_available():
        for backend in (torch.backends.cuda.matmul, torch.backends.cudnn.conv):
            backend.fp32_precision = "tf32" if on else "ieee"


def single_rate(data: Path, work: Path, device: str, steps: int, warmup: int, smoke: bool, tf32: bool,
                start=None) -> float:
    """Steps per second of one run trained as `train` trains it (`loop.step`)."""
    _tf32(tf32)
    run = prepare(plan_run(MODEL, data, work, _options(0, device, smoke, stacked=False)))
    for _ in range(warmup):
        step(run)
    if start is not None:
        start.wait()
    _synchronise(device)
    began = time.perf_counter()
    for _ in range(steps):
        step(run)
    _synchronise(device)
    return steps / (time.perf_counter() - began)


_START: list = []  # in a worker of `processes_rate`: the barrier its runs wait at after their warm-up


def _hold(start) -> None:
    _START.append(start)


def _single_in_process(arguments) -> float:
    data, work, device, steps, warmup, smoke, tf32 = arguments
    with cpu_threads(1):
        return single_rate(Path(data), Path(work), device, steps, warmup, smoke, tf32, _START[0])


def processes_rate(count: int, data: Path, work: Path, device: str, steps: int, warmup: int, smoke: bool,
                   tf32: bool) -> float:
    """Model-steps per second of `count` single runs in as many processes at once (started together after their
    warm-up): the sum of their rates. Each worker holds one run until all `count` have warmed up (the barrier), so
    every worker trains exactly one."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(count)  # handed to each worker as it starts (a Manager would be a process more)
    with context.Pool(count, initializer=_hold, initargs=(start,)) as pool:
        rates = pool.map(_single_in_process, [(str(data), str(work / f"process{index}"), device, steps, warmup,
                                               smoke, tf32) for index in range(count)], chunksize=1)
    return sum(rates)


def stack_rate(size: int, data: Path, work: Path, device: str, steps: int, warmup: int, smoke: bool,
               tf32: bool) -> tuple[float, float | None]:
    """Model-steps per second of `size` runs stacked in this process, and the peak GPU memory per member (MiB)."""
    _tf32(tf32)
    runs = [prepare(plan_run(MODEL, data, work / f"member{seed}", _options(seed, device, smoke, stacked=True)))
            for seed in range(size)]
    stack = Stack(runs)
    for _ in range(warmup):
        stack.step(runs)
    if torch.cuda.is_available() and device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    _synchronise(device)
    began = time.perf_counter()
    for _ in range(steps):
        stack.step(runs)
    _synchronise(device)
    rate = size * steps / (time.perf_counter() - began)
    peak = None
    if torch.cuda.is_available() and device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**20 / size
    return rate, peak


def _synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--stacks", default="8,24,72", help="stack sizes K, comma-separated")
    parser.add_argument("--processes", type=int, default=6, help="single runs at once in their own processes")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per figure")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before each figure")
    parser.add_argument("--work", type=Path, default=None, help="where the benchmark and run folders go")
    parser.add_argument("--smoke", action="store_true", help="CPU, 32-wide model, batches of 32, K = 2, 1 process, "
                        "2 steps: checks the script, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.device, args.stacks, args.processes, args.steps, args.warmup = "cpu", "2", 1, 2, 1
    device = str(resolve_device(args.device))
    sizes = [int(size) for size in args.stacks.split(",")]
    with contextlib.ExitStack() as held:
        # As `train` does: numba's OpenMP layer would otherwise put torch on every core at its first dropout kernel.
        held.enter_context(cpu_threads(torch.get_num_threads()))
        work = args.work or Path(held.enter_context(tempfile.TemporaryDirectory(prefix="stacked-training-")))
        data = work / "addprim_jump"
        if not (data / "build.json").is_file():
            for name, benchmark in build_scan(ScanParameters(split=["addprim_jump"])):
                benchmark.save(work / name, overwrite=True)
        name = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "CPU"
        print(f"{MODEL} at 000's point on SCAN addprim_jump{' (smoke: 32 wide, batches of 32)' if args.smoke else ''}"
              f", {device} ({name}), torch {torch.__version__}, {torch.get_num_threads()} CPU threads", flush=True)
        precisions = [False, True] if device.startswith("cuda") else [False]
        for tf32 in precisions:
            label = "TF32" if tf32 else "float32"
            one = single_rate(data, work / f"single-{label}", device, args.steps, args.warmup, args.smoke, tf32)
            print(f"{label} eager  1 process, 1 run:      {one:9.1f} model-steps/s (1.00x)", flush=True)
            many = processes_rate(args.processes, data, work / f"processes-{label}", device, args.steps,
                                  args.warmup, args.smoke, tf32)
            print(f"{label} eager  {args.processes} processes, 1 run each: {many:9.1f} model-steps/s "
                  f"({many / one:.2f}x)", flush=True)
            for size in sizes:
                rate, peak = stack_rate(size, data, work / f"stack{size}-{label}", device, args.steps, args.warmup,
                                        args.smoke, tf32)
                memory = f", {peak:.0f} MiB peak per member" if peak is not None else ""
                print(f"{label} eager  1 process, stack of {size:>2}: {rate:9.1f} model-steps/s ({rate / one:.2f}x "
                      f"one run, {rate / many:.2f}x {args.processes} processes){memory}", flush=True)


if __name__ == "__main__":
    main()
