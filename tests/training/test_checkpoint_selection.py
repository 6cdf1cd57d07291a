"""Which checkpoint a run folder's root holds: the recipe's `select` (`last`, or `best_validation` with ties to the
later step)."""

import json

import pytest
import torch
from small_inputs import write_benchmark
from typer.testing import CliRunner

from benchbuild import zoo
from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.report.markdown import markdown_table
from benchbuild.report.rows import build_report
from benchbuild.training.loop import train
from benchbuild.training.selection import selects
from benchbuild.zoo.recipe import TrainingRecipe

# Validation exact match by step: a peak at step 20, reached again at step 40, then a drop.
HISTORY = [(10, 50.0), (20, 100.0), (30, 80.0), (40, 100.0), (50, 90.0)]


def selected(select, history):
    """The (step, accuracy) the root would hold after validating `history` in order."""
    chosen = None
    for step, accuracy in history:
        if selects(select, accuracy, None if chosen is None else chosen[1]):
            chosen = (step, accuracy)
    return chosen


def root_weights(run_dir):
    return (run_dir / "model.safetensors").read_bytes()


def checkpoint_weights(run_dir, step):
    return (run_dir / "checkpoints" / f"step-{step:08d}" / "model.safetensors").read_bytes()


def validations(run_dir):
    lines = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    return {line["step"]: line["validation_exact_match"] for line in lines if "validation_exact_match" in line}


def test_last_keeps_the_final_validated_step():
    assert selected("last", HISTORY) == (50, 90.0)


def test_best_validation_keeps_the_peak_and_a_tie_goes_to_the_later_step():
    assert selected("best_validation", HISTORY) == (40, 100.0)
    assert selected("best_validation", HISTORY[:3]) == (20, 100.0)


def test_the_recipe_key_is_checked_like_any_other():
    assert TrainingRecipe(steps=1, batch_size=1, learning_rate=1.0).select == "best_validation"
    assert TrainingRecipe.checked_overrides({"select": "last"}, "--set") == {"select": "last"}
    with pytest.raises(BenchbuildError, match="--set select must be one of best_validation, last, not .final."):
        TrainingRecipe.checked_overrides({"select": "final"}, "--set")


def test_scan_recipes_of_fixed_budget_papers_keep_the_last_step_and_mt_recipes_the_best_validation():
    for name in ("transformer", "sag", "fusion", "universal_transformer", "dangle", "hf"):
        assert zoo.load_entry(name).recipes["scan"]["select"] == "last", name
    for name in ("transformer", "sag", "fusion", "dangle", "rdangle_shr", "hf"):
        assert zoo.load_entry(name).recipes["mt"]["select"] == "best_validation", name
    for name in ("syntactic_attention", "lstm_attention"):  # 002 §3: early stopping on held-out train rows
        assert zoo.load_entry(name).recipes["scan"]["select"] == "best_validation", name


def test_train_with_select_last_leaves_the_final_checkpoint_at_the_root(tiny_scan, tiny_model, tmp_path):
    # tiny_scan has no validation split: under `last` nothing is held out, so nothing validates.
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--model", str(tiny_model), "--data", str(tiny_scan), "--out",
                                      str(run_dir), "--device", "cpu", "--max-steps", "15", "--set", "select=last",
                                      "--set", "eval_every=5"])
    assert result.exit_code == 0, result.output
    assert "selected step 15" in result.output
    assert validations(run_dir) == {}
    assert root_weights(run_dir) == checkpoint_weights(run_dir, 15)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["select"] == "last" and run["selected_step"] == 15
    assert (run["validation"], run["validation_rows"], run["train_rows"]) == ("none", 0, 120)
    assert run["validation_exact_match"] is None and run["best_validation_exact_match"] is None


# A benchmark whose validation exact match moves: train says "go" is "A" in one row and "B" in the other, validation
# asks for "A". Each step trains on one of the two rows (a seeded permutation per epoch), at a constant rate, so the
# model's answer swings between them. With seed 0 it answers "A" after steps 9 and 10 only: over 11 steps validated
# one by one the score is 0, …, 0, 100, 100, 0, a best reached twice and then left, so `last`, the earliest best and
# the latest best are three different steps.
SWINGING = {"eval_every": 1, "batch_size": 1, "learning_rate": 0.01, "schedule": "constant", "warmup_steps": 0,
            "label_smoothing": 0.0}
SWINGING_STEPS = 11


@pytest.fixture(scope="module")
def swinging_scores(tmp_path_factory):
    rows = [{"id": "a", "source": "go", "target": "A"}, {"id": "b", "source": "go", "target": "B"}]
    asked = [{"id": "v", "source": "go", "target": "A"}]
    return write_benchmark(tmp_path_factory.mktemp("swinging") / "go", {"train": rows, "validation": asked,
                                                                        "test": asked}, "scan", "go")


def swinging_run(select, tiny_model, data, out):
    """Train on the swinging benchmark under `select`; the run's result and its validation scores by step, checked
    to move as the fixture says (a best reached at more than one step, the last step below it)."""
    result = train(tiny_model, data, out, device="cpu", progress=False, max_steps=SWINGING_STEPS,
                   overrides={**SWINGING, "select": select}, architecture_overrides={"dropout": 0.0})
    scores = validations(out)
    best = max(scores.values())
    assert sorted(scores) == list(range(1, SWINGING_STEPS + 1))
    assert best > 0 and len([step for step, score in scores.items() if score == best]) >= 2, scores
    assert scores[SWINGING_STEPS] < best, scores
    return result, scores


def test_best_validation_keeps_the_latest_of_the_steps_with_the_best_score(swinging_scores, tiny_model, tmp_path):
    result, scores = swinging_run("best_validation", tiny_model, swinging_scores, tmp_path / "run")
    best = max(scores.values())
    latest_best = max(step for step, score in scores.items() if score == best)
    assert result.selected_step == latest_best == SWINGING_STEPS - 1
    assert root_weights(tmp_path / "run") == checkpoint_weights(tmp_path / "run", latest_best)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run["selected_step"], run["validation_exact_match"]) == (latest_best, best)
    assert (run["best_validation_step"], run["best_validation_exact_match"]) == (latest_best, best)


def test_last_keeps_the_final_step_though_an_earlier_one_scored_higher(swinging_scores, tiny_model, tmp_path):
    result, scores = swinging_run("last", tiny_model, swinging_scores, tmp_path / "run")
    assert result.selected_step == SWINGING_STEPS
    assert root_weights(tmp_path / "run") == checkpoint_weights(tmp_path / "run", SWINGING_STEPS)
    assert root_weights(tmp_path / "run") != checkpoint_weights(tmp_path / "run", SWINGING_STEPS - 1)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["validation_exact_match"] == scores[SWINGING_STEPS] < run["best_validation_exact_match"]


def test_a_run_folder_from_before_select_resumes_under_the_recipes_rule(swinging_scores, tiny_model, tmp_path):
    # A benchmark with a validation split: under `last` as under `best_validation` the run validates on it.
    run_dir = tmp_path / "run"
    train(tiny_model, swinging_scores, run_dir, device="cpu", progress=False, max_steps=10,
          overrides={"eval_every": 5})
    # Make it look like a run of an earlier benchbuild: no `select` in run.json or in the trainer state.
    run = json.loads((run_dir / "run.json").read_text())
    del run["select"], run["recipe"]["select"]
    (run_dir / "run.json").write_text(json.dumps(run))
    state_file = run_dir / "checkpoints" / "step-00000010" / "trainer_state.pt"
    state = torch.load(state_file, weights_only=True)
    del state["selected"], state["selected_step"]
    torch.save(state, state_file)

    result = train(tiny_model, swinging_scores, run_dir, device="cpu", progress=False, max_steps=15,
                   overrides={"eval_every": 5, "select": "last"})
    assert result.resumed_from == 10 and result.selected_step == 15
    assert root_weights(run_dir) == checkpoint_weights(run_dir, 15)
    assert json.loads((run_dir / "run.json").read_text())["select"] == "last"


@pytest.mark.parametrize("key, value", [("select", "last"), ("validate_by", "loss")])
def test_resuming_under_another_rule_than_the_run_was_started_with_is_refused(tiny_scan, tiny_model, tmp_path,
                                                                              key, value):
    run_dir = tmp_path / "run"
    train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=5,
          overrides={"eval_every": 5, key: value})
    with pytest.raises(BenchbuildError, match=f"{key} = '{value}'.*--set {key}={value}"):
        train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=10,
              overrides={"eval_every": 5})
    resumed = train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=10,
                    overrides={"eval_every": 5, key: value})
    assert resumed.resumed_from == 5


def test_report_names_each_groups_selection_rule_and_reads_old_runs_as_best_validation(tmp_path):
    runs = []
    for seed, select in ((0, "last"), (1, None)):
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        run = {"model": "no_such_model", "seed": seed, **({"select": select} if select else {})}
        (folder / "run.json").write_text(json.dumps(run))
        (folder / "metrics.json").write_text(json.dumps({"benchmark": "scan/simple", "split": "test",
                                                         "exact_match": 50.0 + seed}))
        runs.append(folder)
    rows = build_report(runs)
    # Two selection rules are two configurations: a row each, named by the rule (a run.json without `select` was
    # selected by the best validation exact match).
    assert [(row.model, row.select) for row in rows] == [
        ("no_such_model [select=best_validation by exact_match]", "best_validation by exact_match"),
        ("no_such_model [select=last]", "last")]
    header, _, *lines = markdown_table(rows).splitlines()
    cells = [dict(zip((cell.strip() for cell in header.split("|")), (cell.strip() for cell in line.split("|"))))
             for line in lines[:2]]
    assert [row["select"] for row in cells] == ["best_validation by exact_match", "last"]
    assert build_report(runs[:1])[0].select == "last"
