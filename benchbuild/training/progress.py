"""What `train` shows while it steps: a progress bar over optimizer steps (plain lines when stderr is not a
terminal) and its status text, the last logged loss and the best validation score."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from benchbuild.progress import clock

if TYPE_CHECKING:
    from benchbuild.training.prepared import PreparedRun


def training_status(run: PreparedRun) -> str:
    """The progress bar's text: the loss of `train_log.jsonl`'s last line (the mean over the steps since the line
    before, so the bar and the log agree), and the best validation score so far (an exact match cut, not rounded, to
    two decimals: only a perfect score shows as 100.00%)."""
    status = ""
    if run.logged_loss is not None and math.isfinite(run.logged_loss[0]):
        loss, steps = run.logged_loss
        status = f"loss {loss:.4f} (mean of last {steps} step{'s' if steps != 1 else ''})"
    if run.state.best is not None:
        metric, best = run.recipe.validate_by, run.state.best
        status += {"exact_match": f"  best val EM {math.floor(best * 100) / 100:.2f}%", "loss": f"  best val loss {best:.4f}",
                   "bleu": f"  best val BLEU {best:.2f}"}[metric]
    return status


# Seconds between the plain progress lines `train` prints when stderr is not a terminal (a log file, a pipe, a batch
# job's output), where a progress bar would draw nothing until the end; BENCHBUILD_PROGRESS_SECONDS changes it.
PROGRESS_LINE_SECONDS = 60.0


class StepProgress:
    """Progress over optimizer steps on stderr: a rich bar on a terminal; otherwise (piped or logged) one plain line
    every `PROGRESS_LINE_SECONDS` and at the end: steps done of the budget, the bar's status (loss, best validation
    score), steps per second and the time left at that rate. A no-op when disabled."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.enabled, self.total, self.done = enabled, total, done

    def __enter__(self):
        if not self.enabled:
            return lambda status: None
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:
            return self._lines()
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[status]}"), console=console)
        self.progress.start()
        task = self.progress.add_task("train", total=self.total, completed=self.done, status="")

        def advance(status: str) -> None:
            self.progress.update(task, advance=1, status=status)

        return advance

    def _lines(self):
        import os
        import sys

        interval = float(os.environ.get("BENCHBUILD_PROGRESS_SECONDS", PROGRESS_LINE_SECONDS))
        started, first = time.perf_counter(), self.done
        last_line = started

        def advance(status: str) -> None:
            nonlocal last_line
            self.done += 1
            now = time.perf_counter()
            if now - last_line < interval and self.done < self.total:
                return
            last_line = now
            rate = (self.done - first) / max(now - started, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta = "?" if not math.isfinite(left) else clock(left)
            print(f"training: step {self.done:,}/{self.total:,} ({100 * self.done / self.total:.1f}%), {rate:.2f} "
                  f"steps/s, {eta} left{', ' + status.strip() if status.strip() else ''}", file=sys.stderr, flush=True)

        self.progress = None
        return advance

    def __exit__(self, *exc) -> None:
        if self.enabled and self.progress is not None:
            self.progress.stop()
