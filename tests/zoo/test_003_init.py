"""003's `scan` recipe draws its layers as 003's official code (RobertCsordas/transformer_generalization) does, each
parameter family checked against the bound and standard deviation of that code's draw at d = 128, FFN 256."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

D, FFN = 128, 256


def scan_model(name: str):
    torch.manual_seed(0)
    entry = load_entry(name)
    return build_model(dataclasses.replace(entry, architecture=resolved_architecture(entry, "scan")), vocab_size=23,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2)


def uniform(weight: torch.Tensor, bound: float) -> None:
    """Drawn U(±bound): inside it, reaching near it, with the standard deviation bound/√3."""
    weight = weight.detach()
    assert 0.95 * bound < weight.abs().max().item() <= bound
    # The sample std of n uniform draws is within 3 standard errors, about 3 x 0.9 / √(2n) of the std, of it.
    assert weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=max(0.05, 2.7 / math.sqrt(2 * weight.numel())))


def xavier(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    return gain * math.sqrt(6 / (fan_in + fan_out))


def test_absolute_attention_is_xavier_without_biases():
    """layers/transformer/multi_head_attention.py: MultiHeadAttention.reset_parameters, Xavier on data_to_q, both
    halves of data_to_kv and multi_head_merge, all with bias=False."""
    layer = scan_model("transformer_ped").decoder_stack.layers[0]
    for attention in (layer.mixer, layer.cross_attention):
        for projection in (attention.query, attention.key, attention.value, attention.out):
            assert projection.bias is None
            uniform(projection.weight, xavier(D, D))


def test_relative_self_attention_keeps_pytorchs_default_draw_and_cross_attention_is_xavier():
    """multi_head_relative_pos_attention.py: FixedRelativeMultiheadAttention never calls its reset_parameters
    (L51-67 against L109-121), so data_to_kv, data_to_q, pos_to_pq and multi_head_merge keep nn.Linear's draw,
    U(±1/√fan_in): std 0.051 at d = 128; its global content and position biases start at 0."""
    layer = scan_model("relative_transformer").decoder_stack.layers[0]
    mixer = layer.mixer
    for projection in (mixer.query, mixer.key, mixer.value, mixer.out, mixer.position_key):
        assert projection.bias is None
        uniform(projection.weight, 1 / math.sqrt(D))
    assert torch.count_nonzero(mixer.content_bias) == 0 and torch.count_nonzero(mixer.position_bias) == 0
    uniform(layer.cross_attention.query.weight, xavier(D, D))  # relative_transformer.py: plain MultiHeadAttention


@pytest.mark.parametrize("name", ["transformer_ped", "relative_transformer", "universal_transformer"])
def test_feed_forward_layers_are_xavier_with_relu_gain_then_gain_1_and_pytorchs_biases(name):
    """layers/transformer/transformer.py (and relative_transformer.py) reset_parameters: linear1 Xavier with
    calculate_gain('relu') = √2, linear2 Xavier; the biases are never redrawn: U(±1/√fan_in)."""
    first, _, _, second = scan_model(name).encoder_stack.layers[0].feed_forward
    uniform(first.weight, xavier(D, FFN, math.sqrt(2)))
    uniform(second.weight, xavier(FFN, D))
    uniform(first.bias, 1 / math.sqrt(D))
    uniform(second.bias, 1 / math.sqrt(FFN))


def test_the_tied_output_layer_has_a_learned_bias_that_starts_at_zero():
    """layers/tied_embedding.py L12, L15: F.linear(t, embedding, bias), bias = zeros(vocabulary), a parameter."""
    model = scan_model("transformer_noscale").eval()
    assert model.output_bias.requires_grad and model.output_bias.shape == (23,)
    assert torch.count_nonzero(model.output_bias) == 0
    source = torch.tensor([[4, 5, 2]])

    def logits():
        return model(input_ids=source, attention_mask=torch.ones_like(source),
                     decoder_input_ids=torch.tensor([[1, 7]])).logits

    before = logits()
    with torch.no_grad():
        model.output_bias[5] = 3.0
    shift = (logits() - before).detach()
    torch.testing.assert_close(shift[..., 5], torch.full((1, 2), 3.0))
    assert torch.count_nonzero(shift[..., :5]) == 0 and torch.count_nonzero(shift[..., 6:]) == 0


def test_000s_recipes_keep_fairseqs_biased_attention_and_no_output_bias():
    model = scan_model("sag_t5")
    assert model.output_bias is None and model.encoder_stack.layers[0].mixer.query.bias is not None
