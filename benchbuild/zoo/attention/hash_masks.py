"""Keyed-hash dropout masks for CPU: the mask is a hash of each element's index, applied in one compiled pass.

On CPU, `torch.nn.functional.dropout` draws one random number per element (`bernoulli_`) and multiplies in a
second pass; in a SCAN training step of the zoo Transformer on 2 cores that was about a quarter of the step.
Here element i of a mask is kept when h(i) >= round(p · 2³²), where h is a counter-based generator: two rounds
of a 32-bit integer hash (Wellons' "lowbias32", a bijection) of i keyed by one 63-bit draw from torch's global
generator per mask. A numba kernel computes h, the mask and the scaled output (or `residual + output`, or the
output of a ReLU before it) in one pass over memory, in parallel, and the backward pass recomputes the same mask
from the key instead of storing it. The drop probability is p to within 2⁻³³; kept elements are scaled by
1 / (1 - p) as usual. `benchmarks/dropout_step_time.py` compares this with `F.dropout` (7-10x for dropout alone,
1.4x per SCAN step on 2 cores).

A mask is therefore a function of torch's RNG state alone: `torch.manual_seed` and the checkpointed RNG state
make runs reproducible exactly as with `F.dropout`, and each element's value does not depend on the number of
threads. On other devices, for dtypes other than float32 / float64, and outside training, `dropout` is `F.dropout`
unchanged. `HashMask` is the mask itself, for kernels that apply it on their own (attention-weight dropout in
`hashed_dropout` and `packed`). It lives with attention, which needs it; the layers' `Dropout` module
(`benchbuild.zoo.dropout`) builds on it.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
import torch.nn.functional as F
from numba import njit, prange

from benchbuild.zoo.attention import stacking

_STEP = np.uint32(0x9E3779B9)  # odd, so i -> i · _STEP is a bijection of 32-bit indices
_MULTIPLIER_1 = np.uint32(0x7FEB352D)
_MULTIPLIER_2 = np.uint32(0x846CA68B)
HASHED_DTYPES = (torch.float32, torch.float64)  # the dtypes the numba kernels take
_MAX_ELEMENTS = 2**32  # indices are hashed as 32-bit words


@njit(inline="always")
def _lowbias32(z):
    z = np.uint32(np.uint32(z ^ (z >> np.uint32(16))) * _MULTIPLIER_1)
    z = np.uint32(np.uint32(z ^ (z >> np.uint32(15))) * _MULTIPLIER_2)
    return np.uint32(z ^ (z >> np.uint32(16)))


@njit(inline="always")
def _uniform32(i, key_low, key_high):
    return _lowbias32(np.uint32(_lowbias32(np.uint32(np.uint32(np.uint32(i) * _STEP) ^ key_low)) ^ key_high))


@njit(parallel=True, cache=True, nogil=True)
def _keep_kernel(out, key_low, key_high, threshold):
    for i in prange(out.size):
        out[i] = _uniform32(i, key_low, key_high) >= threshold


@njit(parallel=True, cache=True, nogil=True)
def _dropout_kernel(x, out, key_low, key_high, threshold, scale):
    zero = scale - scale
    for i in prange(x.size):
        out[i] = x[i] * (scale if _uniform32(i, key_low, key_high) >= threshold else zero)


@njit(parallel=True, cache=True, nogil=True)
def _dropout_add_kernel(residual, x, out, key_low, key_high, threshold, scale):
    zero = scale - scale
    for i in prange(x.size):
        out[i] = residual[i] + x[i] * (scale if _uniform32(i, key_low, key_high) >= threshold else zero)


@njit(parallel=True, cache=True, nogil=True)
def _relu_dropout_kernel(x, out, key_low, key_high, threshold, scale):
    zero = scale - scale
    for i in prange(x.size):
        out[i] = max(x[i], zero) * (scale if _uniform32(i, key_low, key_high) >= threshold else zero)


class HashMask:
    """One dropout mask: element i is kept iff h(i) >= `threshold`, h the hash keyed by `key_low` / `key_high`
    (uint32 each), kept elements scaled by 1 / (1 - p). `HashMask.draw(p)` keys it with one draw from torch's
    global generator; `HashMask(0.0, 0)` keeps everything and draws nothing."""

    def __init__(self, p: float, key: int):
        self.key_low, self.key_high = np.uint32(key & 0xFFFFFFFF), np.uint32(key >> 32)
        self.threshold = np.uint32(min(round(p * 2**32), 2**32 - 1))
        self.p = p

    @classmethod
    def draw(cls, p: float) -> HashMask:
        return cls(p, int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64)))

    def scale(self, dtype: torch.dtype):
        return np.float32(1.0 / (1.0 - self.p)) if dtype == torch.float32 else np.float64(1.0 / (1.0 - self.p))

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """x times the mask's multipliers (0 or 1 / (1 - p)), as a new contiguous tensor."""
        return self._run(_dropout_kernel, x)

    def apply_after_relu(self, x: torch.Tensor) -> torch.Tensor:
        """relu(x) times the mask's multipliers."""
        return self._run(_relu_dropout_kernel, x)

    def apply_and_add(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """residual + x times the mask's multipliers."""
        return self._run(_dropout_add_kernel, x, residual.contiguous())

    def _run(self, kernel, x: torch.Tensor, *before: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        numba_threads()
        kernel(*map(_flat, before), _flat(x), _flat(out), self.key_low, self.key_high, self.threshold,
               self.scale(x.dtype))
        return out


def _flat(t: torch.Tensor) -> np.ndarray:
    return t.detach().view(-1).numpy()


def numba_threads() -> None:
    """numba's kernels on as many threads as torch runs (at most NUMBA_NUM_THREADS)."""
    numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))


class _DropoutFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        ctx.mask = HashMask.draw(p)
        return ctx.mask.apply(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.mask.apply(grad), None


def _uses_kernel(x: torch.Tensor, p: float) -> bool:
    return (not stacking.active() and x.device.type == "cpu" and x.dtype in HASHED_DTYPES and p < 1.0
            and x.numel() < _MAX_ELEMENTS)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A boolean CPU tensor of `shape`, each element False with probability p (to within 2⁻³³): the mask that
    `dropout` would draw from the same RNG state."""
    mask = HashMask.draw(p)
    out = torch.empty(shape, dtype=torch.bool)
    numba_threads()
    _keep_kernel(_flat(out), mask.key_low, mask.key_high, mask.threshold)
    return out


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, with the CPU mask of `keep_mask`."""
    if not training or p == 0.0:
        return x
    if stacking.active():
        return stacking.dropout(x, p)
    if not _uses_kernel(x, p):
        return F.dropout(x, p, training)
    return _DropoutFunction.apply(x, p)
