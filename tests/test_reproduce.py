"""Every run reproducible from what it recorded, with no path of the machine in it: run.json's record (versions,
commit, device, command line), relative paths read back by the report, the model card, and `benchbuild reproduce`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import torch
from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import tiny_transformer_entry, write_benchmark

from benchbuild.benchmark import load_splits
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.evaluate import evaluate_run
from benchbuild.reproduce import reproduce
from benchbuild.run_folder import benchmark_fingerprint, typed_path
from benchbuild.training.loop import train

ROOT = Path(__file__).resolve().parent.parent
# A one-layer Transformer of width 16 on the SCAN recipe, citing 000 so its card has a citation.
TINY = tiny_transformer_entry("tiny_reproducible", "scan", steps=6, batch_size=16, learning_rate=0.002,
                              eval_every=3).replace('paper = "test"', 'paper = "000"')
# What differs between two evaluations of the same run in two folders: where the files are.
PATH_KEYS = ("run", "benchmark_path")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reproduce")


@pytest.fixture(scope="module")
def model_file(workspace) -> Path:
    path = workspace / "models" / "tiny.toml"
    path.parent.mkdir()
    path.write_text(TINY, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def evaluated_run(workspace, model_file, tiny_scan) -> Path:
    """A 6-step CPU run of the tiny entry on `tiny_scan`, evaluated on its test split into the run folder."""
    run_dir = workspace / "runs" / "run"
    train(model_file, tiny_scan, run_dir, seed=0, device="cpu", progress=False)
    evaluate_run(run_dir, tiny_scan, split="test", device="cpu")
    return run_dir


def _scores(metrics_file: Path) -> dict:
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    return {key: value for key, value in metrics.items() if key not in PATH_KEYS}


def test_reproduce_of_a_cpu_run_gives_identical_metrics_and_exits_0(evaluated_run, workspace):
    again = workspace / "again"
    done = benchbuild("reproduce", evaluated_run, "--out", again)
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = json.loads((evaluated_run / "metrics.json").read_text())
    assert "every number should be identical" in done.stdout
    assert f"metrics.json exact_match: recorded {recorded['exact_match']:.6g}, now {recorded['exact_match']:.6g}" \
        in done.stdout
    assert "metrics.json bleu.score: recorded" in done.stdout and "differs" not in done.stdout
    assert "metrics.json: 20 of 20 predictions identical" in done.stdout
    assert _scores(again / "metrics.json") == _scores(evaluated_run / "metrics.json")
    before, now = (json.loads((folder / "run.json").read_text()) for folder in (evaluated_run, again))
    assert now["identity"] == before["identity"] and now["selected_step"] == before["selected_step"]


def test_a_reproduction_on_the_other_attention_path_names_it(evaluated_run, workspace, monkeypatch):
    """Without the compiled attention kernel (no C compiler, or BENCHBUILD_PACKED_ATTENTION=0) training draws other
    dropout masks: run.json records the path, and `reproduce` on the other one says so instead of reporting numbers
    that differ for no recorded reason (issue #60)."""
    recorded = json.loads((evaluated_run / "run.json").read_text())["environment"]["attention_kernel"]
    assert recorded == "compiled kernel"
    monkeypatch.setenv("BENCHBUILD_PACKED_ATTENTION", "0")
    done = benchbuild("reproduce", evaluated_run, "--out", workspace / "without-kernel")
    said = " ".join((done.stdout + done.stderr).split())
    assert "attention_kernel compiled kernel then, off: BENCHBUILD_PACKED_ATTENTION=0 now" in said, said
    assert "every number should be identical" not in said


def test_a_benchmark_whose_files_changed_is_refused_in_one_line(evaluated_run, tiny_scan, workspace):
    splits = load_splits(tiny_scan)
    rows = {name: list(split) for name, split in splits.items()}
    rows["test"][0] = {**rows["test"][0], "target": "I_JUMP I_JUMP I_JUMP"}
    tampered = write_benchmark(workspace / "tampered", rows, "scan", "simple")
    # Its build.json claims the original's fingerprints: only the rows themselves tell.
    shutil.copy(tiny_scan / "build.json", tampered / "build.json")
    done = benchbuild("reproduce", evaluated_run, "--out", workspace / "never", "--data", tampered)
    refused(done, f"{tampered / 'test'}: its rows are not those", "split 'test'")
    assert not (workspace / "never").exists()


def test_another_benchmark_and_a_changed_entry_file_are_refused_before_training(evaluated_run, tiny_scan,
                                                                               model_file, workspace):
    rows = {name: list(split)[:10] for name, split in load_splits(tiny_scan).items()}
    other = write_benchmark(workspace / "other", rows, "scan", "simple")
    with pytest.raises(BenchbuildError, match="is not the benchmark the run .*splits test, train differ"):
        reproduce(evaluated_run, workspace / "never", data=other, progress=False)
    edited = workspace / "edited.toml"
    edited.write_text(TINY.replace("d_ff = 32", "d_ff = 48"), encoding="utf-8")
    with pytest.raises(BenchbuildError, match="has changed since .*sha256"):
        reproduce(evaluated_run, workspace / "never", model=edited, progress=False)
    assert not (workspace / "never").exists()


def test_run_json_metrics_card_and_predictions_hold_no_absolute_path(evaluated_run, tiny_scan, model_file):
    machine_paths = {str(evaluated_run.parent), str(evaluated_run.parent.resolve()), str(tiny_scan),
                     str(tiny_scan.resolve()), str(model_file.parent.resolve())}
    for name in ("run.json", "metrics.json", "README.md", "predictions.jsonl"):
        text = (evaluated_run / name).read_text(encoding="utf-8")
        assert not [path for path in machine_paths if path in text], name
    run = json.loads((evaluated_run / "run.json").read_text())
    assert (evaluated_run / run["benchmark"]["path"]).resolve() == tiny_scan.resolve()
    assert (evaluated_run / run["model_entry"]).resolve() == model_file.resolve()
    metrics = json.loads((evaluated_run / "metrics.json").read_text())
    assert metrics["run"] == "." and (evaluated_run / metrics["benchmark_path"]).resolve() == tiny_scan.resolve()


def test_the_report_finds_the_benchmark_from_the_relative_path_of_metrics_json(evaluated_run, tiny_scan):
    from benchbuild.report.runs import BenchmarkFolders, read_runs

    [summary] = read_runs([evaluated_run])
    [evaluation] = summary.evaluations
    folder = BenchmarkFolders().folder(evaluation)
    assert folder is not None and folder.resolve() == tiny_scan.resolve()
    assert [row["source"] for row in BenchmarkFolders().rows(evaluation)] == list(load_splits(tiny_scan)["test"]["source"])


def test_run_json_records_versions_commit_device_threads_fingerprint_and_command_line(evaluated_run, tiny_scan,
                                                                                     model_file):
    import sacrebleu
    import transformers

    run = json.loads((evaluated_run / "run.json").read_text())
    environment = run["environment"]
    assert environment["torch"] == torch.__version__.split("+")[0] or environment["torch"] == torch.__version__
    assert environment["transformers"] == transformers.__version__ and environment["sacrebleu"] == sacrebleu.__version__
    assert {"python", "benchbuild", "datasets", "tokenizers", "accelerate"} <= set(environment)
    if (ROOT / ".git").exists():
        assert re.fullmatch("[0-9a-f]{40}", environment["benchbuild_commit"])
        assert isinstance(environment["benchbuild_dirty"], bool)
    assert run["device"] == "cpu" and run["cuda"] is None and run["device_name"]
    assert run["cpu_threads"] == torch.get_num_threads() == 1
    build = json.loads((tiny_scan / "build.json").read_text())
    assert run["benchmark"]["fingerprint"] == benchmark_fingerprint(
        {name: split["fingerprint"] for name, split in build["splits"].items()})
    assert run["recipe"]["steps"] == 6 and run["recipe"]["learning_rate"] == 0.002
    # The paths were given absolute: relative to the current folder, or only their name where that is far away.
    words = shlex.split(run["command_line"])
    assert words[:4] == ["benchbuild", "train", "--model", typed_path(model_file)]
    assert words[words.index("--data") + 1] == typed_path(tiny_scan) and typed_path(tiny_scan).endswith("simple")
    assert words[words.index("--out") + 1] == typed_path(evaluated_run)
    assert words[words.index("--seed") + 1] == "0" and words[words.index("--device") + 1] == "cpu"
    assert "--max-steps" not in words and "--set" not in words


def test_the_command_line_of_a_run_with_overrides_gives_them_as_set_options(tiny_scan, model_file, tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    train(model_file, tiny_scan, Path("run"), seed=3, device="cpu", progress=False, max_steps=2,
          overrides={"eval_every": 2, "schedule": "constant"})
    words = shlex.split(json.loads((tmp_path / "run" / "run.json").read_text())["command_line"])
    assert words[words.index("--out") + 1] == "run" and words[words.index("--max-steps") + 1] == "2"
    assert [words[i + 1] for i, word in enumerate(words) if word == "--set"] == ["eval_every=2", "schedule=constant"]


def test_the_model_card_loads_the_run_as_it_shows_and_gives_metrics_and_citation(evaluated_run, monkeypatch):
    card = (evaluated_run / "README.md").read_text(encoding="utf-8")
    code = card.split("```python\n")[1].split("```")[0]
    assert code.startswith("import benchbuild.zoo") and "AutoModelForSeq2SeqLM.from_pretrained(folder)" in code
    monkeypatch.chdir(evaluated_run)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    decoded = eval(printed.getvalue())
    assert isinstance(decoded, list) and len(decoded) == 1 and isinstance(decoded[0], str)

    metrics = json.loads((evaluated_run / "metrics.json").read_text())
    row = next(line for line in card.splitlines() if "| exact match |" in line)
    assert f"| {metrics['exact_match']:.2f} |" in row
    interval = metrics.get("exact_match_ci")
    assert (f"{interval[0]:.2f} to {interval[1]:.2f}" if interval else "not recorded") in row
    assert "Rahma Chaabouni, Roberto Dessì, Eugene Kharitonov (2021)" in card
    assert "benchbuild reproduce" in card


def test_an_old_run_folder_with_absolute_paths_still_reports_and_reproduces(evaluated_run, tiny_scan, model_file,
                                                                           tmp_path):
    from benchbuild.report.rows import build_report
    from benchbuild.report.runs import BenchmarkFolders, read_runs
    from benchbuild.model_card import write_model_card
    from benchbuild.zoo.loading import load_model

    old = tmp_path / "old"
    shutil.copytree(evaluated_run, old, ignore=shutil.ignore_patterns(".benchbuild.lock"))
    run = json.loads((old / "run.json").read_text())
    for key in ("arguments", "command_line", "model_entry_sha256"):
        run.pop(key)
    run["model_entry"] = str(model_file.resolve())
    run["benchmark"] = {"path": str(tiny_scan.resolve()),
                        **{key: value for key, value in run["benchmark"].items() if key in ("family", "name", "splits")}}
    (old / "run.json").write_text(json.dumps(run))
    metrics = json.loads((old / "metrics.json").read_text())
    recorded = metrics["exact_match"]
    metrics.update(run=str(old), benchmark_path=str(tiny_scan.resolve()), exact_match=recorded + 1.0)
    metrics.pop("benchmark_fingerprint")
    (old / "metrics.json").write_text(json.dumps(metrics))

    [evaluation] = read_runs([old])[0].evaluations
    assert BenchmarkFolders().folder(evaluation) == tiny_scan.resolve()
    rows = build_report([old])
    assert rows and all(row.zoo_reference == str(model_file.resolve()) for row in rows)
    card = write_model_card(old, run, load_model(old)).read_text(encoding="utf-8")
    assert str(tiny_scan.resolve()) not in card and str(model_file.parent) not in card

    # Found by its absolute paths and re-run on the same machine and software: the number edited above differs from
    # what the same run computes, which fails the reproduction.
    done = benchbuild("reproduce", old, "--out", tmp_path / "again")
    refused(done, "1 of", "numbers differ although the device, software, thread count and steps are the run's",
            "exact_match")
    assert f"metrics.json exact_match: recorded {recorded + 1.0:.6g}, now {recorded:.6g}" in done.stdout
    assert "metrics.json bleu.score" in done.stdout and "20 of 20 predictions identical" in done.stdout


def test_numbers_agree_exactly_within_the_recorded_interval_or_differ():
    from benchbuild.reproduce import compare_metrics

    recorded = {"split": "test", "rows": 20, "exact_match": 50.0, "exact_match_ci": [40.0, 60.0],
                "bleu": {"score": 10.0, "signature": "nrefs:1"}, "chrf": {"score": 30.0}, "chrf_ci": [29.0, 31.0],
                "cter": {"aggregate": 5.0}, "confidence_intervals": {"resamples": 1000}}
    reproduced = {"split": "test", "rows": 20, "exact_match": 45.0, "bleu": {"score": 10.0}, "chrf": {"score": 32.0}}
    verdicts = {a.metric: (a.verdict, a.interval) for a in compare_metrics("metrics.json", recorded, reproduced)}
    assert verdicts == {"exact_match": ("within CI", (40.0, 60.0)), "bleu.score": ("identical", None),
                        "chrf.score": ("differs", (29.0, 31.0)), "cter.aggregate": ("not recomputed", None)}


def test_a_reproduction_is_expected_identical_only_on_the_recorded_software_device_threads_and_steps():
    from benchbuild.reproduce import _exactness

    record = {"environment": {"torch": "2.5.1", "benchbuild_commit": "a" * 40}, "device": "cpu", "cpu_threads": 1,
              "steps_done": 6}
    assert _exactness(record, dict(record)) == (True, [])
    exact, why = _exactness(record, {**record, "environment": {**record["environment"], "torch": "2.6.0"},
                                     "cpu_threads": 4})
    assert not exact and why == ["torch 2.5.1 then, 2.6.0 now", "cpu threads 1 then, 4 now"]
    exact, why = _exactness({key: value for key, value in record.items() if key != "environment"}, record)
    assert not exact and "run.json records no software versions" in why[0]


def test_a_recipe_key_the_entry_now_gives_otherwise_is_set_back_to_the_recorded_value(evaluated_run, tiny_scan,
                                                                                      workspace):
    from benchbuild.reproduce import _training_arguments

    record = json.loads((evaluated_run / "run.json").read_text())
    edited = workspace / "retuned.toml"
    edited.write_text(TINY.replace("learning_rate = 0.002", "learning_rate = 0.01"), encoding="utf-8")
    arguments = _training_arguments(record, str(edited), tiny_scan)
    assert arguments["overrides"] == {"learning_rate": 0.002} and arguments["recipe"] == "scan"
    # A run.json from before `arguments` was recorded: its budget and seed as recorded.
    older = {key: value for key, value in record.items() if key != "arguments"}
    arguments = _training_arguments(older, str(edited), tiny_scan)
    assert arguments["max_steps"] == 6 and arguments["seed"] == 0 and arguments["validation_split"] is None
