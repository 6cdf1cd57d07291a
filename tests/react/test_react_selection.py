"""Stages 5 and 8 of ReaCT: the non-overlapping candidate pool and the RMI band sample; the stage cache."""

from __future__ import annotations

import numpy as np
import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.react.cache import StageCache, stage_key
from benchbuild.react.selection import candidate_pool, rmi_ranks, select_by_uncertainty


def test_candidate_pool_drops_oov_overlap_and_duplicates_then_keeps_the_highest_degrees():
    sources = ["a", "b", "c", "b", "d", "e", "f"]
    degrees = np.array([0.5, 0.9, 0.9, 0.9, 0.1, 0.7, 0.9])
    in_vocabulary = np.array([True, True, True, True, True, True, False])
    pool = candidate_pool(sources, degrees, in_vocabulary, seen_sources={"c"}, pool_size=3)
    assert pool.indices == [1, 5, 0]  # b (0.9; its repeat at 3 dropped), e (0.7), a (0.5)
    assert pool.counts["dropped by the OOV filter"] == 1
    assert pool.counts["dropped: source in the training/validation/test corpora"] == 1
    assert pool.counts["dropped: duplicate within the pool"] == 1
    assert pool.counts["non-overlapping in-vocabulary candidates"] == 4


def test_candidate_pool_breaks_degree_ties_by_pool_order():
    pool = candidate_pool(["x", "y", "z"], np.array([0.5, 0.5, 0.5]), np.ones(3, bool), set(), pool_size=2)
    assert pool.indices == [0, 1]


def test_a_pool_smaller_than_pool_size_is_an_error_stating_the_numbers_unless_allowed():
    with pytest.raises(BenchbuildError, match="only 2 non-overlapping .* --pool-size is 5"):
        candidate_pool(["x", "y"], np.array([0.1, 0.2]), np.ones(2, bool), set(), pool_size=5)
    pool = candidate_pool(["x", "y"], np.array([0.1, 0.2]), np.ones(2, bool), set(), pool_size=5, allow_small=True)
    assert pool.indices == [1, 0] and pool.shortfall == 3


def test_selection_drops_the_top_and_samples_only_from_the_band():
    rmi = np.random.default_rng(3).random(100).tolist()
    selection = select_by_uncertainty(rmi, drop_top=10, band=40, sample=15, rng=np.random.default_rng(0))
    ranks = rmi_ranks(rmi)
    assert len(selection.positions) == 15 == len(set(selection.positions))
    assert all(11 <= ranks[p] <= 50 for p in selection.positions)
    assert selection.ranks == sorted(selection.ranks) == [int(ranks[p]) for p in selection.positions]
    assert selection.band == (11, 50)
    again = select_by_uncertainty(rmi, drop_top=10, band=40, sample=15, rng=np.random.default_rng(0))
    other = select_by_uncertainty(rmi, drop_top=10, band=40, sample=15, rng=np.random.default_rng(1))
    assert again.positions == selection.positions != other.positions


def test_rmi_ranks_put_the_most_uncertain_first_and_break_ties_by_order():
    assert rmi_ranks([0.1, 0.5, 0.5, 0.0]).tolist() == [3, 1, 2, 4]


def test_a_band_larger_than_what_remains_is_an_error_stating_the_numbers_unless_allowed():
    with pytest.raises(BenchbuildError, match="10 candidates leave 8 after dropping the top 2, fewer than --band 9"):
        select_by_uncertainty([0.1] * 10, drop_top=2, band=9, sample=3, rng=np.random.default_rng(0))
    selection = select_by_uncertainty([0.1] * 10, drop_top=2, band=9, sample=3, rng=np.random.default_rng(0),
                                      allow_small=True)
    assert selection.shortfall == 1 and selection.counts["RMI band"] == 8
    with pytest.raises(BenchbuildError, match="--sample 5 is larger than --band 4"):
        select_by_uncertainty([0.1] * 10, drop_top=0, band=4, sample=5, rng=np.random.default_rng(0))


def test_stage_cache_computes_once_per_key(tmp_path):
    cache = StageCache(tmp_path)
    calls = []
    key = stage_key("uncertainty", beam=5, candidates="c1")
    assert cache.json(key, lambda: calls.append(1) or {"rmi": [0.5]}) == {"rmi": [0.5]}
    assert StageCache(tmp_path).json(key, lambda: calls.append(1) or {"rmi": [9.0]}) == {"rmi": [0.5]}
    assert calls == [1]
    assert stage_key("uncertainty", beam=1, candidates="c1") != key
    assert stage_key("uncertainty", candidates="c1", beam=5) == key
