"""What a report reads from run folders: `run.json`, the validation lines of `train_log.jsonl`, every evaluation's
`metrics.json` and `predictions.jsonl`, and the benchmark folders the evaluations scored (for their rows)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from benchbuild.benchmark import read_build_info
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.scoring import benchmark_label, split_rows
from benchbuild.papers import selection_rule
from benchbuild.run_folder import PREDICTIONS_FILE, metrics_files, read_log, read_metrics, read_run, recorded_path


@dataclass(frozen=True)
class Validation:
    """One validation line of `train_log.jsonl`: exact match on the validation rows after `step` steps and
    `elapsed_s` seconds of training (None in logs written before training time was recorded)."""

    step: int
    exact_match: float
    elapsed_s: float | None


@dataclass(frozen=True)
class Evaluation:
    """One `metrics.json` of a run (the folder's own or a subfolder's) and the `predictions.jsonl` beside it."""

    metrics_file: Path
    metrics: dict[str, Any]

    @property
    def benchmark(self) -> str:
        return str(self.metrics.get("benchmark"))

    @property
    def split(self) -> str:
        return str(self.metrics.get("split"))

    @property
    def predictions_file(self) -> Path | None:
        path = self.metrics_file.parent / PREDICTIONS_FILE
        return path if path.is_file() else None

    def predictions(self) -> list[dict[str, Any]]:
        """The decoded rows, in the split's row order (empty without `predictions.jsonl`)."""
        if self.predictions_file is None:
            return []
        with open(self.predictions_file, encoding="utf-8-sig") as handle:
            return [json.loads(line) for line in handle if line.strip()]


@dataclass(frozen=True)
class RunSummary:
    """A run folder as a report sees it."""

    folder: Path
    record: dict[str, Any]
    validations: tuple[Validation, ...]
    evaluations: tuple[Evaluation, ...]

    @property
    def model(self) -> str:
        return str(self.record.get("model"))

    @property
    def seed(self) -> Any:
        return self.record.get("seed")

    @property
    def recipe(self) -> str | None:
        return self.record.get("recipe_family")

    @property
    def select(self) -> str:
        """`last` or `best_validation by <validate_by>`; a run.json from before either key existed selected by the
        best validation exact match."""
        return selection_rule(self.record)

    @property
    def selected_step(self) -> int | None:
        return self.record.get("selected_step")

    @property
    def steps_done(self) -> int | None:
        return self.record.get("steps_done")

    @property
    def trained_on(self) -> str:
        """`family/name` of the training benchmark, as metrics files name benchmarks; else the first evaluation's."""
        benchmark = self.record.get("benchmark")
        if isinstance(benchmark, dict) and benchmark.get("family") and benchmark.get("name"):
            family, name = str(benchmark["family"]), str(benchmark["name"])
            return name if name.startswith(family + "/") else f"{family}/{name}"
        return self.evaluations[0].benchmark if self.evaluations else "unknown benchmark"

    @property
    def training_seconds(self) -> float | None:
        """Seconds of training and validation: run.json's at the end, else the last validation's."""
        if self.record.get("elapsed_s") is not None:
            return float(self.record["elapsed_s"])
        timed = [v.elapsed_s for v in self.validations if v.elapsed_s is not None]
        return timed[-1] if timed else None

    @property
    def label(self) -> str:
        return f"{self.model} seed {self.seed}"


def read_runs(run_dirs: Sequence[str | Path]) -> list[RunSummary]:
    """Every run folder's summary; a folder that is not a run at all is a BenchbuildError."""
    summaries = []
    for folder in map(Path, run_dirs):
        record = read_run(folder)
        evaluations = tuple(Evaluation(path, read_metrics(path)) for path in metrics_files(folder))
        summaries.append(RunSummary(folder, record, read_validations(folder), evaluations))
    return summaries


def read_validations(folder: Path) -> tuple[Validation, ...]:
    """The validation lines of a run's `train_log.jsonl`, in step order (none without the log)."""
    found = []
    for record in read_log(folder):
        if "validation_exact_match" in record:
            elapsed = record.get("elapsed_s")
            found.append(Validation(int(record["step"]), float(record["validation_exact_match"]),
                                    None if elapsed is None else float(elapsed)))
    return tuple(sorted(found, key=lambda validation: validation.step))


class BenchmarkFolders:
    """Where each evaluated benchmark's folder is: one given with `--data` (matched by its `family/name`), else the
    `benchmark_path` its `metrics.json` recorded (relative to the metrics file's folder; absolute in older ones), if
    that folder still exists."""

    def __init__(self, data_dirs: Sequence[str | Path] = ()):
        self.given: dict[str, Path] = {}
        for folder in map(Path, data_dirs):
            try:
                self.given[benchmark_label(folder)] = folder
            except FileNotFoundError:
                raise BenchbuildError(f"--data {folder} is not a benchmark folder (no build.json): give the folder "
                                      "a build command wrote") from None
        self._rows: dict[tuple[Path, str], list[dict[str, Any]]] = {}

    def folder(self, evaluation: Evaluation) -> Path | None:
        if evaluation.benchmark in self.given:
            return self.given[evaluation.benchmark]
        recorded = recorded_path(evaluation.metrics_file.parent, evaluation.metrics.get("benchmark_path"))
        if recorded is not None and (recorded / "build.json").is_file():
            return recorded
        return None

    def rows(self, evaluation: Evaluation) -> list[dict[str, Any]] | None:
        """The rows of the evaluated split (None when its folder is unknown or lacks the split)."""
        folder = self.folder(evaluation)
        if folder is None:
            return None
        key = (folder, evaluation.split)
        if key not in self._rows:
            try:
                self._rows[key] = split_rows(folder, evaluation.split)
            except BenchbuildError:
                return None
        return self._rows[key]

    def family(self, folder: Path) -> str:
        return read_build_info(folder).family
