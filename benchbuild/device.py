"""The package's one device policy: a device is `auto`, `cpu`, `cuda` or `cuda:N`, resolved here and nowhere else.

`check_device` reads the spelling only (no torch import), for the command line's option type, so a typo fails before
any work starts. `resolve_device` turns a spelling into a concrete torch device string (`cpu` or `cuda:N`) as a pure
function of how many CUDA devices torch reports; `visible_cuda_devices` asks torch. `member_devices` places the
members of an ensemble: round-robin over the visible GPUs for `auto`/`cuda`, all on one device otherwise — never a mix
of `cpu` and `cuda`, because `accelerate`'s state is per process and cannot switch between them. Members on different
GPUs train in one process one after another (`training.loop` selects each member's GPU with `torch.cuda.set_device`
and starts `accelerate` afresh) or, for parallel training, one process per member.

Under a distributed launcher (`accelerate launch`, `torchrun`), every process takes the GPU of its local rank:
`auto` and `cuda` mean that, and `cuda:N` is refused there (it would put every process on the same GPU).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Iterator

from benchbuild.errors import BenchbuildError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_SPELLING = re.compile(r"auto|cpu|cuda(:(0|[1-9][0-9]*))?")


def check_device(spec: str) -> str:
    """`spec` when it names a device this package understands, else a BenchbuildError that says which do."""
    if not isinstance(spec, str) or _SPELLING.fullmatch(spec) is None:
        raise BenchbuildError(f"unknown device {spec!r}: choose {DEVICE_CHOICES}")
    return spec


def visible_cuda_devices() -> int:
    """How many CUDA devices torch sees in this process (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(spec: str, cuda_devices: int | None = None) -> str:
    """The concrete device (`cpu` or `cuda:N`) that `spec` names when torch reports `cuda_devices` CUDA devices
    (default: ask torch): `auto` is the first GPU when there is one, else the CPU; `cuda` is the first GPU."""
    check_device(spec)
    count = visible_cuda_devices() if cuda_devices is None else cuda_devices
    if spec == "cpu" or (spec == "auto" and count == 0):
        return "cpu"
    if count == 0:
        raise BenchbuildError(f"--device {spec} was asked for but torch sees no CUDA device (use --device cpu or auto)")
    index = 0 if spec in ("auto", "cuda") else int(spec.split(":")[1])
    if index >= count:
        raise BenchbuildError(f"--device {spec} was asked for but torch sees {count} CUDA device"
                              f"{'s' if count != 1 else ''} (cuda:0 .. cuda:{count - 1})")
    return f"cuda:{index}"


def member_devices(spec: str, members: int, cuda_devices: int | None = None) -> list[str]:
    """The device of each of `members` ensemble members: round-robin over the GPUs for `auto`/`cuda` when there
    are GPUs, else every member on the one device `spec` resolves to (never a mix of `cpu` and `cuda`)."""
    count = visible_cuda_devices() if cuda_devices is None else cuda_devices
    resolved = resolve_device(spec, count)
    if spec in ("auto", "cuda") and resolved != "cpu":
        return [f"cuda:{member % count}" for member in range(members)]
    return [resolved] * members


def launched_distributed() -> bool:
    """Whether this process is one of several started by `accelerate launch` / `torchrun`."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def mixed_precision(device: str, precision: str = "auto") -> str:
    """`accelerate`'s mixed-precision mode for a resolved device and a recipe's `precision`: under `auto`, bf16 where
    the GPU has it, else fp16, and none on the CPU; `fp32` none; `bf16` and `fp16` themselves, on a GPU only (the
    zoo's CPU kernels, the numba layer norm and dropout and the packed attention, take float32 and float64)."""
    if precision == "fp32":
        return "no"
    if precision in ("bf16", "fp16"):
        if device == "cpu":
            raise BenchbuildError(f"recipe key 'precision' = {precision!r} needs a GPU: on the CPU use fp32 or auto")
        return precision
    if precision != "auto":
        raise BenchbuildError(f"unknown precision {precision!r}: choose auto, fp32, bf16 or fp16")
    if device == "cpu":
        return "no"
    import torch

    try:  # emulated bf16 (V100, T4) is slower than fp16: only a GPU with bf16 units gets bf16
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.4 counts native support only
        native = torch.cuda.is_bf16_supported()
    return "bf16" if native else "fp16"


def start_accelerator(spec: str, precision: str = "auto"):
    """An `accelerate.Accelerator` on the device `spec` names, with the mixed precision `precision` picks
    (`mixed_precision`: under `auto`, mixed precision on GPUs only).

    One process alone: the device is resolved here (`cuda:N` becomes the current CUDA device) and `accelerate`'s
    per-process state is started afresh, so consecutive runs in one process (ensemble members) may use different
    devices. Under a distributed launcher every process keeps the GPU of its local rank that `accelerate` gives it.
    """
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if launched_distributed():
        if spec.startswith("cuda:"):
            raise BenchbuildError(f"--device {spec} under a distributed launcher would put every process on one GPU: "
                                  "use --device cuda (each process takes the GPU of its local rank) or auto")
        resolved = resolve_device(spec)
        return Accelerator(cpu=resolved == "cpu", mixed_precision=mixed_precision(resolved, precision))
    resolved = resolve_device(spec)
    if resolved != "cpu":
        import torch

        torch.cuda.set_device(int(resolved.split(":")[1]))
    AcceleratorState._reset_state(reset_partial_state=True)  # the state is per process; this run may move device
    return Accelerator(cpu=resolved == "cpu", mixed_precision=mixed_precision(resolved, precision))


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    """torch (and the numba kernels, which follow torch's count) on `count` CPU threads inside the block, restored
    after. Results of some CPU kernels depend on the thread count, and numba's OpenMP threading layer resets the
    process's OpenMP thread count (torch's too) when it starts, at the first dropout kernel: it is started here first,
    so the count holds for the whole block, and a run gives the same numbers in a fresh process and in a worker
    process that ran other tasks before it."""
    import numba
    import torch

    numba.get_num_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
