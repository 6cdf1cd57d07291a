"""`train --stop-when-settled`: a run whose selection can no longer change (best validation, earliest of ties, a
validation exact match of 100%) stops at that validation, keeps the very checkpoint the whole budget would have
kept, says `stopped_by: settled`, and the report compares it with the paper as a run of the whole budget; a recipe
that no validation can settle refuses the option before training."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused, sha256
from small_inputs import tiny_transformer_entry, write_benchmark

from benchbuild.device import cpu_threads
from benchbuild.protocol import PaperProtocol, RunProtocol, run_differences
from benchbuild.training.loop import train
from benchbuild.zoo import load_entry

STEPS, EVAL_EVERY = 200, 10
SETTLING = tiny_transformer_entry("tiny_settling", "scan", steps=STEPS, batch_size=8, learning_rate=1e-2,
                                  eval_every=EVAL_EVERY, select="best_validation", validate_by="exact_match",
                                  ties="earliest", held_out=0.2)
PRIMITIVES = {"jump": "I_JUMP", "walk": "I_WALK", "run": "I_RUN", "look": "I_LOOK"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    """(model file, benchmark): each primitive alone and twice, 10 rows of each kind: a tiny model gets every
    held-out row right within a few validations, long before its 200 steps."""
    folder = tmp_path_factory.mktemp("settling")
    model = folder / "tiny_settling.toml"
    model.write_text(SETTLING, encoding="utf-8")
    rows = [{"id": f"r{i}-{word}-{times}", "source": word if times == 1 else f"{word} twice",
             "target": " ".join([action] * times)}
            for i in range(10) for word, action in PRIMITIVES.items() for times in (1, 2)]
    test = [{"id": f"t-{word}", "source": f"{word} twice", "target": f"{action} {action}"}
            for word, action in PRIMITIVES.items()]
    return model, write_benchmark(folder / "scan", {"train": rows, "test": test}, "scan", "tiny")


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory) -> tuple[Path, Path]:
    """(the whole budget, the same run stopped when settled), trained in this process on one thread."""
    folder = tmp_path_factory.mktemp("runs")
    with cpu_threads(1):
        train(*inputs, folder / "whole", seed=0, device="cpu", progress=False)
        train(*inputs, folder / "settled", seed=0, device="cpu", progress=False, stop_when_settled=True)
    return folder / "whole", folder / "settled"


def _record(run: Path) -> dict:
    return json.loads((run / "run.json").read_text(encoding="utf-8"))


def test_a_settled_run_stops_at_its_first_perfect_validation_and_keeps_what_the_whole_budget_keeps(runs):
    whole, settled = runs
    full, short = _record(whole), _record(settled)
    log = [json.loads(line) for line in (whole / "train_log.jsonl").read_text().splitlines()]
    perfect = [line["step"] for line in log if line.get("validation_exact_match") == 100.0]
    assert perfect and perfect[0] < STEPS, "the fixture never validated at 100%: nothing to settle"
    assert (full["steps_done"], full["stopped_by"]) == (STEPS, "step budget")
    assert full["selected_step"] == perfect[0]  # earliest of the ties
    assert (short["steps_done"], short["stopped_by"], short["status"]) == (perfect[0], "settled", "complete")
    assert short["selected_step"] == perfect[0]
    assert sha256(settled / "model.safetensors") == sha256(whole / "model.safetensors")
    assert short["arguments"]["stop_when_settled"] is True
    assert "--stop-when-settled" in short["command_line"]


def test_a_run_resumed_already_settled_trains_no_further(inputs, runs, tmp_path):
    """A run that validated at 100% before it stopped (here a 45-step budget), resumed with the option and the
    whole budget: it is settled from the start and ends where it stood, with the whole run's selection."""
    run_dir = tmp_path / "resumed"
    with cpu_threads(1):
        train(*inputs, run_dir, seed=0, device="cpu", progress=False, max_steps=45)
        result = train(*inputs, run_dir, seed=0, device="cpu", progress=False, stop_when_settled=True)
    record = _record(run_dir)
    assert (result.resumed_from, result.steps) == (45, 45)
    assert (record["steps_done"], record["stopped_by"], record["status"]) == (45, "settled", "complete")
    assert sha256(run_dir / "model.safetensors") == sha256(runs[0] / "model.safetensors")


def test_the_report_compares_a_settled_run_as_one_of_the_whole_budget(inputs, runs):
    entry = load_entry(inputs[0])
    reported = {"benchmark": "scan/tiny", "recipe": "scan", "metric": "exact_match", "value": 100.0}
    paper = PaperProtocol.of(entry.recipes, reported)
    settled = RunProtocol.of(_record(runs[1]))
    assert run_differences(paper, settled) == []
    stopped = RunProtocol.of({**_record(runs[1]), "stopped_by": "step budget"})  # the same steps, not settled
    assert run_differences(paper, stopped) == [f"trained {settled.steps_done:,} of {STEPS:,} steps"]


def test_a_recipe_no_validation_can_settle_refuses_the_option_before_training(inputs, tmp_path):
    model, data = inputs
    for key_value in ("select=last", "ties=latest", "validate_by=loss"):
        out = tmp_path / key_value.replace("=", "-")
        result = benchbuild("train", "--model", str(model), "--data", str(data), "--out", str(out), "--device", "cpu",
                            "--set", key_value, "--stop-when-settled")
        refused(result, "--stop-when-settled: this recipe", "no validation settles it")
        assert not out.exists()


def test_a_sweep_budget_passes_it_to_its_runs_and_never_stacks_them(inputs, tmp_path):
    from benchbuild.sweep.spec import load_sweep
    from benchbuild.sweep.stacks import stackable

    model, data = inputs
    file = tmp_path / "settling.toml"
    file.write_text(f'models = ["{model}"]\nseeds = [0, 1]\ndevice = "cpu"\n[budget]\nstop_when_settled = true\n'
                    f'[[benchmarks]]\nname = "scan/tiny"\ndata = "{data}"\n', encoding="utf-8")
    sweep = load_sweep(file)
    assert [spec.stop_when_settled for spec in sweep.runs] == [True, True]
    assert sweep.runs[0].config()["stop_when_settled"] is True  # a folder trained otherwise is another run
    assert not stackable(sweep.runs[0])
    whole = replace(sweep.runs[0], stop_when_settled=False)
    assert stackable(whole) and "stop_when_settled" not in whole.config()


def test_a_sweep_whose_recipe_cannot_settle_is_refused_before_any_run_starts(inputs, tmp_path):
    """`[budget] stop_when_settled = true` over a recipe no validation settles (`select = "last"`): one line from the
    sweep, no run folder made (before, each run failed alone and the failed folders blocked the corrected sweep)."""
    model, data = inputs
    file = tmp_path / "unsettling.toml"
    file.write_text(f'models = ["{model}"]\nseeds = [0, 1]\ndevice = "cpu"\n[budget]\n'
                    f'stop_when_settled = true\n[set]\nselect = "last"\n[[benchmarks]]\nname = "scan/tiny"\n'
                    f'data = "{data}"\n', encoding="utf-8")
    result = benchbuild("sweep", str(file), cwd=tmp_path)
    refused(result, "--stop-when-settled: this recipe", "no validation settles it")
    assert not any(tmp_path.rglob("run.json"))
