"""Stages 1–5 of ReaCT on the candidate pool, shard by shard: the candidates and the counts the card gives.

Each shard of each pool (`ParallelInput.shards`) is one task of an `Engine`: read, normalized, pairs over
`--max-length` tokens set aside, OOV-filtered and scored against the one `DegreeScorer` (shared with the workers
once, with the training/validation/test sources), then cut to its own best `--pool-size` (`selection.shard_top`).
The shards' lists are merged in pool order (`selection.TopCandidates`) and the distinct candidate sources counted
by hash on disk (`distinct.DistinctCounter`), so memory holds the scorer, `--pool-size` candidates and a few
shards whatever the pool's length, and the candidates are those `selection.candidate_pool` keeps from the whole
pool in memory, with either engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from benchbuild.corpus import CorpusShard, CorpusStats, ParallelInput
from benchbuild.engine import Engine
from benchbuild.errors import BenchbuildError
from benchbuild.progress import progress_bar
from benchbuild.react.degree import CHUNK_LINES, DegreeScorer
from benchbuild.react.distinct import DistinctCounter, sentence_hashes
from benchbuild.react.normalize import Normalizer
from benchbuild.react.selection import Candidate, TopCandidates, shard_top


@dataclass(frozen=True)
class PoolRules:
    """What every shard task applies: shared with the workers once (the scorer and the seen sources are large)."""

    scorer: DegreeScorer
    seen: frozenset[str]
    source_norm: Normalizer
    target_norm: Normalizer
    max_length: int
    pool_size: int
    encoding_errors: str


@dataclass
class ShardResult:
    """One shard's best candidates (best first), the hashes of its distinct candidate sources, and its counts."""

    pool: int
    best: list[Candidate]
    hashes: np.ndarray
    stats: CorpusStats = field(default_factory=CorpusStats)
    too_long: int = 0
    oov: int = 0
    overlap: int = 0
    candidates: int = 0  # in-vocabulary, not in the training/validation/test corpora (repeats included)


def shard_candidates(item: tuple[int, CorpusShard, tuple[float, int, int] | None], rules: PoolRules) -> ShardResult:
    """One task: stages 1–4 and the overlap filter on one shard, and its `shard_top`."""
    pool, shard, threshold = item
    result = ShardResult(pool, [], np.zeros(0, dtype=np.uint64))
    lines: list[int] = []
    sources: list[str] = []
    targets: list[str] = []
    for line, source_text, target_text in shard.rows(encoding_errors=rules.encoding_errors,  # type: ignore[arg-type]
                                                     stats=result.stats):
        source, target = rules.source_norm(source_text), rules.target_norm(target_text)
        # Attention is quadratic in length: one huge line would stall the ensemble's decoding.
        if max(len(source.split()), len(target.split())) > rules.max_length:
            result.too_long += 1
            continue
        lines.append(line)
        sources.append(source)
        targets.append(target)
    scores = rules.scorer.score(sources, normalized=True)
    result.oov = len(sources) - int(scores.in_vocabulary.sum())
    kept: list[Candidate] = []
    for keep, degree, line, source, target in zip(scores.in_vocabulary.tolist(), scores.degree.tolist(), lines,
                                                  sources, targets):
        if not keep:
            continue
        if source in rules.seen:
            result.overlap += 1
            continue
        kept.append(Candidate(degree, pool, line, source, target))
    result.candidates = len(kept)
    result.hashes = np.unique(sentence_hashes({candidate.source: None for candidate in kept}))
    result.best = shard_top(kept, rules.pool_size, threshold)
    return result


def pool_candidates(pools: Sequence[ParallelInput], rules: PoolRules, engine: Engine, *, allow_small: bool,
                    progress: bool = False, total: int | None = None, shard_rows: int = CHUNK_LINES) -> dict[str, Any]:
    """The candidate stage's result: the `--pool-size` best rows, the counts for the card, and the shortfall
    (`total`: the pools' rows, for the progress bar)."""
    top = TopCandidates(rules.pool_size)
    stats = [CorpusStats() for _ in pools]
    too_long = oov = overlap = candidates = 0
    checked = 0  # pools before this one are known to hold a non-empty pair

    def check_pools(upto: int) -> None:
        nonlocal checked
        for index in range(checked, upto):
            if stats[index].pairs_kept == 0:
                raise BenchbuildError(f"candidate pool {index} ({described(pools[index])}) has no non-empty pair: "
                                      "give a pool with sentences on both sides")
        checked = max(checked, upto)

    # The threshold is read as each task is made: a later shard sends back only what can still enter the top.
    items = ((index, shard, top.threshold()) for index, pool in enumerate(pools) for shard in pool.shards(shard_rows))
    with DistinctCounter() as distinct, progress_bar("compositional degree of the pool", total, progress) as advance:
        for result in engine.map(shard_candidates, items, shared=(engine.share(rules),)):
            check_pools(result.pool)
            pool_stats = stats[result.pool]
            pool_stats.pairs_read += result.stats.pairs_read
            pool_stats.empty_dropped += result.stats.empty_dropped
            pool_stats.replaced_characters_lines += result.stats.replaced_characters_lines
            too_long, oov, overlap = too_long + result.too_long, oov + result.oov, overlap + result.overlap
            candidates += result.candidates
            top.add(result.best)
            distinct.add(result.hashes)
            advance(amount=result.stats.pairs_read)
        check_pools(len(pools))
        kept = distinct.count()
    shortfall = max(0, rules.pool_size - kept)
    if shortfall and not allow_small:
        raise BenchbuildError(f"only {kept:,} non-overlapping in-vocabulary pool sentences remain but "
                              f"--pool-size is {rules.pool_size:,}: lower --pool-size, give a larger pool, or pass "
                              "--allow-small")
    counts = {"pool: pairs read": sum(s.pairs_read for s in stats),
              "pool: empty pairs dropped": sum(s.empty_dropped for s in stats),
              "pool: pairs with invalid UTF-8 replaced": sum(s.replaced_characters_lines for s in stats),
              f"pool: pairs longer than {rules.max_length:,} tokens set aside (--max-length)": too_long,
              "dropped by the OOV filter": oov,
              "dropped: source in the training/validation/test corpora": overlap,
              "dropped: duplicate within the pool": candidates - kept,
              "non-overlapping in-vocabulary candidates": kept,
              "candidate pool (top by degree)": len(top.rows)}
    rows = [{"pool": row.pool, "line": row.line, "source": row.source, "target": row.target, "degree": row.degree}
            for row in top.rows]
    return {"rows": rows, "counts": counts, "shortfall": shortfall}


def described(corpus: ParallelInput) -> str:
    """The files (or folder) of an input, for messages."""
    return ", ".join(str(path) for path in corpus.files().values())
