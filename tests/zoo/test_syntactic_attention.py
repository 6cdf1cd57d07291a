"""Syntactic Attention keeps translation context-free and alignment contextual (002 §2)."""

from __future__ import annotations

import torch

from benchbuild.zoo import load_entry
from tiny_zoo import PAD, tiny_model

VOCAB = 30


def streams(model, ids):
    with torch.no_grad():
        encoding = model.encode(ids, ids.ne(PAD).long())
    return encoding.translation, encoding.last_hidden_state


def test_translation_stream_of_token_j_is_unchanged_when_other_tokens_change():
    model = tiny_model(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    others = torch.tensor([[11, 12, 7, 14, 15]])  # token 2 kept, every other token changed
    translation, alignment = streams(model, ids)
    translation_changed, alignment_changed = streams(model, others)
    torch.testing.assert_close(translation_changed[0, 2], translation[0, 2])
    torch.testing.assert_close(translation[0, 2], model.translation_embedding.weight[7])
    assert not torch.allclose(alignment_changed[0, 2], alignment[0, 2])


def test_alignment_state_of_token_j_comes_from_its_neighbours_only():
    model = tiny_model(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    swapped = ids.clone()
    swapped[0, 2] = 20  # h_2 = [fwd h_1; bwd h_3] does not read x_2
    _, alignment = streams(model, ids)
    _, alignment_swapped = streams(model, swapped)
    torch.testing.assert_close(alignment_swapped[0, 2], alignment[0, 2])
    assert not torch.allclose(alignment_swapped[0, 1], alignment[0, 1])


def test_alignment_stream_is_zero_beyond_the_ends_and_ignores_padding():
    model = tiny_model(load_entry("syntactic_attention"), VOCAB).eval()
    hidden = model.config.hidden_size
    _, alignment = streams(model, torch.tensor([[5, 6, 7]]))
    _, padded = streams(model, torch.tensor([[5, 6, 7, PAD, PAD]]))
    assert torch.all(alignment[0, 0, :hidden] == 0) and torch.all(alignment[0, -1, hidden:] == 0)
    torch.testing.assert_close(padded[:, :3], alignment)


def test_prediction_reads_the_translation_stream_only_through_attention():
    model = tiny_model(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7]])
    decoder_ids = torch.tensor([[1, 9]])
    with torch.no_grad():
        encoding = model.encode(ids, ids.ne(PAD).long())
        logits = model.decode(decoder_ids, encoding, ids.ne(PAD))
        # with every m_j the same vector, d_i is that vector whatever the attention: logits are f(m)
        encoding.translation = encoding.translation[:, :1].expand_as(encoding.translation).clone()
        flat = model.decode(decoder_ids, encoding, ids.ne(PAD))
    expected = model.output(encoding.translation[0, 0])
    torch.testing.assert_close(flat[0, 0], expected)
    torch.testing.assert_close(flat[0, 1], expected)
    assert not torch.allclose(logits[0, 0], expected)
