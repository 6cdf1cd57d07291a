"""Shared fixtures: the `../shared` data folder (skip when absent, fail when BENCHBUILD_REQUIRE_SHARED=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_root() -> Path:
    """`$BENCHBUILD_SHARED` if set, else `../shared` beside the checkout."""
    return Path(os.environ.get("BENCHBUILD_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`<shared>/data`; tests using it skip where it is absent unless BENCHBUILD_REQUIRE_SHARED=1 makes that a failure."""
    data = shared_root() / "data"
    if not data.is_dir():
        reason = f"shared data folder {data} is absent (set BENCHBUILD_SHARED or put ../shared beside the checkout)"
        if os.environ.get("BENCHBUILD_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " and BENCHBUILD_REQUIRE_SHARED=1")
        pytest.skip(reason)
    return data


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Run torch on one thread: the models in tests are tiny, and on a 2-core box two threads contend."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_collection_modifyitems(config, items):
    import torch

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
