"""Noun–adjective builder: parsing throughput against plain spaCy `nlp.pipe` on the same sentences (same run, same
model), the prefilter's share on the Europarl sample, end-to-end pairs/s, and the projected time for 2M pairs.

Run: .venv/bin/python benchmarks/nounadj_throughput.py [--sample DIR] [--repeat N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from benchbuild.corpus import CorpusStats, ParallelInput, read_parallel
from benchbuild.nounadj.amod import noun_occurrences
from benchbuild.nounadj.build import build_noun_adj
from benchbuild.french import FrenchLemmatizer
from benchbuild.nounadj.pairs import TABLE_2
from benchbuild.nounadj.parameters import NounAdjParameters
from benchbuild.nounadj.parsers import SpacyParser, load_spacy
from benchbuild.nounadj.split import decide_sentence

EUROPARL_PAIRS = 2_007_723  # Europarl v7 fr–en line count
ROOT = Path(__file__).resolve().parent.parent


class Clock:
    """Wall-clock and this process's CPU seconds: on a shared machine the CPU time shows what a free core would do."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def plain_pipe(nlp, texts: list[str], batch_size: int) -> Clock:
    with Clock() as clock:
        for _ in nlp.pipe(texts, batch_size=batch_size):
            pass
    return clock


def builder_parse(parser: SpacyParser, texts: list[str]) -> Clock:
    """What the builder does per candidate: parse, collect amod of target nouns, decide the split."""
    nouns = TABLE_2.noun_lemmas()
    with Clock() as clock:
        for words, _ in parser.parse((text, number) for number, text in enumerate(texts)):
            decide_sentence(noun_occurrences(words, nouns), TABLE_2)
    return clock


def timed_build(corpus: ParallelInput, parser: SpacyParser, french: FrenchLemmatizer) -> tuple[Clock, dict]:
    with tempfile.TemporaryDirectory() as work, Clock() as clock:
        benchmark = build_noun_adj(NounAdjParameters(en=corpus.source, fr=corpus.target), workdir=Path(work),
                                   parser=parser, french=french)
    return clock, benchmark.card.counts


def rate(count: int, clocks: list[Clock], kind: str) -> float:
    return count / statistics.median(getattr(clock, kind) for clock in clocks)


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--sample", type=Path, default=ROOT.parent / "shared" / "data" / "europarl-sample")
    arguments.add_argument("--repeat", type=int, default=4, help="copies of the candidate sentences timed per round")
    arguments.add_argument("--rounds", type=int, default=3, help="alternating plain/builder rounds (median kept)")
    arguments.add_argument("--batch-size", type=int, default=256)
    args = arguments.parse_args()
    en, fr = args.sample / "europarl-v7.fr-en.en", args.sample / "europarl-v7.fr-en.fr"

    with Clock() as load:
        nlp = load_spacy("en_core_web_sm")
        parser = SpacyParser(nlp=nlp, batch_size=args.batch_size)
        french = FrenchLemmatizer()
    nlp_full = load_spacy("en_core_web_sm", exclude=())

    stats = CorpusStats()
    pattern = TABLE_2.noun_pattern()
    pairs = list(read_parallel(en, fr, stats=stats))
    candidates = [source for _, source, _ in pairs if pattern.search(source)]
    share = len(candidates) / len(pairs)
    texts = candidates * args.repeat

    plain_pipe(nlp, texts[:64], args.batch_size)  # warm-up (lazy lookup tables)
    builder_parse(parser, texts[:64])
    plain, builder, full = [], [], []
    for _ in range(args.rounds):
        plain.append(plain_pipe(nlp, texts, args.batch_size))
        builder.append(builder_parse(parser, texts))
        full.append(plain_pipe(nlp_full, texts, args.batch_size))

    sample, counts = timed_build(ParallelInput(source=en, target=fr), parser, french)
    with tempfile.TemporaryDirectory() as folder:
        # The unparsed path alone: the sample's lines without a target noun, repeated to 30k lines.
        plain_lines = [(s, t) for _, s, t in pairs if not pattern.search(s)]
        copies = max(1, 30_000 // len(plain_lines))
        (Path(folder) / "x.en").write_text("".join(f"{s}\n" for s, _ in plain_lines) * copies, encoding="utf-8")
        (Path(folder) / "x.fr").write_text("".join(f"{t}\n" for _, t in plain_lines) * copies, encoding="utf-8")
        unparsed, _ = timed_build(ParallelInput(source=Path(folder) / "x.en", target=Path(folder) / "x.fr"),
                                  parser, french)
        unparsed_lines = len(plain_lines) * copies

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores visible (shared with other jobs), "
          f"python {platform.python_version()}, {parser.description}, batch size {args.batch_size}")
    print(f"prefilter: {len(candidates):,} of {len(pairs):,} sample pairs hold a target-noun form "
          f"({share:.1%}) and go to the parser")
    print(f"parsing {len(texts):,} candidate sentences (the sample's x{args.repeat}), median of {args.rounds} "
          "alternating rounds, sentences/s by wall clock | by CPU time of this process:")
    for label, clocks in (("plain nlp.pipe (same pipeline: ner excluded)", plain),
                          ("builder (parse + amod + split rule)", builder),
                          ("plain nlp.pipe, full pipeline incl. ner", full)):
        print(f"  {label:<46} {rate(len(texts), clocks, 'wall'):>7,.0f} | {rate(len(texts), clocks, 'cpu'):>7,.0f}")
    for kind in ("wall", "cpu"):
        print(f"  ratio builder / plain by {kind:<4}: {rate(len(texts), builder, kind) / rate(len(texts), plain, kind):.1%}"
              " (goal: at least 90%)")
    lines = counts["lines read"]
    print(f"end to end on the sample (models preloaded): {lines:,} pairs in {sample.wall:.1f} s wall "
          f"({lines / sample.wall:,.0f} pairs/s) | {sample.cpu:.1f} s CPU ({lines / sample.cpu:,.0f} pairs/s)")
    print(f"unparsed path alone: {unparsed_lines:,} pairs in {unparsed.wall:.1f} s wall "
          f"({unparsed_lines / unparsed.wall:,.0f} pairs/s) | {unparsed.cpu:.1f} s CPU")
    print(f"model loading (en + fr): {load.wall:.1f} s wall | {load.cpu:.1f} s CPU")
    parsed = EUROPARL_PAIRS * share
    for kind in ("wall", "cpu"):
        per_unparsed = getattr(unparsed, kind) / unparsed_lines
        parse_seconds = parsed / rate(len(texts), builder, kind)
        rest = EUROPARL_PAIRS * (1 - share) * per_unparsed + getattr(load, kind)
        print(f"projection for Europarl v7 fr-en ({EUROPARL_PAIRS:,} pairs, {parsed:,.0f} parsed) from {kind} "
              f"rates: {(parse_seconds + rest) / 60:.1f} min with --n-process 1; "
              f"{(parse_seconds / 2 + rest) / 60:.1f} min with --n-process 2 if both cores are free "
              "(goal: under 5 min on 2 cores)")


if __name__ == "__main__":
    main()
