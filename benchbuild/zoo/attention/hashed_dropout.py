"""SDPA spelled out on CPU with `hash_masks`'s keyed dropout masks, for attention whose weights are dropped.

On CPU, `F.scaled_dot_product_attention` with dropout takes its unfused path anyway and draws one random number
per attention weight; here the same computation drops weights with one numba pass of `dropout` (mask, scaling and
backward recomputed from one key). It earns its place where the packed kernel does not apply: SCAN training steps
of `relative_transformer` (batch 256, 8 length groups; distance terms in self-attention) take 194-204 ms with it
against 213-219 ms with `F.scaled_dot_product_attention` in its place, 1.07-1.09x (3 runs of 40 alternating steps
on 2 idle cores; `benchmarks/attention_step_time.py --only 3`).
"""

from __future__ import annotations

import math

import torch

from benchbuild.zoo.attention import stacking
from benchbuild.zoo.attention.hash_masks import dropout


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool,
           dropout_p: float) -> torch.Tensor:
    """`F.scaled_dot_product_attention(q, k, v, mask, dropout_p, causal)` with `dropout`'s mask: (B, H, Lq, d)."""
    # Scaling the queries (B·H·Lq·d) is cheaper than scaling the scores (B·H·Lq·Lk) once Lk > d; the scores are a
    # fresh product that autograd does not keep, so masks go in place.
    scores = (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)
    if causal:
        scores.masked_fill_(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).triu(1),
                            float("-inf"))
    elif mask is not None and mask.dtype == torch.bool:
        blocked = mask.logical_not()
        empty = blocked.all(dim=-1, keepdim=True)
        # Under vmap (a stacked pass, `zoo.attention.stacking`) no branch may read a tensor's values: always the safe path.
        if stacking.active() or empty.any():  # a query that may attend to no key gets zeros, as from SDPA (a softmax of -inf is NaN)
            scores.masked_fill_(blocked & empty.logical_not(), float("-inf"))
            return (dropout(scores.softmax(dim=-1), dropout_p, True) @ v).masked_fill(empty, 0.0)
        scores.masked_fill_(blocked, float("-inf"))
    elif mask is not None:
        scores = scores + mask
    return dropout(scores.softmax(dim=-1), dropout_p, True) @ v
