"""A full disk (issue #45): one line naming the path and "no space left", never an exception's class name, and the
same command run again once there is space finishes, with no --overwrite. The disk is a real tmpfs too small for the
output, mounted for the test (root only: skipped where mounting is not allowed)."""

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
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): a full disk needs one")
    try:
        yield lambda new_size: subprocess.run(["mount", "-o", f"remount,size={new_size}", str(folder)], check=True)
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
        resize("100m")
        again = benchbuild_in_process("build-scan", "--out", out, "--split", "simple")
        assert again.returncode == 0, again.stderr
        assert json.loads((out / "simple" / "build.json").read_text(encoding="utf-8"))["name"] == "scan/simple"


@pytest.mark.skipif(shutil.which("mount") is None, reason="no mount command")
def test_training_on_a_full_disk_says_so_and_the_rerun_with_space_finishes(tiny_scan, tmp_path):
    tiny_model = tmp_path / "tiny.toml"
    tiny_model.write_text('name = "tiny"\npaper = "test"\nsummary = "tiny"\n[architecture]\nkind = "transformer"\n'
                          'd_model = 32\nnum_heads = 4\nd_ff = 64\nencoder_layers = 1\ndecoder_layers = 1\n'
                          '[recipe.scan]\nsteps = 4\nbatch_size = 8\nlearning_rate = 2e-3\neval_every = 4\n',
                          encoding="utf-8")
    with small_disk(tmp_path / "disk", "64k") as resize:
        run_dir = tmp_path / "disk" / "run"
        command = ("train", "--model", tiny_model, "--data", tiny_scan, "--out", run_dir, "--device", "cpu")
        assert_out_of_space(benchbuild_in_process(*command), run_dir)
        resize("50m")
        again = benchbuild_in_process(*command)
        assert again.returncode == 0, again.stderr
        assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"] == "complete"
