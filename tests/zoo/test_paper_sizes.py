"""Every number the catalogue reports is trained here as its paper trained the model: each `[[reported]]` row names a
recipe, and that recipe resolves to the sizes (and the optimiser numbers) the paper states for that model on that
family of benchmarks, kept below with paper and section per row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
import torch

from benchbuild.errors import BenchbuildError
from benchbuild.papers import cited_ids
from benchbuild.zoo.recipe import default_recipe, reported_on, resolve_recipe
from benchbuild.zoo import build_model, list_entries, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

SAG_MODELS = frozenset({"sag", "sag_conv", "sag_fixed_span", "sag_t5"})
TRANSFORMER_003 = frozenset({"transformer_ped", "transformer_noscale", "universal_transformer",
                             "relative_transformer", "relative_universal_transformer"})
DANGLE_MODELS = frozenset({"dangle", "rdangle_shr", "rdangle_sep"})


@dataclass(frozen=True)
class PaperSetup:
    """What a paper states about the model it trained on one family of benchmarks."""

    source: str  # paper and section
    paper: str  # the id a reported row's `table` starts with
    benchmarks: tuple[str, ...]  # the reported rows' benchmark names, or their family prefix ("scan/")
    models: frozenset[str]
    architecture: dict
    recipe: dict = field(default_factory=dict)


SETUPS = (
    PaperSetup("000 App. A.1 (SCAN grid: heads {4, 8}, emb {128, 256}, FFN {256, 512}, layers {4, 6, 8}; SAG "
               "variants 4 layers, beta0 = -1; dropout and attention dropout 0.1; Adam lr 5e-4, batch 256)",
               "000", ("scan/",), SAG_MODELS | {"transformer"},
               dict(d_model=128, d_ff=256, num_heads=8, encoder_layers=4, decoder_layers=4, dropout=0.1,
                    attention_dropout=0.1, activation_dropout=0.0),  # fairseq's default activation dropout
               dict(learning_rate=5e-4, batch_size=256, grad_clip=1.0, select="last")),
    PaperSetup("000 App. A.2, De-En (fairseq IWSLT'14: embeddings 512, FFN 1024, 4 heads, 6 + 6 layers, dropout 0.3; "
               "Adam lr 5e-4, inverse sqrt, 4000 warm-up, wd 1e-4, label smoothing 0.1, no clip)",
               "000", ("iwslt14_de_en",), SAG_MODELS | {"transformer"},
               dict(d_model=512, d_ff=1024, num_heads=4, encoder_layers=6, decoder_layers=6, dropout=0.3),
               dict(learning_rate=5e-4, schedule="inverse_sqrt", warmup_steps=4000, weight_decay=1e-4,
                    label_smoothing=0.1, grad_clip=0.0)),
    PaperSetup("000 App. A.2, noun-adjective order (fairseq WMT'14 En-Fr: embeddings 1024, FFN 4096, 16 heads, 6 + 6 "
               "layers, dropout 0.1; Adam lr 7e-4, inverse sqrt, 4000 warm-up, label smoothing 0.1, no clip)",
               "000", ("nounadj",), SAG_MODELS | {"transformer"},
               dict(d_model=1024, d_ff=4096, num_heads=16, encoder_layers=6, decoder_layers=6, dropout=0.1),
               dict(learning_rate=7e-4, schedule="inverse_sqrt", warmup_steps=4000, label_smoothing=0.1,
                    grad_clip=0.0)),
    PaperSetup("003 Table 4, SCAN row (d_model 128, d_FF 256, 8 heads, 3 layers, batch 256, lr 1e-3, no schedule) "
               "and App. B (dropout 0.1 after every component); §3.1: 50k steps; its official `trafo_scan` profile "
               "(main.py): gradient clip 5",
               "003", ("scan/",), TRANSFORMER_003,
               dict(d_model=128, d_ff=256, num_heads=8, encoder_layers=3, decoder_layers=3, dropout=0.1,
                    attention_dropout=0.1),
               dict(learning_rate=1e-3, batch_size=256, schedule="constant", steps=50000, select="last",
                    grad_clip=5.0)),
    PaperSetup("001 §5 + App. B, Transformer (our implementation): transformer_iwslt_de_en widened to 12 + 12 "
               "layers, attention dropout 0.3, activation dropout 0.4, pre-norm, relative positions",
               "001", ("react/",), frozenset({"transformer"}),
               dict(d_model=512, d_ff=1024, num_heads=4, encoder_layers=12, decoder_layers=12, dropout=0.4,
                    attention_dropout=0.3, activation_dropout=0.4, pre_norm=True, position="shaw",
                    max_relative_position=16),  # run_react.sh: --dropout 0.4 --max-relative-position 16
               dict(learning_rate=5e-4, schedule="inverse_sqrt", warmup_steps=4000)),
    PaperSetup("001 §5 + App. B, Dangle / R-Dangle: transformer_iwslt_de_en sizes, 12-layer decoder, k1 = 2 "
               "adaptive + k2 = 10 source layers (R-Dangle_sep: k2 = 8), attention dropout 0.3, activation dropout "
               "0.4, pre-norm, relative positions; as mswellhao/Dangle run_react.sh runs it (--dropout 0.4, "
               "--max-relative-position 16) and transformer_rdangle_kv_shared.py builds it (8 heads in the k1 layers)",
               "001", ("cognition/", "react/"), DANGLE_MODELS,
               dict(d_model=512, d_ff=1024, num_heads=4, decoder_layers=12, adaptive_layers=2, dropout=0.4,
                    attention_dropout=0.3, activation_dropout=0.4, pre_norm=True, position="shaw",
                    max_relative_position=16, adaptive_heads=8),
               dict(learning_rate=5e-4, schedule="inverse_sqrt", warmup_steps=4000)),
    PaperSetup("004 §3.1, CoGnition (hidden 512, FFN 1024, 6 + 6 layers, 4 heads; Adam (0.9, 0.98), lr 5e-4, "
               "4000 warm-up, 100k steps)",
               "004", ("cognition/",), frozenset({"fusion"}),
               dict(d_model=512, d_ff=1024, num_heads=4, encoder_layers=6, decoder_layers=6, fuse_attention=True),
               dict(learning_rate=5e-4, warmup_steps=4000, steps=100000, adam_beta1=0.9, adam_beta2=0.98)),
    PaperSetup("002 §3.2 + App. B (encoder LSTM 2 layers x 200 units, decoder 1 layer x 400, m_j of 120, dropout "
               "0.5; Adam lr 1e-3, batch 1, 200k iterations), as the official train_test.py sets them: x_hidden_dim "
               "200, n_layers 1",
               "002", ("scan/",), frozenset({"syntactic_attention"}),
               dict(d_semantic=120, hidden_size=200, num_layers=1, dropout=0.5),
               dict(learning_rate=1e-3, batch_size=1, steps=200000, select="best_validation")),
    PaperSetup("002 §3.5 (the same model on the small En-Fr set, learning rate 0.00015)",
               "002", ("lake_baroni_en_fr/syntactic_attention_mt",), frozenset({"syntactic_attention"}),
               dict(d_semantic=120, hidden_size=200, num_layers=1, dropout=0.5),
               dict(learning_rate=1.5e-4, batch_size=1)),
    # 002 reports the recurrent baselines of earlier papers without their sizes; the entry takes Lake & Baroni's
    # (2018) attention LSTM, which 002 Table 3's "LSTM + attn" row is.
    PaperSetup("Lake & Baroni 2018 (not among the shared papers): 2 layers, 200 units, dropout 0.5",
               "002", ("scan/", "lake_baroni_en_fr"), frozenset({"lstm_attention"}),
               dict(d_embedding=200, hidden_size=200, num_layers=2, dropout=0.5)),
)


def setups_of(entry, row) -> list[PaperSetup]:
    return [setup for setup in SETUPS
            if setup.paper == cited_ids(row["table"])[0] and entry.name in setup.models
            and any(row["benchmark"] == name or (name.endswith("/") and row["benchmark"].startswith(name))
                    for name in setup.benchmarks)]


def reported_rows():
    return [(entry, row) for entry in list_entries() for row in entry.reported]


@pytest.mark.parametrize("entry, row", reported_rows(),
                         ids=[f"{e.name}-{r['benchmark']}-{r['metric']}" for e, r in reported_rows()])
def test_every_reported_number_names_a_recipe_that_trains_the_papers_sizes(entry, row):
    assert row.get("recipe"), f"{entry.name}: {row['benchmark']} ({row['table']}) names no recipe"
    setups = setups_of(entry, row)
    assert len(setups) == 1, f"{entry.name}: {row['benchmark']} ({row['table']}) matches {len(setups)} paper setups"
    setup = setups[0]
    architecture = resolved_architecture(entry, row["recipe"])
    assert {key: architecture.get(key) for key in setup.architecture} == setup.architecture, setup.source
    recipe = resolve_recipe(entry.recipes, row["recipe"])
    assert {key: getattr(recipe, key) for key in setup.recipe} == setup.recipe, setup.source


def test_every_paper_setup_of_the_table_is_one_a_reported_number_uses():
    used = {setup.source for entry, row in reported_rows() for setup in setups_of(entry, row)}
    assert used == {setup.source for setup in SETUPS}


def test_the_numbers_of_one_benchmark_name_one_recipe_per_model():
    for entry in list_entries():
        recipes: dict[str, set[str]] = {}
        for row in entry.reported:
            recipes.setdefault(row["benchmark"], set()).add(row["recipe"])
        assert all(len(names) == 1 for names in recipes.values()), (entry.name, recipes)


def test_two_papers_transformers_on_scan_are_two_named_recipes():
    transformer = load_entry("transformer")
    assert {row["recipe"] for row in transformer.reported if row["table"].startswith("000 Table 3")} == {"scan_000"}
    assert resolved_architecture(transformer, "scan")["encoder_layers"] == 3  # 003's, for 003's benchmarks
    assert resolved_architecture(transformer, "scan_000")["encoder_layers"] == 4  # 000's, as its SAG models
    for name in TRANSFORMER_003:  # 003's variants train 003's recipe, and do not inherit 000's or 001's
        entry = load_entry(name)
        assert {row["recipe"] for row in entry.reported} == {"scan"}
        assert not {"scan_000", "mt_001"} & set(entry.recipes), name
    # Transformer vs SAG on 000's SCAN splits: the same recipe and sizes but for the gates.
    sag, baseline = resolved_architecture(load_entry("sag"), "scan"), resolved_architecture(transformer, "scan_000")
    assert {key: value for key, value in sag.items() if "gate" not in key} == baseline
    assert baseline["init"] == sag["init"] == "fairseq"  # 000 §3: both drawn as fairseq draws its Transformer
    without_architecture = {key: value for key, value in transformer.recipes["scan_000"].items()
                            if key != "architecture"}
    assert dataclasses.replace(resolve_recipe(load_entry("sag").recipes, "scan"), architecture={}) == resolve_recipe(
        {"scan": without_architecture}, "scan")


def test_scan_recipes_keep_scan_sizes():
    """The papers train small models on SCAN; a SCAN recipe never builds an MT-sized Transformer."""
    for entry in list_entries():
        for name in ("scan", "scan_000"):
            architecture = resolved_architecture(entry, name) if name in entry.recipes else None
            if architecture is not None and architecture["kind"] == "transformer":
                assert architecture["d_model"] == 128 and architecture["d_ff"] == 256, (entry.name, name)


def parameters(entry, recipe: str, vocabulary: int) -> int:
    with torch.device("meta"):
        network = build_model(dataclasses.replace(entry, architecture=resolved_architecture(entry, recipe)),
                              vocab_size=vocabulary, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return sum(parameter.numel() for parameter in network.parameters())


@pytest.mark.parametrize("name, stated", [("transformer", 992_000), ("universal_transformer", 333_000)])
def test_scan_models_have_003_table_5s_parameter_counts(name, stated):
    # 003 Table 5: "Standard 992k", "Universal 333k" on SCAN; its vocabularies are not ours (32 words here), so 1%.
    assert parameters(load_entry(name), "scan", 32) == pytest.approx(stated, rel=0.01)


def test_001s_models_on_machine_translation_have_one_size():
    # 001 App. B: R-Dangle_sep's 12 differently parametrized encoder layers keep "identical model size" to the
    # baselines (Dangle and the 12-layer Transformer). Up to what the authors' code adds besides the layers: the
    # type and end vectors (512 each), the cross-boundary layers' second distance table, R-Dangle_sep's value norm.
    sizes = {name: parameters(load_entry(name), "mt", 10_000) for name in DANGLE_MODELS}
    sizes["transformer"] = parameters(load_entry("transformer"), "mt_001", 10_000)
    assert max(sizes.values()) - min(sizes.values()) <= 4_000, sizes


def test_the_react_ensembles_default_member_is_iwslt_sized():
    # 001 §4 trains "10 Transformer models" on IWSLT; `build-react` trains `transformer` with recipe `mt`.
    mt = resolved_architecture(load_entry("transformer"), "mt")
    assert (mt["d_model"], mt["d_ff"], mt["num_heads"], mt["encoder_layers"], mt["decoder_layers"]) == (
        512, 1024, 4, 6, 6)


@pytest.mark.parametrize("name, family, benchmark, splits, expected", [
    ("transformer", "scan", "scan/addprim_jump", ("train", "test"), "scan_000"),  # 000 Table 3's number
    ("transformer", "scan", "scan/length_cutoff_26", ("train", "test"), "scan"),  # 003's, elsewhere
    ("transformer", "nounadj", "noun-adjective-order", ("train", "validation", "test"), "nounadj"),
    ("transformer", "react", "react", ("train", "validation", "test", "cg_test"), "mt_001"),  # 001 Table 5's
    ("transformer", "generic", "iwslt14", ("train", "test"), "mt"),
    ("sag_t5", "nounadj", "noun-adjective-order", ("train", "test"), "nounadj"),
    ("relative_transformer", "scan", "scan/addprim_jump", ("train", "test"), "scan"),
    ("dangle", "nounadj", "noun-adjective-order", ("train", "test"), "mt"),  # no recipe of its own for it
    ("syntactic_attention", "scan", "scan/length", ("train", "test"), "scan"),
])
def test_a_run_trains_with_the_recipe_of_the_number_it_reproduces(name, family, benchmark, splits, expected):
    entry = load_entry(name)
    assert default_recipe(entry.recipes, entry.reported, family, benchmark, splits) == expected


def test_a_reported_benchmark_names_a_family_a_benchmark_or_one_of_its_splits():
    assert reported_on("nounadj", "nounadj", "noun-adjective-order")
    assert reported_on("scan/simple", "scan", "scan/simple") and reported_on("scan/simple", "scan", "simple")
    assert not reported_on("scan/simple", "scan", "scan/addprim_jump")
    assert reported_on("react/cg_test", "react", "react", ["train", "cg_test"])
    assert not reported_on("react/cg_test", "react", "react", ["train", "test"])
    assert not reported_on("cognition/cg_test", "react", "react", ["cg_test"])


def test_a_reported_number_naming_a_recipe_the_entry_lacks_is_an_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(load_entry("sag").path.read_text().replace('recipe = "scan"', 'recipe = "scan_000"', 1))
    with pytest.raises(BenchbuildError, match=r"\[\[reported\]\] #1 recipe 'scan_000' is not a recipe of this entry"):
        load_entry(path)


@pytest.mark.parametrize("name", ["relative_transformer", "relative_universal_transformer"])
def test_003s_relative_variants_are_initialised_as_its_official_code_does(name):
    """RobertCsordas/transformer_generalization tasks/transformer_mixin.py: the relative variants take
    `embedding_init="xavier"` with no scaling and an identity positional function (so no input dropout, which the
    absolute variants' PositionalEncoding module applies)."""
    architecture = resolved_architecture(load_entry(name), "scan")
    assert (architecture["embedding_scale"], architecture["input_dropout"]) == ("xavier", 0.0)
    assert architecture["dropout"] == 0.1


@pytest.mark.parametrize("name", ["transformer_ped", "transformer_noscale", "universal_transformer"])
def test_003s_absolute_variants_keep_input_dropout(name):
    assert resolved_architecture(load_entry(name), "scan").get("input_dropout") is None  # = dropout, 0.1
