"""How `pytest -n 2 --dist loadfile` deals the tests to the two workers (the hooks in tests/conftest.py).

A unit of work is a test file, or a whole folder where the folder's files share session fixtures that are expensive
to build (tests/report's trained runs, tests/publishing's built benchmarks, tests/importing's trained model): a
session fixture is built once per worker that needs it, so such a folder goes to one worker. The units are dealt
slowest first (longest-processing-time order): pytest-xdist by itself deals the files with the most tests first,
which left single slow tests (the wheel, the ReaCT build) to run alone at the end while the other worker idled.
"""

from __future__ import annotations

# Folders whose files share expensive session fixtures: one unit each.
SHARED_FIXTURE_FOLDERS = ("tests/report", "tests/publishing", "tests/importing", "tests/nounadj")

# The slowest units, slowest first, as `--durations` measured them (twenty-second session: seconds of one worker,
# quiet machine; test_cli_scan.py and test_kill_builds.py moved down in the twenty-third, which cut them; a unit not
# named comes after these, in collection order). An out-of-date list only costs time.
SLOWEST_FIRST = (
    "tests/test_sweep.py",  # the smoke sweep (12 runs) and the Dask sweep: ~130 s
    "tests/test_sweep_safety.py",  # signals to local and Dask sweeps: ~110 s
    "tests/report",  # ~100 s, the trained runs once
    "tests/publishing",  # ~75 s
    "tests/zoo/test_zoo_models.py",
    "tests/test_gpu_queue.py",
    "tests/distributed/test_react_dask.py",
    "tests/test_sweep_grid.py",
    "tests/test_interrupted_commands.py",
    "tests/training/test_stack.py",
    "tests/react/test_react_build.py",
    "tests/importing",
    "tests/test_wheel.py",
    "tests/test_cli_scan.py",
    "tests/test_kill_builds.py",
    "tests/training/test_token_batches.py",
    "tests/zoo/test_incremental_decoding.py",
    "tests/training/test_batching.py",
    "tests/training/test_run_folder_safety.py",
    "tests/nounadj",
    "tests/test_imports.py",
    "tests/distributed/test_engine.py",
    "tests/distributed/test_nounadj_dask.py",
    "tests/test_pipeline_and_messages.py",
)


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its folder if listed above, else its file."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/"):  # run from inside tests/
        path = f"tests/{path}"
    folder = path.rsplit("/", 1)[0]
    return folder if folder in SHARED_FIXTURE_FOLDERS else path


def rank(nodeid: str) -> int:
    """Where a test's unit comes in the order of dealing (unlisted units last)."""
    name = unit(nodeid)
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)


def make_scheduler(config, log):
    """`--dist loadfile` with the units above, dealt in the order of the collection (which `rank` sorted)."""
    from xdist.scheduler import LoadScopeScheduling

    class SlowestFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    config.option.loadscopereorder = False  # keep the collection's order (slowest first), not the most tests first
    return SlowestFirst(config, log)
