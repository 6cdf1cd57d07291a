"""A sweep file: the grid of a paper's results table (models × benchmarks × seeds) and how each run is trained and
scored, read and checked in full before anything runs.

    name = "table3_000"                       # default: the file's name
    models = ["transformer", "sag_t5"]
    seeds = [0, 1, 2, 3, 4]
    build = "pipelines/scan.toml"             # optional: a pipeline that makes the benchmark folders first
    [budget]
    steps = 50000                             # or minutes = 30 (then runs stop by the clock: not reproducible)
    [set]                                     # recipe keys for every run (`train --set`)
    eval_every = 1000
    [[benchmarks]]
    name = "scan/addprim_jump"                # family/name, as the catalogue's [[reported]] names it
    data = "out/scan/addprim_jump"
    [[overrides]]                             # recipe keys for the runs of one model and/or one benchmark
    model = "sag_t5"
    set = { batch_size = 64 }
    [eval]
    split = "test"
    [report]
    formats = ["md", "csv"]

Every run gets the folder `<out>/<name>/<model>/<benchmark>/seed<k>` (a model file `../m.toml` by its stem `m`, the
benchmark by its name's last part) and a `sweep_run.json` holding its configuration, so a rerun knows which runs are
done, which to resume and which folder belongs to another configuration (refused). Every name that becomes part of
those folders is checked (`outputs.check_name`; `out` by `outputs.check_relative`), so no run lies outside the
sweep's folder `<out>/<name>`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchbuild.device import check_device
from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_name, check_relative
from benchbuild.toml_schema import from_table, read_toml

CONFIG_FILE = "sweep_run.json"
REPORT_FORMATS = ("md", "csv", "tex", "html")


@dataclass
class BenchmarkSpec:
    """A benchmark folder and its `family/name` (default: read from the folder's build.json)."""

    data: str
    name: str = ""


@dataclass
class Override:
    """For the runs of `model` and/or `benchmark` (either may be left out: all of them): recipe keys to set, and/or
    which of the entry's recipes trains them (default: the one its paper's number on the benchmark was made with)."""

    set: dict[str, Any] = field(default_factory=dict)
    recipe: str | None = None
    model: str | None = None
    benchmark: str | None = None


@dataclass
class Budget:
    """Per run: a step budget (default: the recipe's), and/or a wall-clock budget in minutes."""

    steps: int | None = None
    minutes: float | None = None

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise BenchbuildError(f"[budget] steps must be at least 1; got {self.steps}")
        if self.minutes is not None and not self.minutes > 0:
            raise BenchbuildError(f"[budget] minutes must be positive; got {self.minutes}")


@dataclass
class EvalSpec:
    """How every run is scored (`benchbuild eval`)."""

    split: str = "test"
    batch_size: int = 256
    beam: int = 1

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.beam < 1:
            raise BenchbuildError("[eval] batch_size and beam must be at least 1")


@dataclass
class ReportSpec:
    """The report over every finished run (`benchbuild report`): where, and which formats."""

    out: str | None = None
    formats: list[Literal["md", "csv", "tex", "html"]] = field(default_factory=lambda: list(REPORT_FORMATS))


@dataclass
class SweepFile:
    """The whole sweep file (see the module docstring)."""

    models: list[str]
    benchmarks: list[BenchmarkSpec]
    seeds: list[int]
    name: str = ""
    description: str = ""
    out: str = "runs"
    build: str | None = None
    device: str = "auto"
    budget: Budget = field(default_factory=Budget)
    set: dict[str, Any] = field(default_factory=dict)
    overrides: list[Override] = field(default_factory=list)
    eval: EvalSpec = field(default_factory=EvalSpec)
    report: ReportSpec = field(default_factory=ReportSpec)


@dataclass(frozen=True)
class RunSpec:
    """One cell × seed of the grid: what to train, where, and how to score it."""

    model: str
    benchmark: str
    data: str
    seed: int
    folder: str
    recipe: str | None
    overrides: dict[str, Any]
    max_steps: int | None
    max_minutes: float | None
    device: str
    split: str
    batch_size: int
    beam: int

    def config(self) -> dict[str, Any]:
        """What `sweep_run.json` records: a folder with another configuration is not this run."""
        return json.loads(json.dumps({key: value for key, value in asdict(self).items() if key != "folder"}))


@dataclass
class Sweep:
    """A checked sweep file: its runs in grid order (model, benchmark, seed), and where its report goes."""

    path: Path
    name: str
    file: SweepFile
    runs: list[RunSpec]

    @property
    def folder(self) -> Path:
        return Path(self.file.out) / self.name

    @property
    def report_prefix(self) -> Path:
        return Path(self.file.report.out) if self.file.report.out else self.folder / "report"


def load_sweep(path: str | Path) -> Sweep:
    """Read `path`, check every key, model, benchmark and combination, and expand the grid. Nothing is run."""
    path = Path(path)
    where = str(path)
    sweep = from_table(SweepFile, read_toml(path, "sweep file"), where)
    name = check_name(sweep.name or path.stem, f"{where}: name")
    check_relative(sweep.out, f"{where}: out")
    if sweep.report.out is not None:
        check_relative(sweep.report.out, f"{where}: [report] out")
    _check_lists(sweep, where)
    try:
        check_device(sweep.device)
    except BenchbuildError as error:
        raise BenchbuildError(f"{where}: device: {error}") from None
    model_folders = [_model_folder(model, where) for model in sweep.models]
    twice = sorted({folder for folder in model_folders if model_folders.count(folder) > 1})
    if twice:
        raise BenchbuildError(f"{where}: two models have the folder name {twice[0]!r} (a model file is named by its "
                              "stem): rename one file")
    benchmarks = [_named(benchmark, where, sweep.build) for benchmark in sweep.benchmarks]
    folders = [benchmark.name.split("/")[-1] for benchmark in benchmarks]
    twice = sorted({folder for folder in folders if folders.count(folder) > 1})
    if twice:
        raise BenchbuildError(f"{where}: two benchmarks end in the name {twice[0]!r}: give them distinct names")
    names = {benchmark.name for benchmark in benchmarks}
    for number, override in enumerate(sweep.overrides, start=1):
        if override.model is not None and override.model not in sweep.models:
            raise BenchbuildError(f"{where}: [[overrides]] {number} names model {override.model!r}, which is not in "
                                  f"models ({', '.join(sweep.models)})")
        if override.benchmark is not None and override.benchmark not in names:
            raise BenchbuildError(f"{where}: [[overrides]] {number} names benchmark {override.benchmark!r}, which is "
                                  f"not in benchmarks ({', '.join(sorted(names))})")
    runs = []
    for model, model_folder in zip(sweep.models, model_folders):
        for benchmark, folder in zip(benchmarks, folders):
            recipe, overrides = _overrides(sweep, model, benchmark.name)
            _check_trainable(model, benchmark.name, recipe, overrides, where)
            for seed in sweep.seeds:
                runs.append(RunSpec(
                    model=model, benchmark=benchmark.name, data=benchmark.data, seed=seed,
                    folder=str(Path(sweep.out) / name / model_folder / folder / f"seed{seed}"), recipe=recipe,
                    overrides=overrides,
                    max_steps=sweep.budget.steps, max_minutes=sweep.budget.minutes, device=sweep.device,
                    split=sweep.eval.split, batch_size=sweep.eval.batch_size, beam=sweep.eval.beam))
    return Sweep(path=path, name=name, file=sweep, runs=runs)


def _check_lists(sweep: SweepFile, where: str) -> None:
    for key in ("models", "benchmarks", "seeds"):
        values = getattr(sweep, key)
        if not values:
            raise BenchbuildError(f"{where}: {key} is empty: a sweep needs at least one")
        keys = [json.dumps(asdict(value) if key == "benchmarks" else value, sort_keys=True) for value in values]
        if len(set(keys)) != len(keys):
            raise BenchbuildError(f"{where}: {key} names the same entry twice")
    if any(seed < 0 for seed in sweep.seeds):
        raise BenchbuildError(f"{where}: seeds must not be negative")


def _model_folder(model: str, where: str) -> str:
    """The folder name of `model`'s runs: a catalogue name as it is, a model file (`../m.toml`) by its stem."""
    if model.endswith(".toml"):
        return check_name(Path(model).stem, f"{where}: the folder name of model file {model!r},")
    return check_name(model, f"{where}: model")


def _named(benchmark: BenchmarkSpec, where: str, build: str | None) -> BenchmarkSpec:
    """`benchmark` with its `family/name`: given, or read from its folder's build.json; checked either way."""
    if benchmark.name:
        return BenchmarkSpec(data=benchmark.data, name=_checked_benchmark_name(benchmark.name, where))
    from benchbuild.benchmark import read_build_info

    if not (Path(benchmark.data) / "build.json").is_file():
        made = f" (made by {build}?)" if build else ""
        raise BenchbuildError(f"{where}: benchmark folder {benchmark.data} does not exist yet{made}: give its name "
                              "(name = \"family/name\") so the sweep can be checked before it is built")
    info = read_build_info(Path(benchmark.data))
    name = info.name if "/" in info.name else f"{info.family}/{info.name}"
    return BenchmarkSpec(data=benchmark.data, name=_checked_benchmark_name(name, where))


def _checked_benchmark_name(name: str, where: str) -> str:
    """`family/name` whose every part is a plain name: its last part names run folders, so `scan/..` is refused."""
    parts = name.split("/")
    try:
        for part in parts:
            check_name(part, "part")
    except BenchbuildError:
        raise BenchbuildError(f"{where}: benchmark name {name!r} must be family/name (e.g. scan/simple), each part a "
                              "plain name (not empty, '.' or '..'): its last part names the run folders") from None
    if len(parts) < 2:
        raise BenchbuildError(f"{where}: benchmark name {name!r} must be family/name (e.g. scan/simple)")
    return name


def _overrides(sweep: SweepFile, model: str, benchmark: str) -> tuple[str | None, dict[str, Any]]:
    """The recipe (None: `train`'s default) and recipe keys of one model on one benchmark: `[set]`, then each
    matching `[[overrides]]` in file order."""
    recipe, values = None, dict(sweep.set)
    for override in sweep.overrides:
        if override.model in (None, model) and override.benchmark in (None, benchmark):
            values.update(override.set)
            recipe = override.recipe or recipe
    return recipe, values


def budget_recipe(model: str, benchmark: str, recipe: str | None, overrides: dict[str, Any]):
    """The `TrainingRecipe` a run of `model` on `benchmark` (`family/name`) trains with: `recipe`, else the one `train`
    picks by default for that benchmark."""
    from benchbuild import zoo
    from benchbuild.training.recipe import default_recipe, resolve_recipe

    entry = zoo.load_entry(model)
    family = benchmark.split("/")[0]
    name = recipe or default_recipe(entry.recipes, entry.reported, family, benchmark)
    return resolve_recipe(entry.recipes, name, overrides, source=str(entry.path))


def _check_trainable(model: str, benchmark: str, recipe: str | None, overrides: dict[str, Any], where: str) -> None:
    """Refuse a model the catalogue lacks, one with no recipe for the benchmark, or a bad recipe key."""
    from benchbuild.zoo.recipe import TrainingRecipe

    try:
        TrainingRecipe.checked_overrides(overrides, "set")
        budget_recipe(model, benchmark, recipe, overrides)
    except BenchbuildError as error:
        raise BenchbuildError(f"{where}: {model} on {benchmark}: {error}") from None
