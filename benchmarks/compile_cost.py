"""torch.compile against eager for one training update on one CPU thread (issue #59): the update of
`benchmarks/update_cost.py` (forward, loss, backward, clipping, fused AdamW on real SCAN rows at the recipe's batch),
round by round in one process so that the machine's load falls on every variant alike:

- `eager`: the model as `train` runs it, with the zoo's CPU kernels (numba dropout masks and LayerNorm sums, the
  packed attention kernel, the compiled recurrent loops);
- `eager-plain`: the same model on plain torch operators (those kernels switched off: `plain_torch`);
- `compiled-plain`: that model through `torch.compile` (inductor, default mode). The kernels themselves cannot be
  compiled: dynamo traces into their numpy views and fails, so compiling needs them off.

Prints the one-off compile time (the first compiled updates), each variant's median update time and the ratios
to `eager` (above 1: the variant is slower than what `train` runs).

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compile_cost.py [--cases t003,sa] [--rounds 5] [--updates 8]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

import contextlib
from unittest import mock

import update_cost

from benchbuild.zoo import dropout, layer_norm, recurrent_kernels, transformer, transformer_layers
from benchbuild.zoo.attention import Backend, hash_masks


@contextlib.contextmanager
def plain_torch():
    """The zoo's CPU kernels off: torch's dropout, LayerNorm, SDPA attention and the recurrent loops' torch steps."""
    with mock.patch.object(hash_masks, "_uses_kernel", lambda *arguments: False), \
            mock.patch.object(dropout, "_uses_kernel", lambda *arguments: False), \
            mock.patch.object(layer_norm, "KERNEL_DTYPES", ()), \
            mock.patch.object(recurrent_kernels, "uses_kernels", lambda *tensors: False), \
            mock.patch.object(transformer, "choose_backend", lambda *arguments, **keywords: Backend.SDPA), \
            mock.patch.object(transformer_layers, "choose_backend", lambda *arguments, **keywords: Backend.SDPA):
        yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="t003,sa")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=8, help="updates of each kind per round")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}")
    for case in arguments.cases.split(","):
        variants = {"eager": (update_cost.make_update(case)[0], contextlib.nullcontext),
                    "eager-plain": (update_cost.make_update(case)[0], plain_torch),
                    "compiled-plain": (update_cost.make_update(case, compile_model=True)[0], plain_torch)}
        compile_seconds = 0.0
        for name, (update, context) in variants.items():
            started = time.perf_counter()
            with context():
                for index in range(2):
                    update(index)
            if name == "compiled-plain":
                compile_seconds = time.perf_counter() - started
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(arguments.rounds):
            for name, (update, context) in variants.items():
                taken = []
                with context():
                    for index in range(arguments.updates):
                        began = time.perf_counter()
                        update(index)
                        taken.append(time.perf_counter() - began)
                times[name].append(statistics.median(taken))
        medians = {name: statistics.median(values) for name, values in times.items()}
        ratios = {name: statistics.median(t / e for t, e in zip(times[name], times["eager"])) for name in times}
        print(f"{case}: compile (first 2 updates) {compile_seconds:.1f} s; " + "; ".join(
            f"{name} {1e3 * medians[name]:.1f} ms ({ratios[name]:.2f}x eager)" for name in variants))

if __name__ == "__main__":
    main()
