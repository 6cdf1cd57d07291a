"""`train` with stderr piped or logged (a batch job, `2> train.log`) prints a plain progress line every
BENCHBUILD_PROGRESS_SECONDS instead of a bar that draws nothing until the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from benchbuild.progress import clock

LINE = re.compile(r"^training: step ([\d,]+)/12 \(([\d.]+)%\), [\d.]+ steps/s, (\d+:\d\d:\d\d|\?) left(, loss .*)?$")


def test_piped_training_prints_a_progress_line_with_step_rate_and_time_left(tiny_scan, tiny_model, tmp_path):
    env = {**os.environ, "BENCHBUILD_PROGRESS_SECONDS": "0"}
    done = subprocess.run([sys.executable, "-m", "benchbuild", "train", "--model", str(tiny_model), "--data",
                           str(tiny_scan), "--out", str(tmp_path / "run"), "--max-steps", "12", "--device", "cpu"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("training: ")]
    assert [int(LINE.match(line).group(1)) for line in lines] == list(range(1, 13)), done.stderr
    assert LINE.match(lines[-1]).group(2) == "100.0"
    assert "loss " in lines[-1]  # the bar's status: the logged mean loss
    assert "\x1b[" not in done.stderr  # no terminal control sequences in a log


def test_a_long_wait_reads_in_hours_minutes_and_seconds():
    assert (clock(59.6), clock(3_725), clock(50 * 3600)) == ("0:01:00", "1:02:05", "50:00:00")
