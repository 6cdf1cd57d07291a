"""The catalogue: every model of issue 3 has a valid entry; entries are validated; models build and register."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForSeq2SeqLM, BartConfig

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.recipe import resolve_recipe
from benchbuild.zoo import build_model, list_entries, load_entry, register

# What every recipe states itself rather than leaving to TrainingRecipe's defaults: the numbers papers fix (its
# budget and validation interval in steps or in epochs: `ONE_OF`).
STATED_RECIPE_KEYS = {"learning_rate", "schedule", "warmup_steps", "label_smoothing", "grad_clip",
                      "weight_decay"}
ONE_OF = ({"steps", "epochs"}, {"eval_every", "eval_every_epochs"}, {"batch_size", "batch_tokens"})
ISSUE_MODELS = {"transformer", "transformer_ped", "transformer_noscale", "universal_transformer",
                "relative_transformer", "relative_universal_transformer", "sag", "sag_conv", "sag_fixed_span",
                "sag_t5", "fusion", "dangle", "rdangle_shr", "rdangle_sep", "syntactic_attention", "lstm_attention",
                "hf"}
IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def test_catalogue_lists_every_model_of_the_issue_sorted_by_name():
    names = [entry.name for entry in list_entries()]
    assert names == sorted(names)
    assert set(names) == ISSUE_MODELS
    for entry in list_entries():
        assert entry.path.stem == entry.name and entry.summary and entry.paper


# MT recipes on words, as their paper's code: 002's scripts train on a word vocabulary (vocab_fra_MT_all.json).
WORD_LEVEL_MT = {("syntactic_attention", "mt")}


def test_every_entry_has_a_complete_scan_and_mt_recipe():
    for entry in list_entries():
        assert {"scan", "mt"} <= set(entry.recipes), entry.name
        for name, recipe in entry.recipes.items():
            words = name.startswith("scan") or (entry.name, name) in WORD_LEVEL_MT
            assert STATED_RECIPE_KEYS | (set() if words else {"bpe_vocab_size"}) <= set(recipe), (entry.name, name)
            assert all(keys & set(recipe) for keys in ONE_OF), (entry.name, name)
            assert resolve_recipe(entry.recipes, name).tokenizer_kind == ("word" if words else "bpe"), entry.name


def test_a_variant_merges_its_tables_over_its_parents_key_by_key():
    transformer, ped = load_entry("transformer"), load_entry("transformer_ped")
    assert ped.extends == "transformer"
    assert ped.architecture == {**transformer.architecture, "embedding_scale": "ped", "init": "003",
                                "attention_bias": False, "output_bias": True}  # 003's models as its code builds them
    assert ped.recipes == {name: recipe for name, recipe in transformer.recipes.items()
                           if name in ("scan", "mt", "nounadj")}  # another paper's recipe is not inherited
    sag, sag_t5 = load_entry("sag"), load_entry("sag_t5")
    parent = {key: value for key, value in transformer.recipes["scan"].items() if key != "steps"}
    assert sag.recipes["scan"] == {**parent, "epochs": 250, "learning_rate": 5e-4, "eval_every": 500,
                                   "grad_clip": 1.0,  # 000's budget in epochs replaces 003's steps; its clip 1.0
                                   "architecture": {"init": "fairseq"}}  # 000 §3: fairseq's initialisation
    assert sag_t5.recipes["scan"] == sag.recipes["scan"]
    assert transformer.recipes["scan_000"]["architecture"]["init"] == "fairseq"
    assert "architecture" not in transformer.recipes["scan"]  # 003's recipe keeps the zoo's draw
    mt = transformer.recipes["mt"]
    assert sag.recipes["mt"] == {**mt, "architecture": {**mt["architecture"], "decoder_self_attention_gate": 1.0}}
    assert sag_t5.architecture == {**sag.architecture, "position": "t5_bias", "span": 4}  # two levels deep
    assert load_entry("relative_universal_transformer").architecture == {
        **load_entry("relative_transformer").architecture, "universal": True}


def test_a_variant_keeps_its_own_name_paper_summary_and_reported_numbers():
    transformer, ped = load_entry("transformer"), load_entry("transformer_ped")
    assert (ped.name, ped.paper) == ("transformer_ped", "003") and ped.summary != transformer.summary
    # its own rows (003 Table 7 at cutoff 26, Table 1's Trafo row at every cutoff), not the parent's
    assert [row["table"] for row in ped.reported] == ["003 Table 7"] + ["003 Table 1"] * 11
    assert not {row["table"] for row in transformer.reported} & {"003 Table 1", "003 Table 7"}


def test_a_file_outside_the_catalogue_extends_an_entry_or_a_file_beside_it(tmp_path):
    (tmp_path / "wide.toml").write_text('name = "wide"\npaper = "-"\nsummary = "x"\nextends = "transformer"\n'
                                        '[architecture]\nd_model = 256\n[recipe.scan]\nmicro_batches = 2\n')
    (tmp_path / "wider.toml").write_text('name = "wider"\npaper = "-"\nsummary = "x"\nextends = "wide.toml"\n'
                                         '[architecture]\nd_ff = 1024\n')
    wider = load_entry(tmp_path / "wider.toml")
    assert (wider.architecture["d_model"], wider.architecture["d_ff"], wider.architecture["kind"]) == (256, 1024,
                                                                                                      "transformer")
    assert wider.recipes["scan"]["micro_batches"] == 2  # every TrainingRecipe field is a recipe key
    assert resolve_recipe(wider.recipes, "scan").micro_batches == 2


@pytest.mark.parametrize("extends, message", [
    ("gpt", "extends 'gpt', which is not a catalogue entry"),
    ("loop.toml", "extends 'loop.toml', which extends it back"),
])
def test_a_bad_parent_is_an_error_naming_it(tmp_path, extends, message):
    (tmp_path / "loop.toml").write_text(f'name = "loop"\npaper = "-"\nsummary = "x"\nextends = "{extends}"\n')
    with pytest.raises(BenchbuildError, match=message):
        load_entry(tmp_path / "loop.toml")


@pytest.mark.parametrize("edit, message", [
    (("steps = 50000", 'steps = "many"'), r"\[recipe.scan\] steps must be an integer, not 'many'"),
    (("steps = 50000", "steps = 0"), r"\[recipe.scan\]: recipe key 'steps' must be positive"),
    (('schedule = "constant"', 'schedule = "cosine"'), r"\[recipe.scan\] schedule is 'cosine': choose one of"),
    (("value = 3.4", 'value = "3.4"'), r"\[\[reported\]\] #1 value must be a number"),
    (('table = "000 Table 3"', "table = 3"), r"\[\[reported\]\] #1 table must be a string"),
    (('paper = "000, 003"', "paper = 0"), "paper must be a string"),
    (('bleu = "fairseq_tokenized"', 'bleu = "multi-bleu.perl"'),
     r"\[\[reported\]\] #\d+ bleu 'multi-bleu.perl' is not a way benchbuild knows \(one of: fairseq_tokenized, "),
    (("value = 3.4\n", 'value = 3.4\nbleu = "fairseq_tokenized"\n'),
     r"\[\[reported\]\] #1 bleu says how a paper computed BLEU: it belongs to a metric \"bleu\" row, not to metric "
     r"'exact_match'"),
    (("[recipe.mt]", "[recipe.cjk]"), r"unknown key 'cjk' in \[recipe\] \(allowed: mt, mt_001, nounadj, scan, "
                                      r"scan_000\)"),
])
def test_wrong_values_are_errors_naming_the_key(tmp_path, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(load_entry("transformer").path.read_text().replace(*edit, 1))
    with pytest.raises(BenchbuildError, match=message) as error:
        load_entry(path)
    assert str(error.value).startswith(f"{path}: ")


def test_paper_entries_carry_the_numbers_their_paper_reports():
    transformer = load_entry("transformer")
    jump = [r for r in transformer.reported if r["benchmark"] == "scan/addprim_jump"]
    assert jump == [{"benchmark": "scan/addprim_jump", "recipe": "scan_000", "metric": "exact_match", "value": 3.4,
                     "table": "000 Table 3", "statistic": "mean", "runs": 3, "spread": "se", "spread_value": 2.0,
                     "selection": jump[0]["selection"]}]  # 000 Table 3: 3.4 ± 2.0, 1 SEM over seeds {0, 1, 2}
    assert "picked on the test set" in jump[0]["selection"]  # the best of its grid's 3-seed means
    assert {r["value"] for r in load_entry("sag_t5").reported if r["benchmark"] == "scan/addprim_jump"} == {43.0}
    for entry in list_entries():
        if entry.name != "hf":
            assert entry.reported, entry.name


def test_every_reported_bleu_says_how_its_paper_computed_it():
    from benchbuild.bleu_ways import REPORTED_WAYS

    ways = {(entry.name, row["benchmark"]): row.get("bleu") for entry in list_entries() for row in entry.reported
            if row["metric"] == "bleu"}
    assert len(ways) == 20 and set(ways.values()) <= set(REPORTED_WAYS)
    assert ways[("syntactic_attention", "lake_baroni_en_fr/syntactic_attention_mt")] == "nltk_multi_reference"  # 36.8
    assert ways[("lstm_attention", "lake_baroni_en_fr")] == "unstated"  # Lake & Baroni's 28.6, as 002 quotes it
    assert {ways[(name, "iwslt14_de_en")] for name in ("transformer", "sag", "sag_conv", "sag_fixed_span",
                                                       "sag_t5")} == {"fairseq_tokenized"}
    assert {way for (name, benchmark), way in ways.items() if benchmark == "react/cg_test"} == {"sacrebleu_none"}
    assert ways[("dangle", "cognition/cg_test")] == "sacrebleu_characters"
    assert ways[("fusion", "cognition/cg_test")] == "sacrebleu_zh_unspaced"


def test_load_entry_reads_a_toml_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(load_entry("transformer").path.read_text().replace('name = "transformer"', 'name = "mine"'))
    assert load_entry(path).name == "mine"
    assert load_entry(str(path)).architecture["position"] == "absolute"


@pytest.mark.parametrize("edit, key", [
    (("[architecture]", "colour = 1\n[architecture]"), "colour"),
    (("kind = \"transformer\"", "kind = \"transformer\"\nrotary = true"), "rotary"),
    (("steps = 50000", "steps = 50000\nmax_epochs = 3"), "max_epochs"),
    (("table = \"000 Table 3\"", "table = \"000 Table 3\"\nseeds = 5"), "seeds"),
])
def test_unknown_keys_are_an_error_naming_the_key(tmp_path, edit, key):
    path = tmp_path / "bad.toml"
    path.write_text(load_entry("transformer").path.read_text().replace(*edit, 1))
    with pytest.raises(BenchbuildError, match=f"unknown key '{key}'") as error:
        load_entry(path)
    assert str(path) in str(error.value)


def test_unknown_model_name_lists_the_catalogue():
    with pytest.raises(BenchbuildError, match="unknown model 'gpt': \\(catalogue: .*transformer"):
        load_entry("gpt")
    with pytest.raises(BenchbuildError, match="unknown model 'transfomer': did you mean 'transformer'\\?"):
        load_entry("transfomer")


def test_unknown_override_is_an_error_naming_it():
    with pytest.raises(BenchbuildError, match="unknown key 'layers'"):
        build_model(load_entry("transformer"), vocab_size=10, overrides={"layers": 2}, **IDS)


def test_build_model_uses_the_vocabulary_and_start_token():
    model = build_model(load_entry("transformer"), vocab_size=17, overrides={"d_model": 16, "num_heads": 2},
                        pad_token_id=3, bos_token_id=4, eos_token_id=5)
    assert model.config.vocab_size == 17 and model.config.decoder_start_token_id == 4
    assert model.generation_config.decoder_start_token_id == 4 and model.generation_config.eos_token_id == 5
    assert model.config.is_encoder_decoder and model.config.use_cache is True  # the Transformer decodes incrementally
    assert model.config.num_hidden_layers == 3


def test_register_is_idempotent_and_maps_every_zoo_model_type():
    register()
    register()
    for kind in ("transformer", "dangle", "syntactic_attention", "lstm_attention"):
        assert type(AutoConfig.for_model(f"benchbuild_{kind}")).model_type == f"benchbuild_{kind}"


def test_hf_entry_builds_from_a_local_config_folder(tmp_path):
    BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32).save_pretrained(tmp_path / "cfg")
    entry_path = tmp_path / "local.toml"
    entry_path.write_text(load_entry("hf").path.read_text().split("[recipe.scan]")[0].split("[architecture]")[0]
                          + '[architecture]\nkind = "hf"\npath = "cfg"\n')
    model = build_model(load_entry(entry_path), vocab_size=12, **IDS)
    assert model.get_input_embeddings().weight.shape[0] == 12 and model.config.d_model == 16


def test_hf_entry_loads_a_local_checkpoint_and_resizes_it(tmp_path):
    torch.manual_seed(0)
    source = AutoModelForSeq2SeqLM.from_config(BartConfig(
        vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32))
    source.save_pretrained(tmp_path / "ckpt")
    entry_path = tmp_path / "local.toml"
    entry_path.write_text('name = "local"\npaper = "-"\nsummary = "x"\n[architecture]\nkind = "hf"\n'
                          f'path = "{tmp_path / "ckpt"}"\n')
    model = build_model(load_entry(entry_path), vocab_size=20, **IDS)
    assert model.get_input_embeddings().weight.shape[0] == 20
    torch.testing.assert_close(model.get_input_embeddings().weight[:20], source.get_input_embeddings().weight[:20])


def test_hf_entry_needs_path_or_model_type(tmp_path):
    entry_path = tmp_path / "bad.toml"
    entry_path.write_text('name = "bad"\npaper = "-"\nsummary = "x"\n[architecture]\nkind = "hf"\n')
    with pytest.raises(BenchbuildError, match="exactly one of 'path' or 'model_type'"):
        load_entry(entry_path)


def test_hf_entry_refuses_a_checkpoint_with_pickled_weights_only(tmp_path):
    BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32).save_pretrained(tmp_path / "old")
    torch.save({}, tmp_path / "old" / "pytorch_model.bin")
    entry_path = tmp_path / "old.toml"
    entry_path.write_text('name = "old"\npaper = "-"\nsummary = "x"\n[architecture]\nkind = "hf"\npath = "old"\n')
    with pytest.raises(BenchbuildError, match="safetensors checkpoints only"):
        build_model(load_entry(entry_path), vocab_size=20, **IDS)


def test_mt_runs_of_transformer_train_the_iwslt_architecture_of_000_appendix_a2():
    from benchbuild.zoo.catalogue import resolved_architecture

    transformer = load_entry("transformer")
    mt = resolved_architecture(transformer, "mt")
    assert {key: mt[key] for key in ("d_model", "d_ff", "num_heads", "encoder_layers", "decoder_layers", "dropout")} \
        == {"d_model": 512, "d_ff": 1024, "num_heads": 4, "encoder_layers": 6, "decoder_layers": 6, "dropout": 0.3}
    assert resolved_architecture(transformer, "scan") == transformer.architecture  # 003 Table 4's 128-dim model
    sag = resolved_architecture(load_entry("sag"), "mt")  # the variant's own keys stay, the MT sizes go over them
    assert (sag["encoder_layers"], sag["d_model"], sag["encoder_self_attention_gate"]) == (6, 512, -1.0)


def test_a_variant_merges_its_recipe_architecture_key_by_key(tmp_path):
    from benchbuild.zoo.catalogue import resolved_architecture

    (tmp_path / "light.toml").write_text('name = "light"\npaper = "-"\nsummary = "x"\nextends = "transformer"\n'
                                         '[recipe.mt.architecture]\ndropout = 0.1\n')
    mt = resolved_architecture(load_entry(tmp_path / "light.toml"), "mt")
    assert (mt["d_model"], mt["encoder_layers"], mt["dropout"]) == (512, 6, 0.1)


def test_an_unknown_key_in_a_recipe_architecture_is_an_error_naming_it(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(load_entry("transformer").path.read_text().replace("d_ff = 1024\n", "d_ff = 1024\ncolour = 1\n", 1))
    with pytest.raises(BenchbuildError, match=r"\[recipe.mt.architecture\].*unknown key 'colour'"):
        load_entry(path)


def test_a_budget_given_in_epochs_replaces_one_in_steps_and_back():
    """A table over another that gives a budget (or a validation interval) one way drops the other way: `--set
    steps=500` on 000's recipe of 250 epochs trains 500 steps; a variant's `epochs` replaces its parent's `steps`."""
    sag = load_entry("sag")
    assert resolve_recipe(sag.recipes, "scan").steps is None and resolve_recipe(sag.recipes, "scan").epochs == 250
    stepped = resolve_recipe(sag.recipes, "scan", {"steps": 500})
    assert (stepped.steps, stepped.epochs) == (500, None)
    syntactic = load_entry("syntactic_attention")
    every = resolve_recipe(syntactic.recipes, "scan", {"eval_every": 100})
    assert (every.eval_every, every.eval_every_epochs) == (100, None)
    both = resolve_recipe(sag.recipes, "scan", {"steps": 500, "epochs": 2})
    assert (both.steps, both.epochs) == (500, 2)
