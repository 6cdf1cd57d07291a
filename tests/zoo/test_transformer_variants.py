"""The Transformer's switches do what their papers say (000 §3, 003 §2.2 and App. C-D, 004 §2.2)."""

from __future__ import annotations

import math

import pytest
import torch

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.positions import sinusoid
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq
from benchbuild.zoo.transformer_layers import Attention
from tiny_zoo import EOS, PAD, zoo_network

VOCAB = 40


def encoder_states(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.encode(ids, ids.ne(PAD).long()).last_hidden_state


def tokens(*rows: list[int]) -> torch.Tensor:
    return torch.tensor(rows)


def test_fixed_span_self_attention_ignores_tokens_beyond_span():
    model = zoo_network(load_entry("sag_fixed_span"), VOCAB, span=1).eval()
    base = tokens([5, 6, 7, 8, 9, 10])
    far, near = base.clone(), base.clone()
    far[0, 3] = 20   # distance 3 > s from position 0
    near[0, 1] = 20  # distance 1 = s
    before = encoder_states(model, base)
    torch.testing.assert_close(encoder_states(model, far)[0, 0], before[0, 0])
    assert not torch.allclose(encoder_states(model, near)[0, 0], before[0, 0])


def test_fixed_span_attention_weights_are_zero_beyond_span():
    attention = Attention(16, 2, 0.0, position="fixed_span", span=2).eval()
    x = torch.randn(1, 7, 16)
    moved = x.clone()
    moved[0, 5:] = torch.randn(2, 16)
    with torch.no_grad():
        torch.testing.assert_close(attention(moved)[0, :3], attention(x)[0, :3])


def test_t5_bias_has_2s_plus_1_times_heads_parameters_per_layer():
    span, heads = 3, 4
    model = zoo_network(load_entry("sag_t5"), VOCAB, span=span, num_heads=heads, encoder_layers=2, decoder_layers=2)
    biases = [m.relative_bias for m in model.modules() if isinstance(m, Attention) and m.position == "t5_bias"]
    assert len(biases) == 4  # 2 encoder + 2 decoder self-attentions; cross-attention has none
    assert all(b.shape == (heads, 2 * span + 1) for b in biases)
    plain = zoo_network(load_entry("sag"), VOCAB, num_heads=heads, encoder_layers=2, decoder_layers=2)
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == (2 * span + 1) * 4 * heads


def test_t5_bias_is_shared_by_all_distances_beyond_span():
    span = 1
    attention = Attention(8, 2, 0.0, position="t5_bias", span=span).eval()
    with torch.no_grad():
        attention.query.weight.zero_()
        attention.query.bias.zero_()
        attention.relative_bias.copy_(torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]]))
    x = torch.randn(1, 5, 8)
    values = attention.value(x).view(1, 5, 2, 4).transpose(1, 2)
    distance = torch.arange(5)[:, None] - torch.arange(5)[None, :]
    logits = attention.relative_bias[:, distance.clamp(-span, span) + span]
    expected = attention.out((logits.softmax(-1) @ values).transpose(1, 2).reshape(1, 5, 8))
    with torch.no_grad():
        torch.testing.assert_close(attention(x), expected)


@pytest.mark.parametrize("beta0", [(-1.0, 1.0), (-2.0, 0.5)])
def test_self_attention_gate_starts_at_sigmoid_beta0(beta0):
    encoder_beta, decoder_beta = beta0
    model = zoo_network(load_entry("sag"), VOCAB, encoder_self_attention_gate=encoder_beta,
                       decoder_self_attention_gate=decoder_beta, encoder_layers=2, decoder_layers=2)
    for layer in model.encoder_stack.layers:
        assert torch.sigmoid(layer.gate.beta).item() == pytest.approx(1 / (1 + math.exp(-encoder_beta)))
    for layer in model.decoder_stack.layers:
        assert torch.sigmoid(layer.gate.beta).item() == pytest.approx(1 / (1 + math.exp(-decoder_beta)))
    assert all(layer.gate is None for layer in zoo_network(load_entry("transformer"), VOCAB).encoder_stack.layers)


def test_self_attention_gate_scales_the_self_attention_output():
    model = zoo_network(load_entry("sag"), VOCAB).eval()
    layer = model.encoder_stack.layers[0]
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        gated = layer._mix(x, None)
        torch.testing.assert_close(gated, layer.mixer(x) * torch.sigmoid(torch.tensor(-1.0)))


def test_universal_transformer_applies_one_shared_layer_at_every_depth():
    universal = zoo_network(load_entry("universal_transformer"), VOCAB, encoder_layers=3, decoder_layers=3).eval()
    assert len(universal.encoder_stack.layers) == 1 and len(universal.decoder_stack.layers) == 1
    single = zoo_network(load_entry("universal_transformer"), VOCAB, encoder_layers=1, decoder_layers=1)
    assert sum(p.numel() for p in universal.parameters()) == sum(p.numel() for p in single.parameters())
    ids = tokens([5, 6, 7, 8])
    with torch.no_grad():
        x = universal.embedding(ids)
        layer = universal.encoder_stack.layers[0]
        for _ in range(3):
            x = layer(x, ids.ne(PAD), [])
    torch.testing.assert_close(encoder_states(universal, ids), x)


def test_standard_transformer_has_separate_weights_per_layer():
    model = zoo_network(load_entry("transformer"), VOCAB, encoder_layers=3)
    layers = model.encoder_stack.layers
    assert len(layers) == 3 and layers[0].feed_forward[0].weight is not layers[1].feed_forward[0].weight


@pytest.mark.parametrize("scale", ["teu", "none", "ped", "xavier"])
def test_embedding_scaling_follows_003_appendix_d_as_its_official_code_initialises(scale):
    d, vocab = 64, 2000
    config = TransformerConfig(vocab_size=vocab, d_model=d, num_heads=4, encoder_layers=1, decoder_layers=1,
                               embedding_scale=scale)
    torch.manual_seed(0)
    model = TransformerForSeq2Seq(config)
    weight = model.embedding.weight.detach()
    ids = tokens([7, 8, 9])
    positions = sinusoid(torch.arange(3), d)
    words = weight[ids[0]]
    got = model.embedding(ids)[0].detach()
    bound = math.sqrt(6 / (d + vocab))
    if scale == "teu":
        assert weight.abs().max() <= bound and weight.abs().max() > 0.9 * bound  # Glorot uniform
        torch.testing.assert_close(got, math.sqrt(d) * words + positions)
    elif scale == "xavier":  # 003's relative variants: xavier_uniform_, no scaling (positions are relative)
        assert weight.abs().max() <= bound and weight.abs().max() > 0.9 * bound
        torch.testing.assert_close(got, words + positions)
    elif scale == "none":
        assert weight.std().item() == pytest.approx(1.0, rel=0.05)  # N(0, 1)
        torch.testing.assert_close(got, words + positions)
    else:
        # 003's code (models/transformer_enc_dec.py, "scaledinit"): torch's kaiming_normal_ of the (vocab, d)
        # weight, fan_in d and ReLU gain sqrt(2): std sqrt(2/d) (the paper's text says N(0, 1/sqrt(d)))
        reference = torch.empty(vocab, d)
        torch.nn.init.kaiming_normal_(reference)
        assert weight.std().item() == pytest.approx(math.sqrt(2 / d), rel=0.05)
        assert weight.std().item() == pytest.approx(reference.std().item(), rel=0.05)
        torch.testing.assert_close(got, words + positions / math.sqrt(d))


def test_sinusoid_matches_the_formula_for_negative_and_positive_positions():
    table = sinusoid(torch.tensor([-3, 0, 5]), 8)
    for row, i in enumerate([-3, 0, 5]):
        for j in range(8):
            angle = i / 10000 ** ((j - j % 2) / 8)
            assert table[row, j].item() == pytest.approx(math.sin(angle) if j % 2 == 0 else math.cos(angle), abs=1e-6)


def test_relative_encoder_adds_no_absolute_positions_to_embeddings():
    for name in ("relative_transformer", "transformer"):
        model = zoo_network(load_entry(name), VOCAB).eval()
        ids = tokens([9, 9, 9, 9])
        same = model.embedding(ids)[0]
        if name == "relative_transformer":
            torch.testing.assert_close(same[0], same[3])
        else:
            assert not torch.allclose(same[0], same[3])


def test_no_position_encoder_is_permutation_equivariant_and_relative_one_is_not():
    ids = tokens([5, 6, 7, 8, 9])
    order = torch.tensor([4, 2, 0, 3, 1])
    none = zoo_network(load_entry("transformer"), VOCAB, position="none").eval()
    torch.testing.assert_close(encoder_states(none, ids[:, order]), encoder_states(none, ids)[:, order])
    relative = zoo_network(load_entry("relative_transformer"), VOCAB).eval()
    assert not torch.allclose(encoder_states(relative, ids[:, order]), encoder_states(relative, ids)[:, order])


def test_relative_encoder_depends_only_on_distances():
    ids = tokens([5, 6, 7])
    shifted = tokens([PAD, PAD, 5, 6, 7])  # the same tokens two positions later, padding masked out
    relative = zoo_network(load_entry("relative_transformer"), VOCAB).eval()
    torch.testing.assert_close(encoder_states(relative, shifted)[:, 2:], encoder_states(relative, ids))
    absolute = zoo_network(load_entry("transformer"), VOCAB).eval()
    assert not torch.allclose(encoder_states(absolute, shifted)[:, 2:], encoder_states(absolute, ids))


def test_relative_encoder_attention_is_symmetric_in_distance_and_decoder_is_causal():
    encoder_attention = Attention(16, 2, 0.0, position="relative")
    decoder_attention = Attention(16, 2, 0.0, position="relative", causal=True)
    assert not encoder_attention.causal and decoder_attention.causal
    x = torch.randn(1, 6, 16)
    changed = x.clone()
    changed[0, 5] = torch.randn(16)
    with torch.no_grad():
        assert not torch.allclose(encoder_attention(changed)[0, 0], encoder_attention(x)[0, 0])
        torch.testing.assert_close(decoder_attention(changed)[0, :5], decoder_attention(x)[0, :5])


def test_conv_mixer_sees_only_2s_plus_1_positions():
    model = zoo_network(load_entry("sag_conv"), VOCAB, span=1).eval()
    assert model.encoder_stack.layers[0].mixer.conv.kernel_size == (3,)
    base = tokens([5, 6, 7, 8, 9])
    far = base.clone()
    far[0, 3] = 20
    torch.testing.assert_close(encoder_states(model, far)[0, 0], encoder_states(model, base)[0, 0])


def test_conv_mixer_has_fewer_parameters_than_self_attention():  # 000 §3
    sizes = {name: sum(p.numel() for p in build_model(load_entry(name), vocab_size=VOCAB, pad_token_id=PAD,
                                                      bos_token_id=1, eos_token_id=EOS).parameters())
             for name in ("sag", "sag_conv")}
    assert sizes["sag_conv"] < sizes["sag"]
    model = zoo_network(load_entry("sag_conv"), VOCAB, span=1).eval()
    mixer, d = model.encoder_stack.layers[0].mixer, model.config.d_model
    assert sum(p.numel() for p in mixer.parameters()) == 3 * d + d + d * d + d  # depthwise kernel, bias; pointwise


@pytest.mark.parametrize("side", ["encoder_stack", "decoder_stack"])
def test_fuse_attention_at_layer_l_attends_over_exactly_l_previous_outputs(side):
    model = zoo_network(load_entry("fusion"), VOCAB, encoder_layers=3, decoder_layers=3).eval()
    seen = []
    for layer in getattr(model, side).layers:
        layer.fuse_attention.register_forward_hook(
            lambda module, args, kwargs, output: seen.append(kwargs["memory"].keys.shape[1]), with_kwargs=True)
    ids = tokens([5, 6, 7, 8])
    with torch.no_grad():
        model(input_ids=ids, decoder_input_ids=tokens([1, 9, 10]))
    assert seen == [1, 2, 3]


def test_fuse_attention_keys_are_the_embedding_and_lower_layer_outputs():
    model = zoo_network(load_entry("fusion"), VOCAB, encoder_layers=2, decoder_layers=2).eval()
    captured = {}
    second = model.encoder_stack.layers[1]
    second.fuse_attention.register_forward_hook(
        lambda module, args, kwargs, output: captured.update(keys=kwargs["memory"].keys), with_kwargs=True)
    first_out = {}
    model.encoder_stack.layers[0].register_forward_hook(lambda module, args, output: first_out.update(h=output))
    ids = tokens([5, 6, 7, 8])
    with torch.no_grad():
        encoder_states(model, ids)
        embedded = model.embedding(ids)
    keys = captured["keys"].reshape(1, 4, 2, -1)
    torch.testing.assert_close(keys[:, :, 0], embedded)
    torch.testing.assert_close(keys[:, :, 1], first_out["h"])


def test_unknown_switch_value_names_the_switch():
    with pytest.raises(BenchbuildError, match="position"):
        TransformerConfig(position="rotary")
    with pytest.raises(BenchbuildError, match="embedding_scale"):
        TransformerConfig(embedding_scale="big")
    with pytest.raises(BenchbuildError, match="mixer = 'conv'"):
        TransformerConfig(mixer="conv", position="t5_bias")


def test_pre_norm_stack_ends_with_a_layer_norm_and_still_decodes_causally():
    model = zoo_network(load_entry("transformer"), VOCAB, pre_norm=True).eval()
    assert model.encoder_stack.final_norm is not None
    ids, target = tokens([5, 6, 7]), tokens([1, 9, 10, EOS])
    changed = target.clone()
    changed[0, 3] = 11
    with torch.no_grad():
        a = model(input_ids=ids, decoder_input_ids=target).logits
        b = model(input_ids=ids, decoder_input_ids=changed).logits
    torch.testing.assert_close(a[:, :3], b[:, :3])
