"""Syntactic Attention keeps translation context-free and alignment contextual (002 §2)."""

from __future__ import annotations

import torch

from benchbuild.zoo import load_entry
from tiny_zoo import BOS, PAD, zoo_network

VOCAB = 30


def streams(model, ids):
    with torch.no_grad():
        encoding = model.encode(ids, ids.ne(PAD).long())
    return encoding.translation, encoding.last_hidden_state


def role_inputs(model, ids):
    """biLSTM₂'s input h̃ for `ids` wrapped in <s> ... as `encode` wraps them."""
    with torch.no_grad():
        return model.role_inputs(*model.with_start_token(ids, ids.ne(PAD).long()))


def test_encode_reads_the_source_behind_a_start_token():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    translation, alignment = streams(model, torch.tensor([[5, 6, 7]]))
    assert translation.shape[1] == alignment.shape[1] == 4
    torch.testing.assert_close(translation[0, 0], model.translation_embedding.weight[BOS])


def test_translation_stream_of_token_j_is_unchanged_when_other_tokens_change():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    others = torch.tensor([[11, 12, 7, 14, 15]])  # token 2 kept, every other token changed
    translation, alignment = streams(model, ids)
    translation_changed, alignment_changed = streams(model, others)
    torch.testing.assert_close(translation_changed[0, 3], translation[0, 3])  # position 3 behind <s>
    torch.testing.assert_close(translation[0, 3], model.translation_embedding.weight[7])
    assert not torch.allclose(alignment_changed[0, 3], alignment[0, 3])


def test_first_alignment_layer_gives_token_j_the_context_of_its_neighbours_only():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    swapped = ids.clone()
    swapped[0, 2] = 20  # h̃ at x_2 = [fwd h¹ of x_1; bwd h¹ of x_3] does not read x_2
    roles, roles_swapped = role_inputs(model, ids), role_inputs(model, swapped)
    torch.testing.assert_close(roles_swapped[0, 3], roles[0, 3])
    assert not torch.allclose(roles_swapped[0, 2], roles[0, 2])
    assert not torch.allclose(roles_swapped[0, 4], roles[0, 4])


def test_start_and_end_roles_replace_the_context_at_each_rows_first_and_last_token():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    roles = role_inputs(model, torch.tensor([[5, 6, 7, 8], [5, 6, PAD, PAD]]))
    for row, last in ((0, 4), (1, 2)):
        torch.testing.assert_close(roles[row, 0], model.start_role.weight[0])
        torch.testing.assert_close(roles[row, last], model.end_role.weight[0])
    assert not torch.allclose(roles[0, 2], model.end_role.weight[0])


def test_alignment_stream_ignores_padding():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    _, alignment = streams(model, torch.tensor([[5, 6, 7]]))
    _, padded = streams(model, torch.tensor([[5, 6, 7, PAD, PAD]]))
    torch.testing.assert_close(padded[:, :4], alignment)
    assert torch.all(padded[:, 4:] == 0)


def test_prediction_reads_the_translation_stream_only_through_attention():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    ids = torch.tensor([[5, 6, 7]])
    decoder_ids = torch.tensor([[1, 9]])
    with torch.no_grad():
        encoding = model.encode(ids, ids.ne(PAD).long())
        logits = model.decode(decoder_ids, encoding)
        # with every m_j the same vector, d_i is that vector whatever the attention: logits are f(m)
        encoding.translation = encoding.translation[:, :1].expand_as(encoding.translation).clone()
        flat = model.decode(decoder_ids, encoding)
    expected = model.output(encoding.translation[0, 0])
    torch.testing.assert_close(flat[0, 0], expected)
    torch.testing.assert_close(flat[0, 1], expected)
    assert not torch.allclose(logits[0, 0], expected)


def test_a_saved_model_scores_the_same_tokens_when_loaded(tmp_path):
    """`output_vocabulary = "targets"`: the logits outside the output tokens are the dtype's lowest, in the model that
    trained and in the one `load_model` reads back from its folder (what a resumed run and `eval` decode with), so
    the two give the same logits. (A buffer made in __init__ came back uninitialised from `from_pretrained`, and a
    resumed run's first loss was inf.)"""
    from benchbuild.zoo.loading import load_model

    tokens = [1, 2, 5, 7, 11, 13]
    model = zoo_network(load_entry("syntactic_attention"), VOCAB, output_vocabulary="targets",
                        output_tokens=tokens).eval()
    model.save_pretrained(tmp_path)
    loaded = load_model(tmp_path).eval()
    ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    labels = torch.tensor([[7, 11, 2], [13, 2, -100]])
    with torch.no_grad():
        logits, reloaded = (network(input_ids=ids, attention_mask=ids.ne(PAD).long(), labels=labels).logits
                            for network in (model, loaded))
    lowest = torch.finfo(logits.dtype).min
    assert torch.equal((logits > lowest).any(dim=(0, 1)).nonzero().flatten(), torch.tensor(tokens))
    assert torch.equal(logits, reloaded)
