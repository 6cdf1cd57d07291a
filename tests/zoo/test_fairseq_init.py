"""`init = "fairseq"`: the zoo Transformer drawn as fairseq draws its Transformer (the toolkit 000 trained with), each
rule checked on the drawn values, and fairseq's sinusoids checked on values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_zoo import zoo_network

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import load_entry
from benchbuild.zoo.positions import fairseq_sinusoid
from benchbuild.zoo.transformer import TransformerConfig

VOCAB = 40


def network(init: str | None, **extra):
    switches = {} if init is None else {"init": init}
    return zoo_network(load_entry("sag_t5"), VOCAB, d_model=64, d_ff=128, **switches, **extra)


def test_the_default_draw_is_unchanged_by_the_switch():
    default, zoo = network(None).state_dict(), network("zoo").state_dict()
    assert default.keys() == zoo.keys() and all(torch.equal(default[key], zoo[key]) for key in default)


def test_each_weight_is_drawn_as_fairseq_draws_it():
    model = network("fairseq")
    d, d_ff = 64, 128
    embedding = model.embedding.weight.detach()
    assert torch.count_nonzero(embedding[0]) == 0, "fairseq's Embedding zeroes the padding row"
    assert embedding[1:].std().item() == pytest.approx(d ** -0.5, rel=0.1)  # N(0, d^-1/2), 39 x 64 draws
    attention = model.encoder_stack.layers[0].mixer
    qkv_bound = math.sqrt(6 / (d + d)) / math.sqrt(2)  # Glorot-uniform with gain 1/sqrt(2)
    for projection in (attention.query, attention.key, attention.value):
        weight = projection.weight.detach().abs()
        assert qkv_bound * 0.95 < weight.max().item() <= qkv_bound
        bias = projection.bias.detach().abs()  # PyTorch's default: U(+-1/sqrt(fan_in)), not zero
        assert 0.9 / math.sqrt(d) < bias.max().item() <= 1 / math.sqrt(d)
    out = attention.out
    assert math.sqrt(6 / (2 * d)) * 0.95 < out.weight.detach().abs().max().item() <= math.sqrt(6 / (2 * d))
    assert torch.count_nonzero(out.bias) == 0
    first, second = model.encoder_stack.layers[0].feed_forward[0], model.encoder_stack.layers[0].feed_forward[3]
    for linear, fan_in in ((first, d), (second, d_ff)):  # nn.Linear's own init: U(+-1/sqrt(fan_in)), bias too
        for values in (linear.weight, linear.bias):
            assert 0.9 / math.sqrt(fan_in) < values.detach().abs().max().item() <= 1 / math.sqrt(fan_in)
    cross = model.decoder_stack.layers[0].cross_attention
    assert cross.query.weight.detach().abs().max().item() <= qkv_bound


def test_fairseq_sinusoids_are_sines_then_cosines_from_position_2():
    # d = 6: h = 3 frequencies 10000^(-k/(h-1)) = 1, 1/100, 1/10000; token 0 at position 2, token 3 at position 5
    table = fairseq_sinusoid(torch.tensor([0, 3]), 6)
    rates = [1.0, 0.01, 0.0001]
    for row, position in ((0, 2), (1, 5)):
        expected = [math.sin(position * r) for r in rates] + [math.cos(position * r) for r in rates]
        assert table[row].tolist() == pytest.approx(expected, abs=1e-6)
    assert fairseq_sinusoid(torch.tensor([4]), 7)[0, 6].item() == 0.0, "odd d: a zero column last"


def test_the_fairseq_model_adds_fairseq_sinusoids_to_its_scaled_embeddings():
    model = network("fairseq").eval()
    ids = torch.tensor([[5, 6, 7]])
    expected = model.embedding.weight[ids] * math.sqrt(64) + fairseq_sinusoid(torch.arange(3), 64)
    assert torch.allclose(model.embedding(ids), expected, atol=1e-6)


def test_fairseq_init_needs_fairseqs_embedding_scale_and_a_known_name():
    with pytest.raises(BenchbuildError, match="init = 'fairseq' needs embedding_scale = 'teu'"):
        TransformerConfig(init="fairseq", embedding_scale="ped")
    with pytest.raises(BenchbuildError, match="init"):
        TransformerConfig(init="fairsaq")
