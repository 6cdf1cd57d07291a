"""Stacked training on CUDA (`benchbuild.training.stack`, the GPU's default in `sweep --stack auto`): a member of a
stack of 3 follows its single run with dropout off and draws the masks it draws alone with dropout on. The CPU side is
tests/training/test_stack.py; the speed is benchmarks/gpu/stacked_training.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from small_inputs import tiny_transformer_entry

from benchbuild.training.loop import RunOptions, train
from benchbuild.training.stack import train_stack

pytestmark = pytest.mark.gpu


def _entry(tmp: Path, dropout: float) -> Path:
    path = tmp / f"tiny{dropout}.toml"
    entry = tiny_transformer_entry("tiny", "scan", steps=30, batch_size=16, learning_rate=2e-3, eval_every=10,
                                   micro_batches=2)
    path.write_text(entry.replace("dropout = 0.0", f"dropout = {dropout}"), encoding="utf-8")
    return path


def _losses(run: Path) -> list[float]:
    lines = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    return [line["loss"] for line in lines if "loss" in line]


def _close(mine: list[float], theirs: list[float], tolerance: float) -> bool:
    return len(mine) == len(theirs) and all(abs(a - b) <= tolerance * abs(b) for a, b in zip(mine, theirs))


def test_a_member_of_a_cuda_stack_follows_its_single_cuda_run(tiny_scan, tmp_path, ieee_float32):
    model = _entry(tmp_path, 0.0)
    train(model, tiny_scan, tmp_path / "single", seed=1, device="cuda", progress=False)
    result = train_stack(model, tiny_scan, [(tmp_path / f"member{seed}", RunOptions(seed=seed, device="cuda"))
                                            for seed in (0, 1, 2)], progress=False)
    assert not result.failed
    assert json.loads((tmp_path / "member1" / "run.json").read_text())["device"].startswith("cuda")
    assert _close(_losses(tmp_path / "member1"), _losses(tmp_path / "single"), 1e-4)


def test_a_member_of_a_cuda_stack_draws_the_masks_it_draws_alone(tiny_scan, tmp_path, ieee_float32):
    model = _entry(tmp_path, 0.1)
    train_stack(model, tiny_scan, [(tmp_path / f"three{seed}", RunOptions(seed=seed, device="cuda"))
                                   for seed in (0, 1, 2)], progress=False)
    train_stack(model, tiny_scan, [(tmp_path / "alone", RunOptions(seed=1, device="cuda"))], progress=False)
    assert _close(_losses(tmp_path / "three1"), _losses(tmp_path / "alone"), 1e-4)
