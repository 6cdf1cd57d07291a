"""How sure a number is: bootstrap confidence intervals over the test rows of one evaluation, intervals over the seeds
of a model × benchmark, and paired tests between two models' evaluations of the same rows (`report --compare`).

Every interval and test comes from a library that has it: sacrebleu's own bootstrap for BLEU and chrF
(`corpus_score(n_bootstrap=...)`, the `--confidence` of its command line) and its paired bootstrap resampling
(`significance.PairedTest`, the `--paired-bs` of its command line, after Koehn 2004); `scipy.stats` for the percentile
bootstrap of a share of rows, the t-interval over seeds, the distribution-free interval of a median, McNemar's exact
test (a two-sided binomial test on the discordant pairs) and Welch's t-test. Resamples and seed are fixed, so a
metrics.json is the same every time it is written; the seed is sacrebleu's default (`SACREBLEU_SEED`), which makes
the row metrics' resamples the very ones sacrebleu draws for BLEU and chrF.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from benchbuild.errors import BenchbuildError

if TYPE_CHECKING:
    from sacrebleu.metrics.base import Metric

    from benchbuild.report.runs import Evaluation, RunSummary

LEVEL = 0.95
RESAMPLES = 1000
SEED = 12345
SIGNIFICANCE = 0.05  # the level at which a comparison calls a difference significant
# The entry of metrics.json that holds a metric's number, where it is not the metric's own name.
SCORE_OF = {"order_accuracy": "comp", "cter_instance": "cter", "cter_aggregate": "cter"}
MEDIAN_INTERVAL_MIN_SEEDS = 6  # fewer seeds cannot give a 95% distribution-free interval of the median


def share_interval(hits: Sequence[bool], resamples: int = RESAMPLES, seed: int = SEED) -> list[float] | None:
    """The 95% percentile-bootstrap interval, in percent, of the share of rows that are hits (exact matches, wrong
    compounds...): `resamples` resamples of the rows with replacement (`scipy.stats.bootstrap`, its row indices drawn
    as `numpy.random.default_rng(seed).integers(0, n, (resamples, n))`). None under two rows."""
    from scipy.stats import bootstrap

    values = 100.0 * np.asarray(hits, dtype=float)
    if len(values) < 2:
        return None
    result = bootstrap((values,), np.mean, n_resamples=resamples, confidence_level=LEVEL, method="percentile",
                       vectorized=True, rng=np.random.default_rng(seed))
    return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


def sacrebleu_interval(metric: Metric, predictions: Sequence[str], references: Sequence[str],
                       resamples: int = RESAMPLES) -> tuple[list[float] | None, str]:
    """sacrebleu's 95% bootstrap interval of a corpus metric (BLEU, chrF) as its `--confidence` prints it, the
    resamples' mean ± half the spread of their 2.5th to 97.5th percentiles, with the signature that records the
    resamples and seed (`bs:1000|seed:12345|...`). None under two rows."""
    if len(predictions) < 2:
        return None, str(metric.get_signature())
    try:
        score = metric.corpus_score(list(predictions), [list(references)], n_bootstrap=resamples)
    except TypeError:
        score = _corpus_score_with_float_resamples(metric, predictions, references, resamples)
    # sacrebleu keeps the bootstrap mean and half-width on the score (Score.estimate_ci) and prints "μ = mean ± ci".
    mean, half = float(score._mean), float(score._ci)
    return [mean - half, mean + half], str(metric.get_signature())


def _corpus_score_with_float_resamples(metric: Metric, predictions: Sequence[str], references: Sequence[str],
                                       resamples: int):
    """What `metric.corpus_score(..., n_bootstrap=resamples)` computes (the same statistics, sacrebleu's own
    resampling with its seed, `Score.estimate_ci`), for when sacrebleu's own call fails: with chrF, a resample that
    scores 0 gives a Python float among numpy float32 scores, and `statistics.mean` of the mix raises TypeError
    (sacrebleu 2.6: `CHRF().corpus_score(['I_JUMP'] + ['x'] * 23, [['I_JUMP'] + ['I_WALK'] * 23], n_bootstrap=1000)`).
    The resample scores are made Python floats first."""
    from sacrebleu.significance import _bootstrap_resample

    stats = metric._extract_corpus_statistics(list(predictions), [list(references)])
    score = metric._aggregate_and_compute(stats)
    metric.n_bootstrap = resamples
    metric.seed, scores = _bootstrap_resample(stats, metric, resamples)
    for resample in scores:
        resample.score = float(resample.score)
    score.estimate_ci(scores)
    return score


@dataclass
class ExampleIntervals:
    """The intervals of one evaluation, by the metric names `metrics.json` gives its numbers (`exact_match`, `bleu`,
    `cter_aggregate`...), with the method of each; `beside(scores)` places them in metrics.json next to the numbers."""

    resamples: int = RESAMPLES
    seed: int = SEED
    intervals: dict[str, list[float] | None] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)

    def add_share(self, metric: str, hits: Sequence[bool], unit: str) -> None:
        """The interval of a metric that is the share of `hits` among units (`test rows`, `compounds`...)."""
        self.intervals[metric] = share_interval(hits, self.resamples, self.seed)
        self.methods[metric] = (f"percentile bootstrap over {len(hits)} {unit} (scipy.stats.bootstrap, "
                                f"{self.resamples} resamples, seed {self.seed})")

    def add_sacrebleu(self, metric: str, scorer: Metric, predictions: Sequence[str],
                      references: Sequence[str]) -> None:
        """The interval of a sacrebleu corpus metric, by sacrebleu's bootstrap over the test rows."""
        self.intervals[metric], signature = sacrebleu_interval(scorer, predictions, references, self.resamples)
        self.methods[metric] = (f"sacrebleu's bootstrap over {len(predictions)} test rows: mean ± half the 95% "
                                f"percentile range of {self.resamples} resamples ({signature})")

    def beside(self, scores: dict[str, Any]) -> dict[str, Any]:
        """`scores` with `<metric>_ci: [low, high]` (null under two rows) after each metric's entry (`comp` holds
        `order_accuracy`, `cter` both CTERs), then `confidence_intervals`: the level, the resample count, the seed
        and each interval's method."""
        placed: dict[str, Any] = {}
        for key, value in scores.items():
            placed[key] = value
            placed.update({f"{metric}_ci": interval for metric, interval in self.intervals.items()
                           if SCORE_OF.get(metric, metric) == key})
        placed.update({f"{metric}_ci": interval for metric, interval in self.intervals.items()
                       if SCORE_OF.get(metric, metric) not in scores})
        placed["confidence_intervals"] = {"level": LEVEL, "resamples": self.resamples, "seed": self.seed,
                                          "methods": dict(self.methods)}
        return placed


@dataclass(frozen=True)
class SeedStatistics:
    """One number per seed (run) of a model on a benchmark split, summarised: mean ± standard error with the
    t-interval of the mean, and median with interquartile range and the distribution-free interval of the median
    (`scipy.stats.quantile_test`: order statistics, exact binomial coverage)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> SeedStatistics:
        return cls(tuple(float(value) for value in values))

    @property
    def seeds(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def standard_error(self) -> float | None:
        """Sample standard deviation (n - 1) over √n; None for one seed."""
        return None if self.seeds < 2 else statistics.stdev(self.values) / math.sqrt(self.seeds)

    @property
    def mean_interval(self) -> list[float] | None:
        """The 95% t-interval of the mean (Student's t, n - 1 degrees of freedom); None for one seed."""
        from scipy.stats import t

        error = self.standard_error
        if error is None:
            return None
        if error == 0.0:
            return [self.mean, self.mean]
        low, high = t.interval(LEVEL, self.seeds - 1, loc=self.mean, scale=error)
        return [float(low), float(high)]

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def quartiles(self) -> list[float] | None:
        """The 25th and 75th percentiles (numpy's linear interpolation, as the report's IQR); None for one seed."""
        if self.seeds < 2:
            return None
        return [float(value) for value in np.percentile(self.values, [25, 75])]

    @property
    def median_interval(self) -> list[float] | None:
        """The 95% distribution-free interval of the median; None under `MEDIAN_INTERVAL_MIN_SEEDS` seeds, where no
        pair of order statistics covers the median with 95% probability."""
        from scipy.stats import quantile_test

        if self.seeds < MEDIAN_INTERVAL_MIN_SEEDS:
            return None
        interval = quantile_test(np.asarray(self.values), q=self.median, p=0.5).confidence_interval(LEVEL)
        return [float(interval.low), float(interval.high)]


@dataclass(frozen=True)
class DifferenceTest:
    """One test of whether A and B differ on a metric: their numbers, the test's name and its two-sided p-value
    (None when the test is undefined, with `detail` saying why)."""

    metric: str
    a: float
    b: float
    test: str
    p_value: float | None
    detail: str = ""

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE

    def line(self) -> str:
        """`exact match: A 62.50, B 41.67 (A − B = +20.83); McNemar's exact test ...: p = 0.0386 *`."""
        p = "p undefined" if self.p_value is None else f"p = {self.p_value:.4g}" + (" *" if self.significant else "")
        detail = f" ({self.detail})" if self.detail else ""
        return (f"{self.metric}: A {self.a:.2f}, B {self.b:.2f} (A − B = {self.a - self.b:+.2f}); "
                f"{self.test}{detail}: {p}")


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> DifferenceTest:
    """McNemar's exact test of two models' exact matches on the same rows: under no difference, the rows only A gets
    right and those only B gets right are equally likely, so their count b among the n = b + c discordant rows is
    Binomial(n, 1/2) (`scipy.stats.binomtest`, two-sided); p = 1 without discordant rows."""
    from scipy.stats import binomtest

    if len(a_correct) != len(b_correct):
        raise ValueError(f"{len(a_correct)} rows for A but {len(b_correct)} for B")
    only_a = sum(bool(a) and not bool(b) for a, b in zip(a_correct, b_correct))
    only_b = sum(bool(b) and not bool(a) for a, b in zip(a_correct, b_correct))
    discordant = only_a + only_b
    p_value = 1.0 if discordant == 0 else float(binomtest(only_a, discordant, 0.5).pvalue)
    rows = max(1, len(a_correct))
    return DifferenceTest("exact match", 100.0 * sum(map(bool, a_correct)) / rows,
                      100.0 * sum(map(bool, b_correct)) / rows, "McNemar's exact test", p_value,
                      f"only A right: {only_a}, only B right: {only_b} of {len(a_correct)} rows")


def paired_bootstrap_bleu(a_predictions: Sequence[str], b_predictions: Sequence[str], references: Sequence[str],
                          tokenize: str | None = None, resamples: int = RESAMPLES) -> DifferenceTest:
    """sacrebleu's paired bootstrap resampling of BLEU (`sacrebleu REF -i A B --paired-bs`, A the baseline): both
    systems scored on the same `resamples` resamples of the rows; p is the share of resampled differences, centred
    on their mean, at least as large as the observed one (sacrebleu's `_paired_bs_test`)."""
    import sacrebleu
    from sacrebleu.significance import PairedTest as SacrebleuPairedTest

    from benchbuild.metrics import bleu_tokenizer_for

    if not len(a_predictions) == len(b_predictions) == len(references):
        raise ValueError(f"{len(a_predictions)} predictions for A, {len(b_predictions)} for B, "
                         f"{len(references)} references")
    scorer = sacrebleu.BLEU(tokenize=tokenize or bleu_tokenizer_for(references))
    if list(a_predictions) == list(b_predictions):
        # sacrebleu's p for two identical systems is 1 / (resamples + 1): every resampled difference is 0, none > 0.
        score = scorer.corpus_score(list(a_predictions), [list(references)]).score
        return DifferenceTest("BLEU", score, score, "paired bootstrap resampling", 1.0, "identical predictions")
    signatures, scores = SacrebleuPairedTest([("A", list(a_predictions)), ("B", list(b_predictions))],
                                             {"BLEU": scorer}, [list(references)], test_type="bs",
                                             n_samples=resamples)()
    (name, signature), = signatures.items()
    a, b = scores[name]
    return DifferenceTest("BLEU", a.score, b.score, "paired bootstrap resampling", b.p_value,
                      f"sacrebleu --paired-bs, {signature}")


def welch_over_seeds(metric: str, a_values: Sequence[float], b_values: Sequence[float]) -> DifferenceTest:
    """Welch's t-test (unequal variances, `scipy.stats.ttest_ind(equal_var=False)`) of the per-seed numbers of A and
    B: unpaired, since two models' runs of the same seed share nothing but the number. Undefined under two seeds
    on either side, or when neither side varies."""
    from scipy.stats import ttest_ind

    a_mean, b_mean = statistics.fmean(a_values), statistics.fmean(b_values)
    test = "Welch's t-test over seeds"
    detail = f"{len(a_values)} seed{'s' if len(a_values) != 1 else ''} of A, {len(b_values)} of B"
    if min(len(a_values), len(b_values)) < 2:
        return DifferenceTest(metric, a_mean, b_mean, test, None, detail + ": it needs two or more on each side")
    if statistics.pstdev(a_values) == 0.0 and statistics.pstdev(b_values) == 0.0:
        return DifferenceTest(metric, a_mean, b_mean, test, None, detail + ": neither side varies")
    return DifferenceTest(metric, a_mean, b_mean, test, float(ttest_ind(a_values, b_values, equal_var=False).pvalue),
                      detail)


@dataclass(frozen=True)
class RunPair:
    """The tests over the rows of one benchmark split that a run of A and a run of B both evaluated."""

    seed_a: Any
    seed_b: Any
    rows: int
    tests: tuple[DifferenceTest, ...]
    missing: str = ""  # why there is no test over rows (no predictions.jsonl)


@dataclass(frozen=True)
class Comparison:
    """A against B on one benchmark split: per pair of runs a test over rows, and per metric a test over seeds."""

    benchmark: str
    split: str
    pairing: str  # how runs were paired: "by seed" or "in seed order"
    run_pairs: tuple[RunPair, ...]
    seed_tests: tuple[DifferenceTest, ...]

    def lines(self) -> list[str]:
        text = [f"{self.benchmark} ({self.split}):"]
        for pair in self.run_pairs:
            text.append(f"  over test rows, A seed {pair.seed_a} vs B seed {pair.seed_b}"
                        + (f" ({pair.rows} rows):" if not pair.missing else f": {pair.missing}"))
            text += [f"    {test.line()}" for test in pair.tests]
        text.append(f"  over seeds (runs paired {self.pairing} above):")
        text += [f"    {test.line()}" for test in self.seed_tests]
        return text


def run_group(folder: str | Path) -> list[Path]:
    """The run folders a `--compare` argument names: the folder itself when it holds `run.json`, else every run
    folder below it (a sweep's seeds), in path order."""
    from benchbuild.run_folder import RUN_FILE

    folder = Path(folder)
    if (folder / RUN_FILE).is_file():
        return [folder]
    found = sorted(path.parent for path in folder.rglob(RUN_FILE)) if folder.is_dir() else []
    if not found:
        raise BenchbuildError(f"{folder} is neither a run folder nor a folder of runs (no {RUN_FILE} in or below "
                              "it): give a run folder `benchbuild train` wrote, or the folder of a model's seeds")
    return found


def compare_runs(a_runs: Sequence[RunSummary], b_runs: Sequence[RunSummary]) -> list[Comparison]:
    """A against B on every benchmark split both evaluated: runs paired by seed where the seeds match (else in seed
    order), each pair tested over the rows (McNemar's exact test for exact match, sacrebleu's paired bootstrap for
    BLEU) from their predictions.jsonl; and every metric both report tested over seeds (Welch)."""
    from benchbuild.report.rows import headline_metrics

    a_by_split, b_by_split = _evaluations_by_split(a_runs), _evaluations_by_split(b_runs)
    shared = sorted(set(a_by_split) & set(b_by_split))
    if not shared:
        raise BenchbuildError("A and B evaluated no benchmark split in common: A on "
                              f"{_splits_in_words(a_by_split)}, B on {_splits_in_words(b_by_split)}")
    comparisons = []
    for benchmark, split in shared:
        a_found, b_found = a_by_split[(benchmark, split)], b_by_split[(benchmark, split)]
        common = sorted({seed for seed, _ in a_found} & {seed for seed, _ in b_found}, key=_seed_order)
        if common:
            pairing = "by seed"
            pairs = [(dict(a_found)[seed], dict(b_found)[seed], seed, seed) for seed in common]
        else:
            pairing = "in seed order"
            pairs = [(a, b, seed_a, seed_b) for (seed_a, a), (seed_b, b) in zip(a_found, b_found)]
        run_pairs = tuple(_run_pair(a, b, seed_a, seed_b) for a, b, seed_a, seed_b in pairs)
        a_numbers = [headline_metrics(evaluation.metrics) for _, evaluation in a_found]
        b_numbers = [headline_metrics(evaluation.metrics) for _, evaluation in b_found]
        metrics = [metric for metric in a_numbers[0]
                   if all(metric in numbers for numbers in (*a_numbers, *b_numbers))]
        seed_tests = tuple(welch_over_seeds(_metric_name(metric), [numbers[metric] for numbers in a_numbers],
                                            [numbers[metric] for numbers in b_numbers]) for metric in metrics)
        comparisons.append(Comparison(benchmark, split, pairing, run_pairs, seed_tests))
    return comparisons


def comparison_text(a_name: str, a_runs: Sequence[RunSummary], b_name: str, b_runs: Sequence[RunSummary],
                    comparisons: Sequence[Comparison]) -> str:
    """What `report --compare` prints: who A and B are, each comparison, and how to read the p-values."""
    def who(name: str, runs: Sequence[RunSummary]) -> str:
        models = ", ".join(dict.fromkeys(run.model for run in runs))
        seeds = ", ".join(str(run.seed) for run in runs)
        plural = "s" if len(runs) != 1 else ""
        return f"{name}: {models}, {len(runs)} run{plural} (seed{plural} {seeds})"

    lines = [who("A = " + a_name, a_runs), who("B = " + b_name, b_runs)]
    for comparison in comparisons:
        lines += comparison.lines()
    lines.append(f"p-values are two-sided and not corrected for multiple comparisons; * marks p < {SIGNIFICANCE:g} "
                 f"(significant at the {SIGNIFICANCE:.0%} level).")
    return "\n".join(lines) + "\n"


def _evaluations_by_split(runs: Sequence[RunSummary]) -> dict[tuple[str, str], list[tuple[Any, Evaluation]]]:
    """(benchmark, split) -> [(seed, evaluation)] in seed order; a run's first evaluation of a split counts."""
    grouped: dict[tuple[str, str], dict[Any, Evaluation]] = {}
    for run in runs:
        for evaluation in run.evaluations:
            grouped.setdefault((evaluation.benchmark, evaluation.split), {}).setdefault(run.seed, evaluation)
    return {key: sorted(found.items(), key=lambda item: _seed_order(item[0])) for key, found in grouped.items()}


def _seed_order(seed: Any) -> tuple:
    """Numbers by value (2 before 10), then anything else by its text."""
    return (0, seed, "") if isinstance(seed, (int, float)) else (1, 0, str(seed))


def _run_pair(a: Evaluation, b: Evaluation, seed_a: Any, seed_b: Any) -> RunPair:
    from benchbuild.metrics import normalize_whitespace

    a_records, b_records = a.predictions(), b.predictions()
    if not a_records or not b_records:
        without = a if not a_records else b
        return RunPair(seed_a, seed_b, 0, (), f"{without.metrics_file.parent} has no predictions.jsonl: no test over "
                                                "rows")
    b_records = _aligned(a_records, b_records, a, b)
    references = [record["target"] for record in a_records]
    a_predictions = [record["prediction"] for record in a_records]
    b_predictions = [record["prediction"] for record in b_records]
    a_correct = [normalize_whitespace(p) == normalize_whitespace(r) for p, r in zip(a_predictions, references)]
    b_correct = [normalize_whitespace(p) == normalize_whitespace(r) for p, r in zip(b_predictions, references)]
    return RunPair(seed_a, seed_b, len(references), (
        mcnemar_exact(a_correct, b_correct),
        paired_bootstrap_bleu(a_predictions, b_predictions, references)))


def _aligned(a_records: list[dict[str, Any]], b_records: list[dict[str, Any]], a: Evaluation,
             b: Evaluation) -> list[dict[str, Any]]:
    """B's records in A's row order, matched by `id` (by position where the rows have none); an error naming both
    files unless they hold the same rows with the same references."""
    where = f"{a.predictions_file} and {b.predictions_file}"
    a_ids, b_ids = [record.get("id") for record in a_records], [record.get("id") for record in b_records]
    if None not in a_ids and None not in b_ids and len(set(a_ids)) == len(a_ids):
        if sorted(map(str, a_ids)) != sorted(map(str, b_ids)):
            raise BenchbuildError(f"{where} are not of the same rows (their ids differ): a paired test needs both "
                                  "models' predictions of the same split")
        by_id = {str(record["id"]): record for record in b_records}
        b_records = [by_id[str(identifier)] for identifier in a_ids]
    elif len(a_records) != len(b_records):
        raise BenchbuildError(f"{where} hold {len(a_records)} and {len(b_records)} rows: a paired test needs both "
                              "models' predictions of the same split")
    if any(x["target"] != y["target"] for x, y in zip(a_records, b_records)):
        raise BenchbuildError(f"{where} give different references for the same row: they are not of the same split")
    return b_records


def _splits_in_words(by_split: dict[tuple[str, str], Any]) -> str:
    return ", ".join(f"{benchmark} ({split})" for benchmark, split in sorted(by_split)) or "nothing"


def _metric_name(metric: str) -> str:
    from benchbuild.report.headline import metric_name

    return metric_name(metric)
