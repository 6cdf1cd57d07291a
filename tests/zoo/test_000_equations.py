"""000 §3's attention variants on hand-computed values (issue #33).

Each layer is set up so that its attention weights are readable from its output: the queries are zero (every
content logit q_i · k_j / √d is 0), the value and output projections are the identity and the tokens are one-hot
rows, so output row i is row i of the attention weights. Then the weights are exactly what 000's equations give
for the position term alone, worked out by hand in each test.
"""

from __future__ import annotations

import math

import pytest
import torch

from benchbuild.zoo.transformer_layers import Attention, SelfAttentionGate

LN2, LN3 = math.log(2.0), math.log(3.0)


def weights(attention: Attention, length: int) -> torch.Tensor:
    """The (length, length) attention weights of a one-head `attention` of width `length` on one-hot tokens."""
    with torch.no_grad():
        for projection in (attention.query, attention.key):
            projection.weight.zero_()
            projection.bias.zero_()
        for projection in (attention.value, attention.out):
            projection.weight.copy_(torch.eye(length))
            projection.bias.zero_()
        return attention.eval()(torch.eye(length)[None])[0]


def t5_attention(span: int, bias: list[float], causal: bool = False, width: int = 4) -> Attention:
    attention = Attention(width, 1, 0.0, position="t5_bias", span=span, causal=causal)
    with torch.no_grad():
        attention.relative_bias.copy_(torch.tensor([bias]))
    return attention


def test_t5_bias_weights_are_the_softmax_of_the_clamped_distance_bias():
    # 000 §3 / Eq. 3: α_ij = q_i·k_j/√d + b[clamp(i - j, -s, s)], s = 1, b = (b_-1, b_0, b_+1) = (0, ln 2, ln 3).
    # Row 0: i - j = 0, -1, -2, -3 -> b_0, b_-1, b_-1, b_-1 = ln 2, 0, 0, 0 -> exp: 2, 1, 1, 1 -> /5.
    # Row 1: i - j = 1, 0, -1, -2 -> ln 3, ln 2, 0, 0 -> 3, 2, 1, 1 -> /7.
    # Row 3: i - j = 3, 2, 1, 0 -> ln 3, ln 3, ln 3, ln 2 -> 3, 3, 3, 2 -> /11.
    got = weights(t5_attention(1, [0.0, LN2, LN3]), 4)
    torch.testing.assert_close(got[0], torch.tensor([2, 1, 1, 1]) / 5)
    torch.testing.assert_close(got[1], torch.tensor([3, 2, 1, 1]) / 7)
    torch.testing.assert_close(got[3], torch.tensor([3, 3, 3, 2]) / 11)


def test_t5_bias_in_the_decoder_adds_to_causal_attention():
    # Causal (decoder self-attention), s = 1, b = (0, ln 2, ln 3): row 0 sees key 0 only; row 2 sees keys 0-2 at
    # distances 2, 1, 0 -> ln 3, ln 3, ln 2 -> 3, 3, 2 -> /8.
    got = weights(t5_attention(1, [0.0, LN2, LN3], causal=True), 4)
    torch.testing.assert_close(got[0], torch.tensor([1.0, 0, 0, 0]))
    torch.testing.assert_close(got[2], torch.tensor([3, 3, 2, 0]) / 8)


def test_t5_bias_distances_beyond_the_span_share_its_edge_values():
    # s = 2, b = (b_-2 .. b_2) = (ln 3, 0, 0, 0, ln 2): from row 0, keys 2, 3, 4 are all at distance <= -2 -> ln 3;
    # keys 0, 1 at 0, -1 -> 0. exp: 1, 1, 3, 3, 3 -> /11.
    got = weights(t5_attention(2, [LN3, 0.0, 0.0, 0.0, LN2], width=5), 5)
    torch.testing.assert_close(got[0], torch.tensor([1, 1, 3, 3, 3]) / 11)
    # Row 4: distances 4, 3, 2, 1, 0 -> ln 2, ln 2, ln 2, 0, 0 -> 2, 2, 2, 1, 1 -> /8.
    torch.testing.assert_close(got[4], torch.tensor([2, 2, 2, 1, 1]) / 8)


@pytest.mark.parametrize("causal, row, expected", [
    (False, 0, [1 / 2, 1 / 2, 0, 0, 0]),       # |i - j| <= 1 around position 0: keys 0, 1
    (False, 2, [0, 1 / 3, 1 / 3, 1 / 3, 0]),   # keys 1, 2, 3
    (True, 3, [0, 0, 1 / 2, 1 / 2, 0]),        # causal and within 1: keys 2, 3
])
def test_fixed_span_masks_every_key_beyond_the_span(causal, row, expected):
    # 000 §3 fixed span: b_ij = 0 for |i - j| <= s, -inf beyond; with zero content logits the weights are uniform
    # over the keys in the window.
    attention = Attention(5, 1, 0.0, position="fixed_span", span=1, causal=causal)
    torch.testing.assert_close(weights(attention, 5)[row], torch.tensor(expected))


def test_self_attention_gate_multiplies_by_the_sigmoid_of_beta():
    # 000 Alg. 1, line 4: x <- x · σ(β), β0 = -1: σ(-1) = 1 / (1 + e) = 0.2689414213699951.
    gate = SelfAttentionGate(-1.0)
    x = torch.tensor([[[1.0, -2.0, 4.0]]])
    torch.testing.assert_close(gate(x), x * 0.2689414213699951)
    with torch.no_grad():
        gate.beta.fill_(math.log(3.0))  # σ(ln 3) = 3 / 4
    torch.testing.assert_close(gate(x), x * 0.75)
