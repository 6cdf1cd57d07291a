"""`benchbuild build-noun-adj` on the head of the real Europarl sample gives a non-empty test split whose every row
is a held-out pairing: the noun of one column with an adjective of the other, with the pairs file's French lemmas and
order, a pairing that no train or validation sentence holds.

Table 2's pairs have no held-out pairing in the whole 3,000-line sample (test_nounadj_cli.py), so this build uses a
pairs file of words the sample holds: `plenary session` (French `session plénière`, adjective after the noun) and
`first time` (`première fois`, before). Line 22, "this year's first part-session", puts *session* with the other
column's *first*: the first 22 lines are the shortest head with a test row (21 lines are refused as an empty test
split)."""

from __future__ import annotations

from pathlib import Path

import pytest
from commands import benchbuild

from benchbuild.benchmark import load_splits
from benchbuild.nounadj.amod import noun_occurrences
from benchbuild.nounadj.pairs import NounAdjectivePair, PairsConfig, load_pairs

pytestmark = pytest.mark.shared

HEAD_LINES = 22
PAIRS = """\
[[backward]]
adjective = "plenary"
noun = "session"
fr_adjective = "plénier"
fr_noun = "session"

[[forward]]
adjective = "first"
noun = "time"
fr_adjective = "premier"
fr_noun = "fois"
"""


def _head(source: Path, out: Path, lines: int) -> Path:
    with open(source, encoding="utf-8") as lines_in:
        out.write_text("".join(next(lines_in) for _ in range(lines)), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def sample_head(shared_data, tmp_path_factory) -> Path:
    """The benchmark built from the first `HEAD_LINES` lines of the Europarl sample with `PAIRS`."""
    folder = tmp_path_factory.mktemp("europarl-head")
    sample = shared_data / "europarl-sample"
    english = _head(sample / "europarl-v7.fr-en.en", folder / "head.en", HEAD_LINES)
    french = _head(sample / "europarl-v7.fr-en.fr", folder / "head.fr", HEAD_LINES)
    (folder / "pairs.toml").write_text(PAIRS, encoding="utf-8")
    done = benchbuild("build-noun-adj", "--en", english, "--fr", french, "--pairs", folder / "pairs.toml",
                      "--out", folder / "out")
    assert done.returncode == 0, done.stderr
    return folder


def _held_out(pairs: PairsConfig) -> dict[tuple[str, str], NounAdjectivePair]:
    """(noun, adjective) of every held-out pairing → the pair whose adjective it borrows: a noun of one column with
    an adjective of the other."""
    return {(noun_pair.noun, adjective_pair.adjective): adjective_pair for noun_pair in pairs.pairs
            for adjective_pair in pairs.pairs if adjective_pair.order != noun_pair.order}


def test_the_head_gives_a_non_empty_test_split_of_line_22(sample_head):
    test = load_splits(sample_head / "out")["test"]
    assert test["id"] == [f"nounadj-{HEAD_LINES}"]
    assert "first part-session" in test[0]["source"] and "la première session" in test[0]["target"]


def test_every_test_row_is_a_held_out_pairing_with_the_pairs_files_french_facts(sample_head):
    pairs = load_pairs(sample_head / "pairs.toml")
    held_out = _held_out(pairs)
    by_noun = pairs.by_noun()
    test = load_splits(sample_head / "out")["test"]
    assert len(test) > 0
    for row in test:
        adjective_pair = held_out[(row["noun"], row["adjective"])]  # a KeyError: not a held-out pairing
        assert row["fr_noun"] == by_noun[row["noun"]].fr_noun
        assert (row["fr_adjective"], row["order"]) == (adjective_pair.fr_adjective, adjective_pair.order)
        assert row["noun"] in row["source"] and row["adjective"] in row["source"]
    assert test["reference_match"] == [True]  # "la première session" holds both French lemmas


def test_no_train_or_validation_sentence_holds_a_held_out_pairing(sample_head, english_parser):
    pairs = load_pairs(sample_head / "pairs.toml")
    by_noun = pairs.by_noun()
    splits = load_splits(sample_head / "out")
    rows = list(splits["train"]) + list(splits["validation"])
    assert len(rows) == HEAD_LINES - 1 and not {row["id"] for row in rows} & set(splits["test"]["id"])
    occurrences = [occurrence for words, _ in english_parser.parse((row["source"], None) for row in rows)
                   for occurrence in noun_occurrences(words, pairs.noun_lemmas())]
    assert {occurrence.noun for occurrence in occurrences} == {"session", "time"}  # train holds the nouns...
    for occurrence in occurrences:  # ...bare or with their own adjective only, so never in a held-out pairing
        assert set(occurrence.adjectives) <= {by_noun[occurrence.noun].adjective}, occurrence
