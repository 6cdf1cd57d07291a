"""The run folder owns what is on disk: `train` and `eval` never delete or write through what benchbuild did not
create, never write into their inputs, refuse a second process on the same folder, stop a diverging run as
`failed`, and read a log line cut by a kill (real runs through the installed `benchbuild` command)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from commands import file_hashes, refused, started
from commands import benchbuild_in_process as benchbuild
from waiting import until

from benchbuild.training.loop import train

pytestmark = pytest.mark.shared


@pytest.fixture
def benchmark_copy(tiny_scan, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_scan, tmp_path / "bench"))


@pytest.fixture(scope="module")
def trained(tiny_scan, tiny_model, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "seed0"
    train(tiny_model, tiny_scan, run_dir, seed=0, device="cpu", progress=False)
    return run_dir


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run"))


def _train(model, data, out, *extra, cwd=None):
    return benchbuild("train", "--model", model, "--data", data, "--out", out, "--device", "cpu", *extra, cwd=cwd)


def test_train_with_its_benchmark_as_out_and_overwrite_keeps_the_benchmark(benchmark_copy, tiny_model):
    before = file_hashes(benchmark_copy)
    refused(_train(tiny_model, benchmark_copy, benchmark_copy, "--overwrite"), "--out", "is the command's input --data")
    assert file_hashes(benchmark_copy) == before


def test_train_into_a_folder_inside_its_benchmark_is_refused(benchmark_copy, tiny_model):
    before = file_hashes(benchmark_copy)
    refused(_train(tiny_model, benchmark_copy, benchmark_copy / "run"), "lies inside the command's input --data")
    assert file_hashes(benchmark_copy) == before and not (benchmark_copy / "run").exists()


def test_train_with_an_empty_out_and_overwrite_leaves_the_working_folder_alone(tiny_scan, tiny_model, tmp_path):
    (tmp_path / "notes.txt").write_text("a week of notes\n")
    refused(_train(tiny_model, tiny_scan, "", "--overwrite", cwd=tmp_path), "--out is empty")
    refused(benchbuild("train", "--model", tiny_model, "--data", tiny_scan, "--out=", "--overwrite", cwd=tmp_path),
            "--out is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_overwrite_replaces_a_run_folder_but_never_a_folder_of_other_files(tiny_scan, tiny_model, tmp_path):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("\\chapter{One}\n")
    before = file_hashes(mine)
    refused(_train(tiny_model, tiny_scan, mine, "--overwrite"), "is not a run folder benchbuild wrote",
            "chapter1.tex")
    assert file_hashes(mine) == before


def test_overwrite_replaces_a_run_folder_benchbuild_wrote(run_copy, tiny_scan, tiny_model):
    (run_copy / "metrics.json").write_text("{}")
    done = _train(tiny_model, tiny_scan, run_copy, "--overwrite", "--max-steps", "2", "--set", "eval_every=2")
    assert done.returncode == 0, done.stderr
    assert json.loads((run_copy / "run.json").read_text())["steps_done"] == 2
    assert not (run_copy / "metrics.json").exists()


@pytest.mark.parametrize("planted", ["train_log.jsonl", "tokenizer.json", "README.md", "run.json.tmp"])
def test_a_file_linked_elsewhere_is_replaced_not_written_through(run_copy, tiny_scan, tiny_model, tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    if (run_copy / planted).exists():
        (run_copy / planted).unlink()
    (run_copy / planted).symlink_to(victim)
    done = _train(tiny_model, tiny_scan, run_copy, "--max-steps", "40")  # resumes at step 30
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    assert not (run_copy / "train_log.jsonl").is_symlink()
    assert json.loads((run_copy / "train_log.jsonl").read_text().splitlines()[-1])["step"] == 40


def test_eval_writes_no_prediction_through_a_planted_link(run_copy, tiny_scan, tmp_path):
    victims = {name: tmp_path / f"victim-{name}" for name in
               ("predictions.jsonl.partial", "predictions.jsonl", "metrics.json")}
    for name, victim in victims.items():
        victim.write_text("precious\n")
        (run_copy / name).unlink(missing_ok=True)
        (run_copy / name).symlink_to(victim)
    done = benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert all(victim.read_text() == "precious\n" for victim in victims.values())
    assert not (run_copy / "predictions.jsonl").is_symlink()
    assert json.loads((run_copy / "metrics.json").read_text())["split"] == "test"


def test_a_second_train_on_a_busy_run_folder_is_refused_and_the_kill_frees_it(tiny_scan, tiny_model, tmp_path):
    out = tmp_path / "run"
    first = started("train", "--model", tiny_model, "--data", tiny_scan, "--out", out, "--device", "cpu",
                    "--max-steps", "100000", session=False)
    try:
        until((out / "train_log.jsonl").is_file, first, "the first run started training")
        second = _train(tiny_model, tiny_scan, out, "--max-steps", "100000")
        refused(second, "is in use by benchbuild process", str(first.pid))
        assert first.poll() is None  # the first goes on
    finally:
        first.kill()
        first.wait()
    log = (out / "train_log.jsonl").read_text()
    records = [json.loads(line) for line in log.splitlines() if line.strip().endswith("}")]
    steps = [record["step"] for record in records if "loss" in record]
    assert steps == list(range(1, len(steps) + 1))  # one writer: every step logged once, in order
    done = _train(tiny_model, tiny_scan, out, "--max-steps", "20", "--set", "eval_every=10")
    assert done.returncode == 0, done.stderr  # the kernel freed the lock of the killed run


def test_a_diverging_run_stops_marked_failed_and_is_never_a_result(tiny_scan, tiny_model, tmp_path):
    out = tmp_path / "run"
    done = _train(tiny_model, tiny_scan, out, "--set", "learning_rate=1e30", "--set", "warmup_steps=1")
    refused(done, "the training loss became", "marked failed")
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["failed_at_step"] >= 1
    refused(benchbuild("eval", "--run", out, "--data", tiny_scan, "--device", "cpu"), "failed at step")
    assert not (out / "metrics.json").exists()


def test_a_log_line_cut_by_a_kill_neither_blocks_resumption_nor_the_report(run_copy, tiny_scan, tiny_model):
    with open(run_copy / "train_log.jsonl", "a") as log:
        log.write('{"step": 31, "loss": 0.')  # what a kill in the middle of a write leaves
    assert benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu").returncode == 0
    report = benchbuild("report", run_copy, "--out", run_copy.parent / "report", "--format", "md")
    assert report.returncode == 0, report.stderr
    done = _train(tiny_model, tiny_scan, run_copy, "--max-steps", "40")
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line)["step"] for line in (run_copy / "train_log.jsonl").read_text().splitlines()]
    assert steps[-1] == 40 and steps == sorted(steps)


def test_eval_refuses_a_data_folder_that_is_not_a_benchmark_before_decoding(run_copy, tmp_path):
    (tmp_path / "corpus").mkdir()
    refused(benchbuild("eval", "--run", run_copy, "--data", tmp_path / "corpus", "--device", "cpu"),
            "is not a benchbuild benchmark")


def test_eval_out_holding_other_files_is_refused_and_kept(run_copy, tiny_scan, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "table.csv").write_text("mine\n")
    before = file_hashes(results)
    refused(benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--out", results, "--device", "cpu"),
            "holds files that are not an evaluation's", "table.csv")
    assert file_hashes(results) == before
    refused(benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--out", tiny_scan, "--device", "cpu"),
            "is the command's input --data")


def test_an_absurd_beam_is_refused_before_any_allocation(run_copy, tiny_scan):
    done = benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--beam", "1000000", "--device", "cpu")
    assert done.returncode == 2 and "Invalid value for '--beam'" in done.stderr and "256" in done.stderr
    assert "Traceback" not in done.stderr and not (run_copy / "predictions.jsonl").exists()


def test_report_counts_a_run_named_twice_once(run_copy, tiny_scan):
    assert benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu").returncode == 0
    twice = benchbuild("report", run_copy, Path(os.path.relpath(run_copy)), "--out", run_copy.parent / "r",
                       "--format", "csv")
    assert twice.returncode == 0, twice.stderr
    row = (run_copy.parent / "r.csv").read_text().splitlines()[1].split(",")
    assert row[4] == "1"  # runs
    assert "given twice" in twice.stderr


@pytest.mark.parametrize("damage", ["missing tokenizer.json", "missing tokenizer_config.json", "cut tokenizer.json"])
def test_a_run_folder_with_a_missing_or_damaged_tokenizer_file_is_one_line_naming_it(run_copy, tiny_scan, damage):
    how, name = damage.split(" ")
    path = run_copy / name
    if how == "missing":
        path.unlink()
        expected = f"{run_copy} has no {name} (its tokenizer): the run folder is incomplete"
    else:
        path.write_bytes(path.read_bytes()[:100])
        expected = f"{path} is not valid JSON (truncated or corrupt)"
    refused(benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu"), expected)


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_checkpoints_folder_that_is_a_link_is_never_written_through(run_copy, tiny_scan, tiny_model, tmp_path,
                                                                      overwrite):
    """On resume the run is refused before any step; with --overwrite the link goes (its target stays) and the run
    starts afresh in a folder of its own."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "step-00000099").mkdir()
    (elsewhere / "keep.txt").write_text("mine", encoding="utf-8")
    shutil.rmtree(run_copy / "checkpoints")
    (run_copy / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    before = file_hashes(elsewhere)
    done = _train(tiny_model, tiny_scan, run_copy, "--max-steps", "40", *(["--overwrite"] if overwrite else []))
    if overwrite:
        assert done.returncode == 0, done.stderr
        assert not (run_copy / "checkpoints").is_symlink() and (run_copy / "checkpoints").is_dir()
    else:
        refused(done, f"{run_copy / 'checkpoints'} is a symbolic link (to {elsewhere})", "remove the link")
    assert file_hashes(elsewhere) == before and sorted(path.name for path in elsewhere.iterdir()) == [
        "keep.txt", "step-00000099"]


HOLD = """
import sys, time
from benchbuild.locks import FolderLock
FolderLock(sys.argv[1], what="run folder").acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_eval_of_a_run_another_process_holds_is_refused_before_decoding(run_copy, tiny_scan, monkeypatch):
    """`eval --allow-unfinished` on a run still training (its folder held by the training process): refused in one
    line before the model loads, not after the whole split was decoded (issue #60)."""
    import subprocess
    import sys

    from benchbuild.evaluation import evaluate

    def decoded(*args, **kwargs):
        raise AssertionError("the split was decoded before the folder was claimed")

    monkeypatch.setattr(evaluate, "generate_predictions", decoded)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_copy)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu", "--allow-unfinished")
        refused(done, "is in use by benchbuild process", str(holder.pid))
    finally:
        holder.kill()
        holder.wait()


def test_a_split_edited_by_hand_is_refused_by_eval_and_by_a_resumed_train(run_copy, tiny_scan, tiny_model, tmp_path):
    """The same row count, other content (issue #60): one reference changed in test, one train row replaced. eval
    refuses to score the edited test split and a resumed train the edited train split, each in one line naming the
    split's file and the command that rebuilds it; an untouched benchmark is scored with its split's fingerprint in
    metrics.json."""
    import datasets

    def edited(split: str, column: str) -> Path:
        copy = tmp_path / f"edited-{split}"
        shutil.copytree(tiny_scan, copy)
        rows = datasets.load_from_disk(str(tiny_scan))[split].to_list()
        rows[0][column] = rows[1][column]
        shutil.rmtree(copy / split)
        datasets.Dataset.from_list(rows).save_to_disk(str(copy / split))
        return copy

    test_edited = edited("test", "target")
    done = benchbuild("eval", "--run", run_copy, "--data", test_edited, "--device", "cpu", "--out", tmp_path / "scores")
    refused(done, f"{test_edited / 'test'}: its rows are not those", "split 'test'")
    assert not (tmp_path / "scores" / "metrics.json").exists()
    train_edited = edited("train", "source")
    resumed = _train(tiny_model, train_edited, run_copy, "--max-steps", "100000")
    refused(resumed, f"{train_edited / 'train'}: its rows are not those", "split 'train'")

    done = benchbuild("eval", "--run", run_copy, "--data", tiny_scan, "--device", "cpu", "--out", tmp_path / "good")
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "good" / "metrics.json").read_text())
    recorded = json.loads((tiny_scan / "build.json").read_text())["splits"]["test"]["fingerprint"]
    assert metrics["split_fingerprint"] == recorded


def test_a_runs_weights_record_and_scores_stay_together_when_its_budget_changes(tiny_scan, tiny_model, tmp_path):
    """Issue #60: a finished, evaluated run trained on with a larger --max-steps has new weights, so its metrics.json
    is stale: the report refuses it naming the way out and the model card leaves it out, until `eval` again; a
    smaller --max-steps than the steps trained is refused (it used to rewrite run.json to the smaller budget beside
    the larger run's weights)."""
    out = tmp_path / "run"
    assert _train(tiny_model, tiny_scan, out, "--max-steps", "20", "--set", "select=last").returncode == 0
    assert benchbuild("eval", "--run", out, "--data", tiny_scan, "--device", "cpu").returncode == 0
    before = (out / "run.json").read_text()
    refused(_train(tiny_model, tiny_scan, out, "--max-steps", "10", "--set", "select=last"),
            "has trained 20 steps already", "--max-steps 20 or more")
    assert (out / "run.json").read_text() == before
    longer = _train(tiny_model, tiny_scan, out, "--max-steps", "30", "--set", "select=last")
    assert longer.returncode == 0, longer.stderr
    assert json.loads((out / "run.json").read_text())["selected_step"] == 30
    assert json.loads((out / "metrics.json").read_text())["selected_step"] == 20
    refused(benchbuild("report", out, "--out", tmp_path / "report", "--format", "md"),
            "metrics.json is stale", "selects step 30", "benchbuild eval --run")
    assert "| `metrics.json` |" not in (out / "README.md").read_text()  # the card lists no stale scores
    assert "Not evaluated yet" in (out / "README.md").read_text()
    assert benchbuild("eval", "--run", out, "--data", tiny_scan, "--device", "cpu").returncode == 0
    assert "| `metrics.json` |" in (out / "README.md").read_text()
    assert benchbuild("report", out, "--out", tmp_path / "report", "--format", "md").returncode == 0


def test_scores_of_an_unfinished_run_go_stale_when_it_finishes():
    from benchbuild.run_folder import stale_scores

    scored = {"selected_step": 40, "unfinished": "step 50 of 150, unfinished", "exact_match": 12.0}
    assert stale_scores({"status": "running", "selected_step": 40}, scored) is None
    finished = stale_scores({"status": "complete", "selected_step": 40}, scored)
    assert finished is not None and "scored before the run finished (step 50 of 150" in finished
    assert "selects step 120" in stale_scores({"status": "complete", "selected_step": 120}, scored)
    assert stale_scores({"status": "complete", "selected_step": 40}, {"selected_step": 40}) is None
