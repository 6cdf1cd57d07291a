"""`benchbuild build-react` end to end on the shared IWSLT14/WMT14 files, with a tiny 3-member ensemble on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_inputs import tiny_ensemble, write_lines
from typer.testing import CliRunner

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.cli import app

TINY = tiny_ensemble(bpe_vocab_size=2000, batch_size=16, warmup_steps=10, eval_every=1000)


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """IWSLT14 valid + test as the training corpus (its last 8 pairs as validation); pool: cg_test + WMT14 sample."""
    react, folder = shared_data / "react", tmp_path_factory.mktemp("react-inputs")
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    de = read(react / "valid.de") + read(react / "test.de")
    en = read(react / "valid.en") + read(react / "test.en")
    return {
        "train": (write_lines(folder / "train.de", de[:-8]), write_lines(folder / "train.en", en[:-8])),
        "valid": (write_lines(folder / "valid.de", de[-8:]), write_lines(folder / "valid.en", en[-8:])),
        "pool": [(react / "cg_test.de", react / "cg_test.en"),
                 (shared_data / "wmt14-ende-sample" / "train.de", shared_data / "wmt14-ende-sample" / "train.en")],
    }


def _arguments(corpus, out: Path, cache: Path, sample: int) -> list[str]:
    arguments = ["build-react", "--out", str(out), "--train-src", str(corpus["train"][0]),
                 "--train-tgt", str(corpus["train"][1]), "--valid-src", str(corpus["valid"][0]),
                 "--valid-tgt", str(corpus["valid"][1])]
    for source, target in corpus["pool"]:
        arguments += ["--pool-src", str(source), "--pool-tgt", str(target)]
    return arguments + ["--lowercase", "--pool-size", "40", "--ensemble-size", "3", "--max-steps", "40", *TINY,
                        "--beam", "2", "--batch-size", "20", "--drop-top", "5", "--band", "20", "--sample", str(sample),
                        "--cache-dir", str(cache), "--device", "cpu", "--seed", "0"]


@pytest.mark.shared
@pytest.mark.slow
def test_build_react_end_to_end_then_resume_from_the_cache(corpus, tmp_path):
    runner = CliRunner()
    cache = tmp_path / "cache"
    first = runner.invoke(app, _arguments(corpus, tmp_path / "react", cache, sample=12))
    assert first.exit_code == 0, first.output

    splits = load_splits(tmp_path / "react")
    assert set(splits) == {"train", "validation", "cg_test"}
    cg_test = splits["cg_test"]
    assert len(cg_test) == 12
    assert {"id", "source", "target", "degree", "rmi", "rmi_rank"} <= set(cg_test.column_names)
    assert all(6 <= rank <= 25 for rank in cg_test["rmi_rank"])
    assert cg_test["rmi_rank"] == sorted(cg_test["rmi_rank"])
    assert not set(cg_test["source"]) & (set(splits["train"]["source"]) | set(splits["validation"]["source"]))
    assert len(set(cg_test["source"])) == 12
    assert all(0 < degree <= 1 for degree in cg_test["degree"])
    assert "degree" in splits["train"].column_names

    card = (tmp_path / "react" / "README.md").read_text(encoding="utf-8")
    for expected in ("dropped by the OOV filter", "n-gram dictionary: 2-grams", "candidate pool (top by degree)",
                     "dropped as noise (top RMI)", "RMI band", "unique novel word 2-grams",
                     "unique novel word 3-grams", "compositional degree (mean)", "Non-overlapping",
                     "no spaCy model for language 'de'", "ensemble members | 3"):
        assert expected in card, expected
    info = read_build_info(tmp_path / "react")
    assert info.parameters["sample"] == 12 and info.seed == 0
    members = [json.loads(path.read_text()) for path in cache.rglob("run.json")]
    assert len(members) == 3 and {member["recipe_family"] for member in members} == {"mt"}
    assert {member["validate_by"] for member in members} == {"loss"}  # the mt recipe's BLEU would decode validation

    second = runner.invoke(app, _arguments(corpus, tmp_path / "react-8", cache, sample=8))
    assert second.exit_code == 0, second.output
    assert "cached stages reused: candidates, ensemble, uncertainty" in " ".join(second.output.split())
    again = load_splits(tmp_path / "react-8")["cg_test"]
    assert len(again) == 8
    # Both samples come from the same band of 20 with seed 0, so they share rows (numpy draws the 8 as the first 8 of
    # the 12); a shared row keeps the RMI the first build computed.
    first = dict(zip(cg_test["id"], cg_test["rmi"]))
    shared = {row["id"]: row["rmi"] for row in again if row["id"] in first}
    assert shared, "the two samples share no row: nothing shows the RMI was reused"
    assert shared == {row_id: first[row_id] for row_id in shared}
