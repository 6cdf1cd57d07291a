"""The reproduction ledger: for every number the catalogue quotes from a paper (a `[[reported]]` row), whether
benchbuild's own runs reproduce it, and the evidence (`benchbuild/ledger.toml`).

A record names its number by model, benchmark, metric and table, and lists the protocol runs behind it: seed,
value, interval, train exact match where the paper's exclusion rule needs it, whether the run followed the paper's
whole protocol to a final checkpoint (`protocol = "full"`, `final = true`) or stopped short (`protocol` then says
how), commit, device, date and the sha256 of the run's metrics.json (empty where the run folder was not kept). Its
`status` is a claim that `assess` recomputes from those runs (tests/test_ledger.py keeps the two equal), so a status
never says more than its runs show:

- **reproduced**: at least as many final full-protocol runs as the paper's statistic summarises (3 where the paper
  does not say), after the paper's exclusion rule, whose statistic is within the paper's spread of the paper's
  value, or (where the spread and run count allow it) not different by Welch's t-test at 5%, or (no spread given)
  with the paper's value inside our runs' interval; `rule` says which held.
- **not reproduced**: as many runs, and none of those hold; the record must say what has been ruled out.
- **partial**: runs, but fewer countable ones than needed (shorter protocols, unfinished checkpoints, excluded or
  unscored runs, fewer seeds): `reason` says which.
- **not run**: no protocol run yet.

This module reads TOML and computes; it imports neither torch nor the zoo.
"""

from __future__ import annotations

import functools
import math
import statistics
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterable, Literal, Mapping

from benchbuild.errors import BenchbuildError

Status = Literal["reproduced", "not reproduced", "partial", "not run"]
STATUSES: tuple[Status, ...] = ("reproduced", "not reproduced", "partial", "not run")
LEDGER_FILE = "ledger.toml"


@dataclass(frozen=True)
class LedgerRun:
    """One protocol run behind a ledger record."""

    seed: int
    value: float | None = None
    protocol: str = "full"
    final: bool = True
    interval: tuple[float, float] | None = None
    train_exact_match: float | None = None
    steps: int | None = None
    commit: str = ""
    device: str = ""
    date: str = ""
    metrics_sha256: str = ""
    note: str = ""

    @property
    def at_protocol(self) -> bool:
        """Scored at the end of the paper's whole protocol, on a checkpoint no later training could replace."""
        return self.protocol == "full" and self.final and self.value is not None


@dataclass(frozen=True)
class LedgerRecord:
    model: str
    benchmark: str
    metric: str
    table: str
    status: Status
    command: str = ""
    ruled_out: str = ""
    note: str = ""
    runs: tuple[LedgerRun, ...] = field(default_factory=tuple)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.model, self.benchmark, self.metric, self.table)


@dataclass(frozen=True)
class Assessment:
    """What a record's runs show about its paper number: `status`, the statistic over the counted runs (`ours`, None
    when nothing counts), how many runs counted of how many the paper's statistic needs, and in words the `rule`
    that decided (reproduced / not reproduced) or the `reason` it is partial."""

    status: Status
    ours: float | None
    counted: int
    needed: int
    rule: str = ""
    reason: str = ""

    def evidence(self) -> str:
        """What the runs show, without the status word: "10.12 over 1 run; 1 of the 25 runs ..."."""
        if self.status == "not run":
            return "no protocol run yet"
        value = f"{self.ours:.2f} over {self.counted} run{'s' * (self.counted != 1)}" if self.ours is not None \
            else "no run counted yet"
        return f"{value}; {self.rule or self.reason}"

    def in_words(self) -> str:
        return "not run" if self.status == "not run" else f"{self.status}: {self.evidence()}"


def key_of(model: str, row: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """The ledger key of a catalogue `[[reported]]` row of `model`."""
    return (model, row["benchmark"], row["metric"], row["table"])


def load_ledger(text: str | None = None) -> dict[tuple[str, str, str, str], LedgerRecord]:
    """The ledger's records by key (`key_of`): the shipped `benchbuild/ledger.toml` (read once), or `text`."""
    if text is None:
        return dict(_shipped())
    return _parsed(text)


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[tuple[str, str, str, str], LedgerRecord]:
    return _parsed(resources.files("benchbuild").joinpath(LEDGER_FILE).read_text(encoding="utf-8"))


def _parsed(text: str) -> dict[tuple[str, str, str, str], LedgerRecord]:
    records = {}
    for number, table in enumerate(tomllib.loads(text).get("number", []), start=1):
        where = f"ledger [[number]] {number}"
        runs = []
        for run in table.pop("runs", []):
            if "interval" in run:
                run["interval"] = tuple(run["interval"])
            try:
                runs.append(LedgerRun(**run))
            except TypeError as error:
                raise BenchbuildError(f"{where}: a run has an unknown key ({error})") from None
        try:
            record = LedgerRecord(**table, runs=tuple(runs))
        except TypeError as error:
            raise BenchbuildError(f"{where}: unknown or missing key ({error})") from None
        if record.status not in STATUSES:
            raise BenchbuildError(f"{where}: status {record.status!r} is not one of {', '.join(STATUSES)}")
        if record.key in records:
            raise BenchbuildError(f"{where}: {' · '.join(record.key)} is recorded twice")
        records[record.key] = record
    return records


def _t_quantile(degrees: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, degrees))


def welch_p(values: list[float], mean: float, spread: float, runs: int) -> float | None:
    """Two-sided p of Welch's t-test between `values` and a paper's `runs` runs of mean `mean` and standard
    deviation `spread`; None when both sides have no variance."""
    from scipy import stats

    ours_var = statistics.variance(values) / len(values) if len(values) > 1 else 0.0
    paper_var = spread ** 2 / runs
    if ours_var + paper_var == 0.0:
        return None
    t = (statistics.fmean(values) - mean) / math.sqrt(ours_var + paper_var)
    denominator = (ours_var ** 2 / (len(values) - 1) if len(values) > 1 and ours_var else 0.0) + \
        (paper_var ** 2 / (runs - 1) if runs > 1 and paper_var else 0.0)
    degrees = (ours_var + paper_var) ** 2 / denominator if denominator else float(max(len(values), runs) - 1)
    return float(2 * stats.t.sf(abs(t), degrees))


def assess(record: LedgerRecord | None, reported: Mapping[str, Any]) -> Assessment:
    """The status `record`'s runs support for the catalogue row `reported` (see the module's docstring)."""
    needed = reported.get("runs") or 3
    runs = record.runs if record is not None else ()
    if not runs:
        return Assessment("not run", None, 0, needed)
    full = [run for run in runs if run.at_protocol]
    short = len(runs) - len(full)
    threshold = reported.get("min_train_exact_match")
    excluded = unscored = 0
    counted = full
    if threshold is not None:
        unscored = sum(run.train_exact_match is None for run in full)
        excluded = sum(run.train_exact_match is not None and run.train_exact_match <= threshold for run in full)
        counted = [run for run in full if run.train_exact_match is not None and run.train_exact_match > threshold]
    values = [run.value for run in counted]
    ours = None
    if values:
        ours = statistics.median(values) if reported.get("statistic") == "median" else statistics.fmean(values)
    if len(counted) < needed:
        parts = [f"{len(counted)} of the {needed} runs the paper's {reported.get('statistic', 'mean')} needs"]
        if short:
            parts.append(f"{short} not at the whole protocol or not final")
        if excluded:
            parts.append(f"{excluded} excluded by the paper's rule (train exact match at or below {threshold:g}%)")
        if unscored:
            parts.append(f"{unscored} without a train exact match for that rule")
        return Assessment("partial", ours, len(counted), needed, reason="; ".join(parts))
    paper, spread, kind = reported["value"], reported.get("spread_value"), reported.get("spread", "none")
    if spread is not None and kind != "none" and abs(ours - paper) <= spread:
        return Assessment("reproduced", ours, len(counted), needed,
                          rule=f"within the paper's spread: |{ours:.2f} - {paper:g}| <= {spread:g} ({kind})")
    if spread is not None and kind in ("std", "se") and reported.get("runs", 0) > 1 \
            and reported.get("statistic", "mean") == "mean":
        deviation = spread * math.sqrt(reported["runs"]) if kind == "se" else spread
        p = welch_p(values, paper, deviation, reported["runs"])
        if p is not None:
            held = p >= 0.05
            return Assessment("reproduced" if held else "not reproduced", ours, len(counted), needed,
                              rule=f"Welch's t-test against the paper's {reported['runs']} runs "
                                   f"{'does not reject' if held else 'rejects'} equality at 5% (p = {p:.3g})")
        return Assessment("not reproduced", ours, len(counted), needed,
                          rule=f"no spread on either side and {ours:.2f} != {paper:g}")
    if kind == "none" or spread is None:
        if reported.get("statistic") == "median":
            low, high = min(values), max(values)
            inside = low <= paper <= high
            rule = (f"the paper's {paper:g} {'lies' if inside else 'does not lie'} within our runs' range "
                    f"[{low:.2f}, {high:.2f}]")
        else:
            half = _t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) \
                if len(values) > 1 else 0.0
            inside = ours - half <= paper <= ours + half
            rule = (f"the paper's {paper:g} {'lies' if inside else 'does not lie'} in our 95% interval "
                    f"[{ours - half:.2f}, {ours + half:.2f}]")
        return Assessment("reproduced" if inside else "not reproduced", ours, len(counted), needed, rule=rule)
    return Assessment("not reproduced", ours, len(counted), needed,
                      rule=f"outside the paper's spread: |{ours:.2f} - {paper:g}| > {spread:g} ({kind})")


def status_of(model: str, reported: Mapping[str, Any] | None) -> str:
    """The ledger's status of `model`'s paper number `reported` ("reproduced", "partial", ...); "" without a number
    or a record (a model file outside the catalogue)."""
    if reported is None:
        return ""
    record = load_ledger().get(key_of(model, reported))
    return "" if record is None else assess(record, reported).status


def catalogue_numbers(entries: Iterable[Any]) -> list[tuple[str, dict]]:
    """(model, `[[reported]]` row) for every number the catalogue quotes, in catalogue order."""
    return [(entry.name, row) for entry in entries for row in entry.reported]


def ours_json(record: LedgerRecord | None, reported: Mapping[str, Any]) -> dict[str, Any]:
    """The `ours` object of `zoo --format json`: status, the statistic, runs counted and needed, the rule or reason,
    each run's evidence, the command that reproduces it and what has been ruled out."""
    assessment = assess(record, reported)
    runs = [] if record is None else [
        {key: (list(value) if isinstance(value, tuple) else value) for key, value in run.__dict__.items()}
        for run in record.runs]
    return {"status": assessment.status, "value": assessment.ours, "counted": assessment.counted,
            "needed": assessment.needed, "rule": assessment.rule, "reason": assessment.reason,
            "values": [run.value for run in (record.runs if record else ())], "runs": runs,
            "command": record.command if record else "", "ruled_out": record.ruled_out if record else "",
            "note": record.note if record else ""}


TABLE_START = "<!-- ledger table: generated by tools/ledger_table.py from benchbuild/ledger.toml -->"
TABLE_END = "<!-- end of the ledger table -->"


def markdown_table(entries: Iterable[Any], ledger: Mapping[tuple[str, str, str, str], LedgerRecord]) -> str:
    """The whole ledger as docs/catalogue.md shows it: one row per catalogue number, between TABLE_START and
    TABLE_END."""
    rows = [TABLE_START, "", "| model | benchmark | metric | paper | paper's number | status | ours (seeds: values) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for model, row in catalogue_numbers(entries):
        record = ledger.get(key_of(model, row))
        assessment = assess(record, row)
        seeds = "" if record is None or not record.runs else " (seeds " + ", ".join(
            f"{run.seed}: {'-' if run.value is None else f'{run.value:g}'}" for run in record.runs) + ")"
        ours = "" if assessment.status == "not run" else assessment.evidence() + seeds
        statistic = row.get("statistic", "mean")
        runs = f" of {row['runs']}" if row.get("runs") else ""
        ours = ours.replace("|", "\\|")  # a literal bar inside a cell (the rules' |ours - paper|)
        rows.append(f"| `{model}` | {row['benchmark']} | {row['metric']} | {row['table']} | {row['value']:g} "
                    f"({statistic}{runs}) | **{assessment.status}** | {ours} |")
    return "\n".join([*rows, "", TABLE_END])
