"""Edges of the options that every command shares: a negative seed is refused by every command that takes one,
naming the option; a time budget must be finite (`inf` once reached run.json as the non-JSON token `Infinity`); a
pipeline step's `flag = false` leaves the flag off instead of passing an unknown `--no-flag`."""

from __future__ import annotations

import json

import typer
from commands import benchbuild_in_process
from small_inputs import scan_grammar_rows, tiny_transformer_entry, write_benchmark

from benchbuild.cli import app
from benchbuild.options import MAX_SEED
from benchbuild.pipeline import Step


def seeded_commands() -> dict[str, object]:
    group = typer.main.get_command(app)
    return {name: param for name, command in group.commands.items() for param in command.params
            if "--seed" in getattr(param, "opts", ())}


def test_every_command_with_a_seed_takes_only_numpys_seeds():
    seeded = seeded_commands()
    assert {"build-scan", "build-noun-adj", "build-react", "build-lake-baroni-fr", "train"} <= set(seeded)
    for name, param in seeded.items():
        assert (param.min, param.max) == (0, MAX_SEED), name


def test_a_negative_seed_is_refused_naming_the_option(tmp_path):
    for arguments in (["build-scan", "--out", tmp_path / "scan", "--split", "simple", "--seed", "-5"],
                      ["train", "--model", "transformer", "--data", tmp_path, "--out", tmp_path / "run", "--seed", "-1"]):
        done = benchbuild_in_process(*arguments)
        assert done.returncode == 2 and "'--seed'" in done.stderr and "greater than or equal to 0" in done.stderr, \
            done.stderr
    assert not (tmp_path / "scan").exists() and not (tmp_path / "run").exists()


def test_an_infinite_time_budget_is_refused_and_a_finite_one_reaches_run_json_as_a_number(tmp_path):
    model = tmp_path / "tiny.toml"
    model.write_text(tiny_transformer_entry("tiny", "scan", steps=4, batch_size=8, learning_rate=3e-3, eval_every=2,
                                            select="last"), encoding="utf-8")
    rows = scan_grammar_rows(60, 4, seed=0)
    data = write_benchmark(tmp_path / "scan", {"train": rows[:40], "test": rows[40:]}, "scan", "tiny")
    for value in ("inf", "nan"):
        done = benchbuild_in_process("train", "--model", model, "--data", data, "--out", tmp_path / "run",
                                     "--max-minutes", value, "--device", "cpu")
        assert done.returncode == 2 and "positive, finite number of minutes" in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()
    done = benchbuild_in_process("train", "--model", model, "--data", data, "--out", tmp_path / "run",
                                 "--max-minutes", "5", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "run" / "run.json").read_text(encoding="utf-8")
    assert json.loads(text, parse_constant=lambda token: (_ for _ in ()).throw(ValueError(token)))[
        "time_budget_minutes"] == 5.0


def test_a_pipeline_steps_false_flag_is_left_off():
    step = Step("build-react", {"out": "o", "overwrite": False, "lowercase": True})
    assert step.argv() == ["build-react", "--out", "o", "--lowercase"]


def test_a_missing_benchmark_folder_is_called_missing_by_every_reader(tmp_path):
    from benchbuild.benchmark import load_splits, read_build_info

    for read in (read_build_info, load_splits):
        try:
            read(tmp_path / "absent")
        except FileNotFoundError as error:
            assert str(error) == f"{tmp_path / 'absent'} is missing: no such benchmark folder"
        else:
            raise AssertionError(f"{read.__name__} read a folder that does not exist")
    done = benchbuild_in_process("stats", tmp_path / "absent")
    assert done.returncode == 1 and "is missing: no such benchmark folder" in done.stderr, done.stderr
