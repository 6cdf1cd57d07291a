"""Stacked training (`benchbuild.training.stack`) on the CPU: each member of a stack of 3 follows its single run step
by step, draws the same dropout masks in any stack, resumes after a kill as if never stopped, fails alone, and
`benchbuild sweep --stack 3` trains such stacks (issue #44; the speed is measured on GPUs in benchmarks/gpu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from commands import benchbuild_in_process
from small_inputs import tiny_transformer_entry
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import RunOptions, train
from benchbuild.training.stack import train_stack

SEEDS = (0, 1, 2)
STEPS = 50


def _entry(tmp: Path, dropout: float, name: str = "tiny") -> Path:
    """The tiny Transformer, 50 steps of 16 rows in 2 micro-batches, a loss line every step (eval_every 10)."""
    entry = tiny_transformer_entry(name, "scan", steps=STEPS, batch_size=16, learning_rate=2e-3, eval_every=10,
                                   micro_batches=2, label_smoothing=0.1)
    path = tmp / f"{name}.toml"
    path.write_text(entry.replace("dropout = 0.0", f"dropout = {dropout}"), encoding="utf-8")
    return path


def _losses(run: Path) -> list[float]:
    lines = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    return [line["loss"] for line in lines if "loss" in line]


def _close(mine: list[float], theirs: list[float], tolerance: float = 1e-5) -> bool:
    return len(mine) == len(theirs) and all(abs(a - b) <= tolerance * abs(b) for a, b in zip(mine, theirs))


# An attention layer's key bias adds the same q·b to every score of a query, which the softmax removes: its gradient
# is zero but for rounding, and Adam scales any rounding to steps of the learning rate's size. Those weights differ
# between two summation orders by design; every other weight, and the model's outputs, must agree.
def _gradient_free(name: str) -> bool:
    return name.endswith("key.bias")


@pytest.fixture(scope="module")
def no_dropout(tiny_scan, tmp_path_factory):
    """Single runs of seeds 0, 1, 2 and one stack of the three, dropout off."""
    tmp = tmp_path_factory.mktemp("stack")
    model = _entry(tmp, 0.0)
    for seed in SEEDS:
        train(model, tiny_scan, tmp / f"single{seed}", seed=seed, device="cpu", progress=False)
    result = train_stack(model, tiny_scan, [(tmp / f"member{seed}", RunOptions(seed=seed, device="cpu"))
                                            for seed in SEEDS], progress=False)
    return tmp, model, result


def test_each_member_of_a_stack_follows_its_single_run_step_by_step(no_dropout, tiny_scan):
    tmp, _, result = no_dropout
    assert not result.failed and len(result.finished) == 3
    curves = []
    for seed in SEEDS:
        single, member = _losses(tmp / f"single{seed}"), _losses(tmp / f"member{seed}")
        assert len(member) == STEPS
        assert _close(member, single), (seed, member[:5], single[:5])
        curves.append(member)
    assert curves[0] != curves[1] != curves[2]  # three runs, not one run three times
    for seed in SEEDS:
        single = load_file(tmp / f"single{seed}" / "model.safetensors")
        member = load_file(tmp / f"member{seed}" / "model.safetensors")
        assert single.keys() == member.keys()
        for name in single:
            if not _gradient_free(name):
                assert torch.allclose(member[name], single[name], rtol=1e-5, atol=1e-5), (seed, name)


def test_a_member_folder_is_a_run_folder_that_loads_and_scores_as_its_single_run(no_dropout, tiny_scan):
    from transformers import AutoModelForSeq2SeqLM

    import benchbuild.zoo  # noqa: F401 - registers the zoo's model types with AutoModel
    from benchbuild.evaluation.evaluate import evaluate_run

    tmp, _, _ = no_dropout
    record = json.loads((tmp / "member1" / "run.json").read_text())
    assert record["status"] == "complete" and record["steps_done"] == STEPS
    assert record["stack"] == {"members": 3, "with": ["../member0", "../member2"]}
    assert record["identity"]["trainer"] == "stacked"
    logits = []
    for run in (tmp / "single1", tmp / "member1"):
        model = AutoModelForSeq2SeqLM.from_pretrained(run).eval()
        ids = torch.tensor([[5, 6, 7, 2]])
        with torch.no_grad():
            logits.append(model(input_ids=ids, decoder_input_ids=torch.tensor([[0, 5, 6]])).logits)
    assert torch.allclose(logits[0], logits[1], rtol=1e-4, atol=1e-5)
    scores = [evaluate_run(run, tiny_scan, split="test", device="cpu", progress=False)
              for run in (tmp / "single1", tmp / "member1")]
    assert scores[0]["exact_match"] == scores[1]["exact_match"]


def test_a_plain_train_of_a_stacked_run_folder_is_refused(no_dropout, tiny_scan):
    tmp, model, _ = no_dropout
    with pytest.raises(BenchbuildError, match=r"holds a run trained in a stack \(benchbuild sweep --stack\): resume "
                       r"it with the same sweep command, or pass --overwrite to start again \(it differs in: trainer"):
        train(model, tiny_scan, tmp / "member0", seed=0, device="cpu", progress=False, max_steps=STEPS + 5)


def test_a_member_draws_the_same_dropout_masks_in_any_stack(tiny_scan, tmp_path):
    model = _entry(tmp_path, 0.1, "dropped")
    train_stack(model, tiny_scan, [(tmp_path / f"three{seed}", RunOptions(seed=seed, device="cpu", max_steps=20))
                                   for seed in SEEDS], progress=False)
    train_stack(model, tiny_scan, [(tmp_path / "alone", RunOptions(seed=1, device="cpu", max_steps=20))],
                progress=False)
    assert _close(_losses(tmp_path / "three1"), _losses(tmp_path / "alone"))
    # Dropout is on: the same seed without it trains otherwise.
    plain = _entry(tmp_path, 0.0, "plain")
    train_stack(plain, tiny_scan, [(tmp_path / "undropped", RunOptions(seed=1, device="cpu", max_steps=20))],
                progress=False)
    assert abs(_losses(tmp_path / "undropped")[0] - _losses(tmp_path / "alone")[0]) > 1e-3


def test_a_stack_killed_between_its_members_checkpoints_resumes_as_if_never_stopped(tiny_scan, tmp_path):
    model = _entry(tmp_path, 0.1, "dropped")
    whole = [(tmp_path / f"whole{seed}", RunOptions(seed=seed, device="cpu", max_steps=30)) for seed in SEEDS]
    train_stack(model, tiny_scan, whole, progress=False)
    killed = [(tmp_path / f"killed{seed}", RunOptions(seed=seed, device="cpu", max_steps=30)) for seed in SEEDS]
    train_stack(model, tiny_scan, [(out, RunOptions(seed=options.seed, device="cpu", max_steps=20))
                                   for out, options in killed], progress=False)
    # The kill came after member 0 wrote its step-20 checkpoint and before the others did: they are at step 10.
    for seed in (1, 2):
        shutil.rmtree(tmp_path / f"killed{seed}" / "checkpoints" / "step-00000020")
    train_stack(model, tiny_scan, killed, progress=False)
    for seed in SEEDS:
        assert _close(_losses(tmp_path / f"killed{seed}"), _losses(tmp_path / f"whole{seed}"))
        ours = load_file(tmp_path / f"killed{seed}" / "model.safetensors")
        theirs = load_file(tmp_path / f"whole{seed}" / "model.safetensors")
        for name in ours:
            if not _gradient_free(name):
                assert torch.allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-6), (seed, name)


def test_a_diverging_member_is_marked_failed_alone_and_the_others_finish(tiny_scan, tmp_path):
    model = _entry(tmp_path, 0.0)
    members = [(tmp_path / "steady", RunOptions(seed=0, device="cpu", max_steps=10)),
               (tmp_path / "diverging", RunOptions(seed=1, device="cpu", max_steps=10,
                                                   overrides={"learning_rate": 1e30}))]
    result = train_stack(model, tiny_scan, members, progress=False)
    assert list(result.failed) == [tmp_path / "diverging"]
    assert "training loss became" in result.failed[tmp_path / "diverging"]
    failed = json.loads((tmp_path / "diverging" / "run.json").read_text())
    steady = json.loads((tmp_path / "steady" / "run.json").read_text())
    assert failed["status"] == "failed" and steady["status"] == "complete" and steady["steps_done"] == 10
    assert len(_losses(tmp_path / "steady")) == 10


def test_runs_of_other_shapes_are_refused_before_a_step(tiny_scan, tmp_path):
    model = _entry(tmp_path, 0.0)
    members = [(tmp_path / "narrow", RunOptions(seed=0, device="cpu", max_steps=5)),
               (tmp_path / "wide", RunOptions(seed=1, device="cpu", max_steps=5,
                                              architecture_overrides={"d_ff": 64}))]
    with pytest.raises(BenchbuildError, match="differ in architecture"):
        train_stack(model, tiny_scan, members, progress=False)
    other_batches = [members[0], (tmp_path / "wide", RunOptions(seed=1, device="cpu", max_steps=5,
                                                                overrides={"batch_size": 8}))]
    with pytest.raises(BenchbuildError, match="differ in batch_size"):
        train_stack(model, tiny_scan, other_batches, progress=False)
    # Refused before any folder was written: the corrected stack starts afresh.
    assert not (tmp_path / "narrow").exists() and not (tmp_path / "wide").exists()
    result = train_stack(model, tiny_scan, [members[0], (tmp_path / "wide", RunOptions(seed=1, device="cpu",
                                                                                          max_steps=5))],
                         progress=False)
    assert len(result.finished) == 2


SWEEP = """\
name = "stacked"
models = ["tiny.toml"]
seeds = [0, 1, 2]
device = "auto"

[budget]
steps = 20

[[benchmarks]]
name = "scan/simple"
data = "{data}"

[report]
formats = ["csv"]                  # these tests read run folders, not the report's pages
"""


def test_sweep_stack_3_trains_the_seeds_as_one_stack_equal_to_their_single_runs(no_dropout, tiny_scan, tmp_path,
                                                                               monkeypatch):
    _, model, _ = no_dropout
    shutil.copy(model, tmp_path / "tiny.toml")
    (tmp_path / "sweep.toml").write_text(SWEEP.format(data=tiny_scan), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    planned = runner.invoke(app, ["sweep", "sweep.toml", "--stack", "3", "--device", "cpu", "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert "3 runs of tiny.toml on scan/simple (seeds 0, 1, 2)" in planned.output
    auto = runner.invoke(app, ["sweep", "sweep.toml", "--device", "cpu", "--dry-run"])
    assert "stacks here (--stack auto on cpu): none" in auto.output
    assert "stacks on CUDA (--stack auto: up to 72 runs a stack): 1" in auto.output
    done = runner.invoke(app, ["sweep", "sweep.toml", "--stack", "3", "--device", "cpu"])
    assert done.exit_code == 0, done.output
    folders = sorted(Path("runs/stacked/tiny/simple").glob("seed*"))
    assert len(folders) == 3
    for folder in folders:
        record = json.loads((folder / "run.json").read_text())
        assert record["stack"]["members"] == 3 and record["device"] == "cpu"
        assert json.loads((folder / "metrics.json").read_text())["split"] == "test"
        seed = record["seed"]
        train(model, tiny_scan, tmp_path / f"single{seed}", seed=seed, device="cpu", progress=False, max_steps=20)
        assert _close(_losses(folder), _losses(tmp_path / f"single{seed}"))


@pytest.mark.parametrize("value", ["0", "three"])
def test_a_stack_size_that_is_not_a_number_of_runs_is_refused_in_one_line(value):
    result = benchbuild_in_process("sweep", "pipelines/sweep_smoke.toml", "--stack", value, "--dry-run",
                                   cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 2  # a usage error, before the sweep file is read
    assert (f"Invalid value for '--stack': --stack takes 'auto' or a number of runs of at least 1; got '{value}'"
            in " ".join(result.stderr.split()))


@pytest.fixture(scope="module")
def unstopped(tiny_scan, tmp_path_factory):
    """The 40-step stack of seeds 0-2 (dropout 0.1) that no signal stopped: its members' folders by seed."""
    tmp = tmp_path_factory.mktemp("unstopped")
    model = _entry(tmp, 0.1, "tiny")
    train_stack(model, tiny_scan, [(tmp / f"whole{seed}", RunOptions(seed=seed, device="cpu", max_steps=40))
                                   for seed in SEEDS], progress=False)
    return {seed: tmp / f"whole{seed}" for seed in SEEDS}


def _stopped_sweep(tiny_scan, tmp_path, signal_number):
    """`sweep --stack 3` of the unstopped stack's runs, stopped by `signal_number` (sent to its process group, as a
    terminal's Ctrl-C or a scheduler would) once its first checkpoint is written: the command and its environment."""
    import os

    from commands import started
    from waiting import until

    _entry(tmp_path, 0.1, "tiny")
    (tmp_path / "sweep.toml").write_text(SWEEP.format(data=tiny_scan).replace("steps = 20", "steps = 40"),
                                         encoding="utf-8")
    command = ("sweep", "sweep.toml", "--stack", "3", "--device", "cpu")
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    sweep = started(*command, cwd=tmp_path, environment=environment)
    first_checkpoint = tmp_path / "runs/stacked/tiny/simple/seed2/checkpoints/step-00000010/trainer_state.pt"
    try:
        until(first_checkpoint.exists, sweep, "the stack's first checkpoint")
    finally:
        os.killpg(sweep.pid, signal_number)
        sweep.wait()
    killed_at = [json.loads((tmp_path / f"runs/stacked/tiny/simple/seed{seed}/run.json").read_text())
                 for seed in SEEDS]
    assert all(record["status"] != "complete" for record in killed_at), "the signal came too late to test anything"
    return command, environment


def test_a_stacked_sweep_stopped_by_sigterm_then_by_ctrl_c_resumes_to_what_an_unstopped_stack_gives(tiny_scan,
                                                                                                   tmp_path,
                                                                                                   unstopped):
    """SIGTERM (a scheduler's stop) at the stack's first checkpoint, then Ctrl-C (SIGINT to the process group, as a
    terminal sends it) at its second: the same command then finishes the stack as if never stopped. SIGKILL: the
    damaged-member test below."""
    import os
    import signal

    from commands import benchbuild, started
    from waiting import until

    command, environment = _stopped_sweep(tiny_scan, tmp_path, signal.SIGTERM)
    runs = tmp_path / "runs/stacked/tiny/simple"
    again = started(*command, cwd=tmp_path, environment=environment)
    try:
        until((runs / "seed2/checkpoints/step-00000020/trainer_state.pt").exists, again, "the second checkpoint")
    finally:
        os.killpg(again.pid, signal.SIGINT)
        again.wait()
    assert all(json.loads((runs / f"seed{seed}/run.json").read_text())["status"] != "complete" for seed in SEEDS)
    done = benchbuild(*command, cwd=tmp_path, environment=environment)
    assert done.returncode == 0, done.stderr
    for seed in SEEDS:
        assert _close(_losses(runs / f"seed{seed}"), _losses(unstopped[seed]))
        assert json.loads((runs / f"seed{seed}/run.json").read_text())["status"] == "complete"


def test_a_member_damaged_between_two_runs_of_its_stack_fails_alone_with_a_way_out_that_works(tiny_scan, tmp_path,
                                                                                               unstopped):
    """Killed (SIGKILL), then seed 1's run.json and seed 2's checkpoint damaged by hand: seed 0 finishes as the
    unstopped stack's seed 0 did, each damaged member fails in one line naming it and a way out that a sweep has (no
    `--overwrite` there; `train` refuses a stacked run's folder); following the ways out, the same command finishes
    the stack as if never stopped."""
    import shutil
    import signal

    from commands import benchbuild

    command, environment = _stopped_sweep(tiny_scan, tmp_path, signal.SIGKILL)
    runs = tmp_path / "runs/stacked/tiny/simple"
    (runs / "seed1/run.json").write_text("{", encoding="utf-8")
    checkpoint = max((runs / "seed2/checkpoints").glob("step-*"))
    (checkpoint / "trainer_state.pt").write_bytes(b"damaged")
    failed = benchbuild(*command, cwd=tmp_path, environment=environment)
    assert failed.returncode == 1
    said = "".join((failed.stdout + failed.stderr).split())  # the console wraps long paths anywhere

    def says(text):
        return "".join(str(text).split()) in said

    assert says("seed1/run.json is not valid JSON") and says(f"the run folder is damaged; delete {runs / 'seed1'} "
                                                             "and rerun the same sweep command: that run then trains "
                                                             "again from its start")
    assert says(f"{checkpoint}/trainer_state.pt cannot be loaded")
    assert says(f"delete {checkpoint} to resume from the checkpoint before it, or delete {runs / 'seed2'} and rerun")
    assert not says("--overwrite") and not says("another --out")
    assert json.loads((runs / "seed0/run.json").read_text())["status"] == "complete"
    assert _close(_losses(runs / "seed0"), _losses(unstopped[0]))
    shutil.rmtree(runs / "seed1")
    shutil.rmtree(checkpoint)
    done = benchbuild(*command, cwd=tmp_path, environment=environment)
    assert done.returncode == 0, done.stdout + done.stderr
    for seed in SEEDS:
        assert _close(_losses(runs / f"seed{seed}"), _losses(unstopped[seed]))


def test_runs_group_into_stacks_by_configuration_and_a_started_run_keeps_how_it_started(no_dropout, tiny_scan,
                                                                                      tmp_path, monkeypatch):
    from benchbuild.sweep.spec import load_sweep
    from benchbuild.sweep.stacks import groups

    _, model, _ = no_dropout
    shutil.copy(model, tmp_path / "tiny.toml")
    (tmp_path / "sweep.toml").write_text(SWEEP.format(data=tiny_scan), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runs = load_sweep("sweep.toml", "cpu").runs

    def shape(size):
        return [([spec.seed for spec in group.specs], group.stacked) for group in groups(runs, size)]

    assert shape(1) == [([0], False), ([1], False), ([2], False)]
    assert shape(2) == [([0, 1], True), ([2], True)]
    started = Path(runs[1].folder)
    started.mkdir(parents=True)
    (started / "run.json").write_text(json.dumps({"identity": {"trainer": "stacked"}, "status": "running"}))
    assert shape(1) == [([0], False), ([1], True), ([2], False)]
    (started / "run.json").write_text(json.dumps({"identity": {"seed": 1}, "status": "running"}))
    assert shape(3) == [([0, 2], True), ([1], False)]
