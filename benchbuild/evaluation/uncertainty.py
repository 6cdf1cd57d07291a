"""How sure a number is: bootstrap confidence intervals over the test rows of one evaluation, intervals over the seeds
of a model × benchmark, and paired tests between two models' evaluations of the same rows (which
`benchbuild.report.compare` runs for `report --compare`).

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
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np


if TYPE_CHECKING:
    from sacrebleu.metrics.base import Metric

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


def sacrebleu_score_and_interval(metric: Metric, predictions: Sequence[str], references: Sequence[str],
                                 resamples: int = RESAMPLES) -> tuple[dict[str, Any], list[float] | None, str]:
    """The corpus score with its plain signature (what `metrics.bleu` and `metrics.chrf` give: `{"score",
    "signature"}`), and sacrebleu's 95% bootstrap interval as its `--confidence` prints it (the resamples' mean ± half
    the spread of their 2.5th to 97.5th percentiles; None under two rows) with the signature that records the
    resamples and seed (`bs:1000|seed:12345|...`), from one extraction of sacrebleu's statistics (its
    `corpus_score(n_bootstrap=...)` scores the whole corpus from the statistics it then resamples)."""
    if len(predictions) < 2:
        score = metric.corpus_score(list(predictions), [list(references)])
        return {"score": score.score, "signature": str(metric.get_signature())}, None, str(metric.get_signature())
    try:
        score = metric.corpus_score(list(predictions), [list(references)], n_bootstrap=resamples)
    except TypeError:
        score = _corpus_score_with_float_resamples(metric, predictions, references, resamples)
    bootstrap_signature = str(metric.get_signature())
    metric.n_bootstrap, metric.seed = None, None  # the plain signature: no resamples, no seed
    plain = {"score": score.score, "signature": str(metric.get_signature())}
    # sacrebleu keeps the bootstrap mean and half-width on the score (Score.estimate_ci) and prints "μ = mean ± ci".
    mean, half = float(score._mean), float(score._ci)
    return plain, [mean - half, mean + half], bootstrap_signature


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
    unit: str = "test rows"  # what a sacrebleu bootstrap resamples ("train rows" for a train split's scores)
    intervals: dict[str, list[float] | None] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)

    def add_share(self, metric: str, hits: Sequence[bool], unit: str) -> None:
        """The interval of a metric that is the share of `hits` among units (`test rows`, `compounds`...)."""
        self.intervals[metric] = share_interval(hits, self.resamples, self.seed)
        self.methods[metric] = (f"percentile bootstrap over {len(hits)} {unit} (scipy.stats.bootstrap, "
                                f"{self.resamples} resamples, seed {self.seed})")

    def add_sacrebleu(self, metric: str, scorer: Metric, predictions: Sequence[str],
                      references: Sequence[str]) -> dict[str, Any]:
        """The interval of a sacrebleu corpus metric, by sacrebleu's bootstrap over the rows (`unit`); returns the
        metric's own score and signature (`{"score", "signature"}`), computed from the same statistics."""
        score, self.intervals[metric], signature = sacrebleu_score_and_interval(scorer, predictions, references,
                                                                                self.resamples)
        self.methods[metric] = (f"sacrebleu's bootstrap over {len(predictions)} {self.unit}: mean ± half the 95% "
                                f"percentile range of {self.resamples} resamples ({signature})")
        return score

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
        p = "p undefined" if self.p_value is None else p_text(self.p_value) + (" *" if self.significant else "")
        detail = f" ({self.detail})" if self.detail else ""
        return (f"{self.metric}: A {self.a:.2f}, B {self.b:.2f} (A − B = {self.a - self.b:+.2f}); "
                f"{self.test}{detail}: {p}")


def p_text(p_value: float) -> str:
    """"p = 0.0386"; a p-value that underflowed to 0 is below the smallest double, "p < 1e-300", never "p = 0"."""
    return "p < 1e-300" if p_value < 1e-300 else f"p = {p_value:.4g}"


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
