"""`benchbuild build-react` end to end on the shared IWSLT14/WMT14 files, with a tiny 3-member ensemble on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.cli import app

TINY = ["--ensemble-architecture", "d_model=32", "--ensemble-architecture", "num_heads=2",
        "--ensemble-architecture", "d_ff=64", "--ensemble-architecture", "encoder_layers=1",
        "--ensemble-architecture", "decoder_layers=1", "--ensemble-set", "bpe_vocab_size=2000",
        "--ensemble-set", "batch_size=16", "--ensemble-set", "warmup_steps=10", "--ensemble-set", "eval_every=1000"]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """IWSLT14 valid + test as the training corpus (its last 8 pairs as validation); pool: cg_test + WMT14 sample."""
    react, folder = shared_data / "react", tmp_path_factory.mktemp("react-inputs")
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    de = read(react / "valid.de") + read(react / "test.de")
    en = read(react / "valid.en") + read(react / "test.en")
    return {
        "train": (_write(folder / "train.de", de[:-8]), _write(folder / "train.en", en[:-8])),
        "valid": (_write(folder / "valid.de", de[-8:]), _write(folder / "valid.en", en[-8:])),
        "pool": [(react / "cg_test.de", react / "cg_test.en"),
                 (shared_data / "wmt14-ende-sample" / "train.de", shared_data / "wmt14-ende-sample" / "train.en")],
    }


def _arguments(corpus, out: Path, cache: Path, sample: int) -> list[str]:
    arguments = ["build-react", "--out", str(out), "--train-src", str(corpus["train"][0]),
                 "--train-tgt", str(corpus["train"][1]), "--valid-src", str(corpus["valid"][0]),
                 "--valid-tgt", str(corpus["valid"][1])]
    for source, target in corpus["pool"]:
        arguments += ["--pool-src", str(source), "--pool-tgt", str(target)]
    return arguments + ["--lowercase", "--pool-size", "40", "--ensemble-size", "3", "--max-steps", "150", *TINY,
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
    by_id = dict(zip(cg_test["id"], cg_test["rmi"]))
    assert all(by_id.get(row["id"], row["rmi"]) == row["rmi"] for row in again)
