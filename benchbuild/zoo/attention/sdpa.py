"""The default backend: torch's `F.scaled_dot_product_attention`, the only one on GPU (its fused kernels there)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool,
           dropout_p: float) -> torch.Tensor:
    """Heads q (B, H, Lq, d) over k, v (B, H, Lk, d): (B, H, Lq, d)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
