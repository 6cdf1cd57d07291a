"""What `best_validation` compares (`validate_by`: exact match, loss or beam-5 BLEU) and how much of train is held
out to validate on (`held_out`), as the papers select their checkpoints."""

import json

import pytest
import torch
from small_inputs import write_benchmark
from typer.testing import CliRunner

from benchbuild import zoo
from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import train
from benchbuild.training.selection import better, selects
from benchbuild.zoo.loading import load_model
from benchbuild.zoo.recipe import TrainingRecipe


def validation_lines(run_dir):
    lines = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    return {line["step"]: line for line in lines if "validation_exact_match" in line}


def chosen(select, metric, history):
    """The (step, value) the root would hold after validating `history` in order."""
    kept = None
    for step, value in history:
        if selects(select, value, None if kept is None else kept[1], metric):
            kept = (step, value)
    return kept


def test_the_loss_selects_its_lowest_value_and_a_tie_goes_to_the_later_step():
    history = [(10, 2.0), (20, 1.0), (30, 1.5), (40, 1.0), (50, 1.2)]
    assert chosen("best_validation", "loss", history) == (40, 1.0)
    assert chosen("best_validation", "loss", history[:3]) == (20, 1.0)
    assert chosen("best_validation", "bleu", history) == (10, 2.0)  # BLEU, like exact match: higher is better
    assert chosen("last", "loss", history) == (50, 1.2)


def test_the_recipe_keys_are_checked_like_any_other():
    recipe = TrainingRecipe(steps=1, batch_size=1, learning_rate=1.0)
    assert (recipe.validate_by, recipe.held_out) == ("exact_match", 0.1)
    assert TrainingRecipe.checked_overrides({"validate_by": "bleu", "held_out": 0.2}, "--set") == {
        "validate_by": "bleu", "held_out": 0.2}
    with pytest.raises(BenchbuildError, match="--set validate_by must be one of exact_match, loss, bleu, not .chrf."):
        TrainingRecipe.checked_overrides({"validate_by": "chrf"}, "--set")
    with pytest.raises(BenchbuildError, match=r"--set held_out must be in \(0, 0.5\]; got 0.9"):
        TrainingRecipe.checked_overrides({"held_out": 0.9}, "--set")


def test_catalogue_recipes_select_as_their_papers_do():
    transformer = zoo.load_entry("transformer").recipes
    # 000 App. A.2: IWSLT by validation BLEU (beam 5), the noun-adjective split by validation loss.
    assert transformer["mt"]["validate_by"] == "bleu" and transformer["nounadj"]["validate_by"] == "loss"
    assert zoo.load_entry("sag").recipes["nounadj"]["validate_by"] == "loss"  # the variants inherit 000's rule
    # 001 and 004 train with CoGnition's fairseq set-up, whose train.sh keeps the best checkpoint by BLEU.
    assert transformer["mt_001"]["validate_by"] == "bleu"
    for name in ("dangle", "fusion", "hf"):
        assert zoo.load_entry(name).recipes["mt"]["validate_by"] == "bleu", name
    # 002 (after Bastings et al. 2018): early stopping on a 20% held-out sample of train, by accuracy.
    for name in ("syntactic_attention", "lstm_attention"):
        scan = zoo.load_entry(name).recipes["scan"]
        assert scan["held_out"] == 0.2 and scan.get("validate_by", "exact_match") == "exact_match", name


def test_selecting_by_loss_keeps_the_lowest_validation_loss_recomputed_by_the_models_own_forward(
        tiny_scan, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--model", str(tiny_model), "--data", str(tiny_scan), "--out",
                                      str(run_dir), "--device", "cpu", "--max-steps", "20", "--set", "eval_every=5",
                                      "--set", "validate_by=loss", "--set", "label_smoothing=0"])
    assert result.exit_code == 0, result.output
    logged = validation_lines(run_dir)
    assert sorted(logged) == [5, 10, 15, 20]
    losses = {step: line["validation_loss"] for step, line in logged.items()}
    best = min(losses.values())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["validate_by"] == "loss" and run["select"] == "best_validation"
    assert run["selected_step"] == max(step for step, loss in losses.items() if loss == best)
    assert run["validation_loss"] == run["best_validation_loss"] == best
    assert run["validation_exact_match"] == logged[run["selected_step"]]["validation_exact_match"]
    assert "validation_bleu" not in logged[5]  # BLEU decodes the validation set: only when it selects

    # The root's mean token loss on the held-out rows, through the model's own forward (labels, no smoothing).
    from benchbuild.benchmark import load_splits
    from benchbuild.training.validation import split_validation
    from transformers import AutoTokenizer

    _, held, _ = split_validation(load_splits(tiny_scan), None, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    model = load_model(run_dir).eval()
    encoded = tokenizer([row["source"] for row in held], return_tensors="pt", padding=True)
    labels = tokenizer([row["target"] for row in held], return_tensors="pt", padding=True)["input_ids"]
    labels = labels.masked_fill(labels.eq(tokenizer.pad_token_id), -100)
    with torch.no_grad():
        loss = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels).loss
    assert loss.item() == pytest.approx(best, rel=1e-5)
    card = (run_dir / "README.md").read_text()
    assert "`best_validation` by validation loss" in card and f"validation loss {best:.4g}" in card


def test_selecting_by_bleu_logs_the_bleu_that_eval_gives_the_selected_checkpoint_with_beam_5(
        tiny_scan, tiny_model, tmp_path):
    from benchbuild.benchmark import load_splits

    splits = load_splits(tiny_scan)
    rows = list(splits["train"])
    data = write_benchmark(tmp_path / "bench", {"train": rows[:100], "validation": rows[100:],
                                                "test": list(splits["test"])}, "scan", "simple")
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--model", str(tiny_model), "--data", str(data), "--out", str(run_dir),
                                      "--device", "cpu", "--max-steps", "20", "--set", "eval_every=10", "--set",
                                      "validate_by=bleu", "--set", "beam=5"])
    assert result.exit_code == 0, result.output
    bleus = {step: line["validation_bleu"] for step, line in validation_lines(run_dir).items()}
    run = json.loads((run_dir / "run.json").read_text())
    assert run["validate_by"] == "bleu" and run["validation"] == "validation"
    assert run["selected_step"] == max(step for step, bleu in bleus.items() if bleu == max(bleus.values()))
    assert run["validation_bleu"] == max(bleus.values())
    # `eval` decodes with the recipe's beam (5 here) when no --beam is given, as validation did.
    result = CliRunner().invoke(app, ["eval", "--run", str(run_dir), "--data", str(data), "--split", "validation",
                                      "--batch-size", "256", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["beam"], metrics["beam_from"]) == (5, "recipe")
    assert metrics["bleu"]["score"] == pytest.approx(run["validation_bleu"])


def test_held_out_sets_the_share_of_train_that_validates_a_run(tiny_scan, tiny_model, tmp_path):
    result = train(tiny_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=2,
                   overrides={"held_out": 0.2, "eval_every": 2})
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["validation"] == "train-heldout-20%-seed-0" and run["validation_rows"] == 24  # of 120 rows
    default = train(tiny_model, tiny_scan, tmp_path / "default", device="cpu", progress=False, max_steps=2,
                    overrides={"eval_every": 2})
    run = json.loads((default.run_dir / "run.json").read_text())
    assert run["validation"] == "train-heldout-10%-seed-0" and run["validation_rows"] == 12


def test_a_run_that_validated_before_validate_by_existed_resumes_under_exact_match_only(tiny_scan, tiny_model,
                                                                                        tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=5, overrides={"eval_every": 5})
    run = json.loads((run_dir / "run.json").read_text())  # as an earlier benchbuild wrote it: no validate_by
    del run["validate_by"], run["recipe"]["validate_by"]
    (run_dir / "run.json").write_text(json.dumps(run))
    # Its best score so far is an exact match: a loss could not be compared with it.
    with pytest.raises(BenchbuildError, match="validate_by = 'exact_match', not 'loss'"):
        train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=10,
              overrides={"eval_every": 5, "validate_by": "loss"})
    resumed = train(tiny_model, tiny_scan, run_dir, device="cpu", progress=False, max_steps=10,
                    overrides={"eval_every": 5})
    assert resumed.resumed_from == 5


def test_the_better_of_two_scores_is_the_lower_loss_and_the_higher_of_anything_else():
    assert better("loss", 0.5, 0.25) == 0.25 and better("loss", 0.25, 0.5) == 0.25
    assert better("exact_match", 10.0, 20.0) == 20.0 and better("bleu", 30.0, 20.0) == 30.0
