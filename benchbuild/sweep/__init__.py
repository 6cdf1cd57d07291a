"""`benchbuild sweep`: a paper's results table in one command (models × their hyperparameter grid × benchmarks ×
seeds, trained and scored in parallel, resumable, ending in the report). `spec` reads the sweep file, `state` reads
run folders, `run` runs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.live import Live

from benchbuild.engine import EngineParameters
from benchbuild.errors import BenchbuildError
from benchbuild.sweep.spec import Sweep, load_sweep
from benchbuild.sweep.state import run_state, status_table

__all__ = ["load_sweep", "print_status", "dry_run", "run_sweep"]


def print_status(sweep: Sweep, console: Console) -> None:
    """The table of every run's state, read from the run folders."""
    console.print(status_table([run_state(spec) for spec in sweep.runs], f"sweep {sweep.name}", console.width))


def dry_run(sweep: Sweep, console: Console, jobs: int, stack: int | None = None) -> None:
    """The grid (its size: configurations per model, runs in all), what is already done, which runs train as one
    stack (here, and on CUDA under --stack auto), and the estimated cost of the rest (from a few timed steps per
    model and configuration)."""
    from benchbuild.sweep.run import EVALUATION_SAMPLE, check_eval_split, check_folders, estimate

    states = check_folders(sweep)
    check_eval_split(sweep)
    console.print(status_table(states, f"sweep {sweep.name}: {len(states)} runs (dry run: nothing is trained)",
                               console.width))
    console.print(sweep.grid_summary(), markup=False, highlight=False)
    _print_stacks(sweep, states, console, stack)
    missing = sorted({spec.data for spec in sweep.runs if not (Path(spec.data) / "build.json").is_file()})
    if missing:
        console.print(f"benchmark folders still to build ({sweep.file.build or 'no build pipeline given'}): "
                      + ", ".join(missing) + "; no cost estimate before they exist")
        return
    estimates = estimate(sweep, states, jobs)
    for row in estimates:
        how = ("measured (mean of 4 steps after a warm-up step)" if row.measured
               else "scaled by parameters from the first configuration's")
        console.print(f"{row.model}{f' {row.configuration}' if row.configuration else ''}: "
                      f"{row.step_seconds * 1000:.0f} ms per step {how}, {row.steps_left:,} steps left; "
                      f"{row.validations:,} validation{'s' if row.validations != 1 else ''} of "
                      f"{row.validation_seconds:.1f} s and {row.runs_left:,} evaluation"
                      f"{'s' if row.runs_left != 1 else ''} of {row.evaluation_seconds:.1f} s (timed on "
                      f"{EVALUATION_SAMPLE} decoded rows) left", markup=False,
                      highlight=False, soft_wrap=True)
    total = sum(row.seconds for row in estimates)
    console.print(f"estimated time: {_hours(total)} on one worker, about "
                  f"{_hours(total / max(1, min(jobs, len(states))))} with {jobs} in parallel (training steps, "
                  "validations and evaluations as timed on this machine; start-up not counted)", soft_wrap=True)


def _print_stacks(sweep: Sweep, states, console: Console, stack: int | None) -> None:
    """Which runs left would train as one stack: with this --stack on this sweep's device, and on CUDA."""
    from benchbuild.sweep.stacks import AUTO_CUDA_STACK, describe, groups, stack_size

    todo = [state.spec for state in states if state.state != "done"]
    if not todo:
        return
    here = stack_size(stack, todo[0].device)
    on_cuda = stack if stack is not None else AUTO_CUDA_STACK
    for size, where in ((here, f"here (--stack {stack or 'auto'} on {todo[0].device})"),
                        (on_cuda, f"on CUDA (--stack {stack or 'auto'}: up to {on_cuda} runs a stack)")):
        lines = describe(groups(todo, size))
        console.print(f"stacks {where}: " + (f"{len(lines)}\n" + "\n".join(lines) if lines else "none, every run "
                      "trains alone"), markup=False, highlight=False, soft_wrap=True)


def _hours(seconds: float) -> str:
    """`12.5 min` under two hours, else `37.2 h` (a grid's cost)."""
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:,.1f} h"


def run_sweep(sweep: Sweep, engine: EngineParameters, jobs: int, console: Console,
              build: Callable[[Path], None], stack: int | None = None) -> list[str]:
    """Build missing benchmarks (the sweep's `build` pipeline, through `build`), run what is left, write the report
    over every finished run. Returns the report's files. The sweep's folder is locked (`locks.FolderLock`) until
    then: a second sweep of the same file is refused, naming this process."""
    from benchbuild.locks import FolderLock
    from benchbuild.report.write import write_report
    from benchbuild.sweep.run import check_eval_split, check_folders

    engine.check()
    check_folders(sweep)  # a folder of another configuration, or a bad split, fails before the build
    check_eval_split(sweep)
    with FolderLock(sweep.folder, what="sweep"):
        _build_missing(sweep, build)
        failed = _execute(sweep, engine, jobs, console, stack)
        done = [spec.folder for spec in sweep.runs if run_state(spec).state == "done"]
        written: list[str] = []
        if done:
            data = sorted({spec.data for spec in sweep.runs})
            written = [str(path) for path in write_report(done, sweep.report_prefix, sweep.file.report.formats,
                                                          data, grid_rule=sweep.file.grid_selection.rule).files]
    if failed:
        raise BenchbuildError(f"{len(failed)} of {len(sweep.runs)} runs failed (first: {failed[0]}); the report "
                              f"covers the {len(done)} finished ones: fix and rerun the same command")
    return written


def _build_missing(sweep: Sweep, build: Callable[[Path], None]) -> None:
    """Run the sweep's `build` pipeline when a benchmark folder is missing, then check what it made."""
    from benchbuild.sweep.run import check_eval_split

    missing = [spec.data for spec in sweep.runs if not (Path(spec.data) / "build.json").is_file()]
    if not missing:
        return
    if sweep.file.build is None:
        raise BenchbuildError(f"benchmark folder {missing[0]} does not exist: build it first, or name the pipeline "
                              f"that builds it as `build` in {sweep.path}")
    build(Path(sweep.file.build))
    still = [data for data in missing if not (Path(data) / "build.json").is_file()]
    if still:
        raise BenchbuildError(f"{sweep.file.build} ran but did not make {still[0]}: fix the benchmark's data path")
    check_eval_split(sweep)


def _execute(sweep: Sweep, engine: EngineParameters, jobs: int, console: Console, stack: int | None) -> list[str]:
    """`run.execute`, saying how each run ended: a live table on a terminal, a line per run otherwise. Returns the
    folders of the failed runs."""
    from benchbuild.sweep.run import execute

    errors: list[str] = []
    live_view = console.is_terminal

    def report(folder: str, error: str | None) -> None:
        if error is not None:
            errors.append(f"failed {folder}: {error}")
        if not live_view:
            console.print(f"failed {folder}: {error}" if error else f"finished {folder}", markup=False,
                          highlight=False)

    if not live_view:
        return execute(sweep, engine, jobs, report, stack)
    stop = threading.Event()
    with Live(status_table([run_state(s) for s in sweep.runs], f"sweep {sweep.name}", console.width),
              console=console, refresh_per_second=1) as live:
        def refresh() -> None:
            while not stop.wait(2.0):
                live.update(status_table([run_state(s) for s in sweep.runs], f"sweep {sweep.name}", console.width))

        watcher = threading.Thread(target=refresh, daemon=True)
        watcher.start()
        try:
            failed = execute(sweep, engine, jobs, report, stack)
        finally:
            stop.set()
            watcher.join()
            live.update(status_table([run_state(s) for s in sweep.runs], f"sweep {sweep.name}", console.width))
    for line in errors:
        console.print(line, markup=False, highlight=False)
    return failed
