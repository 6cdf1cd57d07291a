"""Training protocols as the papers ran them: a budget in epochs of each benchmark's own train set (000 App. A.1),
validation every so many epochs and the earliest of tied best checkpoints (002's official code), the last 20% of
train held out (002's official code), `select = "last"` training on all of train (000), and the selected checkpoint's
exact match on its own train rows (002's exclusion of runs under 10% train accuracy)."""

import json
import math
from pathlib import Path

import pytest
from test_checkpoint_selection import SWINGING, SWINGING_STEPS, swinging_scores, validations  # noqa: F401
from small_inputs import write_benchmark
from transformers import AutoTokenizer

from benchbuild.benchmark import load_splits
from benchbuild.errors import BenchbuildError
from benchbuild.training.plan import recipe_identity
from benchbuild.training.loop import train
from benchbuild.zoo.recipe import planned_steps, validation_interval
from benchbuild.training.selection import selects
from benchbuild.training.validation import greedy_matches, split_validation
from benchbuild.zoo.loading import load_model
from benchbuild.zoo.recipe import TrainingRecipe

# 000 App. A.1: 250 epochs, batches of 256, on every SCAN split; the run keeps its last step.
PAPER_000 = TrainingRecipe(batch_size=256, learning_rate=5e-4, epochs=250, select="last")


def scan_rows(path):
    """The rows of a canonical SCAN file, in file order."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        rows.append({"source": source, "target": target})
    return rows


@pytest.fixture(scope="module")
def addprim_jump(shared_data):
    """The train and test rows of SCAN's add-primitive `jump` split (Lake & Baroni's files)."""
    folder = shared_data / "scan" / "add_prim_split"
    return {"train": scan_rows(folder / "tasks_train_addprim_jump.txt"),
            "test": scan_rows(folder / "tasks_test_addprim_jump.txt")}


def split_rows(splits):
    return {name: len(rows) for name, rows in splits.items()}


def test_250_epochs_of_addprim_jump_are_the_steps_that_cover_its_14670_train_rows_250_times(addprim_jump):
    assert split_rows(addprim_jump) == {"train": 14_670, "test": 7_706}
    # 250 × 14,670 / 256 = 14,326.17: the last, partial batch is a step too.
    assert planned_steps(PAPER_000, split_rows(addprim_jump)) == math.ceil(250 * 14_670 / 256) == 14_327


def test_each_split_gets_the_epochs_of_its_own_train_set(shared_data, addprim_jump):
    length = scan_rows(shared_data / "scan" / "length_split" / "tasks_train_length.txt")
    assert len(length) == 16_990
    assert planned_steps(PAPER_000, {"train": 16_990, "test": 3_920}) == math.ceil(250 * 16_990 / 256) == 16_592
    assert planned_steps(PAPER_000, split_rows(addprim_jump)) != 16_592


def test_an_epoch_budget_counts_only_the_rows_trained_on_and_steps_count_without_epochs(addprim_jump):
    rows = split_rows(addprim_jump)
    held_out = TrainingRecipe(batch_size=256, learning_rate=1e-3, epochs=250, held_out=0.2)  # best_validation
    assert planned_steps(held_out, rows) == math.ceil(250 * (14_670 - 2_934) / 256)
    with_validation_split = {**rows, "validation": 100}  # nothing held out of train: all of it trains
    assert planned_steps(held_out, with_validation_split) == 14_327
    # `epochs` wins over `steps`; without it, `steps` is the budget whatever the data.
    assert planned_steps(TrainingRecipe(batch_size=256, learning_rate=1e-3, steps=50, epochs=250, select="last"),
                         rows) == 14_327
    assert planned_steps(TrainingRecipe(batch_size=256, learning_rate=1e-3, steps=50), rows) == 50


def test_epochs_count_in_exact_arithmetic():
    # 1.1 × 800 / 16 = 55.00000000000001 in floating point: 55 batches of 16, not 56.
    recipe = TrainingRecipe(batch_size=16, learning_rate=1e-3, epochs=1.1, select="last")
    assert planned_steps(recipe, {"train": 800}) == 55


def test_validation_every_epochs_is_that_many_epochs_of_steps():
    recipe = TrainingRecipe(batch_size=1, learning_rate=1e-3, steps=200_000, eval_every_epochs=5, held_out=0.2,
                            held_out_from="end")
    assert validation_interval(recipe, {"train": 14_670}) == 5 * (14_670 - 2_934)  # 002: every 5 epochs, batch 1
    assert validation_interval(TrainingRecipe(batch_size=1, learning_rate=1e-3, steps=10), {"train": 14_670}) == 1000


def test_a_recipe_needs_a_budget_and_epochs_in_range():
    with pytest.raises(BenchbuildError, match="no step budget: set `steps`"):
        TrainingRecipe(batch_size=1, learning_rate=1e-3)
    for key in ("epochs", "eval_every_epochs"):
        with pytest.raises(BenchbuildError, match=f"--set {key} must be positive"):
            TrainingRecipe.checked_overrides({key: 0}, "--set")
    with pytest.raises(BenchbuildError, match="--set ties must be one of latest, earliest"):
        TrainingRecipe.checked_overrides({"ties": "first"}, "--set")
    with pytest.raises(BenchbuildError, match="--set held_out_from must be one of random, end"):
        TrainingRecipe.checked_overrides({"held_out_from": "start"}, "--set")


def test_a_run_with_an_epoch_budget_trains_exactly_the_planned_steps(tiny_scan, tiny_model, tmp_path):
    splits = load_splits(tiny_scan)
    recipe = TrainingRecipe(batch_size=16, learning_rate=2e-3, epochs=2, select="last")
    planned = planned_steps(recipe, {name: len(split) for name, split in splits.items()})
    assert planned == math.ceil(2 * 120 / 16) == 15  # the recipe's own `steps = 30` is ignored
    result = train(tiny_model, tiny_scan, tmp_path / "run", device="cpu", progress=False,
                   overrides={"epochs": 2, "select": "last", "eval_every": 10})
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert result.steps == run["steps_done"] == run["step_budget"] == run["recipe_steps"] == planned
    assert "15 steps of 16 rows" in (tmp_path / "run" / "README.md").read_text()
    capped = train(tiny_model, tiny_scan, tmp_path / "capped", device="cpu", progress=False, max_steps=4,
                   overrides={"epochs": 2, "select": "last"})
    assert capped.steps == json.loads((tmp_path / "capped" / "run.json").read_text())["step_budget"] == 4


def test_select_last_without_a_validation_split_trains_on_every_train_row(addprim_jump, tiny_scan, tiny_model,
                                                                          tmp_path):
    kept, validation, name = split_validation(addprim_jump, None, seed=0, select="last")
    assert (len(kept), validation, name) == (14_670, [], "none")
    assert len(split_validation(addprim_jump, None, seed=0)[0]) == 13_203  # best_validation holds 10% out

    train(tiny_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=10,
          overrides={"select": "last", "eval_every": 5})
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["train_rows"] == run["benchmark"]["splits"]["train"]["rows"] == 120
    assert (run["validation"], run["validation_rows"]) == ("none", 0)
    # No scores rather than zeros: the log's checkpoint lines carry the step and time only, and the root is step 10.
    lines = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [sorted(line) for line in lines if "loss" not in line] == [["elapsed_s", "step"]] * 2
    assert (run["selected_step"], run["validation_exact_match"], run["best_validation_step"]) == (10, None, None)
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == \
        (tmp_path / "run" / "checkpoints" / "step-00000010" / "model.safetensors").read_bytes()


# Validation exact match by step: 100 reached at step 20 and again at step 40.
TIED = [(10, 50.0), (20, 100.0), (30, 80.0), (40, 100.0), (50, 90.0)]


def kept(history, metric="exact_match", ties="latest"):
    chosen = None
    for step, value in history:
        if selects("best_validation", value, None if chosen is None else chosen[1], metric, ties):
            chosen = (step, value)
    return chosen


def test_earliest_keeps_the_first_step_of_a_tied_best_and_latest_the_last():
    assert kept(TIED, ties="earliest") == (20, 100.0)
    assert kept(TIED, ties="latest") == (40, 100.0)
    losses = [(10, 2.0), (20, 1.5), (30, 1.5), (40, 1.7)]
    assert kept(losses, "loss", ties="earliest") == (20, 1.5)
    assert kept(losses, "loss", ties="latest") == (30, 1.5)
    assert kept([(10, 1.0), (20, 2.0)], ties="earliest") == (20, 2.0)  # a better score still replaces it
    assert selects("last", 0.0, 100.0, ties="earliest")  # `last` knows no ties


def test_a_run_under_earliest_keeps_the_first_step_of_its_tied_best_score(swinging_scores, tiny_model,  # noqa: F811
                                                                         tmp_path):
    out = tmp_path / "run"
    result = train(tiny_model, swinging_scores, out, device="cpu", progress=False, max_steps=SWINGING_STEPS,
                   overrides={**SWINGING, "ties": "earliest"}, architecture_overrides={"dropout": 0.0})
    scores = validations(out)
    best = max(scores.values())
    tied = [step for step, score in scores.items() if score == best]
    assert best > 0 and len(tied) >= 2, scores  # the score really ties
    assert result.selected_step == min(tied) != max(tied)
    assert (out / "model.safetensors").read_bytes() != \
        (out / "checkpoints" / f"step-{SWINGING_STEPS:08d}" / "model.safetensors").read_bytes()
    run = json.loads((out / "run.json").read_text())
    assert (run["ties"], run["selected_step"], run["best_validation_step"]) == ("earliest", min(tied), min(tied))
    with pytest.raises(BenchbuildError, match="ties = 'earliest'.*--set ties=earliest"):
        train(tiny_model, swinging_scores, out, device="cpu", progress=False, max_steps=SWINGING_STEPS + 1,
              overrides=SWINGING, architecture_overrides={"dropout": 0.0})


def test_held_out_from_the_end_validates_on_the_last_rows_of_the_train_file(addprim_jump, tiny_scan):
    kept_rows, validation, name = split_validation(addprim_jump, None, seed=0, held_out=0.2, held_out_from="end")
    assert validation == addprim_jump["train"][-2_934:] and kept_rows == addprim_jump["train"][:-2_934]
    assert round(0.2 * 14_670) == 2_934 and name == "train-last-20%"
    assert split_validation(addprim_jump, None, seed=5, held_out=0.2, held_out_from="end")[1] == validation
    train_rows = list(load_splits(tiny_scan)["train"])
    assert split_validation(load_splits(tiny_scan), None, seed=0, held_out=0.2, held_out_from="end")[1] == \
        train_rows[-24:]
    assert split_validation(load_splits(tiny_scan), None, seed=0, held_out=0.2)[1] != train_rows[-24:]


def test_score_train_records_the_selected_checkpoints_greedy_exact_match_on_its_train_rows(tiny_scan, tiny_model,
                                                                                         tmp_path):
    out = tmp_path / "run"
    # Validating on the last 10% of train, every 2 epochs of the other 108 rows (14 steps) over 8 epochs (54 steps);
    # the root keeps the first of the steps tied at the best validation score (42 and 54), not the last.
    train(tiny_model, tiny_scan, out, device="cpu", progress=False,
          overrides={"epochs": 8, "eval_every_epochs": 2, "held_out_from": "end", "ties": "earliest",
                     "score_train": True, "learning_rate": 5e-3})
    run = json.loads((out / "run.json").read_text())
    assert (run["step_budget"], run["validation_every"]) == (54, 14)
    assert sorted(validations(out)) == [14, 28, 42, 54]
    assert (run["validation"], run["train_rows"], run["selected_step"]) == ("train-last-10%", 108, 42)
    rows = list(load_splits(tiny_scan)["train"])[:108]
    tokenizer = AutoTokenizer.from_pretrained(out)

    def exact_match(folder):
        matches = greedy_matches(load_model(folder), tokenizer, [row["source"] for row in rows],
                                 [row["target"] for row in rows])
        return 100 * sum(matches) / len(rows)

    assert 0 < run["train_exact_match"] == exact_match(out) != exact_match(out / "checkpoints" / "step-00000054")


def estimate_of_two_benchmarks(tiny_scan: Path, tiny_model: Path, tmp_path: Path, monkeypatch, seeds: str,
                               more: str = "") -> list:
    """`estimate` of a sweep of `tiny_model` at 2 epochs, the last checkpoint (and the `[set]` keys in `more`) on
    `tiny_scan` and on `half` (its first 60 train rows, written to tmp_path / "half")."""
    from benchbuild.sweep.run import check_folders, estimate
    from benchbuild.sweep.spec import load_sweep

    splits = load_splits(tiny_scan)
    half = write_benchmark(tmp_path / "half", {"train": list(splits["train"])[:60], "test": list(splits["test"])},
                           "scan", "half")
    sweep_file = tmp_path / "epochs.toml"
    sweep_file.write_text(f"models = ['{tiny_model}']\nseeds = {seeds}\ndevice = 'cpu'\n"
                          f"[set]\nepochs = 2\nselect = 'last'\n{more}"
                          f"[[benchmarks]]\ndata = '{tiny_scan}'\n[[benchmarks]]\ndata = '{half}'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    sweep = load_sweep(sweep_file)
    return estimate(sweep, check_folders(sweep), jobs=1)


def test_a_sweeps_estimate_gives_each_benchmark_its_own_epoch_budget(tiny_scan, tiny_model, tmp_path, monkeypatch):
    [row] = estimate_of_two_benchmarks(tiny_scan, tiny_model, tmp_path, monkeypatch, seeds="[0, 1]")
    # Two seeds of ceil(2 × 120 / 16) = 15 steps on `simple` and of ceil(2 × 60 / 16) = 8 on `half`; the recipe
    # validates every 10 steps (and at the last): 2 validations a run on `simple`, 1 on `half`.
    assert (row.model, row.steps_left, row.measured) == (str(tiny_model), 2 * 15 + 2 * 8, True)
    assert (row.validations, row.runs_left) == (2 * 2 + 2 * 1, 4) and row.step_seconds > 0
    assert row.seconds == pytest.approx(row.step_seconds * 46 + row.validation_seconds * 6
                                        + row.evaluation_seconds * 4)


def test_a_sweeps_estimate_counts_epochs_of_token_batches_on_each_benchmark(tiny_scan, tiny_model, tmp_path,
                                                                            monkeypatch):
    from benchbuild.training.plan import token_batches_per_epoch
    from benchbuild.zoo.recipe import TrainingRecipe

    [row] = estimate_of_two_benchmarks(tiny_scan, tiny_model, tmp_path, monkeypatch, seeds="[0]",
                                       more="batch_tokens = 60\n")
    recipe = TrainingRecipe(learning_rate=1e-3, batch_size=16, batch_tokens=60, epochs=2, select="last")
    simple, halved = (token_batches_per_epoch(data, recipe) for data in (tiny_scan, tmp_path / "half"))
    assert simple > halved > 0
    # Two epochs of each benchmark's own token batches (a batch of at most 16 rows and 60 padded tokens), not of
    # its rows in batches of 16 (ceil(2 × 120 / 16) = 15 and 8).
    assert row.steps_left == 2 * simple + 2 * halved != 15 + 8


# The recipe keys of a run's identity before the keys above existed.
IDENTITY_KEYS = {"batch_size", "learning_rate", "schedule", "warmup_steps", "label_smoothing", "grad_clip",
                 "weight_decay", "eval_every", "bpe_vocab_size", "eval_batch_size", "adam_beta1", "adam_beta2",
                 "micro_batches", "length_groups"}


def test_new_keys_at_their_defaults_leave_a_runs_identity_as_it_was(tiny_scan, tiny_model, tmp_path):
    train(tiny_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=1)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert set(run["identity"]["recipe"]) == IDENTITY_KEYS and run["identity"]["validation"] == \
        "train-heldout-10%-seed-0"
    # Budget, selection and scoring keys stay out whatever their value; `eval_every_epochs` counts once set.
    assert set(recipe_identity(TrainingRecipe(batch_size=16, learning_rate=1e-3, steps=30, ties="earliest",
                                               held_out_from="end", score_train=True, epochs=3))) == IDENTITY_KEYS
    assert recipe_identity(TrainingRecipe(batch_size=16, learning_rate=1e-3, steps=30,
                                           eval_every_epochs=2))["eval_every_epochs"] == 2
