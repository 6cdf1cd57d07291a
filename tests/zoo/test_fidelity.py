"""Fidelity: every SCAN recipe of the 000/002/003 entries lists its sources and known differences from the paper
(`[fidelity.<recipe>]`), checked like the rest of an entry; reported numbers say which statistic they are; the
Fidelity section of docs/catalogue.md names every difference the catalogue lists."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.papers import cited_ids, statistic_in_words
from benchbuild.zoo import build_model, list_entries, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

CATALOGUE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "catalogue.md"
# The SCAN entries of papers 000, 002 and 003 (issue: every one of their SCAN recipes states its fidelity).
SCAN_ENTRIES = ("transformer", "transformer_ped", "transformer_noscale", "relative_transformer",
                "universal_transformer", "relative_universal_transformer", "sag", "sag_conv", "sag_fixed_span",
                "sag_t5", "syntactic_attention", "lstm_attention")
ENTRY = """name = "mine"
paper = "003"
summary = "x"
extends = "transformer"
"""
ROW = """
[[fidelity.scan.differences]]
what = "width"
paper = "128"
ours = "256"
why = "a test"
"""
TABLE = """
[fidelity.scan]
sources = ["003 Table 4"]
""" + ROW


def scan_tables():
    """(entry, recipe name, fidelity table) of every SCAN recipe of the 000/002/003 entries."""
    for name in SCAN_ENTRIES:
        entry = load_entry(name)
        for family in sorted(entry.recipes):
            if family.startswith("scan"):
                yield entry, family, entry.fidelity.get(family)


def write_entry(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def test_every_scan_recipe_of_the_papers_entries_lists_its_sources_and_differences():
    for entry, family, table in scan_tables():
        assert table is not None, (entry.name, family)
        assert table["sources"] and all(source.strip() for source in table["sources"]), (entry.name, family)
        assert table["differences"], (entry.name, family)  # each of them still differs somewhere
        for row in table["differences"]:
            assert set(row) == {"what", "paper", "ours", "why"} and all(text.strip() for text in row.values())
    assert {(entry.name, family) for entry, family, _ in scan_tables()} >= {("transformer", "scan"),
                                                                          ("transformer", "scan_000"),
                                                                          ("syntactic_attention", "scan")}


def test_the_known_differences_of_000_include_the_unnamed_grid_point_and_the_missing_code():
    for name, family in [("transformer", "scan_000"), ("sag", "scan"), ("sag_conv", "scan"),
                         ("sag_fixed_span", "scan"), ("sag_t5", "scan")]:
        rows = {row["what"]: row for row in load_entry(name).fidelity[family]["differences"]}
        assert "does not say which configuration won" in rows["grid point"]["paper"], name
        assert "pipelines/table3_000.toml" in rows["grid point"]["ours"], name
        assert rows["released code"]["why"] == "000 released no code", name
    interpretations = {"sag_conv": "convolution as self-attention", "sag_fixed_span": "fixed-span mask",
                       "sag_t5": "T5 relative bias"}
    for name, what in interpretations.items():
        assert what in {row["what"] for row in load_entry(name).fidelity["scan"]["differences"]}, name


def test_a_variant_inherits_a_recipes_table_with_the_recipe_and_replaces_it_whole():
    transformer, ped = load_entry("transformer"), load_entry("transformer_ped")
    relative, relative_universal = load_entry("relative_transformer"), load_entry("relative_universal_transformer")
    assert relative_universal.fidelity == relative.fidelity  # inherited with [recipe.scan]
    assert "scan_000" in transformer.fidelity and "scan_000" not in ped.fidelity  # another paper's recipe: not
    parent_rows = {row["what"] for row in transformer.fidelity["scan"]["differences"]}
    own_rows = {row["what"] for row in ped.fidelity["scan"]["differences"]}
    assert "embedding scaling on SCAN" in parent_rows - own_rows  # replaced whole, not merged
    assert "PED embedding initialisation" in own_rows - parent_rows


def test_an_entry_file_without_a_table_inherits_and_one_with_a_table_keeps_only_its_own(tmp_path):
    transformer = load_entry("transformer").fidelity
    inherited = load_entry(write_entry(tmp_path, ENTRY))
    # Every own-paper recipe's table comes with its recipe; another paper's (scan_000, mt_001) does not.
    assert inherited.fidelity == {family: transformer[family] for family in ("scan", "mt", "nounadj")}
    own = load_entry(write_entry(tmp_path, ENTRY + TABLE))
    assert own.fidelity["scan"] == {"sources": ["003 Table 4"], "differences": [
        {"what": "width", "paper": "128", "ours": "256", "why": "a test"}]}
    assert own.fidelity["mt"] == transformer["mt"]


@pytest.mark.parametrize("text, message", [
    (TABLE.replace("[fidelity.scan]", "[fidelity.scan]\ncolour = 1"), r"unknown key 'colour' in \[fidelity.scan\]"),
    (TABLE.replace('why = "a test"', 'why = "a test"\nreason = "b"'),
     r"unknown key 'reason' in \[\[fidelity.scan.differences\]\] #1"),
    (TABLE.replace('why = "a test"', ""), r"missing key 'why' in \[\[fidelity.scan.differences\]\] #1"),
    (TABLE.replace('ours = "256"', 'ours = " "'), r"\[\[fidelity.scan.differences\]\] #1 ours is empty"),
    (TABLE.replace('sources = ["003 Table 4"]', "sources = []"), r"\[fidelity.scan\] sources must name"),
    (TABLE.replace('sources = ["003 Table 4"]', "sources = [4]"), r"\[fidelity.scan\] sources item 1 must be a string"),
    (TABLE.replace("[fidelity.scan]", "[fidelity.scan_999]").replace("fidelity.scan.differences",
                                                                     "fidelity.scan_999.differences"),
     r"unknown key 'scan_999' in \[fidelity\]"),
    (TABLE + ROW, r"#2 what 'width' is listed twice in \[fidelity.scan\]"),
    (TABLE.replace("fidelity.scan", "fidelity.mt_001"),
     r"\[fidelity.mt_001\] is for recipe 'mt_001', which this entry does not have \(it has: mt, nounadj, scan\)"),
])
def test_a_bad_fidelity_table_is_an_error_naming_file_and_key(tmp_path, text, message):
    path = write_entry(tmp_path, ENTRY + text)
    with pytest.raises(BenchbuildError, match=message) as error:
        load_entry(path)
    assert str(error.value).startswith(f"{path}: ")


def test_reported_rows_say_the_statistic_their_paper_used():
    jump = next(row for row in load_entry("syntactic_attention").reported if row["benchmark"] == "scan/addprim_jump")
    assert (jump["statistic"], jump["runs"], jump["min_train_exact_match"], jump["spread"], jump["spread_value"]) == (
        "median", 25, 10.0, "std", 27.4)  # 002 Table 1 "91.0* ± 27.4", App. B: train accuracy <= 10% excluded
    assert statistic_in_words(jump) == ("median of 25 runs, runs with train exact match ≤ 10% excluded, "
                                        "± 27.4 (std)")
    for entry in list_entries():
        for row in entry.reported:
            table = row["table"]
            if table == "000 Table 3":  # mean of seeds {0, 1, 2}, ± 1 SEM
                assert (row["statistic"], row["runs"], row["spread"]) == ("mean", 3, "se"), entry.name
            if table == "003 Table 1":  # "Reported results are the median of 5 runs" (its caption), no spread
                assert (row["statistic"], row["runs"], row.get("spread", "none")) == ("median", 5, "none"), entry.name
            elif table.startswith("003 Table"):  # mean ± std of 5 seeds (003 §4)
                assert (row["statistic"], row["runs"], row["spread"]) == ("mean", 5, "std"), entry.name
            if table == "002 Table 1" and entry.name == "syntactic_attention" and row["benchmark"] != jump["benchmark"]:
                assert (row["statistic"], row["runs"], row["spread"]) == ("mean", 5, "std")
            assert "±" not in row.get("note", "") or "printed as" in row["note"], (entry.name, row)


def test_lstm_attentions_table_1_numbers_are_labelled_as_bastings_gru():
    entry = load_entry("lstm_attention")
    table_1 = [row for row in entry.reported if row["table"] == "002 Table 1"]
    assert len(table_1) == 4 and all("GRU + attn of Bastings et al. 2018" in row["model_reported"] for row in table_1)
    rows = {row["what"]: row for row in entry.fidelity["scan"]["differences"]}
    assert "GRU" in rows["reported model"]["paper"] and "LSTM" in rows["reported model"]["ours"]
    assert all(not row.get("model_reported") for other in list_entries() if other.name != "lstm_attention"
               for row in other.reported)


@pytest.mark.parametrize("edit, message", [
    ("runs = 0", "runs must be at least 1; got 0"),
    ('statistic = "single"\nruns = 3', "statistic 'single' is one run"),
    ("spread_value = 1.0", "spread_value needs a spread"),
    ('spread = "std"\nspread_value = -1.0', "must be a finite number, at least 0"),
    ("min_train_exact_match = 150.0", "min_train_exact_match is a percentage"),
    ('statistic = "mode"', "statistic is 'mode': choose one of mean, median, single"),
    ('spread = "variance"', "spread is 'variance': choose one of se, std, iqr, none"),
])
def test_a_reported_rows_statistic_is_checked(tmp_path, edit, message):
    row = ('\n[[reported]]\nbenchmark = "scan/simple"\nrecipe = "scan"\nmetric = "exact_match"\nvalue = 50.0\n'
           f'table = "003 Table 3"\n{edit}\n')
    with pytest.raises(BenchbuildError, match=re.escape(message)):
        load_entry(write_entry(tmp_path, ENTRY + row))


# 003 Table 5: parameters of its SCAN models (Standard 992k, Universal 333k, Relative Pos. 1.1M, Universal Relative
# Pos. 366k), rounded as printed: to thousands, 1.1M to hundreds of thousands.
TABLE_5 = {"transformer_noscale": (992_000, 1_000),
           "transformer_ped": (992_000, 1_000), "universal_transformer": (333_000, 1_000),
           "relative_transformer": (1_100_000, 100_000), "relative_universal_transformer": (366_000, 1_000)}
# 003's code at its SCAN size (d = 128, FFN 256, 3 + 3 layers; RobertCsordas/transformer_generalization), counted by
# hand from its layer shapes, embeddings and output bias left out: bias-free attention (data_to_kv 2d², data_to_q d²,
# multi_head_merge d²), relative self-attention adding pos_to_pq d² and two d-vectors, the FFN d·256 + 256 + 256·d + d,
# two layer norms (4d) per encoder layer and three (6d) per decoder layer. A universal model has one of each layer.
D, FFN = 128, 128 * 256 + 256 + 256 * 128 + 128
ENCODER, DECODER = 4 * D * D + FFN + 4 * D, 8 * D * D + FFN + 6 * D
RELATIVE_ENCODER, RELATIVE_DECODER = 5 * D * D + 2 * D + FFN + 4 * D, 9 * D * D + 2 * D + FFN + 6 * D
LAYERS_003 = {"transformer_noscale": 3 * (ENCODER + DECODER),
              "transformer_ped": 3 * (ENCODER + DECODER), "universal_transformer": ENCODER + DECODER,
              "relative_transformer": 3 * (RELATIVE_ENCODER + RELATIVE_DECODER),
              "relative_universal_transformer": RELATIVE_ENCODER + RELATIVE_DECODER}
# 003's embeddings: 13 + 2 source rows (<eos>, <sos>), 6 + 1 target rows, and the output bias over the 7 targets.
EMBEDDINGS_003 = (13 + 2) * D + (6 + 1) * D + (6 + 1)


@pytest.mark.parametrize("name", TABLE_5)
def test_003s_scan_models_have_its_codes_exact_parameter_count_but_for_the_vocabulary(name):
    """003's models build its code's layers exactly (no attention biases, the output bias): our count minus our one
    shared embedding table and output bias equals the hand count of 003's code, which with 003's embeddings rounds to
    Table 5's printed number. The one listed difference left is 'vocabulary and embeddings'."""
    entry = load_entry(name)
    vocabulary = 4 + 13 + 6  # ours: <pad> <s> </s> <unk>, SCAN's 13 command words and 6 actions
    model = build_model(dataclasses.replace(entry, architecture=resolved_architecture(entry, "scan")),
                        vocab_size=vocabulary, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    ours = sum(parameter.numel() for parameter in model.parameters())
    assert ours - vocabulary * D - vocabulary == LAYERS_003[name]
    printed, unit = TABLE_5[name]
    assert round((LAYERS_003[name] + EMBEDDINGS_003) / unit) * unit == printed
    assert not any(re.search(r"\.(query|key|value|out)\.bias$", key) for key, _ in model.named_parameters())


def test_the_whole_epochs_of_002s_loop_are_the_numbers_its_fidelity_row_gives(shared_data):
    """train_test.py trains on int(0.8 n) rows and finishes the epoch in which iteration 200,000 falls."""
    rows = len((shared_data / "scan" / "add_prim_split" / "tasks_train_addprim_jump.txt").read_text().splitlines())
    trained_on = int(0.8 * rows)
    updates = math.ceil(200_000 / trained_on) * trained_on
    row = next(row for row in load_entry("syntactic_attention").fidelity["scan"]["differences"]
               if row["what"] == "whole epochs")
    assert f"{trained_on:,} rows" in row["paper"] and f"{math.ceil(200_000 / trained_on)} epochs" in row["paper"]
    assert f"{updates:,} updates" in row["paper"]


def fidelity_section() -> str:
    """The Fidelity section of docs/catalogue.md, from its heading to the next heading or the end, in lower case."""
    text = CATALOGUE_PAGE.read_text(encoding="utf-8")
    start = re.search(r"^#+ Fidelity", text, re.MULTILINE).start()
    body = text.index("\n", start)
    following = re.search(r"^#+ ", text[body:], re.MULTILINE)
    end = body + following.start() if following else len(text)
    return " ".join(text[start:end].split()).lower()


def test_the_fidelity_section_names_every_difference_of_the_scan_entries():
    section = fidelity_section()
    assert "benchbuild zoo --model name" in section
    missing = {(entry.name, family, row["what"]) for entry, family, table in scan_tables()
               for row in table["differences"] if row["what"].lower() not in section}
    assert not missing, f"the Fidelity section of docs/catalogue.md does not name: {sorted(missing)}"
    for entry, _, _ in scan_tables():
        assert set(cited_ids(entry.paper)) & {"000", "002", "003"}, entry.name


def test_every_scan_recipe_of_every_entry_names_its_sources():
    """`benchbuild zoo --model M` has something to say for every SCAN recipe: a paper's, or why there is none (a model
    no paper trains on SCAN: benchbuild's recipe, and whose it copies)."""
    missing = [(entry.name, recipe) for entry in list_entries() for recipe in entry.recipes
               if recipe.startswith("scan") and not entry.fidelity.get(recipe, {}).get("sources")]
    assert missing == []
