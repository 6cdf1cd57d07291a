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
    [[grid]]                                  # architecture values to search (`train`'s architecture overrides)
    architecture = { num_heads = [4, 8], d_model = [128, 256], "encoder_layers,decoder_layers" = [4, 6, 8] }
    [[grid]]
    model = "sag_fixed_span"                  # default: every model of the sweep
    architecture = { span = [2, 4, 6] }
    [grid_selection]
    rule = "best_mean"                        # how the report picks each model's configuration per benchmark

Every run gets the folder `<out>/<name>/<model>/<benchmark>/seed<k>` (a model file `../m.toml` by its stem `m`, the
benchmark by its name's last part) and a `sweep_run.json` holding its configuration, so a rerun knows which runs are
done, which to resume and which folder belongs to another configuration (refused). Every name that becomes part of
those folders is checked (`outputs.check_name`; `out` by `outputs.check_relative`), so no run lies outside the
sweep's folder `<out>/<name>`.

A model that a `[[grid]]` table applies to has configurations: the product of the value lists of every table that
applies to it (a key naming several comma-joined keys sets them all to each value: encoder = decoder above), each
checked against the model's architecture keys, types and ranges before anything runs. Each configuration is its own
set of runs, in `<out>/<name>/<model>/<configuration>/<benchmark>/seed<k>`, the configuration named by its keys and
values (`report.grid.configuration_label`: `d_model-128_decoder_layers-4_encoder_layers-4_num_heads-4`). The report
shows, per model and benchmark, the configuration `[grid_selection] rule` picks (`report.grid.RULES`) and lists
every configuration's mean.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchbuild.device import check_device
from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_name, check_relative
from benchbuild.report.grid import DEFAULT_RULE, GridRule, configuration_label
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
    """Per run: a step budget (default: the recipe's), and/or a wall-clock budget in minutes; `stop_when_settled`
    ends a run once its selected checkpoint is final (`train --stop-when-settled`)."""

    steps: int | None = None
    minutes: float | None = None
    stop_when_settled: bool = False

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
    beam: int | None = None  # None: each run's recipe's beam (5 for MT recipes, 1 for SCAN)

    def __post_init__(self) -> None:
        if self.batch_size < 1 or (self.beam is not None and self.beam < 1):
            raise BenchbuildError("[eval] batch_size and beam must be at least 1")


@dataclass
class ReportSpec:
    """The report over every finished run (`benchbuild report`): where, and which formats."""

    out: str | None = None
    formats: list[Literal["md", "csv", "tex", "html"]] = field(default_factory=lambda: list(REPORT_FORMATS))


@dataclass
class GridTable:
    """One `[[grid]]` table: architecture keys and the values each takes, for the runs of `model` (default: every
    model of the sweep). A key may name several keys, comma-joined, that take each value together:
    `"encoder_layers,decoder_layers" = [4, 6, 8]`."""

    architecture: dict[str, list[Any]]
    model: str | None = None


@dataclass
class GridSelection:
    """How the report picks each model's configuration per benchmark split (`benchbuild.report.grid.RULES`)."""

    rule: GridRule = DEFAULT_RULE


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
    grid: list[GridTable] = field(default_factory=list)
    grid_selection: GridSelection = field(default_factory=GridSelection)


@dataclass(frozen=True)
class RunSpec:
    """One cell × configuration × seed of the grid: what to train, where, and how to score it."""

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
    beam: int | None
    architecture_overrides: dict[str, Any] = field(default_factory=dict)
    stop_when_settled: bool = False

    @property
    def configuration(self) -> str:
        """The configuration's name (its folder): "" for a run of the catalogue's architecture."""
        return configuration_label(self.architecture_overrides)

    def config(self) -> dict[str, Any]:
        """What `sweep_run.json` records: a folder with another configuration is not this run. A run without
        architecture keys records what sweeps recorded before grids existed, so their folders are still its own;
        likewise `stop_when_settled` only when set."""
        config = {key: value for key, value in asdict(self).items() if key != "folder"}
        if not self.architecture_overrides:
            del config["architecture_overrides"]
        if not self.stop_when_settled:
            del config["stop_when_settled"]
        return json.loads(json.dumps(config))


@dataclass
class Sweep:
    """A checked sweep file: its runs in grid order (model, benchmark, configuration, seed), and where its report
    goes."""

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

    def configurations(self) -> dict[str, int]:
        """Per model, how many grid configurations its runs have (1 without a grid)."""
        return {model: len({spec.configuration for spec in self.runs if spec.model == model})
                for model in self.file.models}

    def grid_summary(self) -> str:
        """The grid's size in one line: configurations per model, benchmarks, seeds, runs in all."""
        counts = self.configurations()
        per_model = ", ".join(f"{model} {count}" for model, count in counts.items())
        return (f"grid: {sum(counts.values()):,} configurations ({per_model}) x {len(self.file.benchmarks)} "
                f"benchmarks x {len(self.file.seeds)} seeds = {len(self.runs):,} runs")


def load_sweep(path: str | Path, device: str | None = None) -> Sweep:
    """Read `path`, check every key, model, benchmark and combination, and expand the grid. Nothing is run.
    `device` (the command's --device) replaces the file's `device`."""
    path = Path(path)
    where = str(path)
    sweep = from_table(SweepFile, read_toml(path, "sweep file"), where)
    if device is not None:
        sweep.device = device
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
    _check_grid_tables(sweep, where)
    runs = []
    for model, model_folder in zip(sweep.models, model_folders):
        configurations = grid_configurations(sweep, model, where)
        for benchmark, folder in zip(benchmarks, folders):
            recipe, overrides = _overrides(sweep, model, benchmark.name)
            _check_trainable(model, benchmark.name, recipe, overrides, where, sweep.budget.stop_when_settled)
            checked = _checked_configurations(sweep, model, benchmark.name, recipe, overrides, configurations, where)
            for architecture in checked:
                configuration = [configuration_label(architecture)] if architecture else []
                for seed in sweep.seeds:
                    runs.append(RunSpec(
                        model=model, benchmark=benchmark.name, data=benchmark.data, seed=seed,
                        folder=str(Path(sweep.out, name, model_folder, *configuration, folder, f"seed{seed}")),
                        recipe=recipe, overrides=overrides,
                        max_steps=sweep.budget.steps, max_minutes=sweep.budget.minutes, device=sweep.device,
                        split=sweep.eval.split, batch_size=sweep.eval.batch_size, beam=sweep.eval.beam,
                        architecture_overrides=architecture, stop_when_settled=sweep.budget.stop_when_settled))
    return Sweep(path=path, name=name, file=sweep, runs=runs)


def grid_configurations(sweep: SweepFile, model: str, where: str) -> list[dict[str, Any]]:
    """`model`'s configurations, unchecked against its architecture: the product of the value lists of every
    `[[grid]]` table that applies to it, in file order (a comma-joined key sets each of its keys); `[{}]` (the
    catalogue's architecture alone) when none applies."""
    axes: list[tuple[list[str], list[Any]]] = []
    set_by: dict[str, int] = {}
    for number, table in enumerate(sweep.grid, start=1):
        if table.model not in (None, model):
            continue
        for key, values in table.architecture.items():
            keys = _grid_keys(key, number, where)
            for one in keys:
                if one in set_by:
                    tables = f"[[grid]] {number}" if set_by[one] == number else \
                        f"[[grid]] {set_by[one]} and [[grid]] {number}"
                    raise BenchbuildError(f"{where}: {tables} set {one!r} twice for model {model}: give each key "
                                          "once")
                set_by[one] = number
            axes.append((keys, values))
    return [{key: value for (keys, _), value in zip(axes, point) for key in keys}
            for point in itertools.product(*(values for _, values in axes))]


def _grid_keys(key: str, number: int, where: str) -> list[str]:
    keys = [part.strip() for part in key.split(",")]
    if not all(keys) or len(set(keys)) != len(keys):
        raise BenchbuildError(f"{where}: [[grid]] {number} key {key!r} must be an architecture key or several, "
                              "comma-joined, each once (\"encoder_layers,decoder_layers\")")
    return keys


def _check_grid_tables(sweep: SweepFile, where: str) -> None:
    """Each `[[grid]]` table names a model of the sweep (or none), and at least one key, each with distinct values."""
    for number, table in enumerate(sweep.grid, start=1):
        if table.model is not None and table.model not in sweep.models:
            raise BenchbuildError(f"{where}: [[grid]] {number} names model {table.model!r}, which is not in models "
                                  f"({', '.join(sweep.models)})")
        if not table.architecture:
            raise BenchbuildError(f"{where}: [[grid]] {number} has no architecture keys: give at least one, "
                                  "e.g. architecture = { d_model = [128, 256] }")
        for key, values in table.architecture.items():
            _grid_keys(key, number, where)
            texts = [json.dumps(value, sort_keys=True) for value in values]
            if not values or len(set(texts)) != len(texts):
                raise BenchbuildError(f"{where}: [[grid]] {number} {key} must list at least one value, each once; "
                                      f"got {values!r}")


def _checked_configurations(sweep: SweepFile, model: str, benchmark: str, recipe: str | None,
                            overrides: dict[str, Any], configurations: list[dict[str, Any]],
                            where: str) -> list[dict[str, Any]]:
    """`configurations` of `model` on `benchmark`, each checked against the architecture its runs build, as
    `catalogue.checked_architecture_overrides` checks `train`'s (keys of the model's kind, types, ranges, and keys
    that must fit together: d_model divisible by num_heads); a refusal names the `[[grid]]` table whose keys fail.
    Two configurations that would share a folder name are refused."""
    from benchbuild.zoo.catalogue import checked_architecture_overrides

    if configurations == [{}]:
        return configurations
    built, family = _architecture_before_grid(model, benchmark, recipe, overrides)
    checked, labels = [], {}
    for architecture in configurations:
        try:
            checked.append(checked_architecture_overrides(built, family, architecture, "architecture"))
        except BenchbuildError as error:
            tables = _failing_tables(sweep, model, architecture, built, family)
            raise BenchbuildError(f"{where}: {tables}, model {model} on {benchmark}, configuration "
                                  f"{configuration_label(architecture)}: {error}") from None
        label = check_name(configuration_label(checked[-1]), f"{where}: the folder name of a configuration of {model},")
        if len(label.encode()) > 255:
            raise BenchbuildError(f"{where}: model {model}: configuration folder {label!r} is {len(label.encode())} "
                                  "bytes long, over the 255 a folder name may have: grid fewer keys in one sweep")
        if label in labels:
            raise BenchbuildError(f"{where}: model {model}: configurations {labels[label]} and {architecture} have "
                                  f"one folder name {label!r}: give values that read differently")
        labels[label] = architecture
    return checked


def _failing_tables(sweep: SweepFile, model: str, architecture: dict[str, Any], built, family: str) -> str:
    """Which `[[grid]]` table of `model` a refused configuration is refused for: the first whose own keys (at the
    configuration's values) fail alone; else every table that applies (it is their combination)."""
    from benchbuild.zoo.catalogue import checked_architecture_overrides

    applying = []
    for number, table in enumerate(sweep.grid, start=1):
        if table.model not in (None, model):
            continue
        applying.append(f"[[grid]] {number}")
        keys = [one for key in table.architecture for one in _grid_keys(key, number, "")]
        try:
            checked_architecture_overrides(built, family, {key: architecture[key] for key in keys}, "architecture")
        except BenchbuildError:
            return f"[[grid]] {number}"
    return " and ".join(applying)


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
    from benchbuild.zoo.recipe import resolve_recipe

    entry = zoo.load_entry(model)
    return resolve_recipe(entry.recipes, _recipe_name(entry, benchmark, recipe), overrides, source=str(entry.path))


def _recipe_name(entry, benchmark: str, recipe: str | None) -> str:
    from benchbuild.zoo.recipe import default_recipe

    return recipe or default_recipe(entry.recipes, entry.reported, benchmark.split("/")[0], benchmark)


def _architecture_before_grid(model: str, benchmark: str, recipe: str | None, overrides: dict[str, Any]):
    """(entry, recipe name) whose resolved architecture is what a run of `model` on `benchmark` builds before its
    architecture overrides: the recipe's `architecture` (the sweep's `[set]` one, where given) over the entry's, as
    `training.loop.prepare` merges them."""
    from benchbuild import zoo
    from benchbuild.zoo.recipe import resolve_recipe

    entry = zoo.load_entry(model)
    name = _recipe_name(entry, benchmark, recipe)
    architecture = resolve_recipe(entry.recipes, name, overrides, source=str(entry.path)).architecture
    return dataclasses.replace(entry, architecture={**entry.architecture, **architecture}, recipes={}), name


def _check_trainable(model: str, benchmark: str, recipe: str | None, overrides: dict[str, Any], where: str,
                     stop_when_settled: bool = False) -> None:
    """Refuse a model the catalogue lacks, one with no recipe for the benchmark, a bad recipe key, or `[budget]
    stop_when_settled` over a recipe no validation can settle (before any run starts, not in each run)."""
    from benchbuild.training.plan import check_settling
    from benchbuild.zoo.recipe import TrainingRecipe

    try:
        TrainingRecipe.checked_overrides(overrides, "set")
        check_settling(budget_recipe(model, benchmark, recipe, overrides), stop_when_settled)
    except BenchbuildError as error:
        raise BenchbuildError(f"{where}: {model} on {benchmark}: {error}") from None
