"""The engine seam (benchbuild.engine): the same map in this process and on a real Dask cluster, in input order."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchbuild.engine import (EngineParameters, LocalEngine, ProcessPoolEngine, embedded_worker_specs, open_engine,
                               worker_cached)
from benchbuild.errors import BenchbuildError
from both_workers import after_another_worker

pytestmark = pytest.mark.distributed
ROOT = Path(__file__).resolve().parents[2]


def _pid_and_square(item: int, rendezvous: str) -> tuple[int, int]:
    import time

    pid = after_another_worker(rendezvous)
    time.sleep(0.01 * (item % 3))  # finish out of order on purpose
    return pid, item * item


def _cached_identity(item: int) -> int:
    return id(worker_cached("probe", object))


def test_local_engine_maps_in_order_and_shares_by_value():
    engine = LocalEngine()
    assert list(engine.map(operator.mul, range(5), shared=(engine.share(3),))) == [0, 3, 6, 9, 12]


def test_dask_engine_keeps_input_order_across_workers(dask_scheduler, tmp_path):
    with open_engine(EngineParameters(engine="dask", scheduler=dask_scheduler)) as engine:
        assert engine.name == "dask" and engine.workers == 2 and engine.gpus == 0
        results = list(engine.map(_pid_and_square, iter(range(40)), shared=(str(tmp_path),)))
    assert [square for _, square in results] == [item * item for item in range(40)]
    assert len({pid for pid, _ in results}) == 2, "both worker processes run tasks (each waits for the other)"
    assert os.getpid() not in {pid for pid, _ in results}


def test_dask_engine_shares_a_value_once_and_reraises_task_errors(dask_scheduler):
    with open_engine(EngineParameters(engine="dask", scheduler=dask_scheduler)) as engine:
        table = engine.share({"a": 1, "b": 2})
        assert list(engine.map(_lookup, ["b", "a", "b"], shared=(table,))) == [2, 1, 2]
        with pytest.raises(ZeroDivisionError):
            list(engine.map(operator.truediv, [1, 0, 2], shared=(0,)))
        # A value made by worker_cached is made once per worker process.
        assert len(set(engine.map(_cached_identity, range(20)))) <= 2


def _lookup(key: str, table: dict) -> int:
    return table[key]


def test_dask_engine_refuses_gpu_tasks_where_no_worker_has_a_gpu(dask_scheduler):
    with open_engine(EngineParameters(engine="dask", scheduler=dask_scheduler)) as engine:
        with pytest.raises(BenchbuildError, match="--resources GPU=1"):
            list(engine.map(abs, [1], resources={"GPU": 1}))


def test_embedded_cluster_starts_and_stops():
    with open_engine(EngineParameters(engine="dask", workers=1)) as engine:
        assert engine.workers == 1
        assert list(engine.map(abs, [-1, -2])) == [1, 2]
    assert engine.client.status == "closed"


def test_embedded_workers_each_see_one_gpu_round_robin(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    specs = embedded_worker_specs(4, gpus=2)
    assert [spec["options"]["env"]["CUDA_VISIBLE_DEVICES"] for spec in specs.values()] == ["0", "1", "0", "1"]
    assert all(spec["options"]["resources"] == {"GPU": 1} and spec["options"]["nthreads"] == 1
               for spec in specs.values())
    assert all("resources" not in spec["options"] for spec in embedded_worker_specs(2, gpus=0).values())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # this process may use GPUs 2 and 3 only: so may its workers
    assert [spec["options"]["env"]["CUDA_VISIBLE_DEVICES"] for spec in embedded_worker_specs(3, gpus=2).values()] \
        == ["2", "3", "2"]


@pytest.mark.parametrize("parameters, message", [
    (EngineParameters(scheduler="tcp://127.0.0.1:8786"), "--scheduler only apply to --engine dask"),
    (EngineParameters(workers=2), "--workers only apply to --engine dask"),
    (EngineParameters(engine="dask", scheduler="tcp://127.0.0.1:8786", workers=2), "give one of them"),
    (EngineParameters(engine="dask", workers=0), "--workers must be at least 1"),
])
def test_engine_options_are_checked_before_work(parameters, message):
    with pytest.raises(BenchbuildError, match=message):
        parameters.check()


def test_unreachable_scheduler_is_one_clear_error():
    import dask
    import distributed  # noqa: F401  (its defaults first: a set of a missing section drops the whole section on exit)

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), pytest.raises(BenchbuildError, match="could not reach the Dask scheduler at --scheduler tcp://127.0.0.1:9"):
        with open_engine(EngineParameters(engine="dask", scheduler="tcp://127.0.0.1:9")):
            pass


def test_dask_missing_names_the_extra(tmp_path):
    """Without Dask installed, `--engine dask` is one line naming the extra (Dask hidden from a fresh interpreter)."""
    hide = tmp_path / "sitecustomize.py"
    hide.write_text("import sys\nclass _Hide:\n    def find_spec(self, name, path=None, target=None):\n"
                    "        if name.split('.')[0] in ('dask', 'distributed'):\n"
                    "            raise ModuleNotFoundError(name)\n        return None\n"
                    "sys.meta_path.insert(0, _Hide())\n", encoding="utf-8")
    code = ("from benchbuild.engine import EngineParameters\n"
            "EngineParameters(engine='dask').check()\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert result.returncode != 0
    assert "pip install 'benchbuild[distributed]'" in result.stderr


def _slot_and_pid(item: int) -> tuple[str, int, int]:
    return os.environ.get("BENCHBUILD_TEST_SLOT", ""), os.getpid(), item * item


def _fails_the_first_time(marker: str) -> str:
    if not Path(marker).exists():
        Path(marker).touch()
        raise RuntimeError("first attempt")
    return "second attempt"


def test_process_pool_runs_each_task_in_a_fresh_process_with_its_slot_environment():
    """Without Dask, several GPUs run one member each: a process per task, started with a free slot's environment
    (CUDA_VISIBLE_DEVICES there; a variable of our own here), results in input order."""
    engine = ProcessPoolEngine([{"BENCHBUILD_TEST_SLOT": "a"}, {"BENCHBUILD_TEST_SLOT": "b"}])
    assert engine.workers == 2 and engine.gpus == 0
    results = list(engine.map(_slot_and_pid, range(5)))
    assert [square for _, _, square in results] == [0, 1, 4, 9, 16]
    assert {slot for slot, _, _ in results} <= {"a", "b"} and all(slot for slot, _, _ in results)
    pids = [pid for _, pid, _ in results]
    assert len(set(pids)) == 5 and os.getpid() not in pids


def test_process_pool_retries_a_failed_task_in_a_new_process(tmp_path):
    engine = ProcessPoolEngine([{}])
    assert list(engine.map(_fails_the_first_time, [str(tmp_path / "retried")], retries=1)) == ["second attempt"]
    with pytest.raises(RuntimeError, match="first attempt"):
        list(engine.map(_fails_the_first_time, [str(tmp_path / "not-retried")]))


def test_worker_cached_keeps_the_latest_value_of_a_group():
    first = worker_cached(("group-probe", 1), object, group="group-probe")
    assert worker_cached(("group-probe", 1), object, group="group-probe") is first
    second = worker_cached(("group-probe", 2), object, group="group-probe")
    assert second is not first
    assert worker_cached(("group-probe", 1), object, group="group-probe") is not first  # made again

