"""The numbers behind the figures and the page: seed bands, relative-position preferences read from a saved model,
BLEU by degree and COMP per pair agreeing with `eval`'s metrics, word diffs of the error view, LaTeX escaping."""

import json

import numpy as np
import pytest

from benchbuild.evaluation.scoring import score_rows
from benchbuild.report.analyses import band, degree_buckets, pair_scores, position_preferences, relative_biases
from benchbuild.report.html import diff_markup
from benchbuild.report.latex import escape
from benchbuild.report.runs import BenchmarkFolders, Evaluation, read_runs


def test_a_band_spans_the_seeds_on_the_range_they_all_reach():
    seeds = band([([0, 10, 20], [0.0, 50.0, 100.0]), ([0, 10], [10.0, 30.0])], points=3)
    assert seeds.x.tolist() == [0.0, 5.0, 10.0]
    assert seeds.low.tolist() == [0.0, 20.0, 30.0] and seeds.high.tolist() == [10.0, 25.0, 50.0]
    assert band([([0, 10], [1.0, 2.0])]) is None


def test_preferences_run_over_the_keys_offset_from_the_query_and_sum_to_one():
    span = 2
    bias = np.zeros((2, 2 * span + 1))
    bias[0, span + 1] = 5.0  # head 0: distance i - j = +1, the key just before the query
    offsets, preference = position_preferences(bias, causal=False)
    assert offsets.tolist() == [-2, -1, 0, 1, 2]
    assert preference.sum(axis=1) == pytest.approx([1.0, 1.0])
    assert offsets[preference[0].argmax()] == -1
    assert preference[1] == pytest.approx([0.2] * 5)
    decoder_offsets, decoder = position_preferences(bias, causal=True)
    assert decoder_offsets.tolist() == [-2, -1, 0] and decoder.sum(axis=1) == pytest.approx([1.0, 1.0])


@pytest.mark.shared
def test_the_bias_tables_of_every_t5_layer_are_read_from_the_run_and_no_other_run_has_any(trained_runs):
    biases = relative_biases(trained_runs.t5_scan / "model.safetensors")
    assert sorted(biases) == [("decoder", 0), ("decoder", 1), ("encoder", 0), ("encoder", 1)]
    assert all(table.shape == (2, 5) for table in biases.values())  # 2 heads, span 2
    assert relative_biases(trained_runs.transformer_scan[0] / "model.safetensors") == {}


def test_bleu_by_degree_recomputed_from_predictions_equals_what_eval_records(tmp_path):
    degrees = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 1.0, 0.4, 0.6, 0.8]  # not in row order: the buckets sort them
    rows = [{"id": f"r{i}", "source": f"Satz {i}", "target": f"the cat number {i} sat on the mat", "degree": degree}
            for i, degree in enumerate(degrees)]
    predictions = [row["target"] if row["degree"] <= 0.3 else "a dog ran away" for row in rows]
    recorded = score_rows(rows, predictions)["bleu_by_degree"]["buckets"]  # what `eval` writes to metrics.json
    # Two rows a bucket, by degree: both right, one of two, then none.
    assert [bucket["rows"] for bucket in recorded] == [2] * 5
    assert recorded[0]["bleu"] == pytest.approx(100.0) and 0 < recorded[1]["bleu"] < 100
    assert [bucket["bleu"] for bucket in recorded[2:]] == [0.0] * 3
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps({"prediction": prediction}) + "\n"
                                                        for prediction in predictions), encoding="utf-8")
    without = Evaluation(tmp_path / "metrics.json", {"benchmark": "react/tiny", "split": "cg_test"})
    assert degree_buckets(without, rows) == recorded
    assert degree_buckets(without, None) is None
    kept = Evaluation(tmp_path / "metrics.json", {"bleu_by_degree": {"buckets": recorded[:1]}})
    assert degree_buckets(kept, rows) == recorded[:1]  # a recorded table is read as it is


@pytest.mark.shared
def test_comp_per_pair_adds_up_to_the_comp_eval_recorded(trained_runs):
    [run] = read_runs([trained_runs.transformer_nounadj])
    [evaluation] = run.evaluations
    rows = BenchmarkFolders([trained_runs.nounadj]).rows(evaluation)
    scores = pair_scores([p["prediction"] for p in evaluation.predictions()], rows)
    assert [(s.order, s.adjective, s.noun, s.counts.rows) for s in scores] == [
        ("backward", "european", "idea", 2), ("backward", "specific", "plan", 1),
        ("forward", "good", "institution", 1), ("forward", "new", "response", 2)]
    comp = evaluation.metrics["comp"]
    assert sum(s.counts.with_both for s in scores) == comp["counts"]["with_both"]
    assert sum(s.counts.right_order for s in scores) == comp["counts"]["right_order"]


def test_pair_scores_count_both_lemmas_and_the_side_of_the_adjective():
    rows = [{"adjective": "new", "noun": "response", "fr_adjective": "nouveau", "fr_noun": "réponse",
             "order": "forward"}] * 3
    scores = pair_scores(["la nouvelle réponse .", "la réponse nouvelle .", "la réponse ."], rows)
    [score] = scores
    assert (score.counts.rows, score.counts.with_both, score.counts.right_order) == (3, 2, 1)
    assert score.counts.comp == pytest.approx(200 / 3) and score.counts.order_accuracy == 50.0


def test_the_diff_marks_missing_words_in_the_reference_and_added_ones_in_the_prediction():
    reference, prediction = diff_markup("I_JUMP I_WALK <x>", "I_JUMP I_RUN <x> I_RUN")
    assert str(reference) == "I_JUMP <del>I_WALK</del> &lt;x&gt;"
    assert str(prediction) == "I_JUMP <ins>I_RUN</ins> &lt;x&gt; <ins>I_RUN</ins>"


def test_latex_escaping_keeps_model_names_literal():
    assert escape("sag_t5 & 100% {x}") == r"sag\_t5 \& 100\% \{x\}"


def test_an_evaluation_without_predictions_has_none(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"benchmark": "scan/x", "split": "test"}))
    evaluation = Evaluation(tmp_path / "metrics.json", {"benchmark": "scan/x", "split": "test"})
    assert evaluation.predictions_file is None and evaluation.predictions() == []


def test_a_legend_wider_than_its_figure_fits_inside_the_saved_image(tmp_path):
    """Every figure is saved through `FigureFolder.save`: one whose legend (long paper names under a narrow panel)
    is wider than the figure still shows it whole, in the PNG and the PDF."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    from benchbuild.report.figures import DPI, FigureFolder, _figure

    figure = _figure(3.0, 2.0)
    axis = figure.subplots()
    for number in range(2):
        axis.scatter([number], [number], label=f"Csordás, Irie and Schmidhuber (2021), other protocol, run {number}")
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    saved = FigureFolder(tmp_path).save(figure, "wide legend", "")
    figure.set_dpi(DPI)
    legend = figure.legends[0].get_window_extent(FigureCanvasAgg(figure).get_renderer()).width  # pixels at DPI
    assert legend > 3.0 * DPI  # wider than the figure asked for
    with Image.open(saved.png) as image:
        assert image.width >= legend
    assert saved.pdf.stat().st_size > 0
