"""The `benchbuild` entry point as a user runs it: build-scan, errors, recipes (killed builds: test_kill_builds.py)."""

import json
import shlex
from pathlib import Path

import datasets
import pytest
from commands import benchbuild as forked_benchbuild
from scan_counts import (
    ADDPRIM_JUMP_BARE_REPEATS,
    ADDPRIM_JUMP_TEST,
    LENGTH_CUTOFF_26,
    SIMPLE,
)

from benchbuild.benchmark import read_build_info

ROOT = Path(__file__).resolve().parent.parent


def benchbuild(*args, check=False, cwd=ROOT):
    """The command in a process of its own (forked from the tests' fork server), run from the project's root."""
    result = forked_benchbuild(*args, cwd=cwd)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_version_and_help():
    assert benchbuild("--version", check=True).stdout.startswith("benchbuild ")
    help_text = benchbuild("--help", check=True).stdout
    assert "build-scan" in help_text and "run" in help_text


def test_build_scan_writes_loadable_folders_with_cards(tmp_path):
    benchbuild("build-scan", "--out", tmp_path, "--split", "addprim_jump", "--split", "length_cutoff_26", check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["addprim_jump", "length_cutoff_26"]
    cutoff = datasets.load_from_disk(str(tmp_path / "length_cutoff_26"))
    assert {name: len(split) for name, split in cutoff.items()} == LENGTH_CUTOFF_26
    card = (tmp_path / "addprim_jump" / "README.md").read_text()
    assert card.startswith("---\n") and f"repeated {ADDPRIM_JUMP_BARE_REPEATS:,} times" in card
    assert f"| test | {ADDPRIM_JUMP_TEST:,} |" in card


def test_parquet_and_jsonl_formats(tmp_path):
    benchbuild("build-scan", "--out", tmp_path / "p", "--split", "simple", "--format", "parquet", check=True)
    benchbuild("build-scan", "--out", tmp_path / "j", "--split", "simple", "--format", "jsonl", check=True)
    parquet = datasets.load_dataset("parquet", data_dir=str(tmp_path / "p" / "simple" / "data"))
    lines = (tmp_path / "j" / "simple" / "data" / "test.jsonl").read_text().splitlines()
    assert len(parquet["train"]) == SIMPLE["train"] and len(lines) == SIMPLE["test"]
    assert json.loads(lines[0]).keys() == {"id", "source", "target"}


def test_same_seed_same_fingerprints_other_seed_other_simple_p64(tmp_path):
    names = ("simple_p64", "simple", "length")
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        benchbuild("build-scan", "--out", tmp_path / name, *(f"--split={s}" for s in names), "--seed", seed, check=True)
    prints = {name: {s: read_build_info(tmp_path / name / s).splits for s in names} for name in "abc"}
    assert prints["a"] == prints["b"]
    assert prints["a"]["simple_p64"] != prints["c"]["simple_p64"]
    assert prints["a"]["length"] == prints["c"]["length"], "a deterministic rule does not depend on the seed"
    assert prints["a"]["simple"] == prints["c"]["simple"], "simple is the canonical draw, whatever the seed"


def test_unknown_split_is_one_short_line_naming_the_nearest_split(tmp_path):
    result = benchbuild("build-scan", "--out", tmp_path / "x", "--split", "simpel")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'simpel': did you mean 'simple'?" in lines[0] and len(lines[0]) < 300
    assert not (tmp_path / "x").exists()


def test_debug_shows_the_traceback(tmp_path):
    result = benchbuild("--debug", "build-scan", "--out", tmp_path / "x", "--split", "simpel")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_existing_output_built_with_other_options_needs_overwrite(tmp_path):
    benchbuild("build-scan", "--out", tmp_path, "--split", "length", check=True)
    refused = benchbuild("build-scan", "--out", tmp_path, "--split", "length", "--format", "jsonl")
    assert refused.returncode != 0 and "--overwrite" in refused.stderr
    benchbuild("build-scan", "--out", tmp_path, "--split", "length", "--format", "jsonl", "--overwrite", check=True)


def test_official_folder_without_the_file_names_it(tmp_path):
    result = benchbuild("build-scan", "--out", tmp_path / "x", "--split", "simple", "--official", tmp_path)
    assert result.returncode != 0
    assert "simple_split/tasks_train_simple.txt" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.shared
def test_official_simple_reproduces_the_canonical_files(tmp_path, shared_data):
    benchbuild("build-scan", "--out", tmp_path, "--split", "simple", "--official", shared_data / "scan", check=True)
    loaded = datasets.load_from_disk(str(tmp_path / "simple"))
    canonical = (shared_data / "scan" / "simple_split" / "tasks_test_simple.txt").read_text().splitlines()
    assert [f"IN: {r['source']} OUT: {r['target']}" for r in loaded["test"]] == canonical
    info = read_build_info(tmp_path / "simple")
    assert info.seed is None and set(info.inputs) == {"simple_split/tasks_train_simple.txt", "simple_split/tasks_test_simple.txt"}


@pytest.mark.shared
def test_simple_without_official_equals_the_canonical_files(tmp_path, shared_data):
    benchbuild("build-scan", "--out", tmp_path / "index", "--split", "simple", check=True)
    benchbuild("build-scan", "--out", tmp_path / "files", "--split", "simple", "--official", shared_data / "scan",
               check=True)
    built, official = (datasets.load_from_disk(str(tmp_path / name / "simple")) for name in ("index", "files"))
    for split in ("train", "test"):
        canonical = (shared_data / "scan" / "simple_split" / f"tasks_{split}_simple.txt").read_text().splitlines()
        lines = [f"IN: {r['source']} OUT: {r['target']}" for r in built[split]]
        # The same rows; the build keeps the grammar's order (the ids' order), the files a shuffled one.
        assert sorted(lines) == sorted(canonical) and len(lines) == len(canonical)
        assert sorted(built[split]["id"]) == built[split]["id"]
        assert sorted(zip(built[split]["id"], lines)) == sorted(zip(official[split]["id"], canonical))
    card = (tmp_path / "index" / "simple" / "README.md").read_text(encoding="utf-8")
    assert "`benchbuild/scan/canonical/simple_test.bits`" in card and "BSD licence" in card
    assert read_build_info(tmp_path / "index" / "simple").seed is None


def test_recipe_runs_its_steps(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "{tmp_path / "o"}"\n'
                      f'split = ["length", "template_right"]\nseed = 3\n')
    benchbuild("run", recipe, check=True)
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["length", "template_right"]


def test_build_json_records_the_build_command_itself_whether_run_directly_or_by_a_recipe(tmp_path):
    benchbuild("build-scan", "--out", tmp_path / "direct", "--split", "length", check=True)
    assert read_build_info(tmp_path / "direct" / "length").command_line == shlex.join(
        ["benchbuild", "build-scan", "--out", str(tmp_path / "direct"), "--split", "length"])
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "{tmp_path / "recipe"}"\n'
                      f'split = "length"\n')
    benchbuild("run", recipe, check=True)
    assert read_build_info(tmp_path / "recipe" / "length").command_line == shlex.join(
        ["benchbuild", "build-scan", "--out", str(tmp_path / "recipe"), "--split", "length"])


def test_recipe_passes_positional_arguments_by_their_parameter_name(tmp_path):
    recipe = tmp_path / "r.toml"
    # `stats` against two training lines: POS-tagging the split's 16,990 training commands would take 12 s here.
    against = tmp_path / "train.txt"
    against.write_text("jump twice\nwalk left after run\n", encoding="utf-8")
    recipe.write_text(f'[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "{tmp_path / "o"}"\nsplit = "length"\n'
                      f'[[steps]]\ncommand = "stats"\n[steps.options]\nbenchmark = "{tmp_path / "o" / "length"}"\n'
                      f'split = "test"\nagainst = "{against}"\n')
    result = benchbuild("run", recipe, check=True)
    assert "3,920" in result.stdout or "3920" in result.stdout


@pytest.mark.parametrize("text, named", [
    ('[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "x"\nsplits = ["length"]\n', "'splits'"),
    ('[[steps]]\ncommand = "build-scan"\nfrobnicate = 1\n', "'frobnicate'"),
    ('titel = "x"\n[[steps]]\ncommand = "build-scan"\n', "'titel'"),
    ('[[steps]]\ncommand = "build-scna"\n', "'build-scna'"),
])
def test_recipe_with_an_unknown_key_names_it_and_runs_nothing(tmp_path, text, named):
    recipe = tmp_path / "r.toml"
    recipe.write_text(text)
    result = benchbuild("run", recipe, cwd=tmp_path)
    assert result.returncode != 0 and named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
