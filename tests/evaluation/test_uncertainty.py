"""Confidence intervals and paired tests (`benchbuild.evaluation.uncertainty`) against known values: sacrebleu's own
command line on the same inputs, McNemar on a hand-computed 2×2 table, a direct numpy bootstrap, Student's t table."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from benchbuild.evaluation.scoring import score_rows
from benchbuild.evaluation.uncertainty import (RESAMPLES, SEED, SeedStatistics, mcnemar_exact,
                                               paired_bootstrap_bleu, share_interval, welch_over_seeds)


def drop_last_words(lines, every, offset):
    """Every `every`-th line (from `offset`) without its last two words: a system close to the references."""
    return [" ".join(line.split()[:-2]) if index % every == offset else line for index, line in enumerate(lines)]


@pytest.fixture
def english_lines(shared_data):
    return (shared_data / "react" / "cg_test.en").read_text(encoding="utf-8").splitlines()[:80]


def sacrebleu_cli(tmp_path, references, *systems, options=()):
    """sacrebleu's own command line on files holding these lines, its JSON output parsed (SACREBLEU_SEED unset: its
    default seed, 12345)."""
    paths = []
    for name, lines in (("ref", references), *((f"system{i}", s) for i, s in enumerate(systems))):
        path = tmp_path / f"{name}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(path))
    env = {key: value for key, value in os.environ.items() if key != "SACREBLEU_SEED"}
    done = subprocess.run([sys.executable, "-m", "sacrebleu", paths[0], "-i", *paths[1:], "-w", "6", "--format",
                           "json", "--force", *options], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def test_the_bleu_paired_bootstrap_is_sacrebleus_paired_bs_on_the_same_inputs(english_lines, tmp_path):
    a, b = drop_last_words(english_lines, 5, 0), drop_last_words(english_lines, 4, 1)
    ours = paired_bootstrap_bleu(a, b, english_lines, tokenize="13a")
    baseline, system = sacrebleu_cli(tmp_path, english_lines, a, b, options=["-m", "bleu", "--paired-bs"])
    assert ours.a == pytest.approx(baseline["BLEU"]["score"]) and ours.b == pytest.approx(system["BLEU"]["score"])
    assert ours.p_value == pytest.approx(system["BLEU"]["p_value"])
    assert 0.1 < ours.p_value < 0.9 and not ours.significant  # a p-value that could have come out otherwise
    assert f"bs:{RESAMPLES}|seed:{SEED}" in ours.detail


def test_identical_predictions_do_not_differ_in_bleu(english_lines):
    same = drop_last_words(english_lines, 3, 0)
    assert paired_bootstrap_bleu(same, list(same), english_lines).p_value == 1.0


def test_mcnemar_on_a_hand_computed_table():
    # 2 rows only A gets right, 10 only B, 5 both, 3 neither: p = 2 P(X <= 2 | n = 12, 1/2) = 2 (1 + 12 + 66) / 4096.
    a = [True] * 2 + [False] * 10 + [True] * 5 + [False] * 3
    b = [False] * 2 + [True] * 10 + [True] * 5 + [False] * 3
    test = mcnemar_exact(a, b)
    assert test.p_value == pytest.approx(158 / 4096) and round(test.p_value, 4) == 0.0386
    assert test.significant and "only A right: 2, only B right: 10" in test.detail
    assert (test.a, test.b) == (35.0, 75.0)
    assert mcnemar_exact(b, a).p_value == pytest.approx(158 / 4096)
    assert mcnemar_exact(a, a).p_value == 1.0


def test_the_exact_match_interval_is_a_direct_numpy_bootstrap_with_the_same_seed():
    hits = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1], bool)
    indices = np.random.default_rng(SEED).integers(0, len(hits), size=(RESAMPLES, len(hits)))
    expected = np.percentile(100.0 * hits[indices].mean(axis=1), [2.5, 97.5])
    low, high = share_interval(hits)
    assert (low, high) == pytest.approx(expected)
    assert low < 100.0 * hits.mean() < high
    assert share_interval(hits[:1]) is None


def test_score_rows_records_an_interval_beside_every_metric_and_the_same_one_each_time(english_lines, tmp_path):
    rows = [{"id": i, "source": "-", "target": line} for i, line in enumerate(english_lines)]
    predictions = drop_last_words(english_lines, 3, 0)
    scores = score_rows(rows, predictions)
    assert list(scores)[:7] == ["rows", "exact_match", "exact_match_ci", "bleu", "bleu_ci", "chrf", "chrf_ci"]
    hits = [prediction == line for prediction, line in zip(predictions, english_lines)]
    assert scores["exact_match_ci"] == share_interval(hits)
    assert scores["exact_match_ci"][0] < scores["exact_match"] < scores["exact_match_ci"][1]
    # BLEU's and chrF's: sacrebleu's --confidence, mean ± half-width, on the same files.
    for metric, name in (("bleu", "bleu"), ("chrf", "chrf")):
        cli = sacrebleu_cli(tmp_path, english_lines, predictions, options=["-m", name, "--confidence"])
        mean, half = cli["confidence_mean"], cli["confidence_var"]
        assert scores[f"{metric}_ci"] == pytest.approx([mean - half, mean + half], abs=2e-6)
    described = scores["confidence_intervals"]
    assert (described["level"], described["resamples"], described["seed"]) == (0.95, RESAMPLES, SEED)
    assert "scipy.stats.bootstrap" in described["methods"]["exact_match"]
    assert "bs:1000|seed:12345" in described["methods"]["bleu"]
    assert score_rows(rows, predictions) == scores
    assert f"over {len(rows)} test rows" in described["methods"]["exact_match"]
    on_train = score_rows(rows, predictions, split="train")["confidence_intervals"]["methods"]
    assert all(f"over {len(rows)} train rows" in on_train[metric] for metric in ("exact_match", "bleu", "chrf"))


def test_aggregate_cter_resamples_whole_compounds(shared_data):
    folder = shared_data / "cognition"
    references = (folder / "cg-test.zh").read_text(encoding="utf-8").splitlines()[:50]
    compounds = (folder / "cg-test.compound").read_text(encoding="utf-8").splitlines()[:50]
    # Lines 0, 7, 8, 23 translated as nothing: compounds 0, 1 and 4 of 10 have a wrong line.
    predictions = ["" if index in (0, 7, 8, 23) else line for index, line in enumerate(references)]
    rows = [{"id": i, "source": "-", "target": line} for i, line in enumerate(references)]
    scores = score_rows(rows, predictions, lexicon=folder / "lexicon", compounds=compounds)
    assert scores["cter"]["wrong_compounds"] == 3 and scores["cter"]["wrong_instances"] == 4
    wrong_compounds = [group in (0, 1, 4) for group in range(10)]
    assert scores["cter_aggregate_ci"] == share_interval(wrong_compounds)
    assert scores["cter_instance_ci"] == share_interval([index in (0, 7, 8, 23) for index in range(50)])
    assert "over 10 compounds" in scores["confidence_intervals"]["methods"]["cter_aggregate"]


def test_the_interval_over_seeds_is_students_t_interval_of_the_mean():
    seeds = SeedStatistics.of([60.0, 80.0, 70.0])
    # mean 70, s = 10, s.e. = 10 / √3; t(0.975, 2 degrees of freedom) = 4.302653 (a t table).
    half = 4.302653 * 10 / np.sqrt(3)
    assert seeds.mean_interval == pytest.approx([70 - half, 70 + half], abs=1e-4)
    assert SeedStatistics.of([70.0]).mean_interval is None
    assert SeedStatistics.of([70.0, 70.0]).mean_interval == [70.0, 70.0]


def test_the_median_interval_is_distribution_free_and_needs_six_seeds():
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0]
    # Of 9 seeds the 2nd and 8th smallest cover the median with 1 - 2 (1 + 9) / 512 = 96.1% >= 95%.
    assert SeedStatistics.of(values).median_interval == [2.0, 8.0]
    assert SeedStatistics.of(values).quartiles == [3.0, 7.0]
    assert SeedStatistics.of(values[:5]).median_interval is None


def test_welch_over_seeds_needs_two_seeds_a_side_and_some_spread():
    test = welch_over_seeds("exact match", [1.0, 2.0, 3.0], [4.0, 5.0, 7.0])
    # t = -10/3 / √(1/3 + 7/9) = -3.162; Welch-Satterthwaite df = 3.448; two-sided p = 0.0419.
    assert test.p_value == pytest.approx(0.0419, abs=1e-4) and test.significant
    assert welch_over_seeds("BLEU", [1.0], [4.0, 5.0]).p_value is None
    assert welch_over_seeds("BLEU", [1.0, 1.0], [4.0, 4.0]).p_value is None


def test_chrf_interval_survives_resamples_that_score_zero():
    """sacrebleu 2.6's own chrF bootstrap raises TypeError when a resample scores 0 (a float among float32s); the
    interval is then computed from the same resamples with the scores as floats."""
    import sacrebleu

    from benchbuild.evaluation.uncertainty import sacrebleu_score_and_interval

    predictions, references = ["I_JUMP"] + ["x"] * 23, ["I_JUMP"] + ["I_WALK"] * 23
    with pytest.raises(TypeError):
        sacrebleu.CHRF().corpus_score(predictions, [references], n_bootstrap=1000)
    plain, interval, signature = sacrebleu_score_and_interval(sacrebleu.CHRF(), predictions, references)
    assert plain["score"] == pytest.approx(sacrebleu.CHRF().corpus_score(predictions, [references]).score)
    assert len(interval) == 2 and all(math.isfinite(bound) for bound in interval) and interval[0] < interval[1]
    assert "bs:1000" in signature and "seed:12345" in signature
    # Where sacrebleu's own call works, the float path gives its numbers (same resamples, same rule).
    from benchbuild.evaluation.uncertainty import _corpus_score_with_float_resamples

    hypotheses = ["the cat sat on the mat", "a dog barked", "it rains", "the sun is out", "birds sing"] * 4
    truth = ["the cat sat on a mat", "the dog barked", "it is raining", "the sun shines", "birds sing"] * 4
    own = sacrebleu.CHRF().corpus_score(hypotheses, [truth], n_bootstrap=1000)
    ours = _corpus_score_with_float_resamples(sacrebleu.CHRF(), hypotheses, truth, 1000)
    assert (ours.score, ours._ci) == pytest.approx((own.score, own._ci), abs=1e-4)
    assert ours._mean == pytest.approx(own._mean, abs=1e-4)


def test_the_scores_from_the_bootstrap_are_the_plain_scores_with_the_plain_signatures():
    """BLEU and chrF in metrics.json come from the same statistics sacrebleu resamples for their intervals: the
    scores and signatures are those of a plain `corpus_score` (no bs or seed in the signature), and a one-row split,
    which has no interval, still gets its scores (it raised "Number of references unknown" before)."""
    import sacrebleu

    from benchbuild import metrics

    hypotheses = ["the cat sat on the mat", "a dog barked", "it rains", "the sun is out", "birds sing"] * 4
    truth = ["the cat sat on a mat", "the dog barked", "it is raining", "the sun shines", "birds sing"] * 4
    scored = score_rows([{"target": target} for target in truth], hypotheses)
    assert scored["bleu"] == metrics.bleu(hypotheses, truth) and scored["chrf"] == metrics.chrf(hypotheses, truth)
    assert "bs:" not in scored["bleu"]["signature"] and "seed:" not in scored["chrf"]["signature"]
    methods = scored["confidence_intervals"]["methods"]
    assert "bs:1000" in methods["bleu"] and "seed:12345" in methods["chrf"]
    one = score_rows([{"target": truth[0]}], hypotheses[:1])
    assert one["bleu"] == metrics.bleu(hypotheses[:1], truth[:1]) and one["bleu_ci"] is None
    assert one["chrf"]["score"] == sacrebleu.CHRF().corpus_score(hypotheses[:1], [truth[:1]]).score
