"""Re-run a run from what its folder recorded (`benchbuild reproduce`), and say which of its metrics agree.

`reproduce` reads the run's `run.json` and its `metrics.json` files, checks that what they name is still there and
unchanged (the catalogue entry, or the user's entry file by its sha256; the benchmark by the content fingerprint of
each split, computed from its files, not read from its `build.json`), trains the same model on the same benchmark with
the same seed, recipe, overrides, budget, validation split, thread count and device into a new folder, evaluates it as
each recorded evaluation did (split, beam, output cap, batch size), and compares every number of each metrics file.

The numbers should be identical when the device, the software (`run_folder.environment`: benchbuild's commit and the
libraries' versions) and the thread count are the ones the run recorded, and the step count came out the same: then a
difference is a failure (a non-deterministic kernel, a change nobody recorded). Otherwise a number agrees when it lies
in the 95% confidence interval the evaluation recorded beside it (`<metric>_ci`), and else is said to differ.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import (PREDICTIONS_FILE, benchmark_fingerprint, check_result, metrics_files, read_metrics,
                                   read_run, recorded_entry, recorded_interval, recorded_path)

# What must match for a reproduction's numbers to be expected identical, beside `environment`: run.json's keys.
SAME_MACHINE_KEYS = ("device", "device_name", "cuda", "cpu_threads", "processes", "mixed_precision")

# The keys of a metrics file that say what was evaluated and how, not how well: left out of the comparison.
NOT_SCORES = frozenset({"run", "model", "seed", "selected_step", "benchmark", "benchmark_path", "benchmark_fingerprint",
                        "split_fingerprint",
                        "split", "beam", "beam_from", "batch_size", "max_len_a", "max_len_b", "max_new_tokens",
                        "max_new_tokens_per_row", "predictions", "rows", "confidence_intervals"})


@dataclass(frozen=True)
class Agreement:
    """One number of a recorded metrics file beside the reproduction's: `verdict` is `identical`, `within CI`,
    `differs`, or `not recomputed` (a CTER, whose lexicon the metrics file does not record)."""

    file: str  # the metrics file, relative to the run folder
    metric: str  # its key in the file, nested keys joined by dots (`bleu.score`)
    recorded: float
    reproduced: float | None
    interval: tuple[float, float] | None
    verdict: str

    def line(self) -> str:
        now = "not recomputed" if self.reproduced is None else f"{self.reproduced:.6g}"
        within = f" (recorded 95% CI {self.interval[0]:.4g} to {self.interval[1]:.4g})" if self.interval else ""
        return f"{self.file} {self.metric}: recorded {self.recorded:.6g}, now {now}{within}: {self.verdict}"


@dataclass
class Reproduction:
    """What `reproduce` did: the new run folder, whether its numbers should equal the recorded ones (and if not,
    why not), every number compared, and how many predictions came out the same."""

    run_dir: Path
    out: Path
    exact: bool
    why_not_exact: list[str]
    agreements: list[Agreement] = field(default_factory=list)
    predictions: list[tuple[str, int, int]] = field(default_factory=list)  # (metrics file, identical, rows)

    @property
    def failures(self) -> list[Agreement]:
        """The numbers that should be identical and are not."""
        return [a for a in self.agreements if self.exact and a.verdict not in ("identical", "not recomputed")]


@dataclass(frozen=True)
class _Evaluation:
    """A recorded evaluation to repeat: its metrics file (relative to the run folder), contents and benchmark."""

    file: str
    metrics: dict[str, Any]
    data: Path


def reproduce(run_dir: str | Path, out: str | Path, *, data: str | Path | None = None,
              model: str | Path | None = None, device: str | None = None, overwrite: bool = False,
              progress: bool = True) -> Reproduction:
    """Train and evaluate the run `run_dir` records again, into `out`, and compare the numbers.

    `data` replaces the benchmark folder run.json records (relative to the run folder), `model` the entry file of a
    run trained from a user's `.toml` (checked against its recorded sha256), `device` the recorded device. Everything
    is checked before training starts: a changed entry file or benchmark is refused in one line."""
    import torch

    from benchbuild.device import cpu_threads
    from benchbuild.outputs import check_output
    from benchbuild.training.loop import train

    run_dir, out = Path(run_dir), Path(out)
    record = read_run(run_dir)
    check_result(run_dir, record)
    if record.get("status") != "complete":
        raise BenchbuildError(f"{run_dir} has not finished training (status {record.get('status')!r}): finish it "
                              "first (rerun its benchbuild train command), then reproduce it")
    entry_reference, entry_file = _entry_of(run_dir, record, model)
    data = _benchmark_of(run_dir, record, data)
    evaluations = _evaluations_of(run_dir, record, data)
    check_output(out, "--out", "run", overwrite=overwrite, inputs=[
        ("RUN", run_dir), ("--data", data), ("--model", entry_file),
        *((f"the benchmark of {evaluation.file}", evaluation.data) for evaluation in evaluations)])
    arguments = _training_arguments(record, entry_reference, data)
    threads = record.get("cpu_threads")
    # The recorded thread count: some CPU kernels' results depend on it (`device.cpu_threads`).
    with cpu_threads(threads if isinstance(threads, int) and threads > 0 else torch.get_num_threads()):
        train(entry_reference, data, out, **arguments, device=device or record.get("device") or "auto",
              progress=progress, overwrite=overwrite)
        again = read_run(out)
        _check_same_identity(run_dir, record, out, again)
        for evaluation in evaluations:
            _evaluate_again(evaluation, out, again.get("device") or "auto", progress)
    exact, why = _exactness(record, again)
    reproduction = Reproduction(run_dir, out, exact, why)
    for evaluation in evaluations:
        reproduced_file = out / evaluation.file
        reproduced = read_metrics(reproduced_file)
        reproduction.agreements += compare_metrics(evaluation.file, evaluation.metrics, reproduced)
        reproduction.predictions.append((evaluation.file, *_same_predictions(
            (run_dir / evaluation.file).parent / PREDICTIONS_FILE, reproduced_file.parent / PREDICTIONS_FILE)))
    return reproduction


def _entry_of(run_dir: Path, record: Mapping[str, Any], given: str | Path | None) -> tuple[str, Path | None]:
    """The catalogue entry to train (what `zoo.load_entry` takes) and its file when it is a user's: `given`, else the
    recorded one; a user's file must still have the sha256 the run recorded."""
    from benchbuild.fingerprint import sha256_file

    digest = record.get("model_entry_sha256")
    if given is None and digest and not record.get("model_entry"):
        raise BenchbuildError(f"{run_dir}/run.json records the model entry file only by its sha256 (it shared no "
                              "folder with the run but the root): give the file with --model")
    reference = str(given) if given is not None else recorded_entry(run_dir, record) or record.get("model")
    if not reference:
        raise BenchbuildError(f"{run_dir}/run.json names no model: give the entry file with --model")
    if not reference.endswith(".toml"):
        return reference, None
    file = Path(reference)
    if not file.is_file():
        where = "given with --model" if given is not None else "that run.json records (relative to the run folder)"
        raise BenchbuildError(f"the model entry file {file} {where} is not there: give the entry file the run was "
                              "trained from with --model")
    if digest and sha256_file(file) != digest:
        raise BenchbuildError(f"the model entry file {file} has changed since {run_dir} was trained (sha256 "
                              f"{sha256_file(file)[:16]}…, run.json records {digest[:16]}…): give the file as it was "
                              "with --model")
    return str(file), file


def _benchmark_of(run_dir: Path, record: Mapping[str, Any], given: str | Path | None) -> Path:
    """The benchmark folder to train on (`given`, else the one run.json records), checked to hold the rows the run
    trained on."""
    from benchbuild.benchmark import read_build_info

    benchmark = record.get("benchmark") if isinstance(record.get("benchmark"), Mapping) else {}
    data = Path(given) if given is not None else recorded_path(run_dir, benchmark.get("path"))
    if data is None or not (data / "build.json").is_file():
        shown = "" if data is None else f" ({data} is not there)"
        raise BenchbuildError(f"the benchmark {run_dir} was trained on is not found{shown}: give its folder with "
                              f"--data (its fingerprint {benchmark.get('fingerprint', 'is not recorded')})")
    read_build_info(data)
    recorded = {name: split.get("fingerprint") for name, split in (benchmark.get("splits") or {}).items()}
    check_fingerprints(data, recorded, f"the benchmark the run {run_dir} trained on")
    return data


def check_fingerprints(data: Path, recorded: Mapping[str, str], what: str) -> None:
    """`data`'s splits hold the rows `recorded` fingerprints (split name -> fingerprint) say, computed from its split
    files: a benchmark rebuilt otherwise, or whose files were changed after its build, is refused in one line."""
    from benchbuild.benchmark import load_splits, split_fingerprint

    splits = load_splits(data)
    found = {name: split_fingerprint(splits[name]) for name in recorded if name in splits}
    differing = sorted(name for name in recorded if found.get(name) != recorded[name])
    if differing:
        raise BenchbuildError(f"{data} is not {what}: its fingerprint is {benchmark_fingerprint(found)[:16]}…, the "
                              f"run recorded {benchmark_fingerprint(recorded)[:16]}… (split"
                              f"{'s' if len(differing) > 1 else ''} {', '.join(differing)} "
                              f"{'differ' if len(differing) > 1 else 'differs'}): give that benchmark with --data")


def _evaluations_of(run_dir: Path, record: Mapping[str, Any], data: Path) -> list[_Evaluation]:
    """The run's recorded evaluations (its `metrics.json` and its subfolders'), each with its benchmark folder: the one
    its metrics file records (relative to the file's folder), else the training benchmark where the file names the
    same benchmark; each checked by fingerprint where the file records one."""
    from benchbuild.evaluation.scoring import benchmark_label

    evaluations = []
    trained_on = record.get("benchmark", {}).get("fingerprint")
    for path in metrics_files(run_dir):
        metrics = read_metrics(path)
        file = path.relative_to(run_dir).as_posix()
        fingerprint = metrics.get("benchmark_fingerprint")
        folder = recorded_path(path.parent, metrics.get("benchmark_path"))
        same_as_training = (fingerprint == trained_on if fingerprint and trained_on
                            else metrics.get("benchmark") == benchmark_label(data))
        if same_as_training:
            folder = data
        if folder is None or not (folder / "build.json").is_file():
            raise BenchbuildError(f"{run_dir / file} evaluated benchmark {metrics.get('benchmark')}, whose folder "
                                  f"is not found{f' ({folder})' if folder is not None else ''}: put it back where "
                                  "the metrics file records it, or remove that evaluation from the run folder")
        if fingerprint and not same_as_training:
            from benchbuild.benchmark import read_build_info

            splits = read_build_info(folder).splits
            if benchmark_fingerprint({name: split.fingerprint for name, split in splits.items()}) != fingerprint:
                raise BenchbuildError(f"{folder} is not the benchmark {run_dir / file} evaluated (another "
                                      "fingerprint): put that benchmark back where the metrics file records it")
        evaluations.append(_Evaluation(file, metrics, folder))
    return evaluations


def _training_arguments(record: Mapping[str, Any], entry_reference: str, data: Path) -> dict[str, Any]:
    """`train`'s keyword arguments (less the device) for the recorded run: its recorded arguments (older run.json
    files: from the seed, budgets, validation and overrides they record), with the recipe family it resolved to, and
    any recipe key the catalogue entry now gives otherwise set back to the recorded value."""
    from benchbuild import zoo
    from benchbuild.benchmark import read_build_info
    from benchbuild.zoo.recipe import resolve_recipe

    arguments = record.get("arguments")
    if not isinstance(arguments, Mapping):
        validation = record.get("validation")
        arguments = {"seed": record.get("seed", 0), "max_steps": record.get("step_budget"),
                     "max_minutes": record.get("time_budget_minutes"), "overrides": {},
                     "architecture_overrides": record.get("architecture_overrides") or {},
                     "validation_split": validation if validation in read_build_info(data).splits else None}
    family = record.get("recipe_family")
    overrides = dict(arguments.get("overrides") or {})
    entry = zoo.load_entry(entry_reference)
    # As run.json holds it (JSON: a tuple reads back as a list), to compare with the recorded recipe key by key.
    recipe = json.loads(json.dumps(resolve_recipe(entry.recipes, family, overrides, source=str(entry.path)).to_dict()))
    recorded = record.get("recipe") or {}
    if recorded.get("architecture", recipe.get("architecture")) != recipe.get("architecture"):
        raise BenchbuildError(f"the catalogue entry {entry.name} now gives recipe {family!r} another architecture "
                              "than the run was trained with: it cannot be re-run from this entry")
    overrides.update({key: value for key, value in recorded.items()
                      if key != "architecture" and key in recipe and recipe[key] != value})
    return {"seed": arguments.get("seed", 0), "max_steps": arguments.get("max_steps"),
            "max_minutes": arguments.get("max_minutes"), "stop_when_settled": bool(arguments.get("stop_when_settled")),
            "recipe": family, "overrides": overrides or None,
            "architecture_overrides": arguments.get("architecture_overrides") or None,
            "validation_split": arguments.get("validation_split")}


def _check_same_identity(run_dir: Path, record: Mapping[str, Any], out: Path, again: Mapping[str, Any]) -> None:
    """The reproduction trained the run's identity (model, architecture, benchmark, seed, recipe, validation)."""
    before, now = record.get("identity") or {}, again.get("identity") or {}
    differing = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
    if before and differing:
        raise BenchbuildError(f"{out} was trained as another run than {run_dir} (it differs in: "
                              f"{', '.join(differing)}): the catalogue entry or benchbuild changed how it trains")


def _evaluate_again(evaluation: _Evaluation, out: Path, device: str, progress: bool) -> None:
    """Decode and score as the recorded evaluation did, into the same place in the new run folder."""
    from benchbuild.evaluation.evaluate import evaluate_run

    metrics = evaluation.metrics
    folder = Path(evaluation.file).parent
    beam = metrics.get("beam") if metrics.get("beam_from", "--beam") == "--beam" else None
    # One cap for every row as an older evaluation recorded it; else the recipe's rule or each row's own cap.
    max_new_tokens = (metrics.get("max_new_tokens")
                      if "max_len_a" not in metrics and "max_new_tokens_per_row" not in metrics else None)
    evaluate_run(out, evaluation.data, split=str(metrics.get("split", "test")), beam=beam,
                 batch_size=int(metrics.get("batch_size") or 64), out=None if folder == Path(".") else out / folder,
                 device=device, max_new_tokens=max_new_tokens, progress=progress)


def _exactness(record: Mapping[str, Any], again: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the reproduction ran as the run did (same software, device, threads and steps), so its numbers
    should be identical; else the differences, in words."""
    why = []
    environment, now = record.get("environment"), again.get("environment") or {}
    if not isinstance(environment, Mapping):
        why.append("run.json records no software versions (a run from before they were recorded)")
        environment = {}
    for key in sorted(set(environment) | set(now)):
        if environment.get(key) != now.get(key):
            why.append(f"{key} {environment.get(key)} then, {now.get(key)} now")
    for key in SAME_MACHINE_KEYS:
        if record.get(key) != again.get(key):
            why.append(f"{key.replace('_', ' ')} {record.get(key)} then, {again.get(key)} now")
    if record.get("steps_done") != again.get("steps_done"):
        why.append(f"{record.get('steps_done')} steps then, {again.get('steps_done')} now (stopped by the "
                   f"{again.get('stopped_by')})")
    return not why, why


def compare_metrics(file: str, recorded: Mapping[str, Any], reproduced: Mapping[str, Any]) -> list[Agreement]:
    """Every number of the recorded metrics file (`NOT_SCORES` left out) beside the reproduction's: identical, within
    the recorded 95% CI (`<metric>_ci`), or differs; a CTER the reproduction has not (no lexicon) is not recomputed."""
    agreements = []
    now = dict(_numbers(reproduced))
    for metric, value in _numbers(recorded):
        interval = recorded_interval(recorded, metric)
        other = now.get(metric)
        if other is None:
            verdict = "not recomputed" if metric.startswith("cter") else "differs"
        elif other == value:
            verdict = "identical"
        elif interval is not None and interval[0] <= other <= interval[1]:
            verdict = "within CI"
        else:
            verdict = "differs"
        agreements.append(Agreement(file, metric, value, other, interval, verdict))
    return agreements


def _numbers(metrics: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """The numbers of a metrics file as (dotted key, value), less `NOT_SCORES`, the intervals and text."""
    def walk(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if math.isfinite(value):
                yield prefix, float(value)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                yield from walk(f"{prefix}.{key}", inner)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                yield from walk(f"{prefix}.{index}", inner)

    for key, value in metrics.items():
        if key not in NOT_SCORES and not key.endswith("_ci"):
            yield from walk(key, value)


def _same_predictions(recorded: Path, reproduced: Path) -> tuple[int, int]:
    """How many rows of the two `predictions.jsonl` files have the same prediction, of the recorded file's rows."""
    def predictions(path: Path) -> list[Any]:
        if not path.is_file():
            return []
        with open(path, encoding="utf-8-sig") as handle:
            return [json.loads(line).get("prediction") for line in handle if line.strip()]

    before, now = predictions(recorded), predictions(reproduced)
    return sum(a == b for a, b in zip(before, now)), len(before)

