"""Dangle's adaptive encoder as its authors' code builds it (mswellhao/Dangle transformer_rdangle_kv_shared.py,
transformer_rdangle_kv_sep.py, modules/transformer_layer.py, modules/multihead_attention_relative.py)."""

from __future__ import annotations

import math

import pytest
import torch

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import load_entry
from benchbuild.zoo.attention import attend
from benchbuild.zoo.dangle import DangleConfig, source_then_prefix
from benchbuild.zoo.positions import shaw_index, shaw_term
from benchbuild.zoo.transformer_layers import Attention
from tiny_zoo import BOS, EOS, PAD, zoo_network

VOCAB = 30
CPU = torch.device("cpu")
SOURCE = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
TARGET = torch.tensor([[BOS, 11, 12, 13, 14], [BOS, 15, 16, 17, 18]])


def with_random_positions(model):
    """The model with its zero-initialised distance tables drawn at random, so that positions change the outputs."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, Attention) and module.position == "shaw":
                for table in module._shaw_tables():
                    table.copy_(torch.randn(table.shape, generator=generator))
    return model.eval()


def logits(model, source=SOURCE, target=TARGET):
    with torch.no_grad():
        return model(input_ids=source, attention_mask=source.ne(PAD).long(), decoder_input_ids=target).logits


def segments_of(source_length: int, prefix_length: int) -> torch.Tensor:
    return source_then_prefix(torch.ones(1, source_length), torch.tensor([prefix_length]), prefix_length, True)[1]


def test_the_catalogue_builds_the_official_heads_and_positions():
    architecture = load_entry("dangle").architecture
    assert architecture["position"] == "shaw" and architecture["max_relative_position"] == 16
    assert (architecture["num_heads"], architecture["adaptive_heads"]) == (4, 8)
    config = DangleConfig()
    assert (config.adaptive_heads, config.type_embeddings, config.end_of_prefix) == (8, True, True)


@pytest.mark.parametrize("name", ["dangle", "rdangle_sep"])
def test_the_cross_boundary_layers_have_the_official_8_heads_and_the_rest_4(name):
    model = zoo_network(load_entry(name), VOCAB)
    cross_boundary = list(model.adaptive_stack.layers) + list(getattr(model, "value_stack", model.adaptive_stack).layers)
    assert all(layer.mixer.num_heads == 8 and layer.mixer.segmented for layer in cross_boundary)
    for layer in list(model.source_stack.layers) + list(model.decoder_stack.layers):
        assert layer.mixer.num_heads == 4 and not layer.mixer.segmented
    assert all(layer.cross_attention.num_heads == 4 for layer in model.decoder_stack.layers)


def test_cross_boundary_positions_count_within_each_side_and_give_the_boundary_no_distance():
    """M = 2 (distances clipped to ±1); C_t = [x0 x1; y0 e]. Rows 0-2: source table, 3-5: target table (offset
    2M - 1 = 3), 6: a source query over a target key, 7: a target query over a source key (the official
    distance_embedding_src / _tgt / _st)."""
    attention = Attention(8, 2, 0.0, position="shaw", max_relative_position=2, segmented=True)
    index = shaw_index(4, 4, attention.max_relative_position, segments_of(2, 1), CPU)
    assert index.tolist() == [[[1, 0, 6, 6], [2, 1, 6, 6], [7, 7, 4, 3], [7, 7, 5, 4]]]


def test_a_source_tokens_positions_do_not_depend_on_the_prefix_length():
    attention = Attention(8, 2, 0.0, position="shaw", max_relative_position=16, segmented=True)
    short = shaw_index(8, 8, attention.max_relative_position, segments_of(5, 2), CPU)[0]
    long = shaw_index(12, 12, attention.max_relative_position, segments_of(5, 6), CPU)[0]
    torch.testing.assert_close(long[:5, :5], short[:5, :5])
    assert long[:5, 5:].unique().tolist() == [2 * 31]  # one vector for every source-to-target pair, however far
    assert long[5:, :5].unique().tolist() == [2 * 31 + 1]
    torch.testing.assert_close(long[5:8, 5:8], short[5:8, 5:8])  # the prefix counts from its own start too


def test_with_attention_kept_on_the_source_its_outputs_are_the_same_for_two_prefix_lengths():
    model = with_random_positions(zoo_network(load_entry("dangle"), VOCAB))
    attention = model.adaptive_stack.layers[0].mixer
    source, outputs = torch.randn(1, 4, 32), []
    for prefix_length in (1, 4):
        x = torch.cat([source, torch.randn(1, prefix_length + 1, 32)], dim=1)
        segments = segments_of(4, prefix_length)
        q, k, v = (attention._heads(projection(x)) for projection in (attention.query, attention.key, attention.value))
        with torch.no_grad():
            index = shaw_index(x.size(1), x.size(1), attention.max_relative_position, segments, CPU)
            bias = shaw_term(q, k, torch.cat(attention._shaw_tables()), index)
            outputs.append(attend(q, k, v, key_mask=segments.eq(1), bias=bias)[0, :4])
    torch.testing.assert_close(outputs[1], outputs[0])


def test_a_source_query_scores_a_target_key_by_content_not_by_distance():
    attention = with_random_positions(zoo_network(load_entry("dangle"), VOCAB)).adaptive_stack.layers[0].mixer
    x = torch.randn(1, 7, 32)
    x[0, 6] = x[0, 4]  # the same content at target positions 0 and 2 (C_t = [4 source; 3 target])
    q, k = (attention._heads(projection(x)) for projection in (attention.query, attention.key))
    with torch.no_grad():
        index = shaw_index(7, 7, attention.max_relative_position, torch.tensor([[1, 1, 1, 1, 2, 2, 2]]), CPU)
        bias = shaw_term(q, k, torch.cat(attention._shaw_tables()), index)
    torch.testing.assert_close(bias[..., :4, 6], bias[..., :4, 4])
    assert not torch.allclose(bias[..., 6, 4], bias[..., 4, 4])  # within the target side, distance counts


def test_c_t_holds_typed_source_then_typed_prefix_then_the_learned_end_vector():
    model = with_random_positions(zoo_network(load_entry("dangle"), VOCAB))
    seen = {}
    model.adaptive_stack.register_forward_pre_hook(lambda module, args: seen.update(states=args[0], segments=args[1]))
    mask = SOURCE.ne(PAD).long()
    with torch.no_grad():
        model.adaptive_encode(SOURCE, mask, TARGET[:, :2])
        scale = math.sqrt(model.config.d_model)
        words = model.embedding.weight * scale
        sides = model.sides
    states, segments = seen["states"], seen["segments"]
    assert segments.tolist() == [[1, 1, 1, 1, 2, 2, 2], [1, 1, 2, 2, 2, 0, 0]]
    torch.testing.assert_close(states[0, :4], words[SOURCE[0]] + sides.source_type)  # source type on source only
    torch.testing.assert_close(states[1, :2], words[SOURCE[1, :2]] + sides.source_type)
    torch.testing.assert_close(states[0, 4:6], words[TARGET[0, :2]] + sides.target_type)  # target type on the prefix
    torch.testing.assert_close(states[1, 2:4], words[TARGET[1, :2]] + sides.target_type)
    torch.testing.assert_close(states[0, 6], sides.end_of_prefix)  # a learned vector, unscaled, after the prefix
    torch.testing.assert_close(states[1, 4], sides.end_of_prefix)
    assert torch.count_nonzero(states[1, 5:]) == 0
    assert not torch.allclose(sides.source_type, sides.target_type)


def test_the_decoder_input_carries_the_target_type_too():
    model = zoo_network(load_entry("dangle"), VOCAB).eval()
    seen = {}
    model.decoder_stack.register_forward_pre_hook(lambda module, args: seen.update(states=args[0]))
    logits(model)
    steps = TARGET.size(1)  # one row per re-encoding point
    expected = model.embedding.weight[TARGET] * math.sqrt(model.config.d_model) + model.sides.target_type
    torch.testing.assert_close(seen["states"].view(2, steps, steps, -1)[:, 0], expected)


def test_rdangle_sep_values_read_the_source_closed_by_their_own_end_vector_under_their_own_norm():
    model = with_random_positions(zoo_network(load_entry("rdangle_sep"), VOCAB))
    seen = {}
    model.value_stack.register_forward_pre_hook(lambda module, args: seen.update(states=args[0], segments=args[1]))
    with torch.no_grad():
        model.encode(SOURCE, SOURCE.ne(PAD).long())
    assert seen["segments"].tolist() == [[1, 1, 1, 1, 2], [1, 1, 2, 0, 0]]
    torch.testing.assert_close(seen["states"][0, 4], model.sides.end_of_source)
    torch.testing.assert_close(seen["states"][1, 2], model.sides.end_of_source)
    assert model.source_stack.final_norm is None
    assert model.key_norm is not model.value_norm  # official key_layer_norm and value_layer_norm


@pytest.mark.parametrize("name", ["dangle", "rdangle_shr", "rdangle_sep"])
def test_a_padded_batch_equals_each_row_alone(name):
    model = with_random_positions(zoo_network(load_entry(name), VOCAB))
    batch = logits(model)
    for row, length in enumerate((4, 2)):
        alone = logits(model, SOURCE[row: row + 1, :length], TARGET[row: row + 1])
        torch.testing.assert_close(batch[row: row + 1], alone, rtol=1e-5, atol=1e-5)
    left_padded = torch.tensor([[5, 6, 7, 8], [PAD, PAD, 9, 10]])  # where padding sits changes nothing
    torch.testing.assert_close(logits(model, left_padded), batch, rtol=1e-5, atol=1e-5)


def briefly_trained(name: str):
    """A tiny model after 40 steps on reversal: an untrained one repeats one token, which would hide a mismatch."""
    model = with_random_positions(zoo_network(load_entry(name), VOCAB)).train()
    ids = torch.randint(3, VOCAB, (16, 5), generator=torch.Generator().manual_seed(4))
    labels = torch.cat([ids.flip(1), torch.full((16, 1), EOS)], dim=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(40):
        loss = model(input_ids=ids, attention_mask=ids.ne(PAD).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.parametrize("name", ["dangle", "rdangle_shr", "rdangle_sep"])
def test_generate_gives_the_greedy_step_by_step_argmax_of_forward(name):
    model = briefly_trained(name)
    mask = SOURCE.ne(PAD).long()
    with torch.no_grad():
        generated = model.generate(input_ids=SOURCE, attention_mask=mask, do_sample=False, num_beams=1,
                                   min_length=7, max_length=7)
        decoded = torch.full((2, 1), BOS)
        for _ in range(6):
            scores = model(input_ids=SOURCE, attention_mask=mask, decoder_input_ids=decoded).logits[:, -1]
            scores[:, EOS] = -math.inf  # generate's min_length does the same
            decoded = torch.cat([decoded, scores.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, decoded)
    assert len(set(decoded[:, 1:].flatten().tolist())) > 2


def test_parameters_over_position_none_are_exactly_the_official_tables_and_vectors():
    """Per plain layer (2M - 1)·d_head (4 heads); per cross-boundary layer (2(2M - 1) + 2)·d_head (8 heads); plus
    the source type, target type and end-of-prefix vectors (R-Dangle_sep: and the value encoder's end vector)."""
    m, d = 16, 32
    for name, vectors in (("dangle", 3), ("rdangle_sep", 4)):
        entry = load_entry(name)
        shaw = zoo_network(entry, VOCAB)
        plain = zoo_network(entry, VOCAB, position="none", type_embeddings=False, end_of_prefix=False)
        extra = sum(p.numel() for p in shaw.parameters()) - sum(p.numel() for p in plain.parameters())
        plain_layers = 1 + 1  # tiny: 1 source and 1 decoder layer, 1 adaptive layer (R-Dangle_sep: 2 value layers)
        cross_boundary_layers = 1 + (shaw.config.value_layers if shaw.config.separate_keys_values else 0)
        assert extra == (plain_layers * (2 * m - 1) * (d // 4) + cross_boundary_layers * (4 * m) * (d // 8)
                         + vectors * d)


def test_without_types_and_end_vector_c_t_is_the_bare_source_and_prefix():
    model = zoo_network(load_entry("dangle"), VOCAB, type_embeddings=False, end_of_prefix=False).eval()
    seen = {}
    model.adaptive_stack.register_forward_pre_hook(lambda module, args: seen.update(states=args[0], segments=args[1]))
    with torch.no_grad():
        model.adaptive_encode(SOURCE, SOURCE.ne(PAD).long(), TARGET[:, :2])
    assert seen["segments"].tolist() == [[1, 1, 1, 1, 2, 2], [1, 1, 2, 2, 0, 0]]
    torch.testing.assert_close(seen["states"][0, 4:], model.embedding(TARGET[:1, :2])[0])
    assert list(model.sides.parameters()) == []


def test_adaptive_heads_must_divide_d_model_and_cross_boundary_attention_wants_segments():
    with pytest.raises(BenchbuildError, match="adaptive_heads = 3"):
        DangleConfig(d_model=32, adaptive_heads=3)
    attention = Attention(8, 2, 0.0, position="shaw", segmented=True)
    with pytest.raises(BenchbuildError, match="segment mask"):
        attention(torch.randn(1, 3, 8), torch.ones(1, 3, dtype=torch.bool))
