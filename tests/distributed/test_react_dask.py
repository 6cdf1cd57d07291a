"""`degree` and `build-react` with `--engine dask`: the pool's shards, the ensemble's members and the candidates'
decoding batches run on the workers of a real Dask cluster — joined (the session cluster), embedded (started by the
command: `degree` here, the same code path as build-react's) or made of separate `dask scheduler` / `dask worker`
processes, as on several machines — and the output is the local build's, byte for byte.

Each build runs in a folder of its own with relative `--out` and `--cache-dir`, so the builds record the same
command line (less the engine options, which build.json leaves out); the workers get absolute paths.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from commands import folder_bytes
from small_inputs import tiny_ensemble, write_lines

from benchbuild.cli import main

pytestmark = [pytest.mark.distributed, pytest.mark.shared]

TINY = tiny_ensemble(bpe_vocab_size=2000, batch_size=16, warmup_steps=10)


def run(folder: Path, *argv: str) -> int:
    """`benchbuild ARGV` run in `folder` (made): its exit code."""
    folder.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(sys, "argv", ["benchbuild", *argv])
        with pytest.raises(SystemExit) as stop:
            main()
    return stop.value.code



@pytest.fixture(scope="module")
def degree_inputs(shared_data, tmp_path_factory) -> list[str]:
    """`degree`'s arguments: IWSLT14 valid as the training source; a pool of 101,425 lines: cg_test, the WMT14
    sample and IWSLT14 valid with its words reversed (in vocabulary, unseen), five times, and a few empty lines."""
    react, folder = shared_data / "react", tmp_path_factory.mktemp("degree-inputs")
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    valid = read(react / "valid.de")
    block = read(react / "cg_test.de") + read(shared_data / "wmt14-ende-sample" / "train.de") + \
        [" ".join(reversed(line.split())) for line in valid] + ["", "  "]
    pool = write_lines(folder / "pool.de", block * 5)
    assert len(block) * 5 >= 100_000
    return ["degree", "--train-src", str(react / "valid.de"), "--pool", str(pool), "--lowercase",
            "--min-word-count", "1", "--out", "degree.tsv"]


@pytest.fixture(scope="module")
def local_degree(degree_inputs, tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("degree-local")
    assert run(folder, *degree_inputs) == 0
    return (folder / "degree.tsv").read_bytes()


def test_degree_on_a_joined_cluster_writes_the_local_table(degree_inputs, local_degree, dask_scheduler, tmp_path):
    assert run(tmp_path, *degree_inputs, "--engine", "dask", "--scheduler", dask_scheduler) == 0
    table = (tmp_path / "degree.tsv").read_bytes()
    assert table == local_degree
    lines = table.decode().splitlines()
    assert len(lines) == 1 + 101_425 and lines[-1] == "101425\t"  # an empty last line keeps its row
    assert sum(1 for line in lines[1:] if not line.endswith("\t")) > 30_000  # scored, not only dropped


def test_degree_on_an_embedded_cluster_writes_the_local_table(degree_inputs, local_degree, tmp_path):
    assert run(tmp_path, *degree_inputs, "--engine", "dask", "--workers", "2") == 0
    assert (tmp_path / "degree.tsv").read_bytes() == local_degree


@pytest.fixture(scope="module")
def react_arguments(shared_data, tmp_path_factory) -> list[str]:
    """docs/commands.md's small build-react example made smaller (a 2-member ensemble of 20 steps, 8 validation pairs)."""
    react, folder = shared_data / "react", tmp_path_factory.mktemp("react-inputs")
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    de, en = read(react / "valid.de"), read(react / "valid.en")
    wmt = shared_data / "wmt14-ende-sample"
    return ["build-react", "--out", "react", "--cache-dir", "cache",
            "--train-src", str(write_lines(folder / "train.de", de[:-8])),
            "--train-tgt", str(write_lines(folder / "train.en", en[:-8])),
            "--valid-src", str(write_lines(folder / "valid.de", de[-8:])),
            "--valid-tgt", str(write_lines(folder / "valid.en", en[-8:])),
            "--pool-src", str(react / "cg_test.de"), "--pool-tgt", str(react / "cg_test.en"),
            "--pool-src", str(wmt / "train.de"), "--pool-tgt", str(wmt / "train.en"),
            "--lowercase", "--pool-size", "60", "--ensemble-size", "2", "--max-steps", "20", *TINY,
            "--beam", "2", "--batch-size", "16", "--drop-top", "5", "--band", "40", "--sample", "10",
            "--device", "cpu", "--seed", "0"]


@pytest.fixture(scope="module")
def local_react(react_arguments, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    folder = tmp_path_factory.mktemp("react-local")
    assert run(folder, *react_arguments) == 0
    return folder, folder_bytes(folder / "react")


def stage_bytes(cache: Path) -> dict[str, bytes]:
    return {name: data for name, data in folder_bytes(cache).items()
            if name.count("/") == 0 or name.endswith("model.safetensors")}


def test_a_dask_rerun_reuses_complete_members_and_retrains_the_missing_one(react_arguments, local_react,
                                                                           dask_scheduler, tmp_path):
    """A crash after member 0 finished: the rerun on Dask keeps member 0's folder and trains member 1 only."""
    import shutil

    shutil.copytree(local_react[0] / "cache", tmp_path / "cache")
    ensemble = next(path for path in (tmp_path / "cache").iterdir() if path.name.startswith("ensemble-")
                    and path.is_dir())
    for stored in (tmp_path / "cache").glob("*.json"):
        if not stored.name.startswith("candidates-"):
            stored.unlink()
    shutil.rmtree(ensemble / "members" / "member-1")
    kept = folder_bytes(ensemble / "members" / "member-0")
    kept_time = (ensemble / "members" / "member-0" / "run.json").stat().st_mtime_ns
    assert run(tmp_path, *react_arguments, "--engine", "dask", "--scheduler", dask_scheduler) == 0
    assert (ensemble / "members" / "member-0" / "run.json").stat().st_mtime_ns == kept_time
    assert folder_bytes(ensemble / "members" / "member-0") == kept
    assert folder_bytes(tmp_path / "react") == local_react[1]


def test_an_unreachable_scheduler_fails_before_the_first_stage(react_arguments, tmp_path, capsys):
    import dask
    import distributed  # noqa: F401  (its defaults first: a set of a missing section drops the whole section on exit)

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):  # Dask's own setting; 30 s by default
        assert run(tmp_path, *react_arguments, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9") == 1
    assert "could not reach the Dask scheduler at --scheduler tcp://127.0.0.1:9" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "react").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_cluster_of_separate_scheduler_and_worker_processes_builds_the_same_bytes(react_arguments, local_react,
                                                                                    tmp_path):
    """A multi-node run simulated on this machine: `dask scheduler` and two `dask worker` processes (without a
    nanny: one process each), started in another folder than the command's (so only absolute paths reach them),
    joined with --scheduler: the benchmark and every stage's stored result are the local build's bytes, and the
    build record does not depend on the engine."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    elsewhere = tmp_path / "nodes"
    elsewhere.mkdir()
    log = open(elsewhere / "cluster.log", "wb")
    processes = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                   "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
                                  cwd=elsewhere, stdout=log, stderr=subprocess.STDOUT)]
    try:
        processes += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                                        "1", "--no-dashboard", "--no-nanny", "--name", f"node-{index}"],
                                       cwd=elsewhere, stdout=log, stderr=subprocess.STDOUT) for index in range(2)]
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2)
        assert run(tmp_path / "run", *react_arguments, "--engine", "dask", "--scheduler", address) == 0
        built = folder_bytes(tmp_path / "run" / "react")
        assert {"build.json", "README.md", "cg_test/state.json"} <= built.keys()
        assert built == local_react[1]
        assert b"--engine" not in built["build.json"]
        # Every stage's stored result (candidates, members' weights, uncertainty), not only the benchmark, is the
        # local one (run.json and the logs hold times).
        assert stage_bytes(tmp_path / "run" / "cache") == stage_bytes(local_react[0] / "cache")
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
