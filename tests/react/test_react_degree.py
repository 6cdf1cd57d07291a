"""Stages 1–4 of ReaCT: normalization, OOV filter, n-gram dictionary and compositional degree (001 §4, Table 1)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchbuild.errors import BenchbuildError
from benchbuild.react.degree import DegreeParameters, DegreeScorer
from benchbuild.react.hashset import HashSet64
from benchbuild.react.normalize import Normalizer


def plain_dictionary(lines: list[str], min_count: int, max_order: int | None) -> set[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for line in lines:
        tokens = tuple(line.split())
        for start in range(len(tokens)):
            for end in range(start + 1, len(tokens) + 1):
                if max_order is None or end - start <= max_order:
                    counts[tokens[start:end]] += 1
    return {ngram for ngram, count in counts.items() if count >= min_count}


def plain_degree(line: str, dictionary: set[tuple[str, ...]]) -> float:
    """The definition, as a dynamic program over every split point: fewest pieces / tokens."""
    tokens = tuple(line.split())
    fewest = [0] + [math.inf] * len(tokens)
    for end in range(1, len(tokens) + 1):
        for start in range(end):
            piece = tokens[start:end]
            if end - start == 1 or piece in dictionary:
                fewest[end] = min(fewest[end], fewest[start] + 1)
    return fewest[-1] / len(tokens)


def test_table1_first_example_is_two_ngrams_over_eight_tokens():
    train = ["but i said no .", "yes , but why", "but not now", "and but",
             "so what can we do about this ?", "what can we do about this ? nothing",
             "well what can we do about this ?",
             "what can we do about this ?"]
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=1, min_ngram_count=4))
    scores = scorer.score(["but what can we do about this ?"])
    assert scores.degree[0] == pytest.approx(2 / 8) == 0.25


def test_paper_x1_to_x5_example_uses_the_minimum_not_the_greedy_first_match():
    # dictionary (x1, x2, x3x4, x5, x1x2, x3x4x5): min set (x1x2, x3x4x5) → 2/5
    train = ["x1 x2 x3 x4 x5"] * 4 + ["x3 x4"] * 4 + ["x1", "x2", "x5"] * 4
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=1, min_ngram_count=4, max_ngram=3))
    assert scorer.score(["x1 x2 x3 x4 x5"]).degree[0] == pytest.approx(0.4)


def test_token_outside_the_dictionary_is_one_piece_of_its_own():
    train = ["a b c"] * 4 + ["rare"] * 3
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=3, min_ngram_count=4))
    scores = scorer.score(["a b c rare a b c"])
    assert scores.in_vocabulary[0]
    assert scores.degree[0] == pytest.approx(3 / 7)


def test_oov_filter_drops_lines_with_a_word_seen_fewer_than_min_word_count_times():
    train = ["a b"] * 3 + ["c"] * 2
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=3, min_ngram_count=1))
    scores = scorer.score(["a b", "a c", "a unseen", ""])
    assert scores.in_vocabulary.tolist() == [True, False, False, False]
    assert scores.degree[0] == pytest.approx(0.5)
    assert np.isnan(scores.degree[1:]).all()


def test_max_ngram_bounds_the_dictionary():
    train = ["a b c d"] * 4
    unbounded = DegreeScorer(train, DegreeParameters(min_word_count=1))
    bounded = DegreeScorer(train, DegreeParameters(min_word_count=1, max_ngram=2))
    assert unbounded.dictionary.counts_by_order == {1: 4, 2: 3, 3: 2, 4: 1}
    assert bounded.dictionary.counts_by_order == {1: 4, 2: 3}
    assert unbounded.score(["a b c d"]).degree[0] == 0.25
    assert bounded.score(["a b c d"]).degree[0] == 0.5


def test_normalization_lowercases_and_moses_tokenizes_both_sides_alike():
    normalizer = Normalizer(lowercase=True, tokenize="moses", lang="de")
    assert normalizer("Das geht,  gut!") == "das geht , gut !"
    assert Normalizer()("  Das  ist\tgut ") == "Das ist gut"
    scorer = DegreeScorer(["Gut, danke."] * 4, DegreeParameters(lowercase=True, tokenize="moses", min_word_count=1))
    assert scorer.score(["GUT , DANKE ."]).degree[0] == 0.25


def test_unknown_tokenizer_is_an_error():
    with pytest.raises(BenchbuildError, match="--tokenize"):
        Normalizer(tokenize="spacy")  # type: ignore[arg-type]


def test_hashset_contains_exactly_its_keys():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, np.iinfo(np.uint64).max, size=5000, dtype=np.uint64, endpoint=True)
    others = rng.integers(0, np.iinfo(np.uint64).max, size=5000, dtype=np.uint64, endpoint=True)
    hashset = HashSet64(np.concatenate([keys, keys[:100]]))
    assert len(hashset) == 5000
    assert hashset.contains(keys).all()
    assert not hashset.contains(np.setdiff1d(others, keys)).any()


words = st.sampled_from("a b c d e f".split())
sentences = st.lists(words, min_size=1, max_size=12).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(train=st.lists(sentences, min_size=1, max_size=25), pool=st.lists(sentences, min_size=1, max_size=10),
       min_count=st.integers(1, 4), max_order=st.one_of(st.none(), st.integers(1, 4)))
def test_fast_degree_equals_the_plain_dynamic_program(train, pool, min_count, max_order):
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=0, min_ngram_count=min_count, max_ngram=max_order))
    dictionary = plain_dictionary(train, min_count, max_order)
    expected = [plain_degree(line, dictionary) for line in pool]
    assert scorer.score(pool).degree.tolist() == pytest.approx(expected)
    assert len(scorer.dictionary) == len(dictionary)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab \t\n\u00a0\u2003\x1c\u3000\u200bÄ")), max_size=12),
                max_size=6))
def test_arrow_tokens_are_exactly_python_split(lines):
    from benchbuild.react.ngrams import split_tokens

    tokens, offsets = split_tokens(lines)
    flat = tokens.to_pylist()
    assert [flat[offsets[i]:offsets[i + 1]] for i in range(len(lines))] == [line.split() for line in lines]


def test_degree_of_scores_every_line_without_the_oov_filter_and_an_empty_line_has_none():
    train = ["a b"] * 3 + ["c"] * 2
    scorer = DegreeScorer(train, DegreeParameters(min_word_count=3, min_ngram_count=3))
    # "a c": "c" is seen under min_word_count times, so `score` drops the line; `degree_of` scores it (2 pieces)
    degree = scorer.degree_of(["a b", "a c", ""])
    assert degree[:2].tolist() == [0.5, 1.0] and np.isnan(degree[2])
    assert np.isnan(scorer.score([""]).degree).all()


def test_degree_of_normalises_raw_lines_and_takes_normalised_ones_as_they_are():
    scorer = DegreeScorer(["a b"] * 3, DegreeParameters(min_word_count=1, min_ngram_count=3, lowercase=True))
    assert scorer.degree_of(["A B"]).tolist() == [0.5]  # lowercased: one piece "a b" of two tokens
    assert scorer.degree_of(["A B"], normalized=True).tolist() == [1.0]  # "A", "B": unknown, a piece each


def test_a_training_corpus_given_normalised_is_taken_as_it_is():
    parameters = DegreeParameters(min_word_count=1, min_ngram_count=3, lowercase=True)
    raw = DegreeScorer(["A B"] * 3, parameters)
    taken_as_it_is = DegreeScorer(["A B"] * 3, parameters, normalized=True)
    assert raw.score(["a b"], normalized=True).degree.tolist() == [0.5]
    assert taken_as_it_is.score(["A B"], normalized=True).degree.tolist() == [0.5]
    assert taken_as_it_is.score(["a b"], normalized=True).in_vocabulary.tolist() == [False]
