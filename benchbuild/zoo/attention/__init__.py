"""The zoo's one attention seam: every attention call goes through `attend`, whose backend `choose_backend` picks.

Backends, one module each:

- `sdpa`: torch's `F.scaled_dot_product_attention`, the default and the only backend off the CPU (CUDA, MPS);
- `hashed_dropout`: the same computation spelled out on CPU when attention weights are dropped, with
  `hash_masks`' keyed dropout masks (one numba pass instead of one random draw per weight);
- `packed`: a compiled C kernel that attends every sequence of a grouped training batch at once on CPU, dropout
  included, reading the queries, keys and values straight from the fused projections.

Beside them: `layouts` (how grouped training lays a batch out, and where the packed kernel finds each sequence),
`memory` (what attention reads besides its own sequence: the encoder output, the decoding cache), `hash_masks` (the
CPU's keyed dropout masks) and `stacking` (each member's dropout masks in a stacked training pass, and the switch
that sends every layer down its vmappable path there).

The model computes the projections and its position bias; `attend` adds the masks (padding, causal, a window of
positions) and the backend attends. Because the packed kernel wants the batch laid out its own way (and the
projections fused), a grouped training call asks `choose_backend(..., packable=True)` before it projects; every
other call asks inside `attend`.
"""

from __future__ import annotations

import enum

import torch

from benchbuild.zoo.attention import hashed_dropout, packed, sdpa, stacking
from benchbuild.zoo.attention.layouts import SequenceLayout
from benchbuild.zoo.attention.hash_masks import HASHED_DTYPES

__all__ = ["Backend", "attend", "choose_backend", "distances"]


class Backend(enum.Enum):
    """Which module attends (the package docstring says what each does)."""

    SDPA = "sdpa"
    HASHED_DROPOUT = "hashed_dropout"
    PACKED = "packed"


def choose_backend(device: torch.device, dtype: torch.dtype, *, head_dim: int, dropout: float = 0.0,
                   distance_terms: bool = False, packable: bool = False) -> Backend:
    """The backend of an attention call with `head_dim`-sized heads in `dtype` on `device`.

    Off the CPU: SDPA, before anything CPU-specific is looked at. On CPU: PACKED for a grouped training call
    (`packable`) without distance terms (position "absolute" or "none", every cross-attention) when the kernel
    takes the dtype and head size and is on and built (`BENCHBUILD_PACKED_ATTENTION=0` turns it off); else
    HASHED_DROPOUT when attention weights are dropped (0 < `dropout` < 1) in float32 / float64; else SDPA. In a
    stacked pass (`zoo.attention.stacking`), on any device: HASHED_DROPOUT, whose dropout masks then come from each member's
    stream (torch's vmap rule for fused attention calls a CPU kernel that refuses a position bias needing gradients).
    """
    if stacking.active():
        return Backend.HASHED_DROPOUT
    if device.type != "cpu":
        return Backend.SDPA
    if packable and not distance_terms and packed.takes(dtype, head_dim):
        return Backend.PACKED
    if 0.0 < dropout < 1.0 and dtype in HASHED_DTYPES:
        return Backend.HASHED_DROPOUT
    return Backend.SDPA


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, key_mask: torch.Tensor | None = None,
           causal: bool = False, window: int | None = None, bias: torch.Tensor | None = None, dropout: float = 0.0,
           layout: SequenceLayout | None = None) -> torch.Tensor:
    """Heads q (B, H, Lq, d) attend over k, v (B, H, Lk, d); returns (B, Lq, H · d), the heads side by side.

    Positions: the queries are the last Lq of the Lk key positions (self-attention after a cached prefix; cross-
    attention takes neither `causal` nor `window`). `key_mask` (B, Lk): True at real keys; `causal`: a query sees
    no later key; `window`: nor one more than `window` positions away; `bias`: added to the scaled scores,
    broadcastable to (B, H, Lq, Lk); `dropout`: the drop probability of attention weights (0 outside training).
    With `layout` (a grouped training call that `choose_backend` gave PACKED): B = 1, the sequences lie back to back
    along Lq and Lk where `layout` says, their real keys and causality included.
    """
    if layout is not None:
        return packed.attend(q, k, v, layout, dropout)
    length_q, length_k = q.size(2), k.size(2)
    past = length_k - length_q
    if causal and key_mask is None and window is None and bias is None and (past == 0 or length_q == 1):
        # One new query after the cached prefix may see every key; a whole sequence needs the causal mask.
        mask, causal = None, past == 0 and length_q > 1
    else:
        mask, causal = _mask(key_mask, causal, window, bias, length_q, length_k, q.device), False
    if choose_backend(q.device, q.dtype, head_dim=q.size(-1), dropout=dropout) is Backend.HASHED_DROPOUT:
        attended = hashed_dropout.attend(q, k, v, mask, causal, dropout)
    else:
        attended = sdpa.attend(q, k, v, mask, causal, dropout)
    return attended.transpose(1, 2).reshape(q.size(0), length_q, -1)


def distances(length_q: int, length_k: int, device: torch.device) -> torch.Tensor:
    """(Lq, Lk) signed distances i - j from each query position i (the last Lq of Lk) to each key position j."""
    return (torch.arange(length_k - length_q, length_k, device=device)[:, None]
            - torch.arange(length_k, device=device)[None, :])


def _mask(key_mask: torch.Tensor | None, causal: bool, window: int | None, bias: torch.Tensor | None, length_q: int,
          length_k: int, device: torch.device) -> torch.Tensor | None:
    """The SDPA mask of `attend`'s conditions: booleans (True: may attend), or `bias` with -inf where none may."""
    allowed = None if key_mask is None else key_mask[:, None, None, :].bool()
    if causal or window is not None:
        distance = distances(length_q, length_k, device)
        if causal:
            allowed = distance.ge(0) if allowed is None else allowed & distance.ge(0)
        if window is not None:
            near = distance.abs().le(window)
            allowed = near if allowed is None else allowed & near
    if bias is None:
        return allowed
    return bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
