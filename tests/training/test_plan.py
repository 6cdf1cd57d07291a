"""The plan of a run (issue #58): one value, made and checked before the run folder is touched, written to run.json
as it is, and executed by the loop without consulting the recipe again."""

from __future__ import annotations

import json

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import RunOptions, plan_run, prepare, train, validate_and_checkpoint


def test_a_plan_is_made_without_touching_the_run_folder_and_run_json_records_it(tiny_scan, tiny_model, tmp_path):
    out = tmp_path / "run"
    plan = plan_run(tiny_model, tiny_scan, out, RunOptions(seed=3, device="cpu", progress=False,
                                                           overrides={"eval_every": 6}))
    assert not out.exists()
    # 120 rows, 12 held out for validation; the recipe's 30 steps and its validation interval, as planned once.
    assert (len(plan.train_rows), len(plan.validation_rows)) == (108, 12)
    assert plan.validation_name == "train-heldout-10%-seed-3"
    assert (plan.budget, plan.eval_every, plan.recipe.batch_size) == (30, 6, 16)
    assert len(plan.train_encoded.sources) == 108 and plan.tokenizer.get_vocab()
    run = prepare(plan)
    validate_and_checkpoint(run)  # writes run.json
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["identity"] == json.loads(json.dumps(plan.identity))
    assert {key: recorded[key] for key in plan.record()} == json.loads(json.dumps(plan.record()))
    assert run.budget == plan.budget and run.recipe is plan.recipe and run.tokenizer is plan.tokenizer


def test_a_refused_plan_leaves_nothing_for_the_corrected_rerun_to_trip_on(tiny_scan, tiny_model, tmp_path):
    """Token batches too small for a row used to be found after the run folder was opened (and cleared again by
    hand); now the plan refuses them before anything is written, and the corrected run starts cleanly."""
    out = tmp_path / "run"
    with pytest.raises(BenchbuildError, match="batch_tokens"):
        train(tiny_model, tiny_scan, out, device="cpu", progress=False, max_steps=2,
              overrides={"batch_tokens": 3})
    assert not out.exists()
    train(tiny_model, tiny_scan, out, device="cpu", progress=False, max_steps=2)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


@pytest.mark.parametrize("model, key", [("tiny", "source_vocab_size"), ("syntactic_attention", "output_tokens")])
def test_an_architecture_key_training_derives_is_refused_before_the_run_folder_is_written(tiny_scan, tiny_model,
                                                                                          tmp_path, model, key):
    out = tmp_path / "run"
    with pytest.raises(BenchbuildError, match=f"{key} is the run's .* set by training"):
        train(tiny_model if model == "tiny" else model, tiny_scan, out, device="cpu", progress=False, max_steps=2,
              architecture_overrides={key: 7 if key == "source_vocab_size" else [1, 2]})
    assert not out.exists()


def test_label_smoothing_beside_a_softmax_over_the_targets_is_refused_before_the_run_folder(tiny_scan, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(BenchbuildError, match="label_smoothing = 0.1 spreads probability over every token"):
        train("syntactic_attention", tiny_scan, out, device="cpu", progress=False, max_steps=2,
              overrides={"label_smoothing": 0.1})
    assert not out.exists()
