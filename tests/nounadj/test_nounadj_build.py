"""The builder on a small corpus whose every line has a known place: rules, counts, schema, inputs, determinism."""

from __future__ import annotations

from dataclasses import replace

import datasets
import pytest

from benchbuild.benchmark import load_splits
from benchbuild.nounadj.build import build_noun_adj
from benchbuild.nounadj.parameters import NounAdjParameters


@pytest.fixture(scope="module")
def parameters(small_corpus_files) -> NounAdjParameters:
    en, fr = small_corpus_files
    return NounAdjParameters(en=en, fr=fr, valid_fraction=0.5, seed=3)


@pytest.fixture(scope="module")
def built(parameters, english_parser, french):
    return build_noun_adj(parameters, parser=english_parser, french=french)


def lines_of(dataset: datasets.Dataset) -> list[int]:
    return [int(row_id.split("-")[1]) for row_id in dataset["id"]]


def expected_lines(small_corpus, place: str) -> list[int]:
    return [number for number, (_, _, where) in enumerate(small_corpus, start=1) if where == place]


def test_train_and_validation_hold_exactly_the_train_like_lines(built, small_corpus):
    eligible = sorted(lines_of(built.splits["train"]) + lines_of(built.splits["validation"]))
    assert eligible == expected_lines(small_corpus, "train")
    assert len(built.splits["validation"]) == round(0.5 * len(eligible))


def test_test_rows_are_the_swapped_pairings_with_their_french_facts(built, small_corpus):
    test = built.splits["test"]
    assert lines_of(test) == expected_lines(small_corpus, "test")
    facts = [(r["noun"], r["adjective"], r["fr_noun"], r["fr_adjective"], r["order"]) for r in test]
    assert facts == [
        ("solution", "new", "solution", "nouveau", "forward"),
        ("decision", "specific", "décision", "spécifique", "backward"),
        ("solution", "new", "solution", "nouveau", "forward"),  # "new and good solutions": the first pairing
        ("institution", "big", "institution", "grand", "forward"),  # beside "specific response" (own pairing)
        ("solution", "first", "solution", "premier", "forward"),
    ]
    assert test["reference_match"] == [True, True, True, True, False]  # "solution initiale" lacks premier
    assert test[0]["source"] == small_corpus[1][0] and test[0]["target"] == small_corpus[1][1]


def test_card_counts_every_rule(built):
    counts = built.card.counts
    assert counts["lines read"] == 15
    assert counts["pairs dropped: empty or whitespace-only side"] == 1
    assert counts["sentences sent to the parser (hold a target-noun form)"] == 13
    assert counts["train/validation: not parsed (no target-noun form)"] == 1
    assert counts["train/validation: parsed, every target noun bare or with its own adjective"] == 5
    assert counts["neither split: a target noun has an adjective outside the table"] == 1
    assert counts["neither split: a target noun has a table adjective outside its pairing and the other column"] == 2
    assert counts["test: sentences with a held-out pairing"] == 5
    assert counts["test: sentences with more than one held-out pairing (the row names the first)"] == 1
    assert counts["test: references holding both French lemmas"] == 4
    assert counts["test: references with the French adjective on the expected side"] == 4


def test_all_splits_share_one_schema_with_nulls_outside_test(built):
    features = {name: dataset.features for name, dataset in built.splits.items()}
    assert features["train"] == features["validation"] == features["test"]
    row = built.splits["train"][0]
    assert row["noun"] is None and row["order"] is None and row["reference_match"] is None


def test_require_reference_match_drops_unmatched_test_rows(parameters, english_parser, french):
    benchmark = build_noun_adj(replace(parameters, require_reference_match=True), parser=english_parser,
                               french=french)
    assert lines_of(benchmark.splits["test"]) == [2, 4, 10, 11]
    assert benchmark.card.counts["test: rows dropped by --require-reference-match"] == 1


def test_same_inputs_and_seed_give_identical_splits_whatever_the_batch_size(built, parameters, tmp_path,
                                                                          english_parser, french):
    from benchbuild.nounadj.parsers import SpacyParser

    small_batches = SpacyParser(nlp=english_parser.nlp, batch_size=2)
    again = build_noun_adj(parameters, workdir=tmp_path, parser=small_batches, french=french)
    assert {n: s.fingerprint for n, s in again.info.splits.items()} == {n: s.fingerprint for n, s in built.info.splits.items()}


def test_tsv_and_local_hf_inputs_give_the_same_rows(built, parameters, small_corpus, tmp_path, english_parser,
                                                    french):
    tsv = tmp_path / "small.tsv"
    tsv.write_text("".join(f"{en}\t{fr}\n" for en, fr, _ in small_corpus), encoding="utf-8")
    folder = tmp_path / "hf"
    datasets.Dataset.from_dict({"translation": [{"en": en, "fr": fr} for en, fr, _ in small_corpus]}).save_to_disk(str(folder))
    for corpus in ({"tsv": tsv}, {"hf": str(folder)}):
        benchmark = build_noun_adj(replace(parameters, en=None, fr=None, **corpus), parser=english_parser,
                                   french=french)
        assert benchmark.info.splits["test"].fingerprint == built.info.splits["test"].fingerprint
        assert benchmark.info.splits["train"].fingerprint == built.info.splits["train"].fingerprint


def test_saved_benchmark_loads_and_its_card_states_rules_and_pairs(built, tmp_path):
    out = built.save(tmp_path / "na")
    loaded = datasets.load_from_disk(str(out))
    assert {name: len(split) for name, split in loaded.items()} == {name: len(split) for name, split in built.splits.items()}
    card = (out / "README.md").read_text(encoding="utf-8")
    for text in ("| backward | specific | response | spécifique | réponse |", "**test**:", "**neither split**:",
                 "| solution | new | forward | 2 |", "`reference_match`", "| `valid_fraction` | `0.5` |"):
        assert text in card
    assert load_splits(out)["test"]["order"] == built.splits["test"]["order"]


@pytest.mark.parametrize("format", ["parquet", "jsonl"])
def test_other_formats_load_back(built, tmp_path, format):
    out = built.save(tmp_path / format, format=format)
    assert load_splits(out)["test"]["id"] == built.splits["test"]["id"]
