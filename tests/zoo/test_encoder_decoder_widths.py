"""Separate encoder and decoder sizes (issue #43; 000 App. A.1 varies "the Encoder and Decoder parameters
independently", as fairseq's --encoder-embed-dim / --decoder-embed-dim allow): the encoder's width, heads and FFN size
from its `encoder_*` keys, cross-attention reading the encoder's width as key and value size, each stack embedding
its own dictionary; refused in one line where one table would have to serve both widths."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from tiny_zoo import BOS, EOS, PAD

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.attention import packed
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq

TARGETS, SOURCES = 14, 11
UNEQUAL = {"d_model": 32, "num_heads": 4, "d_ff": 48, "encoder_d_model": 16, "encoder_num_heads": 2,
           "encoder_d_ff": 40, "encoder_layers": 2, "decoder_layers": 1, "dropout": 0.0, "attention_dropout": 0.0}


def network(model: str = "sag_t5", **extra) -> TransformerForSeq2Seq:
    torch.manual_seed(0)
    return build_model(load_entry(model), vocab_size=TARGETS, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                       overrides={**UNEQUAL, "source_vocab_size": SOURCES, **extra})


def test_each_stack_takes_its_own_sizes_and_cross_attention_reads_the_encoders_width():
    model = network()
    shapes = {name: tuple(parameter.shape) for name, parameter in model.named_parameters()}
    assert shapes["source_embedding.weight"] == (SOURCES, 16) and shapes["embedding.weight"] == (TARGETS, 32)
    assert shapes["encoder_stack.layers.0.mixer.query.weight"] == (16, 16)
    assert shapes["encoder_stack.layers.0.mixer.relative_bias"] == (2, 2 * 4 + 1)  # encoder heads x (2s + 1)
    assert shapes["encoder_stack.layers.1.feed_forward.0.weight"] == (40, 16)
    assert shapes["decoder_stack.layers.0.mixer.relative_bias"] == (4, 9)
    assert shapes["decoder_stack.layers.0.feed_forward.0.weight"] == (48, 32)
    assert shapes["decoder_stack.layers.0.cross_attention.query.weight"] == (32, 32)
    assert shapes["decoder_stack.layers.0.cross_attention.key.weight"] == (32, 16)  # fairseq's kdim
    assert shapes["decoder_stack.layers.0.cross_attention.value.weight"] == (32, 16)  # and vdim
    # Exact count, by hand: embeddings, 2 encoder layers, 1 decoder layer (self, cross, FFN, 3 norms), gates.
    encoder_layer = 4 * (16 * 16 + 16) + 2 * 9 + (16 * 40 + 40) + (40 * 16 + 16) + 2 * 2 * 16 + 1
    decoder_layer = (4 * (32 * 32 + 32) + 4 * 9 + 2 * (32 * 16 + 32) + 2 * (32 * 32 + 32) + (32 * 48 + 48)
                     + (48 * 32 + 32) + 3 * 2 * 32 + 1)
    assert sum(p.numel() for p in model.parameters()) == SOURCES * 16 + TARGETS * 32 + 2 * encoder_layer + decoder_layer


@pytest.mark.parametrize("kernel", ["packed", "torch"])
def test_a_grouped_training_pass_equals_each_groups_own_forward_pass(kernel):
    if kernel == "packed" and not packed.available():
        pytest.skip("no C compiler to build the packed attention kernel")
    model = network("transformer").train()  # no distance terms: every attention may take the packed kernel
    generator = torch.Generator().manual_seed(1)
    groups = []
    for rows, source_length, target_length in ((3, 4, 2), (2, 6, 9)):
        groups.append({"input_ids": torch.randint(3, SOURCES, (rows, source_length), generator=generator),
                       "attention_mask": torch.ones(rows, source_length, dtype=torch.long),
                       "decoder_input_ids": torch.randint(3, TARGETS, (rows, target_length), generator=generator)})
    with packed.disabled() if kernel == "torch" else contextlib.nullcontext():
        assert model._packs(groups) == (kernel == "packed")
        grouped = model(length_groups=groups).logits
    alone = torch.cat([model(input_ids=group["input_ids"], attention_mask=group["attention_mask"],
                             decoder_input_ids=group["decoder_input_ids"]).logits.reshape(-1, TARGETS)
                       for group in groups])
    torch.testing.assert_close(grouped, alone, rtol=1e-5, atol=1e-5)


def test_cached_greedy_decoding_equals_decoding_without_the_cache():
    model = network().eval()
    source = torch.randint(3, SOURCES, (3, 7), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(source)
    cached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, do_sample=False)
    uncached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, do_sample=False,
                              use_cache=False)
    assert torch.equal(cached, uncached)


def test_fairseq_draws_cross_attention_over_another_width_with_gain_1():
    """fairseq's MultiheadAttention.reset_parameters: Glorot-uniform with gain 1/√2 where query, key and value have
    one size (`qkv_same_dim`), gain 1 where keys and values come from another width (kdim = encoder width)."""
    model = network(init="fairseq")
    same = model.decoder_stack.layers[0].mixer.key.weight.detach().abs().max().item()
    other = model.decoder_stack.layers[0].cross_attention.key.weight.detach().abs().max().item()
    assert 0.95 * math.sqrt(6 / (32 + 32)) / math.sqrt(2) < same <= math.sqrt(6 / (32 + 32)) / math.sqrt(2)
    assert 0.95 * math.sqrt(6 / (16 + 32)) < other <= math.sqrt(6 / (16 + 32))


def test_equal_sizes_build_the_model_they_built_before_the_keys_existed():
    torch.manual_seed(0)
    before = build_model(load_entry("transformer"), vocab_size=TARGETS, pad_token_id=PAD, bos_token_id=BOS,
                         eos_token_id=EOS, overrides={"d_model": 32, "num_heads": 4, "d_ff": 48})
    torch.manual_seed(0)
    spelled = build_model(load_entry("transformer"), vocab_size=TARGETS, pad_token_id=PAD, bos_token_id=BOS,
                          eos_token_id=EOS, overrides={"d_model": 32, "num_heads": 4, "d_ff": 48,
                                                       "encoder_d_model": 32, "encoder_num_heads": 4,
                                                       "encoder_d_ff": 48})
    assert before.state_dict().keys() == spelled.state_dict().keys()
    assert all(torch.equal(before.state_dict()[key], spelled.state_dict()[key]) for key in before.state_dict())


def test_one_shared_table_and_two_widths_is_refused_in_one_line():
    with pytest.raises(BenchbuildError) as refused:
        TransformerForSeq2Seq(TransformerConfig(vocab_size=TARGETS, pad_token_id=PAD, **UNEQUAL))
    assert str(refused.value) == ("transformer: encoder_d_model = 16 and d_model = 32 differ, but encoder and decoder "
                                  "share one embedding table (one dictionary): train with --set dictionaries=separate")


@pytest.mark.parametrize("key, value, message", [
    ("encoder_num_heads", 3, "encoder_d_model = 16 is not divisible by encoder_num_heads = 3"),
    ("num_heads", 5, "d_model = 32 is not divisible by num_heads = 5"),
])
def test_widths_not_divisible_by_their_heads_are_refused_naming_the_stack(key, value, message):
    with pytest.raises(BenchbuildError, match=message):
        TransformerConfig(**{**UNEQUAL, key: value})


def test_dangle_reencodes_the_prefix_so_it_refuses_two_widths():
    with pytest.raises(BenchbuildError, match="dangle: the encoder re-reads the decoder's prefix"):
        build_model(load_entry("dangle"), vocab_size=TARGETS, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                    overrides={"d_model": 32, "num_heads": 4, "encoder_d_model": 16, "encoder_num_heads": 2})


def test_the_t5_bias_starts_at_zero_or_drawn_n01_as_the_authors_prototype_draws_it():
    """Issue #43 experiment 1: robertodessi/fairseq (branch dev) ctronn_attention.py L30 keeps nn.Embedding(2s + 1,
    heads)'s own N(0, 1) draw; the catalogue's default stays 0."""
    zeros = network(d_model=64, num_heads=8, encoder_d_model=64, encoder_num_heads=8)
    normal = network(d_model=64, num_heads=8, encoder_d_model=64, encoder_num_heads=8, t5_bias_init="normal")
    tables = [layer.mixer.relative_bias.detach() for stack in (normal.encoder_stack, normal.decoder_stack)
              for layer in stack.layers]
    assert all(torch.count_nonzero(layer.mixer.relative_bias) == 0 for layer in zeros.encoder_stack.layers)
    drawn = torch.cat([table.flatten() for table in tables])  # 3 layers x 8 heads x 9 distances = 216 draws
    assert drawn.std().item() == pytest.approx(1.0, abs=0.15) and abs(drawn.mean().item()) < 0.2
    with pytest.raises(BenchbuildError, match="t5_bias_init"):
        TransformerConfig(t5_bias_init="uniform")
