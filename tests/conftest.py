"""Shared fixtures: the `../shared` data folder (skip when absent, fail when BENCHBUILD_REQUIRE_SHARED=1) and a small
SCAN benchmark read from it; every test that uses that folder is marked `shared`, so `-m "not shared"` runs without
it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from small_inputs import scan_file_rows, shared_folder, shared_root, write_benchmark

ROOT = Path(__file__).resolve().parent.parent
# The commands the tests start run torch and numba on one thread too: with the suite on both cores (pytest-xdist) a
# second thread per process only contends, and torch's spinning threads then run tiny models 10-25x slower than one
# thread does (measured: 20 Transformer steps, 1.5 s on one thread, 36 s on two while another process is busy).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

# `make mutation` (tools/mutation.py) runs the tests once per mutant: there a failing property only has to be found,
# not shrunk to its smallest example (which can take minutes on a mutant that breaks every input), and examples that
# failed on earlier mutants are tried first (hypothesis's example database, kept in the mutation's scratch folder).
settings.register_profile("mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate], deadline=None)
if os.environ.get("BENCHBUILD_MUTATION") == "1":
    settings.load_profile("mutation")


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` deals units, slowest first (tests/scheduling.py); any other mode is pytest-xdist's own."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from scheduling import make_scheduler

    return make_scheduler(config, log)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`<shared>/data`; tests using it skip where it is absent unless BENCHBUILD_REQUIRE_SHARED=1 makes that a failure."""
    return shared_folder("data", "shared data folder")


@pytest.fixture(scope="session")
def tiny_scan(shared_data: Path, tmp_path_factory) -> Path:
    """A SCAN benchmark folder (`scan/simple`: word tokenizer, the SCAN recipe) of the first 120 train and 20 test
    rows of the canonical `simple` files with at most 4 actions; training holds 12 train rows out for validation."""
    folder = shared_data / "scan" / "simple_split"
    splits = {"train": scan_file_rows(folder / "tasks_train_simple.txt", "train", 120, 4),
              "test": scan_file_rows(folder / "tasks_test_simple.txt", "test", 20, 4)}
    return write_benchmark(tmp_path_factory.mktemp("bench") / "simple", splits, "scan", "simple")


@pytest.fixture(scope="session")
def kill_seed() -> int:
    """The seed of the tests' random kill points: `BENCHBUILD_KILL_SEED` when set, else drawn afresh each session.
    Tests print it with each kill point and name it in their failures, so a failing point can be replayed."""
    import random

    return int(os.environ.get("BENCHBUILD_KILL_SEED") or random.SystemRandom().randrange(2 ** 32))


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Run torch on one thread for the whole session: the models in tests are tiny, and on a 2-core box two threads
    contend. numba's OpenMP layer, at its first dropout kernel, would reset the count to the machine's (so tests
    after it computed otherwise): it is started first, as `benchbuild.device.cpu_threads` does."""
    from benchbuild.device import cpu_threads

    with cpu_threads(1):
        yield


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """A test that uses `shared_data` (itself or through a fixture such as `tiny_scan`) is marked `shared`, whether
    or not its file says so; without CUDA, `gpu` tests are skipped. The slowest units come first (tests/scheduling.py;
    within a unit the collection's own order), so that pytest-xdist deals them first."""
    import torch
    from scheduling import rank

    items.sort(key=lambda item: rank(item.nodeid))  # a stable sort: the rest keeps its order

    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()) and item.get_closest_marker("shared") is None:
            item.add_marker(pytest.mark.shared)
    if not torch.cuda.is_available():
        skip_gpu = pytest.mark.skip(reason="needs CUDA; none on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture
def logged():
    """`with logged("transformers") as messages:` collects what a library logs (its own loggers do not propagate to
    pytest's caplog)."""
    import contextlib
    import logging

    @contextlib.contextmanager
    def collect(name: str):
        messages: list[str] = []
        handler = logging.Handler(logging.DEBUG)
        handler.emit = lambda record: messages.append(record.getMessage())
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        try:
            yield messages
        finally:
            logger.removeHandler(handler)

    return collect


@pytest.fixture(scope="session")
def dask_scheduler():
    """The address of a real Dask `LocalCluster` for the whole session: 2 single-threaded worker processes, no
    dashboard (commands join it with `--engine dask --scheduler ADDRESS`)."""
    import logging

    distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (the `distributed` "
                                      "extra)")
    import dask

    with dask.config.set({"distributed.worker.profile.enabled": False}):  # as benchbuild's embedded cluster
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=logging.CRITICAL)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()
