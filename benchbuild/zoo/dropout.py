"""Dropout that is cheap on CPU: the keep mask comes from 16-bit slices of 64-bit random words.

On CPU, `torch.nn.functional.dropout` draws one random number per element (`bernoulli_`), which took about a
quarter of a SCAN training step of the zoo Transformer on 2 cores (`benchmarks/zoo_step_time.py`). Here one 64-bit
word yields four 16-bit uniforms, and an element is kept when its uniform is at least round(p · 2¹⁶): the drop
probability is p to within 2⁻¹⁷, kept elements are scaled by 1 / (1 - p) as usual.

The words come from numpy's SFC64 generator (2.5x faster than torch's Mersenne Twister on this machine's CPU),
seeded for each mask by one 63-bit draw from torch's global generator. A mask is therefore a function of torch's
RNG state alone: `torch.manual_seed` and the checkpointed RNG state make runs reproducible exactly as with
`F.dropout`. On other devices, and outside training, these are `F.dropout` and `F.scaled_dot_product_attention`
unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

_SLICES = 4  # 16-bit uniforms per 64-bit draw


def _uniforms(count: int) -> np.ndarray:
    """`count` 16-bit uniforms as int16 (u - 32768), from an SFC64 stream seeded by one draw of torch's generator."""
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    return np.random.SFC64(seed).random_raw(-(-count // _SLICES)).view(np.int16)[:count]


def _threshold(p: float) -> int:
    return round(p * 65536) - 32768  # the int16 view of a uniform 16-bit value u is u - 32768


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A boolean CPU tensor of `shape`, each element False with probability p (to within 2⁻¹⁷), independently."""
    return torch.from_numpy(_uniforms(math.prod(shape)) >= _threshold(p)).view(shape)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, with the CPU mask of `keep_mask`.

    The multipliers (0 or 1 / (1 - p)) are made in numpy: torch's bool-to-float cast took over twice as long as the
    comparison that makes the mask (x86-64 with AVX2, torch 2.13), numpy's cast and scaling less than it."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training)
    multipliers = (_uniforms(x.numel()) >= _threshold(p)).astype(np.float32)
    multipliers *= np.float32(1.0 / (1.0 - p))
    return x * torch.from_numpy(multipliers).view(x.shape).to(x.dtype)


class Dropout(nn.Dropout):
    """`nn.Dropout` with `dropout`'s CPU mask (same parameters, same state dict: none)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False) -> torch.Tensor:
    """`F.scaled_dot_product_attention`; when it would drop attention weights on CPU (where it takes its unfused
    path anyway), the same computation spelled out with `dropout`'s mask."""
    if dropout_p == 0.0 or q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)
    # Scaling the queries (B·H·Lq·d) is cheaper than scaling the scores (B·H·Lq·Lk) once Lk > d; the scores are a
    # fresh product that autograd does not keep, so masks go in place.
    scores = (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)
    if is_causal:
        scores.masked_fill_(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).triu(1),
                            float("-inf"))
    elif attn_mask is not None and attn_mask.dtype == torch.bool:
        scores.masked_fill_(attn_mask.logical_not(), float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return dropout(scores.softmax(dim=-1), dropout_p, True) @ v
