"""An encoder and a decoder of different widths (issue #43: 000 App. A.1 varies them independently) train and score
through the command line with separate dictionaries, and are refused in one line, before any folder is written,
with one dictionary (one table cannot serve two widths); the corrected rerun then needs no --overwrite."""

from __future__ import annotations

import json

from commands import benchbuild_in_process

WIDTHS = "architecture={encoder_d_model=16, encoder_num_heads=2, encoder_d_ff=24}"


def test_unequal_widths_train_and_evaluate_with_separate_dictionaries(tiny_model, tiny_scan, tmp_path):
    run_dir = tmp_path / "run"
    refused = benchbuild_in_process("train", "--model", tiny_model, "--data", tiny_scan, "--out", run_dir,
                                    "--max-steps", "4", "--device", "cpu", "--set", WIDTHS)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert ("encoder_d_model = 16 and d_model = 32 differ, but one dictionary means one embedding table for both: "
            "train it with --set dictionaries=separate") in refused.stderr
    assert not run_dir.exists()
    trained = benchbuild_in_process("train", "--model", tiny_model, "--data", tiny_scan, "--out", run_dir,
                                    "--max-steps", "4", "--device", "cpu", "--set", WIDTHS,
                                    "--set", "dictionaries=separate")
    assert trained.returncode == 0, trained.stderr
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    assert (config["encoder_d_model"], config["d_model"], config["encoder_d_ff"], config["d_ff"]) == (16, 32, 24, 64)
    scored = benchbuild_in_process("eval", "--run", run_dir, "--data", tiny_scan, "--device", "cpu")
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["rows"] == 20 and 0.0 <= metrics["exact_match"] <= 100.0
