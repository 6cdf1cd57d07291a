"""Run a sweep: skip the runs that are done, resume the killed ones, schedule the rest, then write the report.

Locally, `--jobs N` worker processes take runs one at a time (one per GPU when there are GPUs: each worker keeps one
GPU; on CPU the cores are split evenly between them). With `--engine dask`, each run is one task (`resources={"GPU":
1}` when the workers advertise GPUs), retried once on failure. A run is `train` (resuming from the run folder's last
checkpoint when one is there) then `eval`; both are the same functions the commands call, so a run folder is the same
whichever way it was made. No run outlives the sweep: Ctrl-C or SIGTERM stops every worker (the local processes are
terminated, the Dask tasks cancelled and an embedded cluster closed) and a worker exits when the sweep's process
dies, so a stopped or killed sweep leaves no run behind that goes on writing, and the same command finishes what was
left (each run resumes from its last checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from benchbuild.atomic import running
from benchbuild.engine import EngineParameters, open_engine
from benchbuild.errors import BenchbuildError
from benchbuild.sweep.spec import CONFIG_FILE, RunSpec, Sweep
from benchbuild.sweep.stacks import Group
from benchbuild.sweep.state import RunState, run_state

_WORKER: dict[str, Any] = {}


def cpu_budget() -> int:
    """The CPU threads a sweep shares among its jobs: OMP_NUM_THREADS when the user set it (as torch itself
    reads it), else every core of the machine."""
    try:
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        return os.cpu_count() or 1


def run_one(spec: RunSpec, threads: int, root: str) -> dict[str, Any]:
    """Train (or resume) and score one run into its folder, on `threads` torch threads; relative paths of the sweep
    are taken from `root` (the sweep's working folder: a Dask worker runs elsewhere, on the same filesystem)."""
    from tqdm import tqdm

    from benchbuild.device import cpu_threads
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    # tqdm's default lock is a multiprocessing semaphore, which a worker stopped by the sweep (terminated, or killed
    # by Dask's nanny) leaves to the resource tracker, and that warns of a leak; a worker draws no progress bars.
    tqdm.set_lock(threading.RLock())

    folder = _configured_folder(spec, root)
    state_of = dataclasses.replace(spec, folder=str(folder))  # `data` as the sweep file gives it: the recorded one
    data = str(Path(root, spec.data))
    device = _WORKER.get("device") or spec.device
    with cpu_threads(threads):
        if run_state(state_of).state in ("pending", "partial"):
            train(spec.model, data, folder, seed=spec.seed, max_steps=spec.max_steps, max_minutes=spec.max_minutes,
                  device=device, recipe=spec.recipe, overrides=spec.overrides or None,
                  architecture_overrides=spec.architecture_overrides or None, progress=False,
                  stop_when_settled=spec.stop_when_settled)
        if run_state(state_of).state != "done":
            evaluate_run(folder, data, split=spec.split, beam=spec.beam, batch_size=spec.batch_size, device=device,
                         progress=False)
    return {"folder": spec.folder}


def check_folders(sweep: Sweep) -> list[RunState]:
    """Every run's state; a folder outside the sweep's folder (through a symbolic link) or one that holds another
    configuration is refused before anything runs."""
    home = sweep.folder.resolve()
    for spec in sweep.runs:
        if not Path(spec.folder).resolve().is_relative_to(home):
            raise BenchbuildError(f"{spec.folder} leads outside the sweep's folder {sweep.folder} (to "
                                  f"{Path(spec.folder).resolve()}): benchbuild never writes through a symbolic link "
                                  "out of the folder it was given; remove the link")
    states = [run_state(spec) for spec in sweep.runs]
    conflicts = [state.spec.folder for state in states if state.state == "conflict"]
    if conflicts:
        raise BenchbuildError(f"{conflicts[0]} holds a run of another configuration than {sweep.path} says"
                              f"{f' (and {len(conflicts) - 1} more)' if len(conflicts) > 1 else ''}: move it away, "
                              "or give the sweep another name or out")
    return states


def check_eval_split(sweep: Sweep) -> None:
    """Refuse an `[eval] split` that a built benchmark of the sweep lacks (those not built yet are checked once the
    build made them), before anything trains."""
    from benchbuild.benchmark import read_build_info

    split = sweep.file.eval.split
    for data in sorted({spec.data for spec in sweep.runs}):
        if not (Path(data) / "build.json").is_file():
            continue
        splits = read_build_info(data).splits
        if split not in splits:
            raise BenchbuildError(f"{sweep.path}: [eval] split {split!r} is not a split of {data} (its splits: "
                                  f"{', '.join(splits)}): fix [eval] split; nothing was trained")


def execute(sweep: Sweep, engine: EngineParameters, jobs: int, on_finished: Callable[[str, str | None], None],
            stack: int | None = None) -> list[str]:
    """Run every run that is not done, runs that differ only in seed in stacks of up to `stack` (None: auto,
    `stacks.stack_size`); `on_finished(folder, error)` after each (`error` None when it succeeded). Returns the
    folders of the failed runs."""
    from benchbuild.sweep.stacks import groups, stack_size

    todo = [state.spec for state in check_folders(sweep) if state.state != "done"]
    if not todo:
        return []
    work = groups(todo, stack_size(stack, todo[0].device))
    if engine.engine == "dask":
        return _on_dask(work, engine, on_finished)
    return _locally(work, jobs, on_finished)


def run_group(group: Group, threads: int, root: str) -> list[dict[str, Any]]:
    """`run_one` for a run trained alone; for a stack, train (or resume) its runs together (`train_stack`) and score
    each: one result per run, a run that failed in the stack with its error."""
    if not group.stacked:
        return [run_one(group.specs[0], threads, root)]
    from tqdm import tqdm

    from benchbuild.device import cpu_threads
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import RunOptions
    from benchbuild.training.stack import train_stack

    tqdm.set_lock(threading.RLock())  # as in run_one
    device = _WORKER.get("device") or group.specs[0].device
    first = group.specs[0]
    data = str(Path(root, first.data))
    members = []
    for spec in group.specs:
        folder = _configured_folder(spec, root)
        if run_state(dataclasses.replace(spec, folder=str(folder))).state in ("pending", "partial"):
            members.append((folder, RunOptions(
                seed=spec.seed, max_steps=spec.max_steps, device=device, recipe=spec.recipe,
                overrides=spec.overrides or None, architecture_overrides=spec.architecture_overrides or None,
                progress=False)))
    results = {}
    with cpu_threads(threads):
        failed = train_stack(first.model, data, members, progress=False).failed if members else {}
        for spec in group.specs:
            folder = Path(root, spec.folder)
            if folder in failed:
                results[spec.folder] = {"folder": spec.folder, "error": failed[folder]}
                continue
            try:
                if run_state(dataclasses.replace(spec, folder=str(folder))).state != "done":
                    evaluate_run(folder, data, split=spec.split, beam=spec.beam, batch_size=spec.batch_size,
                                 device=device, progress=False)
                results[spec.folder] = {"folder": spec.folder}
            except BenchbuildError as error:
                results[spec.folder] = {"folder": spec.folder, "error": str(error)}
    return [results[spec.folder] for spec in group.specs]


def _configured_folder(spec: RunSpec, root: str) -> Path:
    """The run's folder under `root`, holding the sweep's record of its configuration (`sweep_run.json`)."""
    folder = Path(root, spec.folder)
    config = folder / CONFIG_FILE
    if not config.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / (CONFIG_FILE + ".partial")
        partial.write_text(json.dumps(spec.config(), indent=2) + "\n", encoding="utf-8")
        partial.replace(config)
    return folder


def _on_dask(work: list[Group], parameters: EngineParameters,
             on_finished: Callable[[str, str | None], None]) -> list[str]:
    from benchbuild.device import visible_cuda_devices

    device = work[0].specs[0].device
    gpus = visible_cuda_devices() if device != "cpu" and parameters.scheduler is None else 0
    failed = []
    with open_engine(parameters, gpus=gpus) as engine:
        resources = {"GPU": 1} if engine.gpus and device != "cpu" else None
        # Each task trains with one thread: a Dask worker is one single-threaded process.
        outcomes = engine.map(_guarded, work, shared=(1, os.getcwd()), resources=resources, retries=1)
        for group, results in zip(work, outcomes):
            for spec, result in zip(group.specs, results):
                if "error" in result:
                    failed.append(spec.folder)
                on_finished(spec.folder, result.get("error"))
    return failed


def _guarded(group: Group, threads: int, root: str) -> list[dict[str, Any]]:
    """`run_group`, with a user error (BenchbuildError) returned for each of its runs instead of raised: one bad run
    does not stop the others; anything else is raised (and retried by Dask)."""
    try:
        return run_group(group, threads, root)
    except BenchbuildError as error:
        return [{"folder": spec.folder, "error": str(error)} for spec in group.specs]


def _locally(work: list[Group], jobs: int, on_finished: Callable[[str, str | None], None]) -> list[str]:
    from benchbuild.device import resolve_device, visible_cuda_devices

    gpus = visible_cuda_devices() if work[0].specs[0].device != "cpu" else 0
    if gpus:
        resolve_device(work[0].specs[0].device, gpus)
        devices = [f"cuda:{index % gpus}" for index in range(jobs)]
    else:
        devices = [None] * jobs
    threads = max(1, cpu_budget() // jobs)
    context = _worker_context()
    queue = context.Queue()
    for device in devices:
        queue.put(device)
    failed = []
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_start_worker,
                               initargs=(queue, os.getpid()))
    try:
        pending = {pool.submit(_guarded, group, threads, os.getcwd()): group for group in work}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                group = pending.pop(future)
                for spec, result in zip(group.specs, future.result()):
                    if "error" in result:
                        failed.append(spec.folder)
                    on_finished(spec.folder, result.get("error"))
    except BaseException:
        # Ctrl-C, SIGTERM (`Terminated`) or an error: `shutdown` alone would wait for every queued run to train to
        # the end. A terminated run resumes from its last checkpoint when the sweep is run again.
        _stop_workers(pool)
        raise
    pool.shutdown()
    return failed


def _worker_context():
    """The fork server where the platform has one: it imports torch, transformers, the training code and scipy's
    statistics (every evaluation's bootstrap intervals) once and forks each worker from itself (about 5 s of CPU a
    worker saved), and a CUDA context, which a forked process cannot share, is never made in it; elsewhere (Windows)
    spawn, each worker importing on its own."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["benchbuild.training.loop", "benchbuild.evaluation.evaluate", "scipy.stats"])
    return context


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued runs and terminate the running ones (SIGTERM, then SIGKILL after 10 s), waiting until every
    worker process is gone, so no run goes on writing and the runs' folder locks are free for a rerun."""
    processes = list((pool._processes or {}).values())  # the public terminate_workers() is Python 3.14's
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(10.0)
        if process.is_alive():
            process.kill()
            process.join()


def _start_worker(devices, sweep: int) -> None:
    """A local worker: take one device, and exit when the sweep's process is gone (killed). Ctrl-C reaches every
    process of the terminal's foreground group: a worker leaves it to the sweep's process, which stops the workers
    itself, so none prints a traceback of its own."""
    import multiprocessing

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER["device"] = devices.get()
    # A worker starts no process of its own. Under the fork server numba's threading layer (`device.cpu_threads`
    # starts it) would take a multiprocessing lock, whose semaphore a terminated worker leaves behind for the
    # resource tracker to warn about; under spawn it takes none.
    multiprocessing.set_start_method("spawn", force=True)

    # The worker's parent is the sweep's process (spawn) or the fork server, which outlives a killed sweep as long as
    # its workers do: the worker watches both.
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent and running(sweep):
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


# Test rows decoded to time a run's evaluation (scaled to the split's size): enough batches to average over.
EVALUATION_SAMPLE = 64


@dataclass(frozen=True)
class Estimate:
    """The cost of one model configuration's runs left in a sweep: seconds per training step (`measured` on the
    model's first configuration, else scaled from it), the steps left, and per run the seconds of one validation, the
    validations a run makes, and its evaluation (decoding the eval split)."""

    model: str
    configuration: str
    step_seconds: float
    steps_left: int
    measured: bool
    validation_seconds: float
    validations: int  # over the runs left, each run's budget over its validation interval
    evaluation_seconds: float
    runs_left: int

    @property
    def seconds(self) -> float:
        return (self.step_seconds * self.steps_left + self.validation_seconds * self.validations
                + self.evaluation_seconds * self.runs_left)


def estimate(sweep: Sweep, states: list[RunState], jobs: int) -> list[Estimate]:
    """Per model and grid configuration ("" without a grid), what its runs left will cost (`Estimate`), each run's
    budget its own (a recipe in `epochs` gives each benchmark its train set's count: `planned_steps`). A model's first
    configuration is timed on its first benchmark in a scratch folder: the mean of 4 steps after a warm-up step
    (kernel compilation and allocation are not a step's cost), one validation and checkpoint, and the decoding of
    `EVALUATION_SAMPLE` rows of the eval split with the sweep's (or the recipe's) beam, scaled to the split; its
    other configurations are scaled from it by their parameter counts (a step's work grows with the weights it
    multiplies), so a grid of 144 configurations costs five measurements, not 144. The sweep's wall time is about
    their sum over `jobs` parallel runs."""
    import dataclasses
    import functools
    import tempfile

    import torch

    from benchbuild import zoo
    from benchbuild.benchmark import load_splits, read_build_info
    from benchbuild.sweep.spec import budget_recipe
    from benchbuild.training.loop import RunOptions, plan_run, prepare, step, validate_and_checkpoint
    from benchbuild.training.plan import token_batches_per_epoch
    from benchbuild.zoo.recipe import epoch_in_token_batches, planned_steps, validation_interval
    from benchbuild.zoo.decoding import decoding_limit, generate_predictions, length_rule

    entry_of = functools.cache(zoo.load_entry)  # read once a model, not once a configuration

    @functools.cache
    def split_rows(data: str) -> dict[str, int]:
        return {name: split.rows for name, split in read_build_info(data).splits.items()}

    @functools.cache
    def recipe_of(model: str, benchmark: str, recipe: str | None, overrides: str):
        return budget_recipe(model, benchmark, recipe, json.loads(overrides))

    @functools.cache
    def per_epoch(model: str, benchmark: str, recipe: str | None, overrides: str, data: str) -> int | None:
        """Token batches an epoch where the recipe counts epochs of them (seed 0's: an estimate), else None."""
        resolved = recipe_of(model, benchmark, recipe, overrides)
        return token_batches_per_epoch(data, resolved) if epoch_in_token_batches(resolved) else None

    def recipe_and_batches(spec):
        key = (spec.model, spec.benchmark, spec.recipe, json.dumps(spec.overrides, sort_keys=True))
        return recipe_of(*key), per_epoch(*key, str(spec.data))

    def budget(spec) -> int:
        if spec.max_steps is not None:
            return spec.max_steps
        recipe, batches = recipe_and_batches(spec)
        return planned_steps(recipe, split_rows(spec.data), token_batches=batches)

    def validations(spec) -> int:
        recipe, batches = recipe_and_batches(spec)
        return math.ceil(budget(spec) / validation_interval(recipe, split_rows(spec.data), token_batches=batches))

    def weights(spec, tokenizer) -> int:
        """The configuration's parameter count, counted on the meta device (nothing allocated); with separate
        dictionaries the encoder's table is the source dictionary's (and may be of another width)."""
        recipe = recipe_of(spec.model, spec.benchmark, spec.recipe, json.dumps(spec.overrides, sort_keys=True))
        entry = entry_of(spec.model)
        entry = dataclasses.replace(entry, architecture={**entry.architecture, **recipe.architecture})
        overrides = dict(spec.architecture_overrides or {})
        if recipe.dictionaries == "separate":
            overrides["source_vocab_size"] = len(getattr(tokenizer, "source", tokenizer))
        target = getattr(tokenizer, "target", tokenizer)
        with torch.device("meta"):
            network = zoo.build_model(entry, vocab_size=len(target), pad_token_id=target.pad_token_id,
                                      bos_token_id=target.bos_token_id, eos_token_id=target.eos_token_id,
                                      overrides=overrides or None)
        return sum(parameter.numel() for parameter in network.parameters())

    def evaluation_seconds(run, spec) -> float:
        rows = load_splits(spec.data)[spec.split]
        sample = rows.select(range(min(EVALUATION_SAMPLE, len(rows))))
        network = run.accelerator.unwrap_model(run.network)
        beam = spec.beam if spec.beam is not None else run.recipe.beam
        started = time.perf_counter()
        generate_predictions(network, run.tokenizer, list(sample["source"]), beam=beam, batch_size=spec.batch_size,
                             max_new_tokens=decoding_limit(run.tokenizer, list(sample["target"])),
                             length_rule=length_rule(run.recipe.to_dict()), device=run.accelerator.device)
        return (time.perf_counter() - started) * len(rows) / max(1, len(sample))

    rows = []
    grouped: dict[tuple[str, str], list] = {}
    for state in states:
        grouped.setdefault((state.spec.model, state.spec.configuration), []).append(state)
    for model in dict.fromkeys(state.spec.model for state in states):
        timed = None  # (step, validation, evaluation seconds, weights, tokenizer) of the first configuration
        for configuration in dict.fromkeys(configuration for key, configuration in grouped if key == model):
            runs = grouped[(model, configuration)]
            first = runs[0].spec
            pending = [state for state in runs if state.state not in ("done", "trained")]
            left = sum(budget(state.spec) - state.step for state in pending)
            if timed is None:
                with tempfile.TemporaryDirectory(prefix="benchbuild-sweep-estimate-") as scratch:
                    run = prepare(plan_run(model, first.data, Path(scratch) / "run", RunOptions(
                        seed=0, max_steps=10, device=first.device, recipe=first.recipe,
                        overrides=first.overrides or None,
                        architecture_overrides=first.architecture_overrides or None, progress=False)))
                    step(run)  # first-call costs (kernel compilation, allocation) are not a step's
                    started = time.perf_counter()
                    for _ in range(4):
                        step(run)
                    seconds = (time.perf_counter() - started) / 4
                    started = time.perf_counter()
                    validate_and_checkpoint(run)
                    validation = time.perf_counter() - started
                    evaluation = evaluation_seconds(run, first)
                timed = (seconds, validation, evaluation, weights(first, run.tokenizer), run.tokenizer)
                scale, measured = 1.0, True
            else:
                scale, measured = weights(first, timed[4]) / timed[3], False
            rows.append(Estimate(model, configuration, timed[0] * scale, left, measured, timed[1] * scale,
                                 sum(validations(state.spec) for state in pending), timed[2] * scale, len(pending)))
    return rows
