"""Disks that refuse writes (issue #45). A full disk: one line naming the path and "no space left", never an
exception's class name, and the same command run again once there is space finishes, with no --overwrite. A folder
the user may not write in: refused in one line before any decoding, asked as the user who runs the command (as root
only a read-only file system refuses, so that is what the test mounts; an unprivileged user cannot run this venv's
interpreter, which lives under /root). The disks are real tmpfs mounts (root only: skipped where mounting is not
allowed)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from commands import benchbuild_in_process


@contextlib.contextmanager
def small_disk(folder: Path, size: str):
    """A tmpfs of `size` at `folder`; the context gives a function that remounts it with other options."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): these disks need one")
    try:
        yield lambda options: subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def assert_out_of_space(result, path: Path) -> None:
    assert result.returncode == 1
    lines = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("benchbuild:")]
    assert lines == [f"benchbuild: error: no space left on the device holding {path}: free some space there and run "
                     "the same command again (rerun with --debug for the traceback)"], result.stderr
    assert "Error" not in lines[0]


@pytest.mark.skipif(shutil.which("mount") is None, reason="no mount command")
def test_a_build_on_a_full_disk_says_so_and_the_rerun_with_space_finishes(tmp_path):
    with small_disk(tmp_path / "disk", "300k") as resize:
        out = tmp_path / "disk" / "scan"
        assert_out_of_space(benchbuild_in_process("build-scan", "--out", out, "--split", "simple"), out)
        resize("size=100m")
        again = benchbuild_in_process("build-scan", "--out", out, "--split", "simple")
        assert again.returncode == 0, again.stderr
        assert json.loads((out / "simple" / "build.json").read_text(encoding="utf-8"))["name"] == "scan/simple"


@pytest.mark.skipif(shutil.which("mount") is None, reason="no mount command")
def tiny_model(tmp_path: Path) -> Path:
    tiny_model = tmp_path / "tiny.toml"
    tiny_model.write_text('name = "tiny"\npaper = "test"\nsummary = "tiny"\n[architecture]\nkind = "transformer"\n'
                          'd_model = 32\nnum_heads = 4\nd_ff = 64\nencoder_layers = 1\ndecoder_layers = 1\n'
                          '[recipe.scan]\nsteps = 4\nbatch_size = 8\nlearning_rate = 2e-3\neval_every = 4\n',
                          encoding="utf-8")
    return tiny_model


@pytest.mark.skipif(shutil.which("mount") is None, reason="no mount command")
def test_training_on_a_full_disk_says_so_and_the_rerun_with_space_finishes(tiny_scan, tmp_path):
    with small_disk(tmp_path / "disk", "64k") as resize:
        run_dir = tmp_path / "disk" / "run"
        command = ("train", "--model", tiny_model(tmp_path), "--data", tiny_scan, "--out", run_dir, "--device", "cpu")
        assert_out_of_space(benchbuild_in_process(*command), run_dir)
        resize("size=50m")
        again = benchbuild_in_process(*command)
        assert again.returncode == 0, again.stderr
        assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"] == "complete"


@pytest.mark.skipif(shutil.which("mount") is None, reason="no mount command")
def test_an_evaluation_that_cannot_write_is_refused_before_decoding(tiny_scan, tmp_path):
    with small_disk(tmp_path / "disk", "50m") as remount:
        run_dir = tmp_path / "disk" / "run"
        trained = benchbuild_in_process("train", "--model", tiny_model(tmp_path), "--data", tiny_scan, "--out",
                                        run_dir, "--device", "cpu")
        assert trained.returncode == 0, trained.stderr
        remount("ro")
        into_run = benchbuild_in_process("eval", "--run", run_dir, "--data", tiny_scan, "--device", "cpu")
        assert into_run.returncode == 1 and "Decoding" not in into_run.stderr
        assert into_run.stderr.strip().splitlines()[-1] == (
            f"benchbuild: error: --run {run_dir}: cannot write in it (permission denied or a read-only file system) "
            "(rerun with --debug for the traceback)")
        elsewhere = run_dir.parent / "evaluation"
        refused = benchbuild_in_process("eval", "--run", run_dir, "--data", tiny_scan, "--device", "cpu", "--out",
                                        elsewhere)
        assert refused.returncode == 1 and not elsewhere.exists()
        assert f"--out {elsewhere}: cannot write in {run_dir.parent}" in refused.stderr
        remount("rw")
        scored = benchbuild_in_process("eval", "--run", run_dir, "--data", tiny_scan, "--device", "cpu")
        assert scored.returncode == 0 and (run_dir / "metrics.json").is_file(), scored.stderr
