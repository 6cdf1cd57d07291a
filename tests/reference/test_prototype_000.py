"""000's SAG entries (sag_t5, sag_fixed_span, sag_conv) against the nearest code there is: the authors' July-2020
prototype (robertodessi/fairseq, branch dev @ f85f0b88, `fairseq/models/ctronn*.py`, imported as it is from
`<shared>/reference/prototype_000/` by tests/reference/prototype_000.py). 000 released no code for its final models,
so this is a prototype, not 000's model: where the two coincide the same weights give the same outputs (float64),
and where they differ a test here pins how.

Where they coincide:

- the T5 bias: one learned value per head over the signed distance capped at ±span, in every self-attention; their
  bucket of j - i is ours of i - j (`test_their_t5_bias_is_ours_with_the_buckets_mirrored`), which the converter
  undoes, so it is the same function of a relabelled table;
- with our keys `head_width = "model"` and `attention_sublayer = "prototype"`: their relative self-attention
  (encoder and decoder) and their encoder layer without a gate;
- their convolution-like attention, where its window lies inside the sequence, is a kernel-(2s + 1) convolution.

Where they differ (their file:line):

- each head is d_model wide (ctronn_attention.py L69-74), logits scaled by 1/√d_model (L94): ours splits d_model
  among the heads unless `head_width = "model"`;
- the attention returns LayerNorm(x + dropout(fc(·))) (L111-112), and the layer adds the residual and a norm again
  (ctronn_encoder.py L103-115): ours returns the projection unless `attention_sublayer = "prototype"`;
- `attention_dropout` drops the output projection, not the attention weights (L82, L111); ours drops weights unless
  `attention_sublayer = "prototype"`;
- q/k/v weights N(0, √(2 / (d + d_k))), fc Glorot-normal, biases PyTorch's (L72-81): drawn so under
  `attention_sublayer = "prototype"`, the T5 table N(0, 1) under `t5_bias_init = "normal"`;
- no self-attention gate: the prototype has no σ(β) anywhere; ours gates every self-attention (000 Alg. 1);
- their span mask (`masking-cnn`) adds +1 beyond the span instead of -inf (a boolean `zeros_like`, L358), and in
  the encoder its span is (heads - 1) // 2, whatever the span argument (ctronn_encoder.py L64-69): no fixed span;
- their convolution-like attention (`cnn-alike`) uses one head per kernel tap with fixed weights (CnnBias,
  L210-243): the same as a convolution only where the whole window lies in the sequence; its edge heads average
  everything beyond the span, a tap outside the sequence averages all positions (ours reads zeros), and it drops
  the output twice (L301-302);
- their convolution (`cnn`, CnnAttention L179-207) is a dense weight-normalised ConvTBC of kernel = heads with a
  layer norm after it, in the encoder only (ctronn_decoder.py L403-404), and convolves the padding it meant to zero
  (L197-203); ours is depthwise then pointwise, kernel 2s + 1, padding read as zeros, causal in the decoder.
"""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import torch
import torch.nn.functional as F
from prototype_000 import import_prototype, load_prototype_attention, our_t5_table
from reference_code import default_dtype, reference_folder
from scipy import stats

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture
from benchbuild.zoo.positions import t5_bias
from benchbuild.zoo.transformer import Layer, TransformerConfig
from benchbuild.zoo.transformer_layers import Attention, Convolution

pytestmark = [pytest.mark.reference, pytest.mark.shared]

D, HEADS, SPAN, LENGTH = 16, 4, 2, 7
PROTOTYPE_KEYS = {"head_width": "model", "attention_sublayer": "prototype"}


@pytest.fixture(scope="module")
def prototype():
    return import_prototype(reference_folder("prototype_000"), reference_folder("dangle") / "fairseq")


@pytest.fixture(scope="module")
def inputs():
    """Two rows of LENGTH, the second padded after 5 real positions: ours (B, L, d), their (L, B, d) is the
    transpose; `real` marks ours' real keys, their key padding mask is its negation."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, LENGTH, D, generator=generator, dtype=torch.float64)
    real = torch.ones(2, LENGTH, dtype=torch.bool)
    real[1, 5:] = False
    return x, real


def their_future_mask(length: int) -> torch.Tensor:
    """Their decoder's self-attention mask (ctronn.py L559-562): True above the diagonal."""
    return torch.triu(torch.ones(length, length), 1).to(torch.bool)


def pair(prototype, position: str, causal: bool = False):
    """Their attention module and ours with the prototype keys, float64, the same weights, in eval mode."""
    with default_dtype(torch.float64):
        torch.manual_seed(1)
        if position == "t5_bias":
            their = prototype.attention.MultiheadRelativeAttention(D, HEADS, span=SPAN, dropout=0.1)
            torch.nn.init.normal_(their.relative_attention.embedding.weight)
        else:
            their = prototype.attention.CnnMaskingAttention(D, HEADS, span=SPAN, dropout=0.1)
        ours = Attention(D, HEADS, 0.1, position, SPAN, causal=causal, head_width="model", sublayer="prototype")
    ours.double()
    load_prototype_attention(ours, their)
    return their.eval(), ours.eval()


def their_output(their, x, real, causal: bool = False) -> torch.Tensor:
    with default_dtype(torch.float64):
        h = x.transpose(0, 1)
        output, _ = their(h, h, h, key_padding_mask=~real, attn_mask=their_future_mask(x.size(1)) if causal else None)
    return output.transpose(0, 1)


def assert_same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype == theirs.dtype == torch.float64
    assert (ours - theirs).abs().max().item() <= 1e-6


@pytest.mark.parametrize("span", [2, 4, 6])
def test_their_t5_bias_is_ours_with_the_buckets_mirrored(prototype, span):
    """RelativeBias (ctronn_attention.py L23-52) adds E[clamp(j - i, -s, s) + s, h]; `positions.t5_bias` adds
    B[h, clamp(i - j, -s, s) + s]: with B their table mirrored, the same bias at every (head, query, key)."""
    with default_dtype(torch.float64):
        torch.manual_seed(span)
        their = prototype.attention.RelativeBias(HEADS, span)
        torch.nn.init.normal_(their.embedding.weight)
        length = 2 * span + 3  # distances beyond the cap on both sides
        theirs = their(torch.zeros(HEADS, 1, length, length))[:, 0]
    ours = t5_bias(our_t5_table(their.embedding.weight), span, length, length, torch.float64)[0]
    assert_same(ours, theirs)


def test_their_bucket_counts_the_distance_key_minus_query(prototype):
    """Pinned: read without the mirror, their table gives our bias transposed (their i - j is our j - i)."""
    with default_dtype(torch.float64):
        their = prototype.attention.RelativeBias(HEADS, SPAN)
        theirs = their(torch.zeros(HEADS, 1, LENGTH, LENGTH))[:, 0]
    unmirrored = t5_bias(their.embedding.weight.detach().T, SPAN, LENGTH, LENGTH, torch.float64)[0]
    assert (unmirrored - theirs).abs().max().item() > 0.1
    assert_same(unmirrored.transpose(1, 2), theirs)


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_with_the_keys_our_t5_self_attention_is_theirs(prototype, inputs, causal):
    """MultiheadRelativeAttention (L55-113) against our self-attention under `head_width = "model"`,
    `attention_sublayer = "prototype"`: key padding (encoder) or the future mask (decoder, ctronn.py L525)."""
    their, ours = pair(prototype, "t5_bias", causal)
    x, real = inputs
    assert_same(ours(x, None if causal else real), their_output(their, x, real if not causal else torch.ones_like(real),
                                                                causal))


def test_their_span_mask_adds_one_beyond_the_span_instead_of_masking(prototype, inputs):
    """Pinned: CnnMaskingAttention (L308-391) builds its additive mask as `torch.zeros_like(mask)` of a boolean mask
    filled with -inf (L358), which stays boolean (True), so the logits beyond |i - j| > s get +1, not -inf: their
    "fixed span" is our T5 bias of span s + 1 whose table is 1 at both ends and 0 inside, with the keys; our fixed
    span masks."""
    their, _ = pair(prototype, "fixed_span")
    with default_dtype(torch.float64):
        plus_one = Attention(D, HEADS, 0.1, "t5_bias", SPAN + 1, head_width="model", sublayer="prototype")
        masked = Attention(D, HEADS, 0.1, "fixed_span", SPAN, head_width="model", sublayer="prototype")
    for ours in (plus_one, masked):
        load_prototype_attention(ours.double().eval(), their)
    with torch.no_grad():
        plus_one.relative_bias.zero_()
        plus_one.relative_bias[:, [0, -1]] = 1.0
    x, real = inputs
    theirs = their_output(their, x, real)
    assert_same(plus_one(x, real), theirs)
    assert (masked(x, real) - theirs).abs().max().item() > 0.01


def test_their_encoder_span_mask_is_tied_to_the_head_count(prototype):
    """Pinned: the encoder's masking-cnn layer ignores --encoder-attention-span (ctronn_encoder.py L68, commented
    out) and masks beyond (heads - 1) // 2; ours masks beyond `span` in encoder and decoder alike."""
    args = argparse.Namespace(encoder_embed_dim=D, encoder_ffn_embed_dim=2 * D, attention_dropout=0.0, dropout=0.0,
                              encoder_attention_span=4, encoder_glu=False)
    layer = prototype.encoder.CtronnEncoderLayer(args, "masking-cnn", HEADS)
    assert layer.self_attn.span == (HEADS - 1) // 2 == 1


def test_their_heads_are_each_as_wide_as_the_model(prototype):
    """Pinned: w_qs is d → H·d and fc H·d → d (L72-80); ours d → d unless `head_width = "model"`."""
    their = prototype.attention.MultiheadRelativeAttention(D, HEADS, span=SPAN)
    default = Attention(D, HEADS, 0.1, "t5_bias", SPAN)
    wide = Attention(D, HEADS, 0.1, "t5_bias", SPAN, head_width="model")
    assert their.w_qs.weight.shape == wide.query.weight.shape == (HEADS * D, D)
    assert their.fc.weight.shape == wide.out.weight.shape == (D, HEADS * D)
    assert default.query.weight.shape == (D, D) and default.head_dim == D // HEADS


def test_their_attention_adds_the_residual_and_normalises_inside(prototype, inputs):
    """Pinned: their output is LayerNorm(x + fc(heads)) (L112); ours, wide heads and the same weights but our
    default sub-layer, is fc(heads) alone, which their layer norm of x + ours gives back."""
    their, ours = pair(prototype, "t5_bias")
    x, real = inputs
    plain = Attention(D, HEADS, 0.1, "t5_bias", SPAN, head_width="model").double().eval()
    plain.load_state_dict({k: v for k, v in ours.state_dict().items() if not k.startswith("norm.")})
    theirs = their_output(their, x, real)
    assert (plain(x, real) - theirs).abs().max().item() > 0.1
    assert_same(F.layer_norm(x + plain(x, real), (D,)), theirs)


def test_their_attention_dropout_drops_the_output_not_the_weights(prototype, inputs):
    """Pinned: in training their attention weights are the eval ones and the output moves (dropout on fc, L111);
    ours under the prototype sub-layer attends without dropping weights (the output unchanged in training once its
    output dropout is off), and by default drops weights."""
    their, ours = pair(prototype, "t5_bias")
    x, real = inputs
    h = x.transpose(0, 1)
    _, eval_weights = their(h, h, h, key_padding_mask=~real)
    their.dropout.p = 0.5
    their.train()
    torch.manual_seed(2)
    trained, train_weights = their(h, h, h, key_padding_mask=~real)
    assert torch.equal(train_weights, eval_weights)
    assert (trained.transpose(0, 1) - their_output(their.eval(), x, real)).abs().max().item() > 0.1
    expected = ours(x, real)
    ours.dropout, ours.output_dropout.p = 0.5, 0.0
    assert_same(ours.train()(x, real), expected)
    plain = Attention(D, HEADS, 0.5, "t5_bias", SPAN, head_width="model").double()
    assert (plain.train()(x, real) - plain.eval()(x, real)).abs().max().item() > 0.01


def encoder_layers(prototype, gate: float | None):
    """Their encoder layer of type 'relative' (ctronn_encoder.py L20-127) and ours with the prototype keys and
    `gate` as β0 (None: no gate), float64, the same weights, eval mode."""
    args = argparse.Namespace(encoder_embed_dim=D, encoder_ffn_embed_dim=2 * D, attention_dropout=0.1, dropout=0.1,
                              encoder_attention_span=SPAN, encoder_glu=False)
    with default_dtype(torch.float64):
        torch.manual_seed(3)
        their = prototype.encoder.CtronnEncoderLayer(args, "relative", HEADS)
        torch.nn.init.normal_(their.self_attn.relative_attention.embedding.weight)
    config = TransformerConfig(d_model=D, num_heads=HEADS, d_ff=2 * D, position="t5_bias", span=SPAN,
                               activation_dropout=0.0, encoder_self_attention_gate=gate, **PROTOTYPE_KEYS)
    ours = Layer(config, decoder=False).double()
    load_prototype_attention(ours.mixer, their.self_attn)
    with torch.no_grad():
        for mine, theirs in ((ours.mixer_norm, their.self_attn_layer_norm), (ours.feed_forward[0], their.fc1),
                             (ours.feed_forward[3], their.fc2), (ours.feed_forward_norm, their.final_layer_norm)):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    return their.eval(), ours.eval()


def test_with_the_keys_and_no_gate_our_encoder_layer_is_theirs(prototype, inputs):
    """Their whole encoder layer (attention with its inner norm, then dropout, residual and norm again, then the
    feed-forward block) against our Layer with the keys, gate off."""
    their, ours = encoder_layers(prototype, gate=None)
    x, real = inputs
    with default_dtype(torch.float64):
        theirs = their(x.transpose(0, 1), ~real).transpose(0, 1)
    assert_same(ours(x, real, [x]), theirs)


def test_the_prototype_has_no_self_attention_gate(prototype, inputs):
    """Pinned: no β in their layer (no sigmoid anywhere in ctronn*.py); ours with sag_t5's β0 = -1 scales the
    attention by σ(-1) and comes out otherwise."""
    their, ours = encoder_layers(prototype, gate=-1.0)
    assert not any(parameter.dim() == 0 for parameter in their.parameters())
    assert ours.gate.beta.item() == -1.0
    x, real = inputs
    with default_dtype(torch.float64):
        theirs = their(x.transpose(0, 1), ~real).transpose(0, 1)
    assert (ours(x, real, [x]) - theirs).abs().max().item() > 0.01


@pytest.fixture(scope="module")
def drawn(prototype):
    """Initial weights of our sag_t5 (its scan recipe, with the prototype keys and t5_bias_init = "normal") and of
    eight of their relative attentions of the same size, pooled by parameter."""
    entry = load_entry("sag_t5")
    architecture = {**resolved_architecture(entry, "scan"), **PROTOTYPE_KEYS, "t5_bias_init": "normal",
                    "d_model": 64, "num_heads": 8}
    torch.manual_seed(4)
    model = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=12, pad_token_id=0,
                        bos_token_id=1, eos_token_id=2)
    mixers = [layer.mixer for stack in (model.encoder_stack, model.decoder_stack) for layer in stack.layers]
    theirs = [prototype.attention.MultiheadRelativeAttention(64, 8, span=4) for _ in mixers]
    names = {"query": "w_qs", "key": "w_ks", "value": "w_vs", "out": "fc"}
    pooled = {}
    for mine, their in zip(mixers, theirs):
        for ours_name, their_name in names.items():
            for part in ("weight", "bias"):
                values = pooled.setdefault(f"{ours_name}.{part}", ([], []))
                values[0].append(getattr(getattr(mine, ours_name), part).detach().flatten())
                values[1].append(getattr(getattr(their, their_name), part).detach().flatten())
        values = pooled.setdefault("relative_bias", ([], []))
        values[0].append(mine.relative_bias.detach().flatten())
        values[1].append(their.relative_attention.embedding.weight.detach().flatten())
    return {name: (torch.cat(mine).numpy(), torch.cat(their).numpy()) for name, (mine, their) in pooled.items()}


@pytest.mark.parametrize("parameter", ["query.weight", "key.weight", "value.weight", "out.weight", "query.bias",
                                       "key.bias", "value.bias", "out.bias", "relative_bias"])
def test_with_the_keys_our_draws_are_theirs_in_distribution(drawn, parameter):
    """Two-sample Kolmogorov-Smirnov over 8 layers' worth of each draw (L72-81, L30), sizes equal."""
    mine, theirs = drawn[parameter]
    assert mine.shape == theirs.shape
    assert stats.ks_2samp(mine, theirs).pvalue > 1e-3


def test_their_convolution_like_attention_is_a_convolution_where_the_window_fits(prototype):
    """CnnAlikeAttention (L246-304) with 2s + 1 heads: head h attends the position at offset h - s with a fixed
    weight (CnnBias, L210-243: its logits ignore q and k). At the middle of a sequence of 2s + 1 positions every
    head reads one position, and their sub-layer is LayerNorm(x + a kernel-(2s + 1) convolution) there: our
    Convolution's depthwise kernel as their value heads, its pointwise projection as every block of their fc."""
    heads, length = 2 * SPAN + 1, 2 * SPAN + 1
    with default_dtype(torch.float64):
        torch.manual_seed(5)
        their = prototype.attention.CnnAlikeAttention(D, heads, dropout=0.1).eval()
        their.relative_attention.double()  # CnnBias makes its table float32 whatever the default (L216)
        ours = Convolution(D, SPAN, causal=False).double()
        x = torch.randn(1, length, D)
    with torch.no_grad():
        kernel = ours.conv.weight[:, 0, :]  # (d, 2s + 1): channel c's weight at offset o - s
        their.w_vs.weight.copy_(torch.cat([torch.diag(kernel[:, h]) for h in range(heads)]))
        their.w_vs.bias.zero_()
        their.w_vs.bias[:D] = ours.conv.bias
        their.fc.weight.copy_(ours.pointwise.weight.repeat(1, heads))
        their.fc.bias.copy_(ours.pointwise.bias)
        theirs = their(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))[0].transpose(0, 1)
        expected = F.layer_norm(x + ours(x), (D,))
    assert_same(expected[:, SPAN], theirs[:, SPAN])
    assert (expected[:, 0] - theirs[:, 0]).abs().max().item() > 0.01  # the window reaches outside: they differ


def test_their_convolution_like_taps_outside_the_sequence_average_every_position(prototype):
    """Pinned: a head whose tap falls outside the sequence has all logits 0 (no 100 to pick), so it averages every
    position, where our convolution reads zeros; the edge heads average every position beyond the span; with an
    even head count the last head never gets a 100 and averages everything (span (heads - 1) // 2, L216-220)."""
    with default_dtype(torch.float64):
        odd = prototype.attention.CnnAlikeAttention(D, 2 * SPAN + 1, dropout=0.0).eval()
        even = prototype.attention.CnnAlikeAttention(D, 4, dropout=0.0).eval()
        for their in (odd, even):
            their.relative_attention.double()
        h = torch.randn(LENGTH, 1, D)
        _, weights = odd(h, h, h)
        _, even_weights = even(h, h, h)
    uniform = torch.full((LENGTH,), 1 / LENGTH, dtype=torch.float64)
    assert torch.allclose(weights[0, 0, 0], uniform)  # head 0 (offset -s) at position 0
    assert torch.allclose(weights[0, 0, LENGTH - 1, : LENGTH - SPAN], torch.full((LENGTH - SPAN,), 1 / (LENGTH - SPAN),
                                                                                dtype=torch.float64))
    assert weights[SPAN, 0, 3, 3].item() == pytest.approx(1.0)  # the middle head: the position itself
    assert torch.allclose(even_weights[3, 0], torch.full((LENGTH, LENGTH), 1 / LENGTH, dtype=torch.float64))


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")  # their ConvTBC helper's (L176)
def test_their_convolution_layer_is_dense_weight_normalised_and_reads_padding(prototype):
    """Pinned: their 'cnn' attention (CnnAttention, L179-207) is a dense ConvTBC of kernel `heads` with weight
    norm, a layer norm after it, encoder only (ctronn_decoder.py L403-404); it zeroes padding into `x` but convolves
    `query` (L197-203), so padding moves real positions. Ours: depthwise then pointwise, kernel 2s + 1, padding
    read as zeros."""
    with default_dtype(torch.float64):
        torch.manual_seed(6)
        with prototype.standing_in():  # their ConvTBC helper imports fairseq.modules when called (L171)
            their = prototype.attention.CnnAttention(D, D, 2 * SPAN + 1, dropout=0.0, use_layer_norm=True).eval()
        h = torch.randn(LENGTH, 1, D)
        padded = ~torch.tensor([[True] * (LENGTH - 1) + [False]])
        moved = h.clone()
        moved[-1] += 1.0
        first, second = (their(x, x, x, key_padding_mask=padded)[0] for x in (h, moved))
    names = {name for name, _ in their.named_parameters()}
    assert {"conv.weight_g", "conv.weight_v"} <= names
    assert their.conv.weight_v.shape == (2 * SPAN + 1, D, D)
    assert (first[LENGTH - 2] - second[LENGTH - 2]).abs().max().item() > 1e-3
    ours = Convolution(D, SPAN, causal=False).double()
    x, y = h.transpose(0, 1), moved.transpose(0, 1)
    real = ~padded
    assert_same(ours(x, real)[:, : LENGTH - 1], ours(y, real)[:, : LENGTH - 1])


@pytest.mark.parametrize("key, value", [("head_width", "wide"), ("attention_sublayer", "fairseq"),
                                        ("head_width", 1)])
def test_the_prototype_keys_refuse_other_values(key, value):
    entry = load_entry("sag_t5")
    with pytest.raises(BenchbuildError, match=key):
        build_model(entry, vocab_size=12, pad_token_id=0, bos_token_id=1, eos_token_id=2, overrides={key: value})


def test_the_prototype_keys_refuse_the_convolution_and_relative_attention():
    with pytest.raises(BenchbuildError, match="head_width = 'model' acts on self-attention"):
        TransformerConfig(mixer="conv", head_width="model")
    with pytest.raises(BenchbuildError, match="head_width = 'model' needs another position"):
        TransformerConfig(position="relative", head_width="model")
