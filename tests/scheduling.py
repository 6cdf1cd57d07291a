"""How `pytest -n 2 --dist loadfile` deals the tests to the two workers (the hooks in tests/conftest.py).

A unit of work is a test file, or a whole folder where the folder's files share session fixtures that are expensive
to build (tests/report's trained runs, tests/publishing's built benchmarks, tests/importing's trained model), or the
files of several folders that join the test run's shared Dask cluster (`dask_scheduler` in tests/conftest.py: two
worker processes, each importing torch and benchbuild at its first task, ~20 s of CPU): a session-scoped fixture is
built once per worker that needs it, so such a group goes to one worker. The units are dealt slowest first
(longest-processing-time order): pytest-xdist by itself deals the files with the most tests first, which left single
slow tests (the wheel, the ReaCT build) to run alone at the end while the other worker idled.
"""

from __future__ import annotations

# Folders whose files share expensive session fixtures: one unit each.
SHARED_FIXTURE_FOLDERS = ("tests/report", "tests/publishing", "tests/importing", "tests/nounadj")

# The files that use `dask_scheduler` (tests/test_scheduling.py keeps this list whole): one unit, "dask cluster".
DASK_CLUSTER = "dask cluster"
DASK_CLUSTER_FILES = ("tests/distributed/test_engine.py", "tests/distributed/test_nounadj_dask.py",
                      "tests/distributed/test_react_dask.py", "tests/react/test_degree_pools.py", "tests/test_sweep.py",
                      "tests/training/test_token_batches.py")

# The slowest units, slowest first, with their seconds in the clean-clone CI run of 2026-12-05 (junit times, two
# workers; a unit not named comes after these, in collection order). An out-of-date list only costs time.
SLOWEST_FIRST = (
    DASK_CLUSTER,  # 198 s: the smoke sweep (12 runs), the Dask sweep, the ReaCT and noun-adjective builds on Dask
    "tests/test_gpu_queue.py",  # 122 s: every item's rehearsal
    "tests/test_sweep_safety.py",  # 105 s: signals to local and Dask sweeps
    "tests/report",  # 64 s: the trained runs once
    "tests/training/test_stack.py",  # 64 s
    "tests/test_interrupted_commands.py",  # 35 s
    "tests/importing",  # 35 s
    "tests/test_wheel.py",  # 32 s
    "tests/publishing",  # 31 s
    "tests/zoo/test_zoo_models.py",  # 30 s
    "tests/test_sweep_grid.py",  # 29 s
    "tests/react/test_react_build.py",  # 28 s
    "tests/test_kill_builds.py",  # 22 s
    "tests/nounadj",  # 22 s
    "tests/reference/test_syntactic_attention_002.py",  # 21 s
    "tests/reference/test_transformer_003.py",  # 17 s
    "tests/training/test_batching.py",  # 17 s
    "tests/training/test_hold_out.py",  # 17 s
    "tests/test_cli_scan.py",  # 15 s
    "tests/test_code_from_data.py",  # 15 s
    "tests/zoo/test_incremental_decoding.py",  # 15 s
    "tests/training/test_thread_determinism.py",  # 14 s
)


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its group or folder if listed above, else its file."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/"):  # run from inside tests/
        path = f"tests/{path}"
    if path in DASK_CLUSTER_FILES:
        return DASK_CLUSTER
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
