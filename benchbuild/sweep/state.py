"""Where each run of a sweep stands, read from its folder alone (so `sweep --status` works for a sweep running
elsewhere): pending, partial (killed or running: resumes from its checkpoint), trained (not yet scored), done, failed
(its loss diverged), or conflict (the folder holds another configuration)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbuild.errors import BenchbuildError
from benchbuild.progress import clock
from benchbuild.run_folder import METRICS_FILE, RUN_FILE, read_log
from benchbuild.sweep.spec import CONFIG_FILE, RunSpec
from benchbuild.training.selection import better



@dataclass
class RunState:
    """One run's state and progress: step reached, budget, best validation score by the run's `validate_by`
    (`validated_by`), training seconds."""

    spec: RunSpec
    state: str
    step: int = 0
    budget: int | None = None
    best_validation: float | None = None
    validated_by: str = "exact_match"
    elapsed_s: float | None = None
    metric: float | None = None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the run's own pace so far (unknown before its first validation)."""
        if self.state not in ("partial",) or not self.step or not self.elapsed_s or not self.budget:
            return None
        return max(0.0, (self.budget - self.step) * self.elapsed_s / self.step)


def run_state(spec: RunSpec) -> RunState:
    folder = Path(spec.folder)
    config_file = folder / CONFIG_FILE
    if not folder.exists():
        return RunState(spec, "pending")
    if config_file.is_file():
        if _json(config_file) != spec.config():
            return RunState(spec, "conflict")
    elif any(folder.iterdir()):
        return RunState(spec, "conflict")
    run = _json(folder / RUN_FILE) or {}
    state = RunState(spec, "pending" if not run else "partial", budget=run.get("step_budget"),
                     validated_by=run.get("validate_by", "exact_match"))
    for record in _log(folder):
        state.step = max(state.step, int(record.get("step", 0)))
        if record.get(f"validation_{state.validated_by}") is not None:
            value = float(record[f"validation_{state.validated_by}"])
            state.best_validation = (value if state.best_validation is None
                                    else better(state.validated_by, state.best_validation, value))
        # Every validation line carries the time so far, and so does a checkpoint's line in a run that validates on
        # nothing (`select = "last"` without a validation split).
        state.elapsed_s = record.get("elapsed_s", state.elapsed_s)
    if run.get("status") == "failed":
        state.state = "failed"
    elif run.get("status") == "complete":
        metrics = _json(folder / METRICS_FILE)
        scored = isinstance(metrics, dict) and metrics.get("split") == spec.split
        state.state = "done" if scored else "trained"
        if scored:
            state.metric = metrics.get("exact_match")
            if state.metric is None:
                state.metric = (metrics.get("bleu") or {}).get("score")
    return state


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None


def _log(folder: Path) -> list[dict[str, Any]]:
    """The run's log records (a line cut by a kill dropped); a damaged log shows no progress rather than failing."""
    try:
        return read_log(folder)
    except BenchbuildError:
        return []


def status_table(states: list[RunState], title: str, width: int | None = None):
    """A rich Table of the runs: model (and its grid configuration), benchmark, seed, state, step/budget, best
    validation, test metric, ETA. Names are never broken mid-word: a model's configuration goes on a line of its own,
    and where the names alone do not fit in `width` columns (a narrow terminal) each run is one line of text
    instead, the fields separated by " · "."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    columns = ("model", "benchmark", "seed", "state", "step", "best validation", "metric", "ETA")
    rows = []
    for state in states:
        step = f"{state.step:,}" + (f"/{state.budget:,}" if state.budget else "")
        validation = _number(state.best_validation)
        if validation and state.validated_by != "exact_match":  # exact match, in percent, goes without a name
            validation = f"{_METRIC_NAMES.get(state.validated_by, state.validated_by)} {validation}"
        model = f"{state.spec.model} {state.spec.configuration}" if state.spec.configuration else state.spec.model
        rows.append((model, state.spec.benchmark, str(state.spec.seed), state.state, step, validation,
                     _number(state.metric), "" if state.eta_s is None else clock(state.eta_s)))
    counts = {name: sum(s.state == name for s in states) for name in ("done", "trained", "partial", "pending", "failed")}
    caption = ", ".join(f"{number} {name}" for name, number in counts.items() if number)
    # The longest word of each column: what the table needs so that no name breaks (plus 3 columns of border each).
    needed = sum(max([len(column)] + [len(word) for row in rows for word in row[k].split()]) + 3
                 for k, column in enumerate(columns)) + 1
    if width is not None and needed > width:
        lines = [Text(title, style="bold")]
        for row in rows:
            fields = [row[0], row[1], f"seed {row[2]}", row[3], f"step {row[4]}"]
            fields += [f"{name} {value}" for name, value in zip(columns[5:], row[5:]) if value]
            lines.append(Text(" · ".join(fields)))
        return Group(*lines, Text(caption))
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="right" if column in ("seed", "step", "best validation", "metric", "ETA")
                         else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


_METRIC_NAMES = {"loss": "loss", "bleu": "BLEU"}


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"
