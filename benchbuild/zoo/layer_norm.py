"""Layer normalization whose gradients do not depend on the CPU thread count.

torch's CPU LayerNorm backward sums the weight and bias gradients over rows in per-thread chunks and then adds the
chunks, so the rounding of those two gradients (and from there every later weight) depends on how many threads ran
it: the same run on 1 and on 2 threads ends in different checkpoints. `LayerNorm` keeps `nn.LayerNorm`'s parameters
(checkpoints load either way) and forward pass; on the CPU its backward takes the input's gradient from torch's own
kernel (which is per row, so thread-independent) and sums the weight and bias gradients with a numba kernel in
which each column is one sequential sum over the rows, in row order, accumulated in float64: the same bytes on any
thread count. On a GPU, and for dtypes the kernel does not take, it is `nn.LayerNorm` itself.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from numba import njit, prange
from torch import nn

from benchbuild.zoo.attention import stacking
from benchbuild.zoo.attention.hash_masks import numba_threads

KERNEL_DTYPES = (torch.float32, torch.float64)


# Columns per parallel block of `_column_sums`: each block's rows are read along memory, its sums kept in a small
# float64 buffer.
COLUMN_BLOCK = 64


@njit(parallel=True, cache=True, nogil=True)
def _column_sums(grad, x, mean, rstd, grad_weight, grad_bias):
    """grad_weight[j] = Σᵢ grad[i, j]·x̂[i, j] and grad_bias[j] = Σᵢ grad[i, j], each a float64 sum over rows i in
    order, x̂[i, j] = (x[i, j] - mean[i])·rstd[i] rounded in the input's dtype (as torch's two operators round it);
    blocks of columns run in parallel, so no sum is split between threads. Within a block the rows are read one after
    another (along memory: a column at a time would stride over the whole matrix)."""
    rows, columns = grad.shape
    for block in prange((columns + COLUMN_BLOCK - 1) // COLUMN_BLOCK):
        start = block * COLUMN_BLOCK
        stop = min(columns, start + COLUMN_BLOCK)
        weight_sums = np.zeros(stop - start, dtype=np.float64)
        bias_sums = np.zeros(stop - start, dtype=np.float64)
        for i in range(rows):
            row_mean, row_rstd = mean[i], rstd[i]
            for j in range(start, stop):
                value = np.float64(grad[i, j])
                centred = x[i, j] - row_mean
                weight_sums[j - start] += value * np.float64(centred * row_rstd)
                bias_sums[j - start] += value
        grad_weight[start:stop] = weight_sums
        grad_bias[start:stop] = bias_sums


class _LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        output, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return output

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        grad = grad.contiguous()
        grad_input, _, _ = torch.ops.aten.native_layer_norm_backward(
            grad, x, [x.shape[-1]], mean, rstd, weight, bias, [ctx.needs_input_grad[0], False, False])
        grad_weight = np.empty(x.shape[-1], dtype=np.float64)
        grad_bias = np.empty(x.shape[-1], dtype=np.float64)
        numba_threads()
        _column_sums(grad.reshape(-1, x.shape[-1]).numpy(), x.reshape(-1, x.shape[-1]).contiguous().numpy(),
                     mean.reshape(-1).contiguous().numpy(), rstd.reshape(-1).contiguous().numpy(), grad_weight,
                     grad_bias)
        return (grad_input, torch.from_numpy(grad_weight).to(weight.dtype),
                torch.from_numpy(grad_bias).to(bias.dtype), None)


class LayerNorm(nn.LayerNorm):
    """`nn.LayerNorm` over the last dimension, with an affine weight and bias, whose CPU gradients are the same on any
    number of threads (module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (stacking.active() or x.device.type != "cpu" or x.dtype not in KERNEL_DTYPES or self.weight is None
                or self.bias is None or not torch.is_grad_enabled()
                or not (x.requires_grad or self.weight.requires_grad)):
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return _LayerNormFunction.apply(x, self.weight, self.bias, self.eps)
