"""Training on CUDA: every catalogue model trains a few steps under bf16 and under fp16 mixed precision and its saved
checkpoint gives the same logits on the CPU; `eval --device cuda` decodes what `eval --device cpu` decodes; `accelerate
launch` trains on the one GPU. The CPU side of each is tests/training/test_training_loop.py and tests/zoo."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from tiny_zoo import ENTRIES, LEARNING_RATE, tiny_overrides
from transformers import AutoTokenizer
from typer.testing import CliRunner

from benchbuild.benchmark import load_splits
from benchbuild.cli import app
from benchbuild.device import mixed_precision
from benchbuild.training import train
from benchbuild.zoo.loading import load_model
from benchbuild.zoo import load_entry

pytestmark = [pytest.mark.gpu, pytest.mark.shared]

STEPS = 30


def recipe_overrides(entry, eval_every: int = STEPS // 2) -> dict:
    """A short constant-rate recipe every kind learns from in a few steps (the step sizes of tests/zoo/tiny_zoo.py);
    `select = last`, so the run folder's root holds the final step."""
    return {"batch_size": 32, "learning_rate": LEARNING_RATE.get(entry.architecture["kind"], 3e-3),
            "schedule": "constant", "warmup_steps": 0, "label_smoothing": 0.0, "grad_clip": 1.0, "weight_decay": 0.0,
            "eval_every": eval_every, "select": "last"}


def architecture_overrides(entry) -> dict:
    """The zoo tests' tiny sizes, with dropout (and attention dropout, where the kind has it) on: the CUDA dropout
    paths train too."""
    overrides = tiny_overrides(entry)
    return {**overrides, **{key: 0.1 for key in ("dropout", "attention_dropout") if key in overrides}}


def read_log(run_dir: Path) -> tuple[list[float], list[dict]]:
    """(the logged training losses, the validation lines) of a run's `train_log.jsonl`: a validation line carries the
    time so far, and no scores where the run validates on nothing (`select = last` without a validation split)."""
    lines = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    losses = [line["loss"] for line in lines if "loss" in line]
    return losses, [line for line in lines if "elapsed_s" in line]


def teacher_forced_batch(run_dir: Path, benchmark: Path) -> dict[str, torch.Tensor]:
    """The benchmark's test rows as a teacher-forced batch (inputs and labels) in the run's vocabulary."""
    tokenizer = AutoTokenizer.from_pretrained(run_dir)
    rows = load_splits(benchmark)["test"]
    encoded = tokenizer(list(rows["source"]), return_tensors="pt", padding=True)
    labels = tokenizer(list(rows["target"]), return_tensors="pt", padding=True)["input_ids"]
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
            "labels": labels.masked_fill(labels.eq(tokenizer.pad_token_id), -100)}


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.name for entry in ENTRIES])
def test_every_zoo_model_trains_on_cuda_under_mixed_precision_and_its_checkpoint_gives_the_same_logits_on_cpu(
        entry, precision, tiny_scan, tmp_path, monkeypatch, ieee_float32):
    if precision == "fp16":
        # What a GPU without bf16 (V100, T4) reports: the device policy then trains in fp16, with loss scaling.
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    elif not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    run_dir = tmp_path / "run"
    result = train(entry.name, tiny_scan, run_dir, device="cuda", max_steps=STEPS, overrides=recipe_overrides(entry),
                   architecture_overrides=architecture_overrides(entry), progress=False)

    assert result.steps == STEPS and result.selected_step == STEPS
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "complete" and run["mixed_precision"] == precision
    assert torch.device(run["device"]).type == "cuda"  # accelerate records the current GPU as "cuda"
    losses, validations = read_log(run_dir)
    assert len(losses) == STEPS and all(math.isfinite(loss) for loss in losses), losses
    assert sum(losses[-5:]) < sum(losses[:5]), losses
    assert [line["step"] for line in validations] == [STEPS // 2, STEPS]
    assert run["validation"] == "none" and not any("validation_exact_match" in line for line in validations)

    on_cpu = load_model(run_dir).eval()
    assert {parameter.dtype for parameter in on_cpu.parameters()} == {torch.float32}  # mixed precision saves float32
    on_cuda = load_model(run_dir).to("cuda").eval()
    batch = teacher_forced_batch(run_dir, tiny_scan)
    with torch.no_grad():
        cpu_logits = on_cpu(**batch).logits
        cuda_logits = on_cuda(**{name: tensor.to("cuda") for name, tensor in batch.items()}).logits
    torch.testing.assert_close(cuda_logits.cpu(), cpu_logits, rtol=1e-4, atol=1e-4)


def test_eval_on_cuda_decodes_and_scores_what_eval_on_cpu_does(tiny_scan, tmp_path, ieee_float32):
    entry = load_entry("transformer")
    run_dir = tmp_path / "run"
    train("transformer", tiny_scan, run_dir, device="cuda", max_steps=120, overrides=recipe_overrides(entry, 60),
          architecture_overrides=tiny_overrides(entry), progress=False)
    runner = CliRunner()
    for device in ("cuda", "cpu"):
        result = runner.invoke(app, ["eval", "--run", str(run_dir), "--data", str(tiny_scan), "--beam", "2",
                                     "--device", device, "--out", str(tmp_path / device)])
        assert result.exit_code == 0, result.output
    metrics = {device: json.loads((tmp_path / device / "metrics.json").read_text()) for device in ("cuda", "cpu")}
    predictions = {device: (tmp_path / device / "predictions.jsonl").read_text().splitlines()
                   for device in ("cuda", "cpu")}
    assert metrics["cuda"]["rows"] == len(load_splits(tiny_scan)["test"]) and metrics["cuda"]["beam"] == 2
    assert predictions["cuda"] == predictions["cpu"]
    assert metrics["cuda"]["exact_match"] == metrics["cpu"]["exact_match"]


TINY_TRANSFORMER = """\
name = "tiny_transformer"
paper = "test"
summary = "The zoo transformer at the zoo tests' tiny size, 20 steps."
extends = "transformer"

[architecture]
d_model = 32
num_heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1

[recipe.scan]
steps = 20
batch_size = 32
eval_every = 10
"""


def test_accelerate_launch_trains_on_the_one_gpu(tiny_scan, tmp_path):
    model = tmp_path / "tiny_transformer.toml"
    model.write_text(TINY_TRANSFORMER, encoding="utf-8")
    run_dir = tmp_path / "run"
    launched = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
         "--dynamo_backend", "no", "-m", "benchbuild", "train", "--model", str(model), "--data", str(tiny_scan),
         "--out", str(run_dir), "--device", "cuda"],
        capture_output=True, text=True, check=False)
    assert launched.returncode == 0, launched.stderr[-4000:]
    assert "trained 20 steps" in launched.stdout
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "complete" and run["steps_done"] == 20
    assert torch.device(run["device"]).type == "cuda" and run["processes"] == 1
    assert run["mixed_precision"] == mixed_precision("cuda:0")
    losses, _ = read_log(run_dir)
    assert all(math.isfinite(loss) for loss in losses)
