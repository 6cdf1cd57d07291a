"""A report never loses the old one or a user's file: a killed `report` leaves the old page and its figures whole, an
existing file is replaced only when a report wrote it, and a report never lands in its inputs (real runs, a real
SIGKILL)."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from commands import BENCHBUILD, benchbuild, file_hashes, started
from waiting import until

pytestmark = pytest.mark.shared


def _report(*arguments) -> list[str]:
    return [BENCHBUILD, "report", *map(str, arguments)]


def test_a_killed_report_leaves_the_old_page_and_its_figures_whole(trained_runs, tmp_path):
    prefix = tmp_path / "report"
    runs = [*trained_runs.transformer_scan, trained_runs.transformer_react]
    first = benchbuild("report", *runs, "--out", prefix, "--data", trained_runs.scan)
    assert first.returncode == 0, first.stderr
    old = file_hashes(*tmp_path.glob("report.*"), *(tmp_path / "report_files").iterdir())
    assert any(name.endswith(".png") for name in old) and any(name.endswith(".html") for name in old)
    killed = started("report", *runs, "--out", prefix, "--data", trained_runs.scan, session=False)
    try:  # until it works beside the report, drawing the new figures
        until(lambda: list(tmp_path.glob(".report.work-*/figures/*.png")), killed, "its first new figure")
    finally:
        killed.kill()
        killed.wait()
    assert killed.returncode == -signal.SIGKILL, "the report ended before it could be killed"
    assert file_hashes(*tmp_path.glob("report.*"), *(tmp_path / "report_files").iterdir()) == old
    rerun = benchbuild("report", *runs, "--out", prefix, "--data", trained_runs.scan)
    assert rerun.returncode == 0, rerun.stderr  # the killed one's work folder blocks nothing
    assert not list(tmp_path.glob(".report.*"))


def test_a_report_never_replaces_a_file_it_did_not_write(trained_runs, tmp_path):
    notes = tmp_path / "results.md"
    notes.write_text("# my results, by hand\n")
    done = subprocess.run(_report(trained_runs.transformer_scan[0], "--out", tmp_path / "results"),
                          capture_output=True, text=True)
    assert done.returncode == 1 and "is not a report file benchbuild wrote" in done.stderr, done.stderr
    assert notes.read_text() == "# my results, by hand\n"
    assert not (tmp_path / "results.html").exists()  # refused before anything was written


def test_a_report_is_never_written_into_a_run_folder_it_reads(trained_runs, tmp_path):
    run = Path(shutil.copytree(trained_runs.transformer_scan[0], tmp_path / "run"))
    before = file_hashes(run)
    done = subprocess.run(_report(run, "--out", run / "checkpoints"), capture_output=True, text=True)
    assert done.returncode == 1 and "lies inside the command's input" in done.stderr, done.stderr
    assert file_hashes(run) == before
