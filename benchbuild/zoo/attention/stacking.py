"""What the zoo's layers do inside a stacked training pass (`benchbuild.training.stack`): K runs' models evaluated as
one `torch.func.vmap`ped call over their stacked parameters.

Inside `member_streams(keys, step)` every dropout mask of member m is drawn from m's own stream: a counter-based
hash of (m's key, the step, the call's number within the step, the element's coordinates), computed with torch
integer ops that `vmap` batches over members, so one launch draws every member's mask and no member's masks depend
on which others share its stack, on K, or on the process. The element's coordinates are its index along each
dimension of the layer's tensor, weighed as if every dimension had `_SPAN` places: padding a batch to a longer
sequence (as a stack pads its members' batches to common shapes) leaves every real element's mask as it was. A
stacked run therefore resumes exactly from its step alone, and a member trained in a stack of 3 draws the masks it
draws in a stack of 1.

The CPU kernels that cannot run under `vmap` (numba dropout, the packed attention kernel, the thread-independent
LayerNorm backward) step aside while a stream is open (`active`); attention whose weights are dropped is spelled out
(`attention.hashed_dropout`) so its mask comes from the stream too.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from benchbuild.errors import BenchbuildError

_M32 = 0xFFFFFFFF
_STEP = 0x9E3779B9
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)
_SPAN_BITS = 12
_SPAN = 1 << _SPAN_BITS  # places per dimension in an element's hashed index (sequence lengths and widths up to 4,096)
_MAX_DIMENSIONS = 5  # 5 x 12 bits: the index fits in 63


class _Streams(threading.local):
    keys: torch.Tensor | None = None
    step: int = 0
    calls: int = 0


_STREAMS = _Streams()


def active() -> bool:
    """Whether a stacked pass is running on this thread (the layers then take their vmappable paths)."""
    return _STREAMS.keys is not None


@contextlib.contextmanager
def member_streams(keys: torch.Tensor, step: int):
    """Dropout inside the block draws from the members' streams: `keys` the members' int64 keys (one per member;
    inside `vmap`, each member sees its own), `step` the optimizer step being taken. Calls are numbered from 0 on
    each entry, so a step's passes (its micro-batches) open one block around all of them, or continue with
    `continued`."""
    previous = (_STREAMS.keys, _STREAMS.step, _STREAMS.calls)
    _STREAMS.keys, _STREAMS.step, _STREAMS.calls = keys, step, 0
    try:
        yield
    finally:
        _STREAMS.keys, _STREAMS.step, _STREAMS.calls = previous


@contextlib.contextmanager
def member_keys(keys: torch.Tensor):
    """Inside an open `member_streams` block: the members' keys as this (vmapped) pass sees them, the call count
    going on."""
    previous = _STREAMS.keys
    _STREAMS.keys = keys
    try:
        yield
    finally:
        _STREAMS.keys = previous


def member_key(seed: int) -> int:
    """A run's stream key from its seed (0 <= seed < 2**32, as `--seed` allows)."""
    return _lowbias32_int(_lowbias32_int(seed & _M32) ^ 0x5BD1E995)


def dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """`x` with elements dropped with probability `p` and the rest scaled by 1 / (1 - p), the mask from the current
    member's stream (the module docstring)."""
    if x.dim() > _MAX_DIMENSIONS or any(size > _SPAN for size in x.shape):
        raise BenchbuildError(f"stacked training hashes dropout masks of tensors with at most {_MAX_DIMENSIONS} "
                              f"dimensions of at most {_SPAN:,} places each; got shape {tuple(x.shape)}: train this "
                              "model without --stack")
    call = _STREAMS.calls
    _STREAMS.calls += 1
    counter = ((_STREAMS.step & _M32) << 20) | (call & 0xFFFFF)
    first = _lowbias32(_STREAMS.keys ^ _lowbias32_int(counter & _M32) ^ _lowbias32_int(counter >> 32))
    second = _lowbias32(first ^ 0x27D4EB2F)
    index = _coordinates(x.shape, x.device)
    low, high = index & _M32, index >> 32
    hashed = _lowbias32(_lowbias32(_times(low, _STEP) ^ first) ^ high ^ second)
    threshold = min(round(p * 2**32), 2**32 - 1)
    keep = hashed >= threshold
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


def _coordinates(shape: torch.Size, device: torch.device) -> torch.Tensor:
    """Each element's index along every dimension, weighed by `_SPAN` places per dimension: int64 of `shape`."""
    index = torch.zeros((), dtype=torch.int64, device=device)
    for dimension, size in enumerate(shape):
        view = [1] * len(shape)
        view[dimension] = size
        weight = _SPAN ** (len(shape) - 1 - dimension)
        index = index + torch.arange(size, dtype=torch.int64, device=device).view(view) * weight
    return index.expand(shape)


def _times(z: torch.Tensor, multiplier: int) -> torch.Tensor:
    """(z · multiplier) mod 2**32 for 0 <= z < 2**32, in int64 without overflow: the multiplier in 16-bit halves."""
    low, high = multiplier & 0xFFFF, multiplier >> 16
    return (z * low + (((z * high) & 0xFFFF) << 16)) & _M32


def _lowbias32(z: torch.Tensor) -> torch.Tensor:
    """Wellons' lowbias32 (the hash of `attention.hash_masks`) on int64 tensors holding 32-bit words."""
    z = _times(z ^ (z >> 16), _MULTIPLIERS[0])
    z = _times(z ^ (z >> 15), _MULTIPLIERS[1])
    return z ^ (z >> 16)


def _lowbias32_int(z: int) -> int:
    z = ((z ^ (z >> 16)) * _MULTIPLIERS[0]) & _M32
    z = ((z ^ (z >> 15)) * _MULTIPLIERS[1]) & _M32
    return z ^ (z >> 16)
