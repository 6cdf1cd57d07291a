"""Real tiny training runs on CPU: run folder contents, determinism, resume after a kill, the CLI."""

import json
import shutil

import pytest
import torch
from small_inputs import write_benchmark
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import train
from benchbuild.training.validation import split_validation


def read_log(run_dir):
    """The training log without its wall-clock field (`elapsed_s`, on validation lines), which no two runs share."""
    lines = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    for line in lines:
        if "validation_exact_match" in line:
            assert line.pop("elapsed_s") >= 0.0
    return lines


@pytest.fixture(scope="module")
def finished_run(tiny_scan, tiny_model, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "seed0"
    result = train(tiny_model, tiny_scan, run_dir, seed=0, device="cpu", progress=False)
    return run_dir, result


def test_run_folder_holds_the_selected_checkpoint_checkpoints_log_and_record(finished_run, tiny_scan):
    import transformers

    import benchbuild.zoo

    run_dir, result = finished_run
    assert result.steps == 30 and result.resumed_from is None
    benchbuild.zoo.register()
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(run_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(run_dir)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert (run_dir / "model.safetensors").is_file()
    assert [p.name for p in sorted((run_dir / "checkpoints").iterdir())] == ["step-00000020", "step-00000030"]
    state = torch.load(run_dir / "checkpoints" / "step-00000030" / "trainer_state.pt", weights_only=True)
    assert state["step"] == 30 and "optimizer" in state and "scheduler" in state

    log = read_log(run_dir)
    losses = [line["loss"] for line in log if "loss" in line]
    assert [line["step"] for line in log if "loss" in line] == list(range(1, 31))
    assert sum(losses[-5:]) < sum(losses[:5])
    accuracies = {line["step"]: line["validation_exact_match"] for line in log if "validation_exact_match" in line}
    assert sorted(accuracies) == [10, 20, 30]

    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["seed"] == 0 and run["recipe_family"] == "scan"
    assert run["stopped_by"] == "step budget" and run["time_budget_minutes"] is None
    assert run["selected_step"] == result.selected_step
    # best_validation: the latest step of the best accuracy (here the model learns too little for the accuracy to
    # move, so this is the last step; test_checkpoint_selection.py selects on a score that moves).
    best = max(accuracies.values())
    assert run["selected_step"] == max(step for step, accuracy in accuracies.items() if accuracy == best)
    selected = run_dir / "checkpoints" / f"step-{run['selected_step']:08d}" / "model.safetensors"
    assert (run_dir / "model.safetensors").read_bytes() == selected.read_bytes()
    build = json.loads((tiny_scan / "build.json").read_text())
    assert run["benchmark"]["splits"]["train"]["fingerprint"] == build["splits"]["train"]["fingerprint"]
    assert run["validation"] == "train-heldout-10%-seed-0" and run["validation_rows"] == 12


def test_same_seed_gives_the_same_loss_curve_and_another_seed_does_not(finished_run, tiny_scan, tiny_model, tmp_path):
    run_dir, _ = finished_run
    train(tiny_model, tiny_scan, tmp_path / "again", seed=0, device="cpu", progress=False, max_steps=12)
    assert read_log(tmp_path / "again")[:12] == read_log(run_dir)[:12]
    train(tiny_model, tiny_scan, tmp_path / "other", seed=1, device="cpu", progress=False, max_steps=3)
    assert [l["loss"] for l in read_log(tmp_path / "other")[:3]] != [l["loss"] for l in read_log(run_dir)[:3]]


def test_a_killed_run_resumes_from_its_last_checkpoint_and_matches_the_uninterrupted_curve(
        finished_run, tiny_scan, tiny_model, tmp_path):
    run_dir, _ = finished_run
    killed = tmp_path / "killed"
    train(tiny_model, tiny_scan, killed, seed=0, device="cpu", progress=False, max_steps=25)
    # The kill came after step 25 was logged but before its checkpoint was written.
    shutil.rmtree(killed / "checkpoints" / "step-00000025")
    # run.json's segments say which code trained which steps: the start's, here as if from another commit, stays; a
    # segment from a step the resume discards (a resume at 22 whose checkpoint was lost too) goes.
    record = json.loads((killed / "run.json").read_text())
    (start,) = record["segments"]
    assert start == {"from_step": 0, "benchbuild_commit": record["environment"]["benchbuild_commit"],
                     "benchbuild_dirty": record["environment"]["benchbuild_dirty"]}
    record["segments"] = [{**start, "benchbuild_commit": "0123456"}, {**start, "from_step": 22}]
    (killed / "run.json").write_text(json.dumps(record))
    result = train(tiny_model, tiny_scan, killed, seed=0, device="cpu", progress=False)
    assert result.resumed_from == 20 and result.steps == 30
    assert read_log(killed) == read_log(run_dir)
    assert json.loads((killed / "run.json").read_text())["segments"] == [{**start, "benchbuild_commit": "0123456"},
                                                                         {**start, "from_step": 20}]


def test_a_time_budget_stops_early_after_validating_and_keeping_the_best_checkpoint(tiny_scan, tiny_model, tmp_path):
    result = train(tiny_model, tiny_scan, tmp_path / "run", seed=0, max_minutes=1e-6, device="cpu", progress=False)
    assert result.steps == 1 and result.selected_step == 1
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["stopped_by"] == "time budget" and run["steps_done"] == 1 and run["time_budget_minutes"] == 1e-6
    assert [line["step"] for line in read_log(tmp_path / "run") if "validation_exact_match" in line] == [1]
    assert (tmp_path / "run" / "model.safetensors").is_file()
    with pytest.raises(BenchbuildError, match="time budget"):
        train(tiny_model, tiny_scan, tmp_path / "other", max_minutes=0, device="cpu", progress=False)


def test_a_run_folder_of_different_arguments_is_refused_unless_overwritten(finished_run, tiny_scan, tiny_model, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_model, tiny_scan, run_dir, seed=0, device="cpu", progress=False, max_steps=2)
    with pytest.raises(BenchbuildError, match="seed"):
        train(tiny_model, tiny_scan, run_dir, seed=5, device="cpu", progress=False, max_steps=2)
    result = train(tiny_model, tiny_scan, run_dir, seed=5, device="cpu", progress=False, max_steps=2, overwrite=True)
    assert result.resumed_from is None and json.loads((run_dir / "run.json").read_text())["seed"] == 5


def test_validation_is_the_validation_split_or_held_out_train_never_test():
    splits = {"train": [{"source": str(i), "target": str(i)} for i in range(50)], "test": [{"source": "t", "target": "t"}]}
    kept, held, name = split_validation(splits, None, seed=3)
    assert len(held) == 5 and len(kept) == 45 and name == "train-heldout-10%-seed-3"
    assert {r["source"] for r in held}.isdisjoint(r["source"] for r in kept)
    assert split_validation(splits, None, seed=3)[1] == held
    with pytest.raises(BenchbuildError, match="test split"):
        split_validation(splits, "test", seed=3)
    with_validation = {**splits, "validation": [{"source": "v", "target": "v"}]}
    assert split_validation(with_validation, None, seed=3)[1:] == ([{"source": "v", "target": "v"}], "validation")


def test_train_and_eval_commands_write_a_run_and_print_metrics(tiny_scan, tiny_model, tmp_path):
    runner = CliRunner()
    trained = runner.invoke(app, ["train", "--model", str(tiny_model), "--data", str(tiny_scan), "--out",
                                  str(tmp_path / "run"), "--max-steps", "10", "--device", "cpu"])
    assert trained.exit_code == 0, trained.output
    assert "trained 10 steps" in trained.output
    evaluated = runner.invoke(app, ["eval", "--run", str(tmp_path / "run"), "--data", str(tiny_scan), "--beam", "2"])
    assert evaluated.exit_code == 0, evaluated.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["split"] == "test" and metrics["rows"] == 20 and metrics["beam"] == 2
    assert f'"exact_match": {metrics["exact_match"]}' in evaluated.output
    assert "BLEU" not in metrics["bleu"]["signature"] and "tok:13a" in metrics["bleu"]["signature"]
    lines = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 20 and json.loads(lines[0])["id"] == "test-0"


def test_teacher_forced_validation_agrees_with_greedy_generate(finished_run, tiny_scan):
    import transformers

    import benchbuild.zoo
    from benchbuild.benchmark import load_splits
    from benchbuild.zoo.decoding import generate_predictions
    from benchbuild.training.validation import greedy_matches

    run_dir, _ = finished_run
    benchbuild.zoo.register()
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(run_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(run_dir)
    rows = list(load_splits(tiny_scan)["test"])
    sources, references = [r["source"] for r in rows], [r["target"] for r in rows]
    predictions = generate_predictions(model, tokenizer, sources, max_new_tokens=40, batch_size=7)
    # A prediction that re-encodes to fewer than 40 tokens ended with </s>: greedy decoding reproduces it.
    finished = [len(tokenizer(p)["input_ids"]) < 40 for p in predictions]
    assert sum(finished) >= len(rows) // 2
    own = greedy_matches(model, tokenizer, sources, predictions, batch_size=7)
    assert [ok for ok, done in zip(own, finished) if done] == [True] * sum(finished)
    against_references = greedy_matches(model, tokenizer, sources, references, batch_size=5)
    assert against_references == [p == r for p, r in zip(predictions, references)]
    longer = greedy_matches(model, tokenizer, sources, [p + " I_WALK" for p in predictions])
    assert not any(longer)


def test_mt_benchmarks_train_with_a_shared_bpe_vocabulary_and_any_hf_model(shared_data, tmp_path):
    import transformers

    from benchbuild.evaluation.evaluate import evaluate_run

    react = shared_data / "react"
    german = (react / "valid.de").read_text(encoding="utf-8").splitlines()
    english = (react / "valid.en").read_text(encoding="utf-8").splitlines()
    rows = [{"id": f"r-{i}", "source": german[i], "target": english[i]} for i in range(60)]
    benchmark = write_benchmark(tmp_path / "react", {"train": rows[:50], "test": rows[50:]}, "react", "react/tiny")
    tiny_bart = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
                 "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32}
    result = train("hf", benchmark, tmp_path / "run", max_steps=4, device="cpu", progress=False,
                   overrides={"batch_size": 8, "eval_every": 4, "bpe_vocab_size": 150},
                   architecture_overrides=tiny_bart)
    assert result.steps == 4
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["recipe_family"] == "mt" and run["recipe"]["schedule"] == "inverse_sqrt"
    tokenizer_file = json.loads((tmp_path / "run" / "tokenizer.json").read_text())
    assert tokenizer_file["model"]["type"] == "BPE"
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "run")
    assert len(tokenizer) == 150
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "run")
    assert model.config.model_type == "bart" and model.config.vocab_size == 150
    metrics = evaluate_run(tmp_path / "run", benchmark, max_new_tokens=8)
    assert metrics["rows"] == 10 and metrics["benchmark"] == "react/tiny"


def test_unknown_recipe_overrides_from_the_command_line_name_the_key(tiny_scan, tiny_model, tmp_path):
    result = CliRunner().invoke(app, ["train", "--model", str(tiny_model), "--data", str(tiny_scan), "--out",
                                      str(tmp_path / "run"), "--set", "lr=0.1"])
    assert isinstance(result.exception, BenchbuildError)
    assert "unknown recipe key 'lr'" in str(result.exception)
    assert not (tmp_path / "run").exists()
