"""A local sweep on CUDA with `--jobs 2`: its workers fork from the fork server (`sweep.run._worker_context`), which
imported torch without making a CUDA context, so each worker makes its own on the GPU it was given; both runs finish
on CUDA, and each follows the run `train` gives alone on the same device. The CPU side is tests/test_sweep.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from commands import benchbuild
from small_inputs import tiny_transformer_entry

from benchbuild.training.loop import train

pytestmark = pytest.mark.gpu


def _losses(run: Path) -> list[float]:
    lines = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    return [line["loss"] for line in lines if "loss" in line]


def test_a_two_job_cuda_sweep_trains_each_run_on_the_gpu_as_train_alone_does(tiny_scan, tmp_path):
    (tmp_path / "tiny.toml").write_text(tiny_transformer_entry("tiny", "scan", steps=30, batch_size=16,
                                                               learning_rate=2e-3, eval_every=10), encoding="utf-8")
    (tmp_path / "sweep.toml").write_text(
        f'name = "cuda"\nmodels = ["tiny.toml"]\nseeds = [0, 1]\ndevice = "cuda"\n[budget]\nsteps = 30\n'
        f'[[benchmarks]]\nname = "scan/simple"\ndata = "{tiny_scan}"\n[report]\nformats = ["csv"]\n', encoding="utf-8")
    # One run a worker (`--stack 1`: on CUDA `auto` would stack the two seeds in one process).
    result = benchbuild("sweep", "sweep.toml", "--jobs", "2", "--stack", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr and "leaked" not in result.stderr, result.stderr
    for seed in (0, 1):
        folder = tmp_path / f"runs/cuda/tiny/simple/seed{seed}"
        record = json.loads((folder / "run.json").read_text())
        assert record["status"] == "complete" and record["device"].startswith("cuda"), record
        alone = train(tmp_path / "tiny.toml", tiny_scan, tmp_path / f"alone{seed}", seed=seed, device="cuda",
                      progress=False)
        assert alone.steps == 30
        mine, theirs = _losses(folder), _losses(tmp_path / f"alone{seed}")
        assert len(mine) == len(theirs) and all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(mine, theirs)), seed
