"""The environment at its edges (issue #60): a deleted current folder, a memory limit, a name too long for the file
system, a Moses language the tokenizer has no rules for, a run whose config.json names a model type nobody builds,
and a benchmark published without its card: each one line naming what to fix, before any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import tiny_transformer_toml

ROOT = Path(__file__).resolve().parent.parent
TINY = tiny_transformer_toml(steps=2, batch_size=8, learning_rate=2e-3, eval_every=2, select="last")


def test_a_deleted_current_folder_is_one_line_not_a_crash(tmp_path):
    """oneMKL used to abort the process with 'FATAL ERROR' when torch loaded in a folder that no longer exists."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && exec {sys.executable} -m benchbuild zoo"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == ("benchbuild: error: the current folder no longer exists (it was deleted or moved): "
                                   "cd into an existing folder and run the command again")


def test_out_of_memory_says_so_and_what_to_do():
    from benchbuild.cli import _one_line

    said = _one_line(MemoryError())
    assert said.startswith("out of memory: the process may not allocate what this command needs")
    assert "ulimit -v" in said and "MemoryError: MemoryError" not in said


def test_an_output_name_too_long_for_its_temporary_name_is_refused_before_work(tiny_scan, tmp_path):
    """A 240-byte run folder name: the temporary names written beside it would pass the file system's 255."""
    model = tmp_path / "tiny.toml"
    model.write_text(TINY, encoding="utf-8")
    long_name = tmp_path / ("r" * 240)
    done = benchbuild("train", "--model", model, "--data", tiny_scan, "--out", long_name, "--device", "cpu")
    refused(done, "is 240 bytes long", "at most 225 bytes")
    assert not long_name.exists()
    fits = tmp_path / ("r" * 225)
    done = benchbuild("train", "--model", model, "--data", tiny_scan, "--out", fits, "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert json.loads((fits / "run.json").read_text())["status"] == "complete"


def test_a_moses_language_without_rules_is_refused(tmp_path):
    corpus = tmp_path / "train.de"
    corpus.write_text("ein haus\nein baum\n", encoding="utf-8")
    done = benchbuild("degree", "--train-src", corpus, "--pool", corpus, "--tokenize", "moses", "--lang", "xx")
    refused(done, "--lang 'xx': the Moses tokenizer (--tokenize moses) has no rules for it", "de, ")
    assert benchbuild("degree", "--train-src", corpus, "--pool", corpus, "--tokenize", "moses",
                      "--lang", "de").returncode == 0


def test_an_unknown_model_type_is_named_not_blamed_on_the_weights(tiny_scan, tmp_path):
    from benchbuild.training.loop import train

    model = tmp_path / "tiny.toml"
    model.write_text(TINY, encoding="utf-8")
    run_dir = tmp_path / "run"
    train(model, tiny_scan, run_dir, seed=0, device="cpu", progress=False)
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "model_type": "benchbuild_not_a_model"}))
    done = benchbuild("eval", "--run", run_dir, "--data", tiny_scan, "--device", "cpu", "--out", tmp_path / "e")
    refused(done, "config.json names model_type 'benchbuild_not_a_model'", "neither benchbuild's zoo nor transformers")
    assert "model.safetensors" not in done.stderr


def test_publishing_a_benchmark_without_its_card_names_the_command_that_rebuilds_it(tmp_path):
    built = tmp_path / "scan"
    assert benchbuild("build-scan", "--out", built, "--split", "simple").returncode == 0
    (built / "simple" / "README.md").unlink()
    done = benchbuild("publish", built / "simple", "--out", tmp_path / "published")
    refused(done, "has no README.md", "rebuild it with --overwrite", "benchbuild build-scan --out")
    assert not (tmp_path / "published").exists()
    shutil.rmtree(built)


def test_home_pointing_at_a_file_still_trains_with_the_compiled_kernel(tiny_scan, tmp_path):
    """The kernel's cache folder (~/.cache/benchbuild/kernels) cannot be made under a HOME that is a file: it used to
    fall back, silently but for a warning, to the other attention path (another training, recorded as 'no working C
    compiler'); the kernel is now built in a folder of the system's temporary folder instead."""
    home = tmp_path / "home-is-a-file"
    home.write_text("", encoding="utf-8")
    model = tmp_path / "tiny.toml"
    model.write_text(TINY, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != "BENCHBUILD_KERNEL_CACHE"}
    done = subprocess.run([sys.executable, "-m", "benchbuild", "train", "--model", str(model), "--data", str(tiny_scan),
                           "--out", str(tmp_path / "run"), "--device", "cpu"], capture_output=True, text=True,
                          env={**environment, "HOME": str(home), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["environment"]["attention_kernel"] == "compiled kernel"


def test_canonically_equal_spellings_score_as_equal_in_nfc():
    """NFC and NFD spellings of one word (issue #60): a prediction "café" written with a combining accent used to get
    exact match 0 against the precomposed reference; both are compared in NFC, and metrics.json says so."""
    import unicodedata

    from benchbuild.evaluation.scoring import score_rows

    references = ["le café est chaud", "une idée précise", "il a été là"]
    rows = [{"id": str(index), "source": "x", "target": text} for index, text in enumerate(references)]
    decomposed = [unicodedata.normalize("NFD", text) for text in references]
    assert decomposed != references
    scores = score_rows(rows, decomposed)
    assert scores["unicode_normalization"] == "NFC"
    assert scores["exact_match"] == 100.0 and scores["bleu"]["score"] == pytest.approx(100.0)
    assert score_rows(rows, ["le café est froid", *references[1:]])["exact_match"] < 100.0
