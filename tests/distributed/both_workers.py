"""Tasks that make a map on a two-worker Dask cluster run on both workers whatever the scheduler decides: each task
waits until a task has started in another worker process too. (Left alone, one worker may take every task.)"""

from __future__ import annotations

import os
import time
from pathlib import Path


def after_another_worker(folder: str) -> int:
    """Mark this process as one that took a task (a file named by its process id in `folder`), wait until another
    process has done so too, and return this process's id. A worker blocked here leaves the remaining tasks to the
    other worker, so both take some. No deadline (tests/waiting.py): should the other worker never come, the suite's
    per-test limit stops the test."""
    Path(folder, str(os.getpid())).touch()
    while len(list(Path(folder).iterdir())) < 2:
        time.sleep(0.01)
    return os.getpid()
