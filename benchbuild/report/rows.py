"""The report's rows: every evaluation of the given run folders grouped by model, benchmark split and metric, our
mean ± standard error over seeds, and the number the paper reports there (the catalogue's `[[reported]]`) with how it
was made; our runs summarised as the paper summarised its own (`PaperStatistic`: its mean or median, its spread, its
exclusions); whether the runs were made and scored as the paper's number was (`protocol`, and a BLEU computed
otherwise than the paper's: `ReportRow.bleu_difference`; only then do the tables set the two side by side; each
paper's own way of BLEU is a metric of its own, `bleu_<way>`, from metrics.json's `paper_bleu`); and the footnotes on
where the runs' recipe differs from the paper (its `[fidelity.<recipe>]` table) and where the paper's number is
another model's; each row's test against the best of its column, set by
`significance.compare_with_best`. Every format of the report (`markdown`, `csv_table`, `latex`, `html`,
`grid`, `figures`) shows these rows."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation import paper_bleu
from benchbuild.evaluation.uncertainty import DifferenceTest, p_text
from benchbuild.papers import (SPREADS, Paper, cited_paper, differences_of, reported_on, selection_rule,
                               source_in_words)
from benchbuild.report.metric_values import example_interval, headline_metrics
from benchbuild.protocol import Comparison, PaperProtocol, RunProtocol, compare
from benchbuild.run_folder import METRICS_FILE, check_fresh, metrics_files, read_metrics, read_run


@dataclass(frozen=True)
class PaperStatistic:
    """A row's runs summarised as its paper summarised its own (the `[[reported]]` row's `statistic`, `spread` and
    `min_train_exact_match`): `value` over the runs left after the exclusion (None when none is left) and
    `spread_value`, the spread the paper gives (sample standard deviation, n - 1; its standard error; or the
    interquartile range), None under two runs left or when the paper gives none. A paper's single run is compared
    with the mean of ours."""

    reported: Mapping[str, Any]
    runs: int  # our runs in the row
    excluded: int  # left out: their train exact match does not exceed the paper's threshold
    unrecorded: int  # kept although the paper excludes by train exact match: their run.json does not record it
    value: float | None
    spread_value: float | None

    @classmethod
    def of(cls, values: Sequence[float], train_exact_matches: Sequence[float | None],
           reported: Mapping[str, Any]) -> PaperStatistic:
        """`values` (one per run, beside each run's train exact match) summarised by `reported`'s statistic."""
        threshold = reported.get("min_train_exact_match")
        kept = [value for value, train in zip(values, train_exact_matches, strict=True)
                if threshold is None or train is None or train > threshold]
        unrecorded = 0 if threshold is None else sum(train is None for train in train_exact_matches)
        value = spread_value = None
        if kept:
            value = statistics.median(kept) if reported.get("statistic") == "median" else statistics.fmean(kept)
        spread = reported.get("spread", "none")
        if len(kept) >= 2 and spread in ("std", "se"):
            spread_value = statistics.stdev(kept) / (math.sqrt(len(kept)) if spread == "se" else 1.0)
        elif len(kept) >= 2 and spread == "iqr":
            lower, upper = np.percentile(kept, [25, 75])
            spread_value = float(upper - lower)
        return cls(reported, len(values), len(values) - len(kept), unrecorded, value, spread_value)

    @property
    def spread(self) -> str:
        return self.reported.get("spread", "none")

    @property
    def text(self) -> str:
        """The number and its spread at two decimals: "3.50 ± 1.20 (std)", "3.50 (IQR 1.20)", "3.50"; "—" when
        every run was excluded."""
        if self.value is None:
            return "—"
        if self.spread == "none":
            return f"{self.value:.2f}"
        if self.spread_value is None:
            return f"{self.value:.2f} (no {SPREADS[self.spread]}: one run)"
        if self.spread == "iqr":
            return f"{self.value:.2f} (IQR {self.spread_value:.2f})"
        return f"{self.value:.2f} ± {self.spread_value:.2f} ({SPREADS[self.spread]})"

    @property
    def words(self) -> str:
        """What `value` is: "median of 3 runs (1 excluded: train exact match ≤ 10%)", then the runs the exclusion
        could not judge and, when our run count is not the paper's, the paper's ("median of 1 run; the paper: median
        of 25")."""
        statistic, runs = self.reported.get("statistic", "mean"), self.reported.get("runs")
        if statistic == "single":
            words, runs = ("a single run" if self.runs == 1 else f"mean of {self.runs} runs"), 1
        else:
            words = f"{statistic} of {_runs(self.runs)}"
        threshold = self.reported.get("min_train_exact_match")
        if threshold is not None:
            words += f" ({self.excluded} excluded: train exact match ≤ {threshold:g}%)"
        if self.unrecorded:
            words += (f"; train exact match not recorded for {_runs(self.unrecorded)}: exclusion not applied to "
                      f"{'it' if self.unrecorded == 1 else 'them'}")
        if runs is not None and runs != self.runs:
            words += "; the paper: " + ("a single run" if statistic == "single" else f"{statistic} of {runs}")
        return words


def _runs(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


MARK = "*"  # as `report --compare` marks p < SIGNIFICANCE (`significance`)


@dataclass(frozen=True)
class AgainstBest:
    """A row against the best row of its column (model `best`): the test and what it was over (`basis`); no test for
    the best row itself, nor where none could be run (`missing` says why)."""

    best: str
    test: DifferenceTest | None = None
    basis: str = ""
    missing: str = ""

    @property
    def is_best(self) -> bool:
        return self.test is None and not self.missing

    @property
    def p_value(self) -> float | None:
        return None if self.test is None else self.test.p_value

    @property
    def significant(self) -> bool:
        return self.test is not None and self.test.significant

    @property
    def method(self) -> str:
        """"best"; "McNemar's exact test against tiny_a (24 test rows, seed 0 against seed 0)"; "no test against
        tiny_a: why"."""
        if self.is_best:
            return "best"
        if self.test is None:
            return f"no test against {self.best}: {self.missing}"
        return f"{self.test.test} against {self.best} ({self.basis})"

    @property
    def words(self) -> str:
        """"the best mean"; "p = 0.0078 * in McNemar's exact test against tiny_a (...)"; "no test against ..."."""
        if self.is_best:
            return "the best mean"
        if self.test is None:
            return self.method
        return f"{p_text(self.p_value)}{' ' + MARK if self.significant else ''} in {self.method}"


@dataclass
class ReportRow:
    """One cell group of the table: a metric of one model on one benchmark split, over seeds. `paper` is the number
    the paper published there, whether or not the runs were made as it was: the tables set it beside ours only when
    `comparable`, and show it apart, with `comparison.words` saying why, otherwise."""

    model: str
    benchmark: str
    split: str
    metric: str
    values: list[float] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)
    paper: float | None = None
    paper_source: str = ""  # the catalogue's `table`, "000 Table 3" (`source` names the paper by authors and year)
    selections: list[str] = field(default_factory=list)
    reported: dict[str, Any] | None = None  # the catalogue's `[[reported]]` row `paper` comes from
    train_exact_matches: list[float | None] = field(default_factory=list)  # per run; None: run.json has none
    # Per run: its metrics.json's 95% bootstrap interval over the test rows (`<metric>_ci`); None where it has none.
    example_intervals: list[list[float] | None] = field(default_factory=list)
    differences: dict[str, list[str]] = field(default_factory=dict)  # the runs' recipe -> its known differences
    zoo_reference: str = ""  # what `benchbuild zoo --model` takes to show the model's entry
    protocols: list[RunProtocol] = field(default_factory=list)  # per run: how it was trained
    paper_protocol: PaperProtocol | None = None  # how the paper's number was made, with `reported`
    metrics_files: list[Path] = field(default_factory=list)  # per run: its metrics.json, predictions.jsonl beside it
    against_best: AgainstBest | None = None  # its test against its column's best (`significance.compare_with_best`)
    # What sets this row's runs apart from the same model's other rows on this benchmark split ("recipe=scan_000,
    # d_model=64"; "" where the model has one configuration there); `model` then ends with it in brackets.
    configuration: str = ""
    repeated_seeds: list[Any] = field(default_factory=list)  # seeds given by more than one run: counted once
    # A `bleu` row, per run: the sacreBLEU tokenizer its metrics.json's signature names ("13a", "zh").
    bleu_tokenizers: list[str] = field(default_factory=list)

    @property
    def ledger_status(self) -> str:
        """What the reproduction ledger says of the paper's number here (`ledger.status_of`)."""
        from benchbuild.ledger import status_of

        return status_of(self.zoo_reference, self.reported)

    @property
    def select(self) -> str:
        """The checkpoint selection rule of the runs (`last`, `best_validation`), each named once."""
        return ", ".join(dict.fromkeys(self.selections))

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def interval(self) -> tuple[list[float], str] | None:
        """The 95% confidence interval of `mean` and how it was made: the t-interval over seeds where there are
        several, else the one run's bootstrap over its test rows (its metrics.json's `<metric>_ci`); None where
        neither exists (one run evaluated before intervals were recorded)."""
        from benchbuild.evaluation.uncertainty import SeedStatistics

        interval = SeedStatistics.of(self.values).mean_interval
        if interval is not None:
            how = f"t-interval of the mean over {len(self.values)} seeds"
            # Every headline metric is a percentage or BLEU points: a t-interval over 2-3 seeds can leave [0, 100].
            clipped = [min(max(bound, 0.0), 100.0) for bound in interval]
            return (clipped, f"{how}, clipped to [0, 100]") if clipped != list(interval) else (list(interval), how)
        if self.example_intervals and self.example_intervals[0] is not None:
            return self.example_intervals[0], "bootstrap over the test rows (the run's metrics.json)"
        return None

    @property
    def standard_error(self) -> float | None:
        """Sample standard deviation over √n, as the papers' ± columns; undefined for a single run."""
        n = len(self.values)
        return None if n < 2 else statistics.stdev(self.values) / math.sqrt(n)

    @property
    def by_paper_statistic(self) -> PaperStatistic | None:
        """Our runs summarised by the statistic of the paper's number (None without one)."""
        if self.reported is None:
            return None
        return PaperStatistic.of(self.values, self.train_exact_matches, self.reported)

    @property
    def comparison(self) -> Comparison | None:
        """What differs between the runs and the paper's protocol (None without a paper number), first of all a BLEU
        computed otherwise than the paper's (`bleu_difference`)."""
        if self.paper_protocol is None:
            return None
        comparison = compare(self.paper_protocol, self.protocols, self.benchmark, self.split,
                             self.train_exact_matches)
        bleu = self.bleu_difference
        return Comparison([bleu, *comparison.differences]) if bleu else comparison

    @property
    def bleu_difference(self) -> str:
        """Why this row's BLEU is not the paper's BLEU, in words ("sacreBLEU 13a BLEU, not 002's multi-reference
        NLTK BLEU"); "" where it is computed as the paper's number was, or is no BLEU. Only benchbuild's own `bleu`
        can differ: a paper's way (`bleu_<way>`) is matched with the paper numbers computed that way alone."""
        if self.metric != "bleu" or self.reported is None:
            return ""
        tokenizers = "/".join(dict.fromkeys(self.bleu_tokenizers)) or "13a"
        return paper_bleu.difference_words(self.reported, f"sacreBLEU {tokenizers} BLEU")

    @property
    def comparable(self) -> bool:
        """Whether the runs were made as the paper's number was, so the two may stand side by side."""
        comparison = self.comparison
        return comparison is not None and comparison.comparable

    @property
    def compared_paper(self) -> float | None:
        """The paper's number where it may stand beside ours, else None (no number, or another protocol's)."""
        return self.paper if self.comparable else None

    @property
    def published_apart(self) -> float | None:
        """The paper's number where the runs were not made as it was: shown apart from ours."""
        return self.paper if self.paper is not None and not self.comparable else None

    @property
    def comparison_words(self) -> str:
        """"yes", or "no: " and what differs; "" without a paper number."""
        comparison = self.comparison
        if comparison is None:
            return ""
        return "yes" if comparison.comparable else f"no: {comparison.words}"

    @property
    def source(self) -> str:
        """Where the paper's number is, its paper by authors and year: "Chaabouni et al. (2021), Table 3"."""
        return source_in_words(self.paper_source)

    @property
    def citation_key(self) -> str:
        """The BibTeX key of the paper of `paper_source` ("chaabouni2021"); "" when it is none of `PAPERS`."""
        paper = cited_paper(self.paper_source)
        return "" if paper is None else paper.bibtex_key

    @property
    def differences_in_words(self) -> str:
        """"recipe scan: vocabulary and embeddings, batch sampling"; one such part per recipe of the runs."""
        return "; ".join(f"recipe {recipe}: {', '.join(whats)}" for recipe, whats in self.differences.items())

    @property
    def recipe_note(self) -> str | None:
        """A footnote naming what the runs' recipe does differently from the paper, as the catalogue lists it."""
        if not self.differences:
            return None
        return (f"{self.model} as trained here differs from its paper ({self.differences_in_words}): "
                f"`benchbuild zoo --model {self.zoo_reference}` for details.")

    @property
    def paper_note(self) -> str | None:
        """A footnote saying that the paper's number belongs to another model than this one."""
        if self.reported is None or not self.reported.get("model_reported"):
            return None
        return (f"The paper's number ({self.paper:g}, {self.source}) is for {self.reported['model_reported']}, "
                f"not for {self.model} as benchbuild builds it.")


class Footnotes:
    """The notes under a table, numbered in the order they are first marked, each text once."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str | None) -> int | None:
        """The number of note `text` (None for no note)."""
        if text is None:
            return None
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1


def cited_papers(rows: Sequence[ReportRow]) -> list[Paper]:
    """The papers whose numbers the rows show (beside ours or apart), in the order the rows first cite them: the
    report's references."""
    papers = [cited_paper(row.paper_source) for row in rows if row.paper is not None]
    return list(dict.fromkeys(paper for paper in papers if paper is not None))


def reported_for(entry: Any, metric: str, benchmark: str, split: str) -> dict[str, Any] | None:
    """The entry's `[[reported]]` row for `metric` on split `split` of `benchmark` (None without one): for `bleu`
    (ours), the paper's BLEU however it was computed (`ReportRow.bleu_difference` says how they differ); for a
    paper's way (`bleu_<way>`), the paper's BLEU computed that way only."""
    way = metric.removeprefix("bleu_")

    def computed_so(row: Mapping[str, Any]) -> bool:
        return row.get("metric") == metric or (row.get("metric") == "bleu" and way in paper_bleu.WAYS
                                               and paper_bleu.way_of(row) == way)

    return next((row for row in (entry.reported if entry else []) if computed_so(row)
                 and _same_benchmark(str(row.get("benchmark")), benchmark, split)), None)


# Recipe keys that change no update: how often and on what a run validates, and how a batch is cut for speed.
_NOT_THE_UPDATE = ("architecture", "eval_every", "eval_every_epochs", "ties", "held_out", "held_out_from",
                   "allow_hidden_words", "eval_batch_size", "micro_batches", "length_groups", "select", "validate_by",
                   "score_train", "steps", "epochs")  # the selection and the budget: `select` and `steps` below


def run_configuration(run: dict[str, Any]) -> dict[str, Any]:
    """What makes runs of one model one configuration, flattened to `key: value`: the recipe family, the architecture
    as trained (the entry's keys under the recipe's and the run's overrides), the recipe keys that change an update,
    the step budget and the benchmark's fingerprint; the seed is not part of it. From run.json's `identity` (a run.json
    from before it existed: its recorded recipe and overrides)."""
    identity = run.get("identity") or {}
    flat: dict[str, Any] = {"recipe": run.get("recipe_family")}
    architecture = {**(identity.get("architecture") or {}), **(identity.get("architecture_overrides")
                                                               or run.get("architecture_overrides") or {})}
    flat.update(architecture)
    flat.update({key: value for key, value in (identity.get("recipe") or run.get("recipe") or {}).items()
                 if key not in flat and key not in _NOT_THE_UPDATE})
    flat["select"] = selection_rule(run)
    flat["steps"] = run.get("step_budget")
    flat["benchmark"] = (run.get("benchmark") or {}).get("fingerprint")
    return flat


def _configuration_words(configuration: dict[str, Any], others: Sequence[dict[str, Any]]) -> str:
    """The `key=value` pairs of `configuration` where it differs from one of `others`, in a stable order."""
    differing = [key for key in configuration if any(other.get(key) != configuration.get(key) for other in others)]
    differing += sorted({key for other in others for key in other if key not in configuration})

    def text(value: Any) -> str:
        return "none" if value is None else str(value)[:8] if isinstance(value, str) and len(value) == 64 else str(value)

    return ", ".join(f"{key}={text(configuration.get(key))}" for key in differing)


def build_report(run_dirs: Sequence[str | Path]) -> list[ReportRow]:
    """Group every evaluation of the given runs by model, configuration (`run_configuration`), benchmark, split and
    metric, each group with the paper's number for it (its model's catalogue entry as it is now) and how that number
    was made. A seed given by two runs of one configuration is counted once (the first), and said; a model with
    several configurations on one benchmark split gets a row each, named by what sets it apart."""
    groups: dict[tuple[str, str, str, str, str], ReportRow] = {}
    configurations: dict[str, dict[str, Any]] = {}
    entries: dict[str, Any] = {}
    for run_dir in map(Path, run_dirs):
        run = read_run(run_dir)
        files = metrics_files(run_dir)
        if not files:
            raise BenchbuildError(f"{run_dir} has no {METRICS_FILE}: run `benchbuild eval --run {run_dir}` first")
        check_fresh(run_dir, run, files)
        model = str(run.get("model"))
        if model not in entries:
            entries[model] = _entry(run, run_dir)
        entry = entries[model]
        recipe = run.get("recipe_family")
        differences = differences_of(entry, recipe) if entry is not None and recipe else []
        train_exact_match = run.get("train_exact_match")
        protocol = RunProtocol.of(run)
        configuration = run_configuration(run)
        label = json.dumps(configuration, sort_keys=True, default=str)
        for path in files:
            metrics = read_metrics(path)
            benchmark, split = str(metrics.get("benchmark")), str(metrics.get("split"))
            # An evaluation of an unfinished run (`eval --allow-unfinished`, also one the run has since trained past)
            # is never averaged with finished ones: a configuration of its own, named "unfinished".
            finished = run.get("status", "complete") == "complete" and not metrics.get("unfinished")
            scored = label if finished else json.dumps({**configuration, "finished": False}, sort_keys=True, default=str)
            configurations[scored] = configuration if finished else {**configuration, "finished": False}
            for metric, value in headline_metrics(metrics).items():
                key = (model, benchmark, split, metric, scored)
                if key in groups and run.get("seed") in groups[key].seeds:
                    groups[key].repeated_seeds.append(run.get("seed"))
                    continue
                if key not in groups:
                    groups[key] = ReportRow(model, benchmark, split, metric,
                                            zoo_reference="" if entry is None else _zoo_reference(entry))
                    paper = reported_for(entry, metric, benchmark, split)
                    if paper is not None:
                        groups[key].paper = float(paper["value"])
                        groups[key].paper_source = str(paper.get("table", ""))
                        groups[key].reported = paper
                        groups[key].paper_protocol = PaperProtocol.of(entry.recipes, paper, str(entry.path))
                row = groups[key]
                row.values.append(value)
                row.example_intervals.append(example_interval(metrics, metric))
                if metric == "bleu":
                    row.bleu_tokenizers.append(paper_bleu.sacrebleu_tokenizer(
                        str((metrics.get("bleu") or {}).get("signature", ""))) or "13a")
                row.seeds.append(run.get("seed"))
                row.metrics_files.append(path)
                row.protocols.append(protocol)
                row.selections.append(selection_rule(run))
                row.train_exact_matches.append(None if train_exact_match is None else float(train_exact_match))
                if differences:
                    row.differences.setdefault(str(recipe), differences)
    _name_configurations(groups, configurations)
    return [groups[key] for key in sorted(groups, key=lambda key: (groups[key].model, *key[1:4]))]


def _name_configurations(groups: dict[tuple[str, str, str, str, str], ReportRow],
                         configurations: dict[str, dict[str, Any]]) -> None:
    """Where one model has rows of several configurations on a benchmark split and metric, each row's `model` gets
    what sets its configuration apart, "transformer [recipe=scan_000, d_model=64]"."""
    cells: dict[tuple[str, str, str, str], list[str]] = {}
    for model, benchmark, split, metric, label in groups:
        cells.setdefault((model, benchmark, split, metric), []).append(label)
    for (model, benchmark, split, metric), labels in cells.items():
        for label in labels:
            row = groups[(model, benchmark, split, metric, label)]
            others = [configurations[other] for other in labels if other != label]
            words = _configuration_words(configurations[label], others) if others else ""
            if configurations[label].get("finished") is False and "finished=" not in words:
                words = ", ".join(filter(None, [words, "finished=False"]))
            if words:
                row.configuration, row.model = words, f"{model} [{words}]"


def _same_benchmark(reported: str, ours: str, split: str) -> bool:
    """Whether a `[[reported]]` number is one for split `split` of benchmark `ours` (`family/name`): a reported
    `scan/simple` names one benchmark, `nounadj` its family's, `react/cg_test` the family and the split (a folder
    `build-react` writes is labelled `react/react`), as `train` reads them to pick a recipe (`reported_on`)."""
    family, _, name = ours.partition("/")
    return reported_on(reported, family, name, [split])


def _entry(run: dict[str, Any], run_dir: Path):
    """The catalogue entry of the run's model, its reported numbers and fidelity tables as they are now (None when
    its entry cannot be found any more)."""
    from benchbuild import zoo
    from benchbuild.run_folder import recorded_entry

    # run.json names the entry by catalogue name, or its file relative to the run folder (absolute in older runs).
    for reference in (recorded_entry(run_dir, run), run.get("model")):
        if not reference:
            continue
        try:
            return zoo.load_entry(reference)
        except BenchbuildError:
            continue
    return None


def _zoo_reference(entry) -> str:
    """What `benchbuild zoo --model` takes for `entry`: its name when it ships in the catalogue, else its file."""
    from benchbuild.zoo.catalogue import CATALOGUE

    shipped = CATALOGUE / f"{entry.path.stem}.toml"
    return entry.path.stem if shipped.is_file() and shipped.resolve() == entry.path.resolve() else str(entry.path)
