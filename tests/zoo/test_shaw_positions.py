"""position = "shaw": 001's relative positions as mswellhao/Dangle's MultiheadAttentionWithRelPos computes them."""

from __future__ import annotations

import math

import pytest
import torch

from benchbuild.zoo import load_entry
from benchbuild.zoo.positions import shaw_index, shaw_term
from benchbuild.zoo.transformer import TransformerConfig
from benchbuild.zoo.transformer_layers import Attention
from tiny_zoo import BOS, PAD, zoo_network

VOCAB = 30
CPU = torch.device("cpu")


def random_tables(attention: Attention, seed: int = 0) -> None:
    """Replace the (zero-initialised) distance tables with random ones, so that positions change the logits."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in attention._shaw_tables():
            table.copy_(torch.randn(table.shape, generator=generator))


def test_distance_index_is_clipped_at_max_relative_position_minus_one():
    attention = Attention(8, 2, 0.0, position="shaw", max_relative_position=2)
    # r_ij = clamp(i - j, -1, 1) + 1: the official clamp(distance, 1 - M, M - 1) + M - 1.
    m = attention.max_relative_position
    assert shaw_index(4, 4, m, None, CPU).tolist() == [[1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0], [2, 2, 2, 1]]
    assert shaw_index(1, 4, m, None, CPU).tolist() == [[2, 2, 2, 1]]  # a cached step: the last query


def test_every_layer_has_one_table_of_2m_minus_1_rows_shared_by_its_heads():
    attention = Attention(32, 4, 0.0, position="shaw", max_relative_position=16)
    assert [tuple(t.shape) for t in attention._shaw_tables()] == [(31, 8)]  # 2·16 - 1 rows of d_head = 32 / 4
    assert torch.count_nonzero(attention.distance_table) == 0  # the official table starts at 0


def test_logits_of_tokens_20_apart_equal_those_16_and_15_apart_but_not_14():
    """With every token the same, q_i · k_j is one number: what differs between pairs is r_ij alone."""
    attention = Attention(16, 2, 0.0, position="shaw", max_relative_position=16).eval()
    random_tables(attention)
    x = torch.randn(1, 1, 16).expand(1, 25, 16)
    q = attention._heads(attention.query(x))
    k = attention._heads(attention.key(x))
    with torch.no_grad():
        index = shaw_index(25, 25, attention.max_relative_position, None, CPU)
        bias = shaw_term(q, k, torch.cat(attention._shaw_tables()), index)[0, 0]
    torch.testing.assert_close(bias[20, 0], bias[16, 0])
    torch.testing.assert_close(bias[20, 0], bias[15, 0])
    torch.testing.assert_close(bias[0, 20], bias[0, 15])
    assert not torch.allclose(bias[20, 0], bias[14, 0])
    assert not torch.allclose(bias[20, 0], bias[0, 20])  # signed: i - j and j - i read different rows


@pytest.mark.parametrize("causal", [False, True])
def test_one_head_output_is_the_formula(causal):
    """softmax_j((q_i·k_j + q_i·r_ij + k_j·r_ij) / √d) over v_j, r_ij = R[clamp(i - j, -(M-1), M-1) + M - 1],
    written out position by position; values carry no position term."""
    torch.manual_seed(4)
    d, m = 4, 2
    attention = Attention(d, 1, 0.0, position="shaw", max_relative_position=m, causal=causal).eval()
    random_tables(attention, seed=5)
    x = torch.randn(1, 4, d)
    mask = torch.tensor([[1, 1, 1, 0]])  # the last position is padding
    with torch.no_grad():
        got = attention(x, mask if not causal else None)[0]
        q, k, v = attention.query(x)[0], attention.key(x)[0], attention.value(x)[0]
        table = attention.distance_table
        expected = []
        for i in range(4):
            keys = range(i + 1) if causal else range(3)
            logits = torch.stack([(q[i] @ k[j] + q[i] @ table[max(-(m - 1), min(m - 1, i - j)) + m - 1]
                                   + k[j] @ table[max(-(m - 1), min(m - 1, i - j)) + m - 1]) / math.sqrt(d)
                                  for j in keys])
            weights = torch.softmax(logits, dim=0)
            expected.append(attention.out(sum(w * v[j] for w, j in zip(weights, keys))))
    torch.testing.assert_close(got, torch.stack(expected))


def test_shaw_acts_in_self_attention_only_and_adds_exactly_the_official_tables():
    """(encoder + decoder layers) × (2M - 1) × d_head parameters over position "none"; no absolute positions."""
    m = 5
    shaw = zoo_network(load_entry("transformer"), VOCAB, position="shaw", max_relative_position=m, encoder_layers=2,
                      decoder_layers=2)
    none = zoo_network(load_entry("transformer"), VOCAB, position="none", encoder_layers=2, decoder_layers=2)
    extra = sum(p.numel() for p in shaw.parameters()) - sum(p.numel() for p in none.parameters())
    head_dim = shaw.config.d_model // shaw.config.num_heads
    assert extra == (2 + 2) * (2 * m - 1) * head_dim
    assert all(layer.mixer.position == "shaw" for layer in shaw.encoder_stack.layers)
    for layer in shaw.decoder_stack.layers:
        assert layer.mixer.position == "shaw" and layer.cross_attention.position == "none"
    ids = torch.tensor([[5, 6, 7]])  # no absolute positions: the scaled word embeddings alone
    torch.testing.assert_close(shaw.embedding(ids), shaw.embedding.weight[ids] * math.sqrt(shaw.config.d_model))


def shaw_model(max_relative_position: int = 3):
    model = zoo_network(load_entry("transformer"), VOCAB, position="shaw", max_relative_position=max_relative_position,
                       encoder_layers=2, decoder_layers=2).eval()
    shaw_layers = [m for m in model.modules() if isinstance(m, Attention) and m.position == "shaw"]
    for seed, attention in enumerate(shaw_layers):
        random_tables(attention, seed)
    return model


def test_cached_steps_reproduce_the_logits_of_one_full_pass():
    """Three tokens at once, then one at a time, past the clipping distance (M = 3): the logits of one pass."""
    model = shaw_model()
    input_ids = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, PAD, PAD]])
    mask = input_ids.ne(PAD).long()
    target = torch.cat([torch.full((2, 1), BOS), torch.randint(3, VOCAB, (2, 8),
                                                               generator=torch.Generator().manual_seed(2))], 1)
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=target).logits
        encoded = model.encode(input_ids, mask)
        step = model(encoder_outputs=encoded, attention_mask=mask, decoder_input_ids=target[:, :3], use_cache=True)
        pieces, past = [step.logits], step.past_key_values
        for position in range(3, target.size(1)):
            step = model(encoder_outputs=encoded, attention_mask=mask,
                         decoder_input_ids=target[:, position: position + 1], past_key_values=past, use_cache=True)
            pieces.append(step.logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


def test_cached_generate_equals_uncached_generate():
    model = shaw_model()
    input_ids = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, PAD, PAD]])
    options = dict(attention_mask=input_ids.ne(PAD).long(), do_sample=False, min_length=9, max_length=9)
    with torch.no_grad():
        assert torch.equal(model.generate(input_ids=input_ids, use_cache=True, **options),
                           model.generate(input_ids=input_ids, use_cache=False, **options))


def test_length_groups_in_one_pass_equal_one_forward_per_group():
    model = shaw_model()
    generator = torch.Generator().manual_seed(6)
    groups = []
    for rows, source, target in ((3, 4, 3), (2, 7, 6)):
        input_ids = torch.randint(3, VOCAB, (rows, source), generator=generator)
        input_ids[0, -1] = PAD
        decoder_ids = torch.randint(3, VOCAB, (rows, target), generator=generator)
        decoder_mask = torch.ones(rows, target, dtype=torch.long)
        decoder_mask[-1, -2:] = 0
        groups.append({"input_ids": input_ids, "attention_mask": input_ids.ne(PAD).long(),
                       "decoder_input_ids": decoder_ids, "decoder_attention_mask": decoder_mask})
    assert not model._packs(groups)  # distance terms keep the packed kernel out
    with torch.no_grad():
        grouped = model(length_groups=groups).logits
        one_by_one = [model(input_ids=g["input_ids"], attention_mask=g["attention_mask"],
                            decoder_input_ids=g["decoder_input_ids"]).logits[g["decoder_attention_mask"].bool()]
                      for g in groups]
    torch.testing.assert_close(grouped, torch.cat(one_by_one), rtol=1e-5, atol=1e-5)


def test_max_relative_position_below_one_is_an_error():
    from benchbuild.errors import BenchbuildError

    with pytest.raises(BenchbuildError, match="max_relative_position = 0"):
        TransformerConfig(position="shaw", max_relative_position=0)
