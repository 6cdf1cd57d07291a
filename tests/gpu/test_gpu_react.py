"""`benchbuild build-react --device cuda` end to end on the shared IWSLT14/WMT14 files, with a tiny 2-member ensemble
trained and scored on the GPU (tests/react/test_react_build.py runs the same pipeline on CPU)."""

from __future__ import annotations

import json
import math

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from small_inputs import tiny_ensemble
from typer.testing import CliRunner

from benchbuild.benchmark import load_splits
from benchbuild.cli import app
from benchbuild.device import mixed_precision

pytestmark = [pytest.mark.gpu, pytest.mark.shared]

TINY = tiny_ensemble(bpe_vocab_size=2000, batch_size=32, warmup_steps=10)


def test_build_react_trains_and_scores_its_ensemble_on_cuda(shared_data, tmp_path):
    react, wmt = shared_data / "react", shared_data / "wmt14-ende-sample"
    arguments = ["build-react", "--out", str(tmp_path / "react"),
                 "--train-src", str(react / "valid.de"), "--train-tgt", str(react / "valid.en"),
                 "--valid-src", str(react / "test.de"), "--valid-tgt", str(react / "test.en"),
                 "--pool-src", str(react / "cg_test.de"), "--pool-tgt", str(react / "cg_test.en"),
                 "--pool-src", str(wmt / "train.de"), "--pool-tgt", str(wmt / "train.en"),
                 "--lowercase", "--pool-size", "200", "--ensemble-size", "2", "--max-steps", "40", *TINY,
                 "--beam", "2", "--batch-size", "32", "--drop-top", "10", "--band", "100", "--sample", "50",
                 "--ensemble-dir", str(tmp_path / "members"), "--cache-dir", str(tmp_path / "cache"),
                 "--device", "cuda", "--seed", "0"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output

    for member in ("member-0", "member-1"):
        run = json.loads((tmp_path / "members" / member / "run.json").read_text(encoding="utf-8"))
        assert run["status"] == "complete" and run["steps_done"] == 40
        assert torch.device(run["device"]).type == "cuda"  # accelerate records the current GPU as "cuda"
        assert run["mixed_precision"] == mixed_precision("cuda:0")
    splits = load_splits(tmp_path / "react")
    assert set(splits) == {"train", "validation", "cg_test"}
    cg_test = splits["cg_test"]
    assert len(cg_test) == 50
    assert all(math.isfinite(rmi) and rmi >= 0 for rmi in cg_test["rmi"])
    assert all(11 <= rank <= 110 for rank in cg_test["rmi_rank"])
    assert not set(cg_test["source"]) & set(splits["train"]["source"])
    assert "ensemble members | 2" in (tmp_path / "react" / "README.md").read_text(encoding="utf-8")
