"""Where the heavy stages run: in this process (`--engine local`, the default) or as tasks on Dask distributed
(`--engine dask`): an embedded cluster on this machine, started and stopped by the command, or any running cluster
joined with `--scheduler ADDRESS` (`dask scheduler` + `dask worker`, dask-jobqueue on SLURM/PBS, dask-kubernetes).

The stages are written once against `Engine`:
- `map(function, items, shared=…, resources=…)` runs `function(item, *shared)` for every item and yields the results
  in input order, with a bounded number of tasks in flight, so a stream of shards never sits in memory;
- `share(value)` makes a large read-only value (an n-gram dictionary) available to every task once: Dask scatters it
  to every worker with `broadcast=True` instead of pickling it into each task;
- `resources={"GPU": 1}` asks Dask for a worker that advertises a GPU.
Tasks are module-level functions of picklable arguments; `worker_cached` keeps a value (a spaCy pipeline) in a
worker process across tasks. No result depends on the engine: a stage that maps with either gives the same bytes.

Dask is an optional extra (`pip install 'benchbuild[distributed]'`); nothing here imports it until `--engine dask`
is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from abc import ABC, abstractmethod
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Hashable, Iterable, Iterator, Literal, Optional, Sequence

import typer

from benchbuild.errors import BenchbuildError
from benchbuild.options import check_ranges

DASK_EXTRA = "pip install 'benchbuild[distributed]'"

EngineOption = Annotated[Literal["local", "dask"], typer.Option(
    "--engine", help="local: run in this process; dask: run the heavy stages as Dask distributed tasks (an embedded "
    "cluster on this machine, or the one at --scheduler). The output is the same byte for byte.")]
SchedulerOption = Annotated[Optional[str], typer.Option(
    "--scheduler", metavar="ADDRESS", help="With --engine dask: join the running Dask scheduler at ADDRESS "
    "(tcp://host:8786) instead of starting a cluster on this machine.")]
WorkersOption = Annotated[Optional[int], typer.Option(
    "--workers", min=1, help="With --engine dask and no --scheduler: worker processes of the embedded cluster "
    "(default: one per CPU core).")]


@dataclass(frozen=True)
class EngineParameters:
    """`--engine`, `--scheduler` and `--workers`: where the heavy stages of a command run (never what they give)."""

    engine: EngineOption = "local"
    scheduler: SchedulerOption = None
    workers: WorkersOption = None

    def check(self) -> None:
        """Fail before any work on an engine option that cannot be honoured (Dask missing, options that need
        `--engine dask` given without it)."""
        check_ranges(self)
        if self.engine not in ("local", "dask"):
            raise BenchbuildError(f"--engine must be local or dask; got {self.engine!r}")
        if self.engine == "local":
            given = [name for name, value in (("--scheduler", self.scheduler), ("--workers", self.workers))
                     if value is not None]
            if given:
                raise BenchbuildError(f"{' and '.join(given)} only apply to --engine dask: add --engine dask or "
                                      "leave them out")
            return
        if self.scheduler is not None and self.workers is not None:
            raise BenchbuildError("--workers sizes the embedded cluster and --scheduler joins a running one: give "
                                  "one of them")
        require_dask()


ENGINE_OPTIONS = ("--engine", "--scheduler", "--workers")


def without_engine_options(argv: Iterable[str]) -> list[str]:
    """`argv` less the engine options and their values (`--workers 2` and `--workers=2`): what a build records as
    its command line, since where it ran never changes what it wrote."""
    kept: list[str] = []
    skip_value = False
    for argument in argv:
        if skip_value:
            skip_value = False
            continue
        name, equals, _ = argument.partition("=")
        if name in ENGINE_OPTIONS:
            skip_value = not equals
            continue
        kept.append(argument)
    return kept


def dask_available() -> bool:
    """Whether `dask.distributed` can be imported here (without importing it)."""
    from importlib.util import find_spec

    try:
        return find_spec("distributed") is not None and find_spec("dask") is not None
    except (ImportError, ValueError):
        return False


def require_dask() -> None:
    if not dask_available():
        raise BenchbuildError(f"--engine dask needs Dask distributed, which is not installed: {DASK_EXTRA}")


class Engine(ABC):
    """Runs a stage's tasks; `workers` is how many run at once, `gpus` how many GPU slots the workers advertise."""

    name: str
    workers: int = 1
    gpus: int = 0

    @abstractmethod
    def map(self, function: Callable[..., Any], items: Iterable[Any], *, shared: tuple[Any, ...] = (),
            resources: dict[str, float] | None = None, retries: int = 0) -> Iterator[Any]:
        """`function(item, *shared)` for every item, yielded in the order of `items` (read lazily)."""

    @abstractmethod
    def share(self, value: Any) -> Any:
        """A handle to pass in `map(shared=…)` for a large read-only value, sent to each worker once."""

    def close(self) -> None:
        """Release what the engine started."""

    def abort(self) -> None:
        """Stop at once the tasks the engine runs in processes it started (Ctrl-C, SIGTERM, an error), before
        `close`."""


class LocalEngine(Engine):
    """Everything in this process, one task after another."""

    name = "local"

    def map(self, function: Callable[..., Any], items: Iterable[Any], *, shared: tuple[Any, ...] = (),
            resources: dict[str, float] | None = None, retries: int = 0) -> Iterator[Any]:
        for item in items:
            yield function(item, *shared)

    def share(self, value: Any) -> Any:
        return value


class DaskEngine(Engine):
    """Tasks on a Dask distributed cluster through `client`; at most `window` tasks in flight per `map`."""

    name = "dask"

    def __init__(self, client: Any, cluster: Any = None, window: int | None = None) -> None:
        self.client = client
        self.cluster = cluster
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        self.workers = max(1, sum(int(worker.get("nthreads", 1)) for worker in workers))
        self.gpus = int(sum(worker.get("resources", {}).get("GPU", 0) for worker in workers))
        self.window = window or 2 * self.workers

    def map(self, function: Callable[..., Any], items: Iterable[Any], *, shared: tuple[Any, ...] = (),
            resources: dict[str, float] | None = None, retries: int = 0) -> Iterator[Any]:
        if resources and any(amount > self._available(name) for name, amount in resources.items()):
            raise BenchbuildError(f"the Dask cluster's workers advertise no {', '.join(resources)} resource: start "
                                  "workers with e.g. `dask worker ADDRESS --resources GPU=1`, or use --device cpu")
        pending: deque[Any] = deque()
        try:
            for item in items:
                pending.append(self.client.submit(function, item, *shared, resources=resources, retries=retries,
                                                  pure=False))
                if len(pending) >= self.window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            if pending:  # an error or an abandoned stream: stop what is still queued
                self.client.cancel(list(pending))

    def share(self, value: Any) -> Any:
        return self.client.scatter(value, broadcast=True, hash=False)

    def _available(self, resource: str) -> float:
        workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
        return max((worker.get("resources", {}).get(resource, 0) for worker in workers), default=0)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def abort(self) -> None:
        """The embedded cluster's worker processes terminated now, each nanny first told not to start another: a
        closing cluster would otherwise let the running tasks go on for its seconds of shutdown (a Ctrl-C'd sweep's
        runs trained some 500 steps more). A cluster joined with --scheduler is not ours to stop: `map` cancels
        what it queued there."""
        if self.cluster is None:
            return
        for nanny in list(self.cluster.workers.values()):
            pid = getattr(nanny, "pid", None)
            if pid is None:
                continue
            nanny.close_gracefully()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


@contextmanager
def open_engine(parameters: EngineParameters, *, gpus: int = 0) -> Iterator[Engine]:
    """The engine `parameters` ask for, closed on exit. An embedded Dask cluster gets `--workers` single-threaded
    worker processes (default: one per CPU core); when `gpus` > 0, every worker advertises `GPU=1` and sees one
    GPU (`CUDA_VISIBLE_DEVICES`, round-robin), so several workers may share a GPU."""
    parameters.check()
    if parameters.engine == "local":
        yield LocalEngine()
        return
    engine = _join(parameters.scheduler) if parameters.scheduler else _embedded(parameters.workers, gpus)
    try:
        yield engine
    except BaseException:
        engine.abort()
        raise
    finally:
        engine.close()


def _join(address: str) -> DaskEngine:
    from distributed import Client

    try:
        client = Client(address)  # waits `distributed.comm.timeouts.connect` (Dask config; 30 s by default)
    except (OSError, TimeoutError) as error:
        raise BenchbuildError(f"could not reach the Dask scheduler at --scheduler {address} ({error}): start it "
                              "with `dask scheduler` and give the address it prints") from None
    return DaskEngine(client)


def embedded_worker_specs(workers: int, gpus: int) -> dict[str, dict[str, Any]]:
    """Worker specs of the embedded cluster: `workers` single-threaded processes, with a GPU each when `gpus` > 0."""
    from distributed import Nanny

    # The GPUs this process may use, by the ids the driver knows them by: those CUDA_VISIBLE_DEVICES names, if set.
    visible = [device for device in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if device.strip()]
    ids = visible[:gpus] if len(visible) >= gpus else [str(index) for index in range(gpus)]
    specs = {}
    for index in range(workers):
        # A failed task is re-raised in the command, which says it once: the workers' own logs would repeat it.
        # No statistical profiler: it samples every task's stack every 10 ms for a dashboard the cluster does not run.
        options: dict[str, Any] = {"nthreads": 1, "silence_logs": logging.CRITICAL,
                                   "config": {"distributed.worker.profile.enabled": False}}
        if gpus:
            options["resources"] = {"GPU": 1}
            options["env"] = {"CUDA_VISIBLE_DEVICES": ids[index % gpus]}
        specs[f"worker-{index}"] = {"cls": Nanny, "options": options}
    return specs


def _embedded(workers: int | None, gpus: int) -> DaskEngine:
    from distributed import Client, Scheduler, SpecCluster

    count = workers or os.cpu_count() or 1
    cluster = SpecCluster(workers=embedded_worker_specs(count, gpus),
                          scheduler={"cls": Scheduler, "options": {"dashboard": False, "dashboard_address": ":0"}},
                          silence_logs=logging.ERROR, name="benchbuild")
    return DaskEngine(Client(cluster), cluster)


class ProcessPoolEngine(Engine):
    """Each task in a fresh process of this machine (spawned), at most one per slot at once. A slot is the
    environment its task's process starts with — `{"CUDA_VISIBLE_DEVICES": "1"}` gives each task one GPU, so N
    GPUs run N tasks at once without Dask, each in a process of its own (`accelerate`'s state is per process).
    Results are yielded in input order; a failed task is run again up to `retries` times."""

    name = "processes"

    def __init__(self, slots: Sequence[dict[str, str]]) -> None:
        if not slots:
            raise ValueError("a process pool needs at least one slot")
        self.slots = [dict(slot) for slot in slots]
        self.workers = len(self.slots)
        self.gpus = sum(1 for slot in self.slots if "CUDA_VISIBLE_DEVICES" in slot)

    def map(self, function: Callable[..., Any], items: Iterable[Any], *, shared: tuple[Any, ...] = (),
            resources: dict[str, float] | None = None, retries: int = 0) -> Iterator[Any]:
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        context = multiprocessing.get_context("spawn")
        # One single-process executor per slot, its process replaced after every task: a slot's environment is
        # set before the task's process imports anything, and no process runs two tasks.
        executors = [ProcessPoolExecutor(1, mp_context=context, initializer=_set_environment, initargs=(slot,),
                                         max_tasks_per_child=1) for slot in self.slots]
        free = list(range(len(self.slots)))
        queued = iter(enumerate(items))
        running: dict[Any, tuple[int, Any, int, int]] = {}  # future -> (index, item, slot, attempt)
        done: dict[int, Any] = {}
        following = 0
        try:
            while True:
                while free and len(done) + len(running) < 2 * self.workers:
                    entry = next(queued, None)
                    if entry is None:
                        break
                    slot = free.pop(0)
                    running[executors[slot].submit(function, entry[1], *shared)] = (*entry, slot, 0)
                if not running and following not in done:
                    return
                if following in done:
                    yield done.pop(following)
                    following += 1
                    continue
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    index, item, slot, attempt = running.pop(future)
                    error = future.exception()
                    if error is not None and attempt < retries:
                        running[executors[slot].submit(function, item, *shared)] = (index, item, slot, attempt + 1)
                        continue
                    free.append(slot)
                    if error is not None:
                        raise error
                    done[index] = future.result()
        finally:
            for future in running:
                future.cancel()
            for executor in executors:
                executor.shutdown(wait=True, cancel_futures=True)

    def share(self, value: Any) -> Any:
        return value


def _set_environment(environment: dict[str, str]) -> None:
    os.environ.update(environment)


_WORKER_CACHE: dict[Hashable, Any] = {}
_WORKER_GROUPS: dict[Hashable, Hashable] = {}


def worker_cached(key: Hashable, make: Callable[[], Any], *, group: Hashable | None = None) -> Any:
    """`make()` once per process (a Dask worker or this one), then the same value for every later task. Values of
    one `group` replace each other: a process keeps the latest only (an ensemble that holds a GPU's memory)."""
    if key not in _WORKER_CACHE:
        if group is not None and _WORKER_GROUPS.get(group) is not None:
            _WORKER_CACHE.pop(_WORKER_GROUPS.pop(group), None)
        _WORKER_CACHE[key] = make()
        if group is not None:
            _WORKER_GROUPS[group] = key
    return _WORKER_CACHE[key]
