"""`transformer`'s recipes for 000 (SCAN at App. A.1's point, IWSLT'14 De-En, WMT'14 En-Fr big) and 001 (Dangle's
`transformer_baseline`) build fairseq's Transformer exactly: our parameter count, less our embedding tables, equals fairseq's counted by hand from its layer
shapes (facebookresearch/fairseq, fairseq/models/transformer/transformer_encoder.py and transformer_decoder.py,
fairseq/modules/transformer_layer.py, fairseq/modules/multihead_attention.py), biases included.

fairseq's layers, at width d and feed-forward width f:
- an encoder layer: self-attention (q, k, v, out: d x d weights with a d bias each), its layer norm (2d), fc1 (d f + f),
  fc2 (f d + d), the final layer norm (2d);
- a decoder layer: the same with an encoder-attention and its layer norm beside the self-attention;
- sinusoidal positions (no parameters); with --encoder/--decoder-normalize-before a layer norm after each stack;
- the output projection tied to the decoder's embeddings (--share-decoder-input-output-embed or
  --share-all-embeddings), no output bias.
The embedding tables are left out on both sides: their rows are the dictionaries, which fairseq-preprocess and our
tokenizers make differently (`[fidelity.*]` "vocabulary" rows say how). Dangle's and R-Dangle's layer stacks are
counted the same way against Dangle's fork of fairseq (last test)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture


def attention(d: int, kv: int | None = None) -> int:
    """fairseq MultiheadAttention: q, out from d; k, v from kv (the encoder's width), each with a bias."""
    kv = kv or d
    return d * d + d + 2 * (kv * d + d) + d * d + d


def encoder_layer(d: int, f: int) -> int:
    return attention(d) + 2 * d + d * f + f + f * d + d + 2 * d


def decoder_layer(d: int, f: int) -> int:
    return 2 * attention(d) + 3 * 2 * d + d * f + f + f * d + d


def fairseq_layers(d: int, f: int, encoder: int, decoder: int, normalize_before: bool, heads: int,
                   relative: int | None) -> int:
    """The layers' parameters; with `relative` = --max-relative-position m, each self-attention of the Dangle fork's
    MultiheadAttentionWithRelPos adds its distance table, 2m - 1 rows of the head width
    (mswellhao/Dangle fairseq/fairseq/modules/multihead_attention_relative.py, `distance_embedding_src`)."""
    tables = (encoder + decoder) * (2 * relative - 1) * (d // heads) if relative else 0
    return (encoder * encoder_layer(d, f) + decoder * decoder_layer(d, f) + (2 * 2 * d if normalize_before else 0)
            + tables)


# recipe: (d, FFN, encoder layers, decoder layers, normalize before, heads, relative) as the papers name fairseq's
# architecture: 000 App. A for its three, 001's `transformer_baseline` (Dangle run_react.sh) for mt_001.
RECIPES = {
    "scan_000": (128, 256, 4, 4, False, 8, None),  # 000 App. A.1's point (the one of its SAG models)
    "mt": (512, 1024, 6, 6, False, 4, None),  # transformer_iwslt_de_en
    "nounadj": (1024, 4096, 6, 6, False, 16, None),  # transformer_vaswani_wmt_en_fr_big
    "mt_001": (512, 1024, 12, 12, True, 4, 16),  # transformer_iwslt_de_en_rel_pos, 12 + 12, pre-norm, m = 16
}
SOURCE, TARGET = 40, 30  # two dictionaries of different sizes, so a table counted twice or not at all shows


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_transformers_fairseq_recipes_have_fairseqs_exact_parameter_count_but_for_the_embeddings(recipe):
    entry = load_entry("transformer")
    architecture = resolved_architecture(entry, recipe)
    separate = entry.recipes[recipe].get("dictionaries") == "separate"
    overrides = {"source_vocab_size": SOURCE} if separate else {}
    with torch.device("meta"):  # shapes only: the big model's 200M draws would take seconds
        model = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=TARGET,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2, overrides=overrides)
    d = architecture["d_model"]
    tables = (SOURCE + TARGET) * d if separate else TARGET * d  # the output layer is tied to the decoder's table
    ours = sum(parameter.numel() for parameter in model.parameters())
    assert ours - tables == fairseq_layers(*RECIPES[recipe])


def stack_sizes(model) -> dict[str, int]:
    """Parameters of each of the model's layer stacks (`adaptive_stack`, `source_stack`, `decoder_stack`...)."""
    sizes: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if ".layers." in name:
            stack = name.split(".layers.", 1)[0]
            sizes[stack] = sizes.get(stack, 0) + parameter.numel()
    return sizes


@pytest.mark.parametrize("name", ["dangle", "rdangle_sep", "rdangle_shr"])
def test_dangles_layer_stacks_have_the_forks_exact_parameter_counts(name):
    """Dangle's fork (mswellhao/Dangle, run_react.sh's --max-relative-position 16, 512/1024, pre-norm): its
    cross-boundary layers (the adaptive encoder's, 8 heads) are fairseq encoder layers whose
    MultiheadAttentionWithRelPosCrossBoundry holds three distance tables, source and target 2m - 1 rows each and 2
    boundary rows, of the head width (fairseq/fairseq/modules/multihead_attention_relative.py,
    `distance_embedding_src`, `_tgt`, `_st`); the source encoder's and the decoder's layers carry one table of 2m - 1
    rows (MultiheadAttentionWithRelPos). The type vectors, end-of-prefix vector and norms outside the stacks are
    checked in tests/zoo/test_dangle_official.py."""
    entry = load_entry(name)
    architecture = resolved_architecture(entry, "mt")
    with torch.device("meta"):
        model = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=TARGET,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2)
    d, f, m = architecture["d_model"], architecture["d_ff"], architecture["max_relative_position"]
    head, adaptive_head = d // architecture["num_heads"], d // architecture["adaptive_heads"]
    sizes = stack_sizes(model)
    assert sizes["adaptive_stack"] == architecture["adaptive_layers"] * (
        encoder_layer(d, f) + (2 * (2 * m - 1) + 2) * adaptive_head)
    assert sizes["source_stack"] == architecture["source_layers"] * (encoder_layer(d, f) + (2 * m - 1) * head)
    assert sizes["decoder_stack"] == architecture["decoder_layers"] * (decoder_layer(d, f) + (2 * m - 1) * head)
    if "value_stack" in sizes:
        # R-Dangle with separate keys and values: the fork builds the value encoder as it builds the key one,
        # --dis-encoder-layers TransformerEncoderLayerCrossBoundary layers (fairseq/fairseq/models/
        # transformer_rdangle_kv_sep.py, build_model: value_dis_encoder_layers and key_dis_encoder_layers).
        assert architecture["value_layers"] == architecture["adaptive_layers"]
        assert sizes["value_stack"] == sizes["adaptive_stack"]
    else:
        assert not architecture.get("separate_keys_values")


def padded(types: int) -> int:
    """A fairseq dictionary's size: its 4 specials (<s>, <pad>, </s>, <unk>) and the counted types, padded to a
    multiple of 8 (fairseq-preprocess's --padding-factor 8)."""
    return -(-(types + 4) // 8) * 8


@pytest.mark.parametrize("name, millions", [("transformer", 35), ("fusion", 48)])
def test_004s_cognition_models_have_its_table_1_parameter_counts(name, millions):
    """004 Table 1 gives the Transformer 35M and FUSION 48M parameters on CoGnition, whose dictionaries have 2,008
    English and 5,504 Chinese types (yafuly/CoGnition data/processed/bin/preprocess.log); the decoder's table is the
    output layer (--share-decoder-input-output-embed)."""
    entry = load_entry(name)
    architecture = resolved_architecture(entry, "mt")
    with torch.device("meta"):
        model = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=padded(5504),
                            pad_token_id=0, bos_token_id=1, eos_token_id=2,
                            overrides={"source_vocab_size": padded(2008)})
    assert round(sum(parameter.numel() for parameter in model.parameters()) / 1e6) == millions
