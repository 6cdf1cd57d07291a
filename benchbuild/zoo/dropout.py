"""The zoo's dropout layers on CPU: `Dropout` (an `nn.Dropout`), `dropout_add` and `relu_dropout`, one compiled pass
each, with the keyed-hash masks of `benchbuild.zoo.attention.hash_masks` (the same mask from the same RNG state as
`dropout` there); on other devices, other dtypes and outside training, `F.dropout` unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from numba import njit, prange
from torch import nn

from benchbuild.zoo.attention.hash_masks import HashMask, _flat, _uses_kernel, dropout, numba_threads


@njit(parallel=True, cache=True, nogil=True)
def _relu_dropout_backward_kernel(grad, out, result, scale):
    zero = scale - scale
    for i in prange(grad.size):
        result[i] = grad[i] * scale if out[i] > zero else zero


class _DropoutAddFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, residual: torch.Tensor, x: torch.Tensor, p: float) -> torch.Tensor:
        ctx.mask = HashMask.draw(p)
        return ctx.mask.apply_and_add(residual, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, ctx.mask.apply(grad), None


class _ReluDropoutFunction(torch.autograd.Function):
    """dropout(relu(x)); the backward pass needs only the output: an element passes gradient iff it is positive."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        mask = HashMask.draw(p)
        out = mask.apply_after_relu(x)
        ctx.save_for_backward(out)
        ctx.scale = mask.scale(x.dtype)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (out,) = ctx.saved_tensors
        grad = grad.contiguous()
        result = torch.empty_like(grad)
        numba_threads()
        _relu_dropout_backward_kernel(_flat(grad), _flat(out), _flat(result), ctx.scale)
        return result, None


def dropout_add(residual: torch.Tensor, x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`residual + dropout(x, p, training)` in one pass (the same mask as `dropout` from the same RNG state)."""
    if not training or p == 0.0:
        return residual + x
    if not _uses_kernel(x, p) or residual.shape != x.shape or residual.dtype != x.dtype:
        return residual + dropout(x, p, training)
    return _DropoutAddFunction.apply(residual, x, p)


def relu_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`dropout(relu(x), p, training)` in one pass (the same mask as `dropout` from the same RNG state)."""
    if not training or p == 0.0 or not _uses_kernel(x, p):
        return dropout(F.relu(x), p, training)
    return _ReluDropoutFunction.apply(x, p)


class Dropout(nn.Dropout):
    """`nn.Dropout` with `dropout`'s CPU mask (same parameters, same state dict: none)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def after_relu(self, x: torch.Tensor) -> torch.Tensor:
        """`self(relu(x))`, in one pass on CPU."""
        return relu_dropout(x, self.p, self.training)

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """`residual + self(x)`, in one pass on CPU."""
        return dropout_add(residual, x, self.p, self.training)

