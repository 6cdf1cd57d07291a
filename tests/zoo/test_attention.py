"""The attention seam: `choose_backend`'s rules, `attend`'s masks, and the CPU path with hashed dropout."""

from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config
import torch.nn.functional as F

from benchbuild.zoo.attention import Backend, attend, choose_backend, hashed_dropout, packed
from benchbuild.zoo.attention.layouts import Groups
from benchbuild.zoo.attention.hash_masks import keep_mask
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq

CPU = torch.device("cpu")


def _forbid(monkeypatch, *places) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("CPU-specific code ran for a call off the CPU")

    for owner, name in places:
        monkeypatch.setattr(owner, name, refuse)


@pytest.mark.parametrize("device", ["cuda", "meta"])
def test_off_the_cpu_the_chooser_returns_sdpa_before_looking_at_anything_cpu_specific(device, monkeypatch):
    _forbid(monkeypatch, (packed, "takes"), (packed, "available"))
    for packable in (False, True):
        for dropout in (0.0, 0.1):
            for dtype in (torch.float32, torch.float64, torch.bfloat16):
                assert choose_backend(torch.device(device), dtype, head_dim=16, dropout=dropout,
                                      packable=packable) is Backend.SDPA


def test_a_grouped_training_pass_off_the_cpu_builds_no_cpu_layout(monkeypatch):
    """On a non-CPU device (meta here: shapes only, no GPU needed) the grouped pass never reads masks into numpy."""
    _forbid(monkeypatch, (packed, "takes"), (packed, "available"), (Groups, "real_lengths"),
            (Groups, "sequence_layout"))
    torch.manual_seed(0)
    model = TransformerForSeq2Seq(TransformerConfig(vocab_size=12, d_model=32, num_heads=2, d_ff=32, encoder_layers=1,
                                                    decoder_layers=1)).to("meta").train()
    groups = [{"input_ids": torch.ones(rows, source, dtype=torch.long, device="meta"),
               "attention_mask": torch.ones(rows, source, dtype=torch.long, device="meta"),
               "decoder_input_ids": torch.ones(rows, target, dtype=torch.long, device="meta")}
              for rows, source, target in ((3, 4, 2), (2, 6, 5))]
    assert not model._packs(groups)
    # Picking the real target positions of a meta tensor needs a nonzero() that assumes all of them real (they are).
    with torch.fx.experimental._config.patch(meta_nonzero_assume_all_nonzero=True):
        assert model(length_groups=groups).logits.shape == (3 * 2 + 2 * 5, 12)


@pytest.mark.skipif(not packed.available(), reason="no C compiler to build the packed attention kernel")
def test_on_cpu_the_kernel_takes_packable_float32_calls_without_distance_terms(monkeypatch):
    assert choose_backend(CPU, torch.float32, head_dim=16, packable=True) is Backend.PACKED
    assert choose_backend(CPU, torch.float32, head_dim=16, dropout=0.1, packable=True) is Backend.PACKED
    assert choose_backend(CPU, torch.float32, head_dim=16) is Backend.SDPA  # not a grouped call
    assert choose_backend(CPU, torch.float32, head_dim=16, packable=True, distance_terms=True) is Backend.SDPA
    assert choose_backend(CPU, torch.float64, head_dim=16, packable=True) is Backend.SDPA
    assert choose_backend(CPU, torch.float32, head_dim=12, packable=True) is Backend.SDPA  # not a multiple of 8
    assert choose_backend(CPU, torch.float32, head_dim=264, packable=True) is Backend.SDPA  # over 256
    with packed.disabled():
        assert choose_backend(CPU, torch.float32, head_dim=16, packable=True) is Backend.SDPA
    monkeypatch.setenv(packed.ENABLED_VARIABLE, "0")
    assert choose_backend(CPU, torch.float32, head_dim=16, dropout=0.1, packable=True) is Backend.HASHED_DROPOUT


def test_on_cpu_dropped_attention_weights_take_the_hashed_dropout():
    for dtype in (torch.float32, torch.float64):
        assert choose_backend(CPU, dtype, head_dim=12, dropout=0.1) is Backend.HASHED_DROPOUT
        assert choose_backend(CPU, dtype, head_dim=16, dropout=0.1, distance_terms=True,
                              packable=True) is Backend.HASHED_DROPOUT
        assert choose_backend(CPU, dtype, head_dim=12, dropout=0.0) is Backend.SDPA
        assert choose_backend(CPU, dtype, head_dim=12, dropout=1.0) is Backend.SDPA
    assert choose_backend(CPU, torch.bfloat16, head_dim=16, dropout=0.1) is Backend.SDPA


@pytest.mark.parametrize("case", ["key_mask", "causal", "cached_causal", "next_token", "window", "bias", "everything"])
def test_attend_masks_as_its_conditions_say(case):
    generator = torch.Generator().manual_seed(3)
    batch, heads, length_q, length_k, d = 2, 3, 5, 7, 8
    if case in ("causal", "window", "everything"):
        length_q = length_k
    if case == "next_token":  # one new position after a cached prefix
        length_q = 1
    q = torch.randn(batch, heads, length_q, d, generator=generator)
    k, v = (torch.randn(batch, heads, length_k, d, generator=generator) for _ in range(2))
    key_mask = None
    if case in ("key_mask", "everything"):
        key_mask = torch.ones(batch, length_k, dtype=torch.bool)
        key_mask[0, 1] = key_mask[1, 4] = key_mask[1, 6] = False  # every query still sees a key
    bias = torch.randn(1, heads, length_q, length_k, generator=generator) if case in ("bias", "everything") else None
    causal = case in ("causal", "cached_causal", "next_token", "everything")
    window = 2 if case in ("window", "everything") else None
    query_positions = torch.arange(length_k - length_q, length_k)[:, None]
    allowed = torch.ones(batch, 1, length_q, length_k, dtype=torch.bool)
    if key_mask is not None:
        allowed &= key_mask[:, None, None, :]
    if causal:
        allowed &= torch.arange(length_k)[None, :] <= query_positions
    if window is not None:
        allowed &= (torch.arange(length_k)[None, :] - query_positions).abs() <= window
    scores = q @ k.transpose(-1, -2) / d**0.5 + (0 if bias is None else bias)
    expected = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
    got = attend(q, k, v, key_mask=key_mask, causal=causal, window=window, bias=bias)
    torch.testing.assert_close(got, expected.transpose(1, 2).reshape(batch, length_q, heads * d))


@pytest.mark.parametrize("case", ["plain", "causal", "boolean", "additive"])
def test_the_spelled_out_attention_equals_pytorchs(case):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 8, generator=generator) for _ in range(3))
    mask = None
    if case == "boolean":
        mask = torch.rand(3, 1, 1, 7, generator=generator) > 0.3
        mask[..., 0] = True
    if case == "additive":
        mask = torch.randn(1, 4, 7, 7, generator=generator)
    causal = case == "causal"
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    # A drop probability under 2^-33 rounds to a threshold that keeps every weight: the spelled-out path, no drops.
    ours = hashed_dropout.attend(q, k, v, mask, causal, 1e-11)
    torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("case", ["plain", "causal", "key_mask", "square_mask", "additive"])
def test_attention_dropout_drops_weights_after_the_softmax_in_values_and_gradients(case):
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(3, 2, 5, 4, dtype=torch.float64, generator=generator).requires_grad_() for _ in range(3))
    mask, causal = None, case == "causal"
    if case == "key_mask":
        mask = torch.rand(3, 1, 1, 5, generator=generator) > 0.4
        mask[..., 0] = True
    if case == "square_mask":
        mask = torch.rand(5, 5, generator=generator) > 0.4
        mask[:, 0] = True
    if case == "additive":
        mask = torch.randn(1, 2, 5, 5, dtype=torch.float64, generator=generator)
    upstream = torch.randn(3, 2, 5, 4, dtype=torch.float64, generator=generator)
    torch.manual_seed(5)
    ours = hashed_dropout.attend(q, k, v, mask, causal, 0.2)
    ours_grads = torch.autograd.grad(ours, (q, k, v), upstream)
    torch.manual_seed(5)
    scores = q @ k.transpose(-2, -1) / 2.0
    if causal:
        scores = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    elif mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask
    weights = scores.softmax(-1)
    expected = torch.where(keep_mask(weights.shape, 0.2), weights / 0.8, 0.0) @ v
    torch.testing.assert_close(ours, expected)
    for got, want in zip(ours_grads, torch.autograd.grad(expected, (q, k, v), upstream)):
        torch.testing.assert_close(got, want)


def test_attend_with_dropout_on_cpu_drops_with_the_hash_mask():
    generator = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=generator) for _ in range(3))
    torch.manual_seed(4)
    got = attend(q, k, v, causal=True, dropout=0.3)
    torch.manual_seed(4)
    expected = hashed_dropout.attend(q, k, v, None, True, 0.3)
    assert torch.equal(got, expected.transpose(1, 2).reshape(2, 6, 24))


def test_hashed_dropout_gives_a_query_with_no_key_zeros_as_sdpa_does():
    """A query whose every key is masked (a fixed-span window, a padded row) gets zeros, not NaN that dropout's
    0·NaN would spread into real positions and the loss (sag_fixed_span went NaN at step 13 with attention dropout)."""
    import torch.nn.functional as F

    from benchbuild.zoo.attention.hashed_dropout import attend as hashed_attend

    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, 4, 8, generator=generator, requires_grad=True)
    k, v = torch.randn(2, 2, 5, 8, generator=generator), torch.randn(2, 2, 5, 8, generator=generator)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, 0, 1, :] = False
    mask[1, 0, :, 3:] = False
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(hashed_attend(q, k, v, mask, False, 0.0), expected, atol=1e-6)
    dropped = hashed_attend(q, k, v, mask, False, 0.3)
    dropped.sum().backward()
    assert torch.isfinite(dropped).all() and torch.isfinite(q.grad).all()
    assert dropped[0, :, 1].abs().max() == 0
