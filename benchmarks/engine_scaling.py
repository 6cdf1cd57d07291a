"""Throughput of the heavy stages against the number of Dask workers: each stage timed in this process
(`--engine local`) and on an embedded cluster of 1, 2, … single-threaded workers (up to the CPU count), with each
count's share of linear scaling over one worker.

Stages (a stage is a `Stage`: how to make its input once, and one timed run on an engine; add one to `STAGES`):
- `degree`: `benchbuild degree` (`write_degree_table`) over a pool of `--lines` lines;
- `candidates`: build-react's candidate stage (`react.pool.pool_candidates`: normalization, --max-length, OOV
  filter, degree, top --pool-size) over the same number of pool pairs.
The pool joins two sentences drawn (seeded) from the shared data per line, as `degree_memory.py` does; the training
corpus is IWSLT14 valid. The cluster starts, and each worker receives the scorer, before the clock: a warm-up run per
worker count is not timed.

Run: .venv/bin/python benchmarks/engine_scaling.py [--stages degree candidates] [--lines N] [--rounds R]
     [--max-workers W] [--shared DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from degree_memory import sentence_pairs, write_pool  # noqa: E402

from benchbuild.corpus import ParallelInput  # noqa: E402
from benchbuild.engine import Engine, EngineParameters, LocalEngine, open_engine  # noqa: E402
from benchbuild.react.degree import DegreeParameters, DegreeScorer, write_degree_table  # noqa: E402
from benchbuild.react.normalize import Normalizer  # noqa: E402
from benchbuild.react.pool import PoolRules, pool_candidates  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Stage:
    """A stage to time: `prepare(arguments, folder)` makes its input once; `run(engine, input)` is one timed run
    and returns how many `unit`s it processed."""

    name: str
    unit: str
    prepare: Callable[[argparse.Namespace, Path], Any]
    run: Callable[[Engine, Any], int]


def prepare_pool(arguments: argparse.Namespace, folder: Path) -> dict[str, Any]:
    de, en = write_pool(sentence_pairs(arguments.shared), arguments.lines, folder / "pool")
    return {"train": arguments.shared / "react" / "valid.de", "train_en": arguments.shared / "react" / "valid.en",
            "de": de, "en": en, "out": folder / "degree.tsv", "lines": arguments.lines}


def run_degree(engine: Engine, pool: dict[str, Any]) -> int:
    parameters = DegreeParameters(lowercase=True, min_word_count=1)
    counts = write_degree_table(pool["train"], pool["de"], pool["out"], parameters, overwrite=True, engine=engine)
    return counts["lines"]


def run_candidates(engine: Engine, pool: dict[str, Any]) -> int:
    if "rules" not in pool:  # as build-react makes them: the normalized training source, scorer and seen sources
        source_norm, target_norm = Normalizer(lowercase=True, lang="de"), Normalizer(lowercase=True, lang="en")
        train = source_norm.all(pool["train"].read_text(encoding="utf-8").splitlines())
        scorer = DegreeScorer(train, DegreeParameters(lowercase=True, min_word_count=1), normalized=True)
        pool["rules"] = PoolRules(scorer, frozenset(train), source_norm, target_norm, 256, 60_000, "strict")
    result = pool_candidates([ParallelInput(source=pool["de"], target=pool["en"])], pool["rules"], engine,
                             allow_small=True)
    return result["counts"]["pool: pairs read"]


STAGES = {
    "degree": Stage("degree", "lines", prepare_pool, run_degree),
    "candidates": Stage("candidates", "pairs", prepare_pool, run_candidates),
}


def timed(stage: Stage, engine: Engine, data: Any, rounds: int) -> tuple[float, float]:
    """Units per wall second and per CPU second (this process and the engine's workers: the work a free core
    does), medians of `rounds` timed runs after one untimed warm-up."""
    stage.run(engine, data)
    walls, cpus, units = [], [], 0
    for _ in range(rounds):
        cpu, started = cpu_seconds(engine), time.perf_counter()
        units = stage.run(engine, data)
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds(engine) - cpu)
    return units / statistics.median(walls), units / statistics.median(cpus)


def cpu_seconds(engine: Engine) -> float:
    """CPU seconds used so far by this process and, on Dask, by every worker process."""
    workers = sum(engine.client.run(time.process_time).values()) if engine.name == "dask" else 0.0
    return time.process_time() + workers


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--stages", nargs="+", choices=sorted(STAGES), default=list(STAGES))
    arguments.add_argument("--lines", type=int, default=1_000_000, help="pool lines (pairs) per run")
    arguments.add_argument("--rounds", type=int, default=3, help="timed runs per worker count (median kept)")
    arguments.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    arguments.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    args = arguments.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores visible, load average at start "
          f"{' '.join(f'{value:.1f}' for value in os.getloadavg())}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="benchbuild-engine-scaling-") as temporary:
        prepared: dict[Callable, Any] = {}
        for name in args.stages:
            stage = STAGES[name]
            if stage.prepare not in prepared:
                prepared[stage.prepare] = stage.prepare(args, Path(temporary) / stage.prepare.__name__)
            data = prepared[stage.prepare]
            print(f"\n{stage.name}: {args.lines:,} {stage.unit} per run, median of {args.rounds} runs; {stage.unit} "
                  "per wall second | per CPU second (this process and the workers)")
            wall, cpu = timed(stage, LocalEngine(), data, args.rounds)
            print(f"  local (this process)  {wall:>10,.0f} | {cpu:>10,.0f}")
            single = None
            for workers in range(1, args.max_workers + 1):
                with open_engine(EngineParameters(engine="dask", workers=workers)) as engine:
                    wall, cpu = timed(stage, engine, data, args.rounds)
                single = single or wall
                print(f"  dask, {workers:>2} worker{'s' if workers > 1 else ' '}      {wall:>10,.0f} | {cpu:>10,.0f}"
                      f"   {wall / single:5.2f}x one worker = {wall / (single * workers):4.0%} of linear"
                      f" (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
