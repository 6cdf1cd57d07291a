"""The packed CPU backend (benchbuild.zoo.attention.packed) against attention spelled out in torch."""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
import torch

from benchbuild.zoo.attention import Backend, attend, choose_backend, packed
from benchbuild.zoo.attention.layouts import SequenceLayout
from benchbuild.zoo.attention.packed import attend_projections, attention_keep_mask

pytestmark = pytest.mark.skipif(not packed.available(), reason="no C compiler to build the packed attention kernel")

HEADS, HEAD_DIM = 4, 16
WIDTH = HEADS * HEAD_DIM
GROUPS = [(3, 2), (4, 5), (2, 9), (2, 13)]  # (rows, length): lengths below, at and above the kernel's 8-key blocks


def _query_layout():
    starts, lengths, offset = [], [], 0
    for rows, length in GROUPS:
        starts += [offset + row * length for row in range(rows)]
        lengths += [length] * rows
        offset += rows * length
    return np.array(starts), np.array(lengths), offset


def _reference(q, k, v, layout: SequenceLayout, keep: torch.Tensor | None, p: float) -> torch.Tensor:
    """Each sequence's multi-head attention with torch ops; `keep` (rows, heads, longest keys) drops weights."""
    rows = []
    for b in range(layout.sequences):
        start, length = layout.query_starts[b], layout.query_lengths[b]
        key_start, keys = layout.key_starts[b], layout.key_lengths[b]
        heads = [t.view(-1, HEADS, HEAD_DIM).transpose(0, 1) for t in
                 (q[start:start + length], k[key_start:key_start + keys], v[key_start:key_start + keys])]
        scores = heads[0] @ heads[1].transpose(-1, -2) / math.sqrt(HEAD_DIM)
        if layout.causal:
            scores = scores.masked_fill(~torch.ones(length, keys, dtype=torch.bool).tril(), float("-inf"))
        weights = scores.softmax(-1)
        if keep is not None:
            weights = weights * keep[start:start + length, :, :keys].transpose(0, 1) / (1 - p)
        rows.append((weights @ heads[2]).transpose(0, 1).reshape(length, WIDTH))
    return torch.cat(rows)


@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_values_and_gradients_match_torch(p, causal):
    starts, lengths, tokens = _query_layout()
    key_lengths = lengths if causal else np.maximum(lengths - 1, 1)  # a padded key at the end of each sequence
    layout = SequenceLayout(starts, lengths, starts, key_lengths, causal)
    torch.manual_seed(0)
    fused = torch.randn(tokens, 3 * WIDTH, requires_grad=True)
    torch.manual_seed(7)
    out = attend_projections(fused, None, layout, HEADS, p)
    torch.manual_seed(7)
    keep = attention_keep_mask(layout, tokens, HEADS, p) if p > 0 else None
    expected = _reference(fused[:, :WIDTH], fused[:, WIDTH:2 * WIDTH], fused[:, 2 * WIDTH:], layout, keep, p)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    upstream = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, fused, upstream)
    (want,) = torch.autograd.grad(expected, fused, upstream)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    if keep is not None:
        assert 0.2 < 1 - keep.float().mean().item() < 0.4  # the mask really drops about p of the weights


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_cross_attention_values_and_gradients_match_torch(p):
    starts, lengths, tokens = _query_layout()
    memory = 6  # rows of memory per sequence; sequence b has 1 + b % 6 real ones
    key_starts = np.arange(len(starts)) * memory
    layout = SequenceLayout(starts, lengths, key_starts, 1 + np.arange(len(starts)) % memory, causal=False)
    torch.manual_seed(1)
    queries = torch.randn(tokens, WIDTH, requires_grad=True)
    keys_values = torch.randn(len(starts) * memory, 2 * WIDTH, requires_grad=True)
    torch.manual_seed(3)
    out = attend_projections(queries, keys_values, layout, HEADS, p)
    torch.manual_seed(3)
    keep = attention_keep_mask(layout, tokens, HEADS, p) if p > 0 else None
    expected = _reference(queries, keys_values[:, :WIDTH], keys_values[:, WIDTH:], layout, keep, p)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    upstream = torch.randn_like(out)
    got = torch.autograd.grad(out, (queries, keys_values), upstream)
    want = torch.autograd.grad(expected, (queries, keys_values), upstream)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    padding = np.setdiff1d(np.arange(len(starts) * memory),
                           np.concatenate([s + np.arange(n) for s, n in zip(key_starts, layout.key_lengths)]))
    assert torch.count_nonzero(got[1][padding]) == 0  # padded memory rows get no gradient


def test_results_do_not_depend_on_the_thread_count():
    starts, lengths, tokens = _query_layout()
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=True)
    fused = torch.randn(tokens, 3 * WIDTH, requires_grad=True)
    results = []
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            torch.manual_seed(11)
            out = attend_projections(fused, None, layout, HEADS, 0.2)
            (grad,) = torch.autograd.grad(out, fused, torch.ones_like(out))
            results.append((out, grad))
    finally:
        torch.set_num_threads(threads)
    for out, grad in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(grad, results[0][1])


def test_no_dropout_draws_nothing_from_the_generator():
    starts, lengths, tokens = _query_layout()
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=True)
    torch.manual_seed(5)
    attend_projections(torch.randn(tokens, 3 * WIDTH), None, layout, HEADS, 0.0)
    after = torch.rand(1)
    torch.manual_seed(5)
    torch.randn(tokens, 3 * WIDTH)
    assert torch.equal(after, torch.rand(1))


def test_the_kernel_takes_only_what_it_computes():
    starts, lengths, tokens = _query_layout()
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=True)
    assert packed.takes(torch.float32, HEAD_DIM) and packed.fits(tokens, HEADS, layout.longest_keys)
    assert not packed.takes(torch.float64, HEAD_DIM)
    assert not packed.takes(torch.float32, 12)  # head size 12: not a multiple of 8
    assert not packed.fits(2**28, HEADS, 4)  # 2^32 weights: more than 32-bit indices number


def test_attend_reads_column_blocks_of_a_fused_projection_in_place():
    """The seam's packed call on head views of one fused projection is the kernel's call on that projection: the
    same output and the same gradient, bit for bit, and no copy of the projection."""
    starts, lengths, tokens = _query_layout()
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=True)
    fused = torch.randn(tokens, 3 * WIDTH, requires_grad=True)
    upstream = torch.randn(tokens, WIDTH)
    torch.manual_seed(3)
    expected = attend_projections(fused, None, layout, HEADS, 0.2)
    (want,) = torch.autograd.grad(expected, fused, upstream)
    heads = [part[None].view(1, tokens, HEADS, HEAD_DIM).transpose(1, 2) for part in fused.chunk(3, dim=1)]
    assert all(packed._columns(part)[0] is fused for part in heads)
    torch.manual_seed(3)
    out = attend(*heads, dropout=0.2, layout=layout)
    (got,) = torch.autograd.grad(out, fused, upstream[None])
    assert torch.equal(out[0], expected) and torch.equal(got, want)


def test_attend_over_keys_and_values_from_separate_tensors_matches_the_fused_call():
    starts, lengths, tokens = _query_layout()
    layout = SequenceLayout(starts, lengths, starts, lengths, causal=False)
    queries, keys, values = (torch.randn(tokens, WIDTH, requires_grad=True) for _ in range(3))
    torch.manual_seed(8)
    expected = attend_projections(queries, torch.cat([keys, values], dim=1), layout, HEADS, 0.1)
    heads = [t[None].view(1, tokens, HEADS, HEAD_DIM).transpose(1, 2) for t in (queries, keys, values)]
    torch.manual_seed(8)
    assert torch.equal(attend(*heads, dropout=0.1, layout=layout)[0], expected)


def test_a_failing_compiler_gives_a_warning_and_no_kernel(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert packed.build("/bin/false", tmp_path) is None
    assert any("could not compile" in str(w.message) and "CC" in str(w.message) for w in caught)
    assert not list(tmp_path.glob("*.so"))


def test_the_kernel_is_built_once_and_reused(tmp_path, monkeypatch):
    compiler = packed.shutil.which("cc") or packed.shutil.which("gcc")
    first = packed.build(compiler, tmp_path)
    assert first is not None and first.is_file()
    modified = first.stat().st_mtime_ns
    assert packed.build(compiler, tmp_path) == first and first.stat().st_mtime_ns == modified
    assert [path.name for path in tmp_path.iterdir()] == [first.name]  # no temporary build folder left behind


def test_the_switch_turns_the_kernel_off(monkeypatch):
    cpu = torch.device("cpu")
    with packed.disabled():
        assert choose_backend(cpu, torch.float32, head_dim=HEAD_DIM, packable=True) is not Backend.PACKED
    assert choose_backend(cpu, torch.float32, head_dim=HEAD_DIM, packable=True) is Backend.PACKED
    monkeypatch.setenv(packed.ENABLED_VARIABLE, "0")
    assert not packed.available()
    assert choose_backend(cpu, torch.float32, head_dim=HEAD_DIM, packable=True) is not Backend.PACKED


def test_grouped_training_gives_the_same_gradients_with_and_without_the_kernel():
    """A grouped training pass of the zoo Transformer (no dropout) through the kernel and through torch's
    group-by-group attention: same loss, same gradient for every parameter."""
    from benchbuild.zoo import build_model, load_entry

    torch.manual_seed(0)
    network = build_model(load_entry("transformer"), vocab_size=12, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                          overrides={"d_model": 32, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                                     "attention_dropout": 0.0}).train()
    generator = torch.Generator().manual_seed(1)
    groups = []
    for rows, source_length, target_length in ((3, 4, 2), (2, 6, 9), (4, 5, 12)):
        source = torch.randint(3, 12, (rows, source_length), generator=generator)
        mask = torch.ones(rows, source_length, dtype=torch.long)
        mask[0, source_length - 2:] = 0  # one row with padded source
        groups.append({"input_ids": source.masked_fill(mask == 0, 0), "attention_mask": mask,
                       "decoder_input_ids": torch.randint(3, 12, (rows, target_length), generator=generator)})
    results = []
    for context in (packed.disabled, contextlib.nullcontext):
        network.zero_grad()
        with context():
            logits = network(length_groups=groups).logits
        loss = logits.logsumexp(-1).mean()
        loss.backward()
        results.append((loss.item(), {name: p.grad.clone() for name, p in network.named_parameters()}))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    for name, gradient in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], gradient, rtol=1e-4, atol=1e-6)
