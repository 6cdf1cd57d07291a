"""`benchbuild zoo --model M`, run as a user runs it, prints per recipe the statistic of each reported number, its
sources and its known differences from the paper; `benchbuild zoo` marks the entries that have differences."""

from __future__ import annotations

import functools

from commands import benchbuild_in_process as benchbuild

from benchbuild.papers import known_differences, statistic_in_words
from benchbuild.zoo import list_entries, load_entry


@functools.cache  # one process per distinct command: each start imports torch
def zoo(*arguments: str) -> str:
    """`benchbuild zoo ARGUMENTS`' output, checked: exit 0, nothing on stderr, lines within 80 columns (rich's width
    without a terminal); returned with its whitespace runs joined, so wrapped text reads as one line."""
    done = benchbuild("zoo", *arguments)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert max(map(len, done.stdout.splitlines())) <= 80
    return " ".join(done.stdout.split())


def recipe_block(text: str, family: str) -> str:
    """The part of `zoo --model`'s output about `[recipe.FAMILY]`, up to the next recipe."""
    return text.split(f"[recipe.{family}] ")[1].split(" [recipe.")[0]


def test_zoo_model_prints_each_recipes_sources_and_every_known_difference():
    entry = load_entry("sag_t5")
    block = recipe_block(zoo("--model", "sag_t5"), "scan")
    table = entry.fidelity["scan"]
    assert f"known differences from the paper: {len(table['differences'])}" in block
    sources = block.split("sources: ")[1].split(" known differences")[0]
    assert sources == " ".join(f"- {source}" for source in table["sources"])
    for row in table["differences"]:
        assert f"- {row['what']} paper: {row['paper']} ours: {row['ours']} why: {row['why']}" in block, row["what"]
    assert "T5 relative bias" in block and "000 released no code" in block


def test_zoo_model_prints_the_statistic_of_each_reported_number():
    text = zoo("--model", "syntactic_attention")
    scan = recipe_block(text, "scan")
    assert ("scan/addprim_jump exact_match 91 (002 Table 1), median of 25 runs, runs with train exact match ≤ 10% "
            "excluded, ± 27.4 (std)") in scan
    assert ("scan/length exact_match 15.2 (002 Table 1), mean of 5 runs, runs with train exact match ≤ 10% excluded, "
            "± 0.7 (std)") in scan  # 002 App. B says its exclusion of all its evaluation runs
    assert "- whole epochs paper: train_test.py finishes the epoch" in scan
    lstm = recipe_block(zoo("--model", "lstm_attention"), "scan")
    assert ("scan/addprim_jump exact_match 12.5 (002 Table 1), mean (runs not recorded), ± 6.6 (std); the paper's "
            "number is for GRU + attn of Bastings et al. 2018") in lstm


def test_zoo_model_says_when_a_recipe_has_no_fidelity_table():
    mt = recipe_block(zoo("--model", "lstm_attention"), "mt")
    assert "sources: none listed known differences from the paper: none listed" in mt


def test_zoo_lists_how_many_known_differences_each_entry_has():
    text = zoo()
    for entry in list_entries():
        block = text.split(f" {entry.name} {entry.architecture['kind']} · paper")[1].split(entry.summary)[0]
        count = known_differences(entry)
        if count:
            assert f"· {count} known difference{'s' * (count != 1)} (zoo --model {entry.name})" in block, entry.name
        else:
            assert "known difference" not in block, entry.name
    transformer = load_entry("transformer")
    assert known_differences(transformer) == sum(
        len(transformer.fidelity[family]["differences"]) for family in ("scan", "scan_000", "mt", "nounadj", "mt_001"))


def test_statistic_in_words_reads_every_field():
    assert statistic_in_words({"statistic": "single"}) == "a single run"
    assert statistic_in_words({"statistic": "mean", "runs": 1}) == "mean of 1 run"
    assert statistic_in_words({"runs": 3, "spread": "se", "spread_value": 2.0}) == "mean of 3 runs, ± 2 (s.e.)"
    assert statistic_in_words({"statistic": "median", "spread": "iqr"}) == "median (runs not recorded), spread: IQR"
