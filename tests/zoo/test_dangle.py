"""Dangle / R-Dangle re-encode [source; target prefix] at their interval (001 §2-3)."""

from __future__ import annotations

import torch

from benchbuild.zoo import load_entry
from benchbuild.zoo.dangle import source_then_prefix
from tiny_zoo import PAD, zoo_network

VOCAB = 30
SOURCE = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
TARGET = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 17, 18]])


def logits(model, decoder_ids=TARGET):
    with torch.no_grad():
        return model(input_ids=SOURCE, attention_mask=SOURCE.ne(PAD).long(), decoder_input_ids=decoder_ids).logits


def test_source_then_prefix_packs_each_row_without_inner_padding():
    index, segments = source_then_prefix(SOURCE.ne(PAD), torch.tensor([2, 2]), 2, end_token=True)
    # Each row's pool: source positions 0-3, prefix 4-5, the end-of-prefix vector 6, a zero vector 7.
    assert index.tolist() == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 4, 5, 6, 7, 7]]
    assert segments.tolist() == [[1, 1, 1, 1, 2, 2, 2], [1, 1, 2, 2, 2, 0, 0]]


def test_dangle_re_encodes_the_prefix_at_every_step():
    model = zoo_network(load_entry("dangle"), VOCAB).eval()
    mask = SOURCE.ne(PAD).long()
    expected = []
    with torch.no_grad():
        for t in range(TARGET.size(1)):
            keys = model.adaptive_encode(SOURCE, mask, TARGET[:, : t + 1])
            expected.append(model.decode(TARGET[:, : t + 1], keys, mask)[:, -1])
    torch.testing.assert_close(logits(model), torch.stack(expected, dim=1))


def test_rdangle_with_interval_1_equals_dangle():
    dangle = zoo_network(load_entry("dangle"), VOCAB, seed=3).eval()
    rdangle = zoo_network(load_entry("rdangle_shr"), VOCAB, seed=3, interval=1).eval()
    assert load_entry("rdangle_shr").architecture["interval"] > 1
    torch.testing.assert_close(logits(rdangle), logits(dangle))


def test_rdangle_reuses_the_encoding_between_re_encoding_points():
    model = zoo_network(load_entry("rdangle_shr"), VOCAB, interval=2).eval()
    mask = SOURCE.ne(PAD).long()
    with torch.no_grad():
        at_0 = model.adaptive_encode(SOURCE, mask, TARGET[:, :1])
        at_2 = model.adaptive_encode(SOURCE, mask, TARGET[:, :3])
        expected = torch.cat([model.decode(TARGET[:, :2], at_0, mask),
                              model.decode(TARGET[:, :4], at_2, mask)[:, 2:],
                              model.decode(TARGET, model.adaptive_encode(SOURCE, mask, TARGET), mask)[:, 4:]], dim=1)
    got = logits(model)
    torch.testing.assert_close(got, expected)
    dangle_like = zoo_network(load_entry("rdangle_shr"), VOCAB, interval=1).eval()
    assert not torch.allclose(logits(dangle_like)[:, 1], got[:, 1])  # position 1 uses H_0, not H_1


def test_rdangle_sep_keys_and_values_come_from_different_encodings():
    model = zoo_network(load_entry("rdangle_sep"), VOCAB).eval()
    seen = {}
    cross = model.decoder_stack.layers[0].cross_attention
    cross.register_forward_hook(lambda module, args, kwargs, output: seen.update(
        keys=kwargs["memory"].keys, values=kwargs["memory"].values), with_kwargs=True)
    mask = SOURCE.ne(PAD).long()
    logits(model)
    steps = TARGET.size(1)
    keys = seen["keys"].view(SOURCE.size(0), steps, *seen["keys"].shape[1:])  # one row per re-encoding point
    values = seen["values"].view(SOURCE.size(0), steps, *seen["values"].shape[1:])
    with torch.no_grad():
        encoded_once = model.encode(SOURCE, mask).last_hidden_state
        for t in range(steps):
            torch.testing.assert_close(values[:, t], encoded_once)  # H^v: the source encoded once
            real = mask.bool()  # padded source positions are masked in cross-attention; their states do not matter
            torch.testing.assert_close(keys[:, t][real], model.adaptive_encode(SOURCE, mask, TARGET[:, : t + 1])[real])
    assert not torch.allclose(keys[:, 0], values[:, 0])
    assert not torch.allclose(keys[:, 0], keys[:, -1])  # keys change with the prefix, values do not


def test_rdangle_sep_shares_the_top_source_layers_between_key_and_value_encoders():
    model = zoo_network(load_entry("rdangle_sep"), VOCAB)
    assert len(model.value_stack.layers) == model.config.value_layers
    assert len(model.adaptive_stack.layers) == model.config.adaptive_layers
    names = {name.split(".")[0] for name, _ in model.named_parameters()}
    assert {"value_stack", "adaptive_stack", "source_stack"} <= names
    assert not hasattr(zoo_network(load_entry("rdangle_shr"), VOCAB), "value_stack")
