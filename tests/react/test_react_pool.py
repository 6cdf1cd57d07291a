"""Stages 1–5 on a pool read shard by shard (`react.pool`): the same candidates and card counts as the rule applied
to the whole pool in memory (`selection.candidate_pool`), in memory bounded by --pool-size."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from small_inputs import write_lines

from benchbuild.corpus import CorpusStats, ParallelInput
from benchbuild.engine import LocalEngine
from benchbuild.errors import BenchbuildError
from benchbuild.react.degree import DegreeParameters, DegreeScorer
from benchbuild.react.distinct import DistinctCounter, sentence_hashes
from benchbuild.react.normalize import Normalizer
from benchbuild.react.parameters import ReactParameters
from benchbuild.react.pool import PoolRules, pool_candidates
from benchbuild.react.selection import Candidate, TopCandidates, candidate_pool, shard_top


def in_memory_candidates(pools: list[ParallelInput], rules: PoolRules, allow_small: bool) -> dict:
    """The candidate stage as it was before shards: every pool pair in memory, then `candidate_pool`."""
    origin, sources, targets, degrees = [], [], [], []
    read = empty = too_long = oov = 0
    for index, pool in enumerate(pools):
        stats = CorpusStats()
        rows = [(line, rules.source_norm(s), rules.target_norm(t)) for line, s, t in pool.rows(stats=stats)]
        read, empty = read + stats.pairs_read, empty + stats.empty_dropped
        short = [row for row in rows if max(len(row[1].split()), len(row[2].split())) <= rules.max_length]
        too_long += len(rows) - len(short)
        scores = rules.scorer.score([source for _, source, _ in short], normalized=True)
        oov += len(short) - int(scores.in_vocabulary.sum())
        for keep, degree, (line, source, target) in zip(scores.in_vocabulary, scores.degree.tolist(), short):
            if keep:
                origin.append((index, line))
                sources.append(source)
                targets.append(target)
                degrees.append(degree)
    pool = candidate_pool(sources, np.asarray(degrees), np.ones(len(sources), dtype=bool), rules.seen,
                          rules.pool_size, allow_small=allow_small)
    counts = {"pool: pairs read": read, "pool: empty pairs dropped": empty,
              "pool: pairs with invalid UTF-8 replaced": 0,
              f"pool: pairs longer than {rules.max_length:,} tokens set aside (--max-length)": too_long,
              "dropped by the OOV filter": oov,
              **{key: value for key, value in pool.counts.items()
                 if key not in ("pool lines", "dropped by the OOV filter")}}
    rows = [{"pool": origin[i][0], "line": origin[i][1], "source": sources[i], "target": targets[i],
             "degree": degrees[i]} for i in pool.indices]
    return {"rows": rows, "counts": counts, "shortfall": pool.shortfall}


@pytest.fixture(scope="module")
def react_inputs(shared_data, tmp_path_factory):
    """IWSLT14 valid as the training corpus (every word kept by the OOV filter); pools: cg_test and the WMT14
    sample (real, mostly OOV), 3,000 IWSLT14 valid sentences with their words reversed (in vocabulary, unseen) as a
    TSV and again as two files (every line a repeat), and 500 IWSLT14 valid pairs (all in the training corpus)."""
    react, folder = shared_data / "react", tmp_path_factory.mktemp("pool-inputs")
    source_norm, target_norm = Normalizer(lowercase=True, lang="de"), Normalizer(lowercase=True, lang="en")
    de, en = ((react / f"valid.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))
    reversed_de = [" ".join(reversed(line.split())) for line in de[:3000]]
    (folder / "reversed.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in zip(reversed_de, en)), encoding="utf-8")
    write_lines(folder / "reversed.de", reversed_de)
    write_lines(folder / "reversed.en", en[:3000])
    (folder / "seen.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in zip(de[:500], en)), encoding="utf-8")
    wmt = shared_data / "wmt14-ende-sample"
    pools = [ParallelInput(source=react / "cg_test.de", target=react / "cg_test.en"),
             ParallelInput(source=wmt / "train.de", target=wmt / "train.en"),
             ParallelInput(tsv=folder / "reversed.tsv"),
             ParallelInput(source=folder / "reversed.de", target=folder / "reversed.en"),
             ParallelInput(tsv=folder / "seen.tsv")]
    train = source_norm.all(de)
    scorer = DegreeScorer(train, DegreeParameters(lowercase=True, min_word_count=1), normalized=True)
    return pools, scorer, frozenset(train), source_norm, target_norm


@pytest.mark.shared
@pytest.mark.parametrize("pool_size, max_length, shard_rows", [(40, 256, 1000), (2_000, 30, 777),
                                                               (60_000, 256, 65_536)])
def test_sharded_pool_keeps_the_in_memory_candidates_and_counts(react_inputs, pool_size, max_length, shard_rows):
    pools, scorer, seen, source_norm, target_norm = react_inputs
    rules = PoolRules(scorer, seen, source_norm, target_norm, max_length, pool_size, "strict")
    expected = in_memory_candidates(pools, rules, allow_small=True)
    sharded = pool_candidates(pools, rules, LocalEngine(), allow_small=True, shard_rows=shard_rows)
    assert sharded == expected
    counts = sharded["counts"]
    assert counts["dropped: duplicate within the pool"] >= 2_000  # the second copy of the reversed sentences
    # seen.tsv, less its lines over --max-length 30
    assert counts["dropped: source in the training/validation/test corpora"] >= 400
    assert counts["non-overlapping in-vocabulary candidates"] >= 2_000
    assert len(sharded["rows"]) == min(pool_size, counts["non-overlapping in-vocabulary candidates"])


@pytest.mark.shared
def test_a_pool_smaller_than_pool_size_is_refused_as_before(react_inputs):
    pools, scorer, seen, source_norm, target_norm = react_inputs
    rules = PoolRules(scorer, seen, source_norm, target_norm, 256, 10_000_000, "strict")
    with pytest.raises(BenchbuildError, match="--pool-size is 10,000,000: lower --pool-size"):
        pool_candidates(pools, rules, LocalEngine(), allow_small=False, shard_rows=5000)


LETTERS = "abcdefghijkl"


@settings(max_examples=200, deadline=None)
@given(sources=st.lists(st.sampled_from(LETTERS), max_size=60),
       pieces=st.lists(st.integers(1, 4), min_size=len(LETTERS), max_size=len(LETTERS)),
       size=st.integers(1, 12), cuts=st.lists(st.integers(0, 60), max_size=6), use_threshold=st.booleans())
def test_bounded_merge_of_shard_tops_is_candidate_pool(sources, pieces, size, cuts, use_threshold):
    """Any pool (sources with repeats and ties, one degree per source), cut anywhere: the merged shard tops are the
    candidates `candidate_pool` keeps, in its order."""
    candidates = [Candidate(1 / pieces[LETTERS.index(source)], 0, line, source, "t")
                  for line, source in enumerate(sources, start=1)]
    expected = candidate_pool(sources, np.array([c.degree for c in candidates]), np.ones(len(sources), dtype=bool),
                              set(), size, allow_small=True)
    top = TopCandidates(size)
    bounds = [0, *sorted(set(cut for cut in cuts if cut < len(candidates))), len(candidates)]
    for start, end in zip(bounds, bounds[1:]):
        top.add(shard_top(candidates[start:end], size, top.threshold() if use_threshold else None))
        assert len(top.rows) <= size
    assert [row.line - 1 for row in top.rows] == expected.indices


def test_distinct_counter_counts_exactly_beyond_its_buffer():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, np.iinfo(np.uint64).max, size=30_000, dtype=np.uint64, endpoint=True)
    stream = np.concatenate([keys, keys[:10_000], keys[5:7]])
    rng.shuffle(stream)
    with DistinctCounter(buffer=1_000) as counter:
        for part in np.array_split(stream, 41):
            counter.add(part)
        assert counter.count() == 30_000
        spilled = counter._folder
        assert spilled is not None and len(list(spilled.iterdir())) > 200
    assert not spilled.exists()


def test_sentence_hashes_are_stable_across_processes():
    assert sentence_hashes(["das ist gut", "das ist gut", ""]).tolist()[:2] == [sentence_hashes(["das ist gut"])[0]] * 2
    assert int(sentence_hashes(["a"])[0]) == 3405396810240292928  # BLAKE2b-64, not the salted `hash`


def test_pools_from_globs_tsv_and_parquet_in_their_order(tmp_path):
    for name in ("b", "a"):
        write_lines(tmp_path / f"{name}.de", ["x"])
        write_lines(tmp_path / f"{name}.en", ["y"])
    write_lines(tmp_path / "c.tsv", ["x\ty"])
    pq.write_table(pa.table({"de": ["x"], "en": ["y"]}), tmp_path / "d.parquet")
    parameters = ReactParameters(pool_src=[tmp_path / "*.de"], pool_tgt=[tmp_path / "*.en"],
                                 pool_tsv=[tmp_path / "c.tsv"], pool_parquet=[tmp_path / "*.parquet"])
    pools = parameters.pools()
    assert [pool.source.name if pool.source else (pool.tsv or pool.parquet).name for pool in pools] == \
        ["a.de", "b.de", "c.tsv", "d.parquet"]
    assert all(list(pool.rows()) == [(1, "x", "y")] for pool in pools)
    with pytest.raises(BenchbuildError, match=r"--pool-tsv '.*\*\.nothing' matches no file"):
        ReactParameters(pool_tsv=[tmp_path / "*.nothing"]).pools()
