"""Noun–adjective parse on Dask workers: sentences/s with 1, 2, … workers of an embedded cluster (up to the CPU count),
against the local parser in this process, and each count's share of linear scaling over one worker.

What is timed is the parse stage of `build-noun-adj --engine dask`: the Europarl sample's candidate sentences (those
holding a target noun), repeated, through `ShardedParser` (one task per --batch-size sentences, parses back in
order). The workers load their spaCy model before the clock starts (a one-off cost, printed apart).

Run: .venv/bin/python benchmarks/nounadj_scaling.py [--sample DIR] [--repeat N] [--rounds R] [--max-workers W]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from benchbuild.corpus import CorpusStats, read_parallel
from benchbuild.engine import EngineParameters, open_engine
from benchbuild.nounadj.pairs import TABLE_2
from benchbuild.nounadj.parsers import ParserSettings, ShardedParser, parser_description

ROOT = Path(__file__).resolve().parent.parent


def candidates(sample: Path, repeat: int) -> list[tuple[str, int]]:
    pattern = TABLE_2.noun_pattern()
    rows = read_parallel(sample / "europarl-v7.fr-en.en", sample / "europarl-v7.fr-en.fr", stats=CorpusStats())
    texts = [source for _, source, _ in rows if pattern.search(source)] * repeat
    return [(text, number) for number, text in enumerate(texts)]


def timed_parse(parser, items: list[tuple[str, int]], engine=None) -> tuple[float, float]:
    """Wall seconds of one parse, and the CPU seconds it took (this process's, plus the workers' with an engine)."""
    cpu = time.process_time() + (workers_cpu(engine) if engine else 0.0)
    start = time.perf_counter()
    parsed = sum(1 for _ in parser.parse(iter(items)))
    wall = time.perf_counter() - start
    assert parsed == len(items)
    return wall, time.process_time() + (workers_cpu(engine) if engine else 0.0) - cpu


def workers_cpu(engine) -> float:
    """CPU seconds the engine's worker processes have used so far."""
    return sum(engine.client.run(time.process_time).values())


def rates(count: int, timings: list[tuple[float, float]]) -> tuple[float, float]:
    """Sentences per wall second and per CPU second (medians over the rounds)."""
    return (count / statistics.median(wall for wall, _ in timings),
            count / statistics.median(cpu for _, cpu in timings))


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--sample", type=Path, default=ROOT.parent / "shared" / "data" / "europarl-sample")
    arguments.add_argument("--repeat", type=int, default=8, help="copies of the candidate sentences parsed per round")
    arguments.add_argument("--rounds", type=int, default=3, help="timed rounds per worker count (median kept)")
    arguments.add_argument("--batch-size", type=int, default=64, help="sentences per task (--batch-size)")
    arguments.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    args = arguments.parse_args()
    items = candidates(args.sample, args.repeat)
    settings = ParserSettings(batch_size=args.batch_size)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores visible, load average at start "
          f"{' '.join(f'{value:.1f}' for value in os.getloadavg())}, python {platform.python_version()}")
    print(f"parsing {len(items):,} candidate sentences (the sample's x{args.repeat}), {args.batch_size} per task, "
          f"median of {args.rounds} rounds")

    print("sentences/s by wall clock | per CPU second (this process and the workers: the work a free core does)")
    local = settings.make()
    timed_parse(local, items[:args.batch_size])  # warm-up (lazy lookup tables)
    wall, cpu = rates(len(items), [timed_parse(local, items) for _ in range(args.rounds)])
    print(f"  local (this process)   {wall:>6,.0f} | {cpu:>6,.0f}")

    single = None
    for workers in range(1, args.max_workers + 1):
        started = time.perf_counter()
        with open_engine(EngineParameters(engine="dask", workers=workers)) as engine:
            engine.client.run(parser_description, settings)  # every worker loads its model now, not on the clock
            ready = time.perf_counter() - started
            parser = ShardedParser(engine, settings)
            timed_parse(parser, items[:args.batch_size * workers])
            wall, cpu = rates(len(items), [timed_parse(parser, items, engine) for _ in range(args.rounds)])
        single = single or wall
        print(f"  dask, {workers:>2} worker{'s' if workers > 1 else ' '}       {wall:>6,.0f} | {cpu:>6,.0f}   "
              f"{wall / single:>4.2f}x one worker = {wall / (single * workers):>4.0%} of linear  "
              f"(cluster up, models loaded: {ready:.1f} s)")
    print(f"load average at end {' '.join(f'{value:.1f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
