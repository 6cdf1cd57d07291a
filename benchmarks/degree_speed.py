"""Compositional degree (ReaCT stages 1–4): fast path vs a plain pure-Python dynamic program, in one run.

Training corpus: 160,000 German sentences sampled (seeded) from a word-trigram model of all German text in
../shared/data (IWSLT14 valid+test, ReaCT cg_test, WMT14 sample; lowercased), with sentence lengths drawn from
the same text — IWSLT-like statistics at the paper's corpus size. Pool: the WMT14 sample's sentences of 20–30
tokens (lowercased), repeated to --pool-lines. Prints dictionary build time and peak traced memory, throughput of
both algorithms and whether they agree on every sentence the plain DP scored.

    .venv/bin/python benchmarks/degree_speed.py [--pool-lines 1000000] [--dp-lines 20000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from benchbuild.react.degree import DegreeParameters, DegreeScorer

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def german_text() -> list[list[str]]:
    files = [SHARED / "react" / name for name in ("valid.de", "test.de", "cg_test.de")]
    files.append(SHARED / "wmt14-ende-sample" / "train.de")
    return [line.lower().split() for path in files for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def trigram_corpus(sentences: list[list[str]], size: int, seed: int) -> list[str]:
    """`size` sentences from a word-trigram model of `sentences` (seeded), lengths from the same text."""
    successors: dict[tuple[str, str], list[str]] = defaultdict(list)
    for tokens in sentences:
        padded = ["<s>", "<s>", *tokens]
        for a, b, c in zip(padded, padded[1:], padded[2:]):
            successors[(a, b)].append(c)
    rng = np.random.default_rng(seed)
    lengths = rng.choice([len(tokens) for tokens in sentences], size=size)
    corpus = []
    for length in lengths.tolist():
        context, words = ("<s>", "<s>"), []
        while len(words) < length:
            options = successors.get(context) or successors[("<s>", "<s>")]
            word = options[int(rng.integers(len(options)))]
            words.append(word)
            context = (context[1], word)
        corpus.append(" ".join(words))
    return corpus


def plain_dictionary(lines: list[str], min_count: int) -> set[tuple[str, ...]]:
    """Frequent n-grams counted with a Counter, order by order (only extending frequent (n−1)-grams)."""
    tokenized = [tuple(line.split()) for line in lines]
    frequent: set[tuple[str, ...]] = set()
    starts = [(s, i) for s, tokens in enumerate(tokenized) for i in range(len(tokens))]
    order = 0
    while starts:
        order += 1
        counts = Counter(tokenized[s][i:i + order] for s, i in starts)
        level = {ngram for ngram, count in counts.items() if count >= min_count}
        frequent |= level
        starts = [(s, i) for s, i in starts if i + order < len(tokenized[s]) and tokenized[s][i:i + order] in level]
    return frequent


def plain_degree(line: str, dictionary: set[tuple[str, ...]], longest: int) -> float:
    """fewest[j] = min over pieces tokens[i:j] (in the dictionary, or one token) of fewest[i] + 1."""
    tokens = tuple(line.split())
    fewest = [0] + [math.inf] * len(tokens)
    for end in range(1, len(tokens) + 1):
        for start in range(max(0, end - longest), end):
            if end - start == 1 or tokens[start:end] in dictionary:
                fewest[end] = min(fewest[end], fewest[start] + 1)
    return fewest[-1] / len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-lines", type=int, default=160_000)
    parser.add_argument("--pool-lines", type=int, default=1_000_000)
    parser.add_argument("--dp-lines", type=int, default=20_000)
    args = parser.parse_args()

    text = german_text()
    train = trigram_corpus(text, args.train_lines, seed=0)
    wmt = [line.lower() for line in (SHARED / "wmt14-ende-sample" / "train.de").read_text(encoding="utf-8").splitlines()
           if 20 <= len(line.split()) <= 30]
    pool = (wmt * (args.pool_lines // len(wmt) + 1))[:args.pool_lines]
    print(f"training corpus: {len(train):,} sentences, {sum(len(s.split()) for s in train):,} tokens (trigram model "
          f"of {len(text):,} shared German sentences); pool: {len(pool):,} WMT14 lines of 20-30 tokens "
          f"({len(wmt):,} distinct)")

    parameters = DegreeParameters(lowercase=True)
    tracemalloc.start()
    started = time.perf_counter()
    scorer = DegreeScorer(train, parameters)
    build_seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dictionary = scorer.dictionary
    print(f"n-gram dictionary (min count {parameters.min_ngram_count}, no max n): {len(dictionary):,} n-grams, "
          f"orders 1-{dictionary.max_order}; built in {build_seconds:.2f} s, peak traced memory "
          f"{peak / 2**20:.0f} MiB (hash table {dictionary.ngrams.nbytes / 2**20:.0f} MiB)")

    started, cpu = time.perf_counter(), time.process_time()
    fast = np.concatenate([scores.degree for scores in scorer.score_stream(pool)])
    fast_seconds, fast_cpu = time.perf_counter() - started, time.process_time() - cpu
    kept = ~np.isnan(fast)
    print(f"fast path (normalize + OOV filter + degree): {len(pool):,} lines in {fast_seconds:.2f} s wall = "
          f"{len(pool) / fast_seconds * 60:,.0f} lines/min; {fast_cpu:.2f} s CPU = "
          f"{len(pool) / fast_cpu * 60:,.0f} lines/min ({kept.sum():,} kept by the OOV filter)")

    started = time.perf_counter()
    plain = plain_dictionary(train, parameters.min_ngram_count)
    plain_build = time.perf_counter() - started
    assert len(plain) == len(dictionary), (len(plain), len(dictionary))
    subset = pool[:args.dp_lines]
    started, cpu = time.perf_counter(), time.process_time()
    reference = [plain_degree(line, plain, dictionary.max_order) for line in subset]
    dp_seconds, dp_cpu = time.perf_counter() - started, time.process_time() - cpu
    started = time.perf_counter()
    fast_subset = scorer.degree_of(subset)
    fast_subset_seconds = time.perf_counter() - started
    agree = np.array_equal(np.asarray(reference), fast_subset)
    dp_rate, fast_rate = len(subset) / dp_seconds * 60, len(pool) / fast_seconds * 60
    print(f"plain dictionary (Counter, order by order): {len(plain):,} n-grams in {plain_build:.2f} s")
    print(f"plain DP: {len(subset):,} lines in {dp_seconds:.2f} s wall = {dp_rate:,.0f} lines/min; {dp_cpu:.2f} s "
          f"CPU = {len(subset) / dp_cpu * 60:,.0f} lines/min; fast on the same lines: {fast_subset_seconds:.3f} s; "
          f"degrees agree on all {len(subset):,}: {agree}")
    print(f"speed-up (fast throughput / plain DP throughput): {fast_rate / dp_rate:.1f}x wall, "
          f"{(len(pool) / fast_cpu) / (len(subset) / dp_cpu):.1f}x CPU")
    if not agree:
        sys.exit("the fast degree disagrees with the plain dynamic program")


if __name__ == "__main__":
    main()
