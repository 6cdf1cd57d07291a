"""Recipe key `precision`: the arithmetic a run trains in (fp32 as fairseq trains without --fp16, or an autocast
type), recorded in run.json, part of a run's identity, and refused where it cannot run (issue #33)."""

from __future__ import annotations

import json

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused

from benchbuild.device import mixed_precision
from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import train


@pytest.mark.parametrize("device, precision, mode", [
    ("cpu", "auto", "no"), ("cpu", "fp32", "no"),
    ("cuda:0", "fp32", "no"), ("cuda:0", "bf16", "bf16"), ("cuda:0", "fp16", "fp16"),
])
def test_each_precision_maps_to_its_accelerate_mode(device, precision, mode):
    assert mixed_precision(device, precision) == mode


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_autocast_on_the_cpu_and_unknown_precisions_are_refused(precision):
    with pytest.raises(BenchbuildError, match=f"'{precision}' needs a GPU"):
        mixed_precision("cpu", precision)
    with pytest.raises(BenchbuildError, match="choose auto, fp32, bf16 or fp16"):
        mixed_precision("cpu", "fp64")


def test_a_run_records_its_precision_and_a_changed_precision_does_not_resume_it(tiny_scan, tiny_model, tmp_path):
    out = tmp_path / "run"
    train(tiny_model, tiny_scan, out, seed=0, max_steps=2, device="cpu", progress=False,
          overrides={"precision": "fp32"})
    record = json.loads((out / "run.json").read_text())
    assert record["mixed_precision"] == "no"
    assert record["identity"]["recipe"]["precision"] == "fp32"
    with pytest.raises(BenchbuildError, match="differs in: recipe"):
        train(tiny_model, tiny_scan, out, seed=0, max_steps=3, device="cpu", progress=False)


def test_the_default_precision_leaves_the_identity_of_earlier_runs_unchanged(tiny_scan, tiny_model, tmp_path):
    out = tmp_path / "run"
    train(tiny_model, tiny_scan, out, seed=0, max_steps=2, device="cpu", progress=False)
    record = json.loads((out / "run.json").read_text())
    assert "precision" not in record["identity"]["recipe"] and record["mixed_precision"] == "no"


def test_the_cli_refuses_fp16_on_the_cpu_before_training_and_a_misspelt_precision(tiny_scan, tiny_model, tmp_path):
    refused(benchbuild("train", "--model", tiny_model, "--data", tiny_scan, "--out", tmp_path / "a", "--device", "cpu",
                       "--max-steps", "1", "--set", "precision=fp16"), "'fp16' needs a GPU")
    assert not (tmp_path / "a" / "run.json").exists()
    refused(benchbuild("train", "--model", tiny_model, "--data", tiny_scan, "--out", tmp_path / "b", "--device", "cpu",
                       "--max-steps", "1", "--set", "precision=fp64"), "precision")
    assert not (tmp_path / "b").exists()
