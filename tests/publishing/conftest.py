"""Benchmarks to publish, each written once per session by the command a user runs: SCAN generated from the grammar
(jsonl), a noun-adjective benchmark parsed from Europarl lines (arrow), the published ReaCT test set imported
(parquet), a tiny ReaCT build whose cg_test has columns its train split lacks, and Lake & Baroni's English-French set
(a family whose card cites one of its two papers); and each one's published folder.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild
from small_inputs import build_react, write_lines

# Sentences with a held-out pairing of Table 2 (a noun with an adjective of the other column), appended to the
# Europarl lines so that the test split has rows: the first 300 lines hold none.
SWAPPED_PAIRINGS = [
    ("We need a good response to this crisis.", "Nous avons besoin d'une bonne réponse à cette crise."),
    ("This is a new solution for Europe.", "C'est une nouvelle solution pour l'Europe."),
    ("The Commission took a specific decision yesterday.", "La Commission a pris une décision spécifique hier."),
]


def built(done: subprocess.CompletedProcess, folder: Path) -> Path:
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.fixture(scope="session")
def scan_benchmark(tmp_path_factory) -> Path:
    """`build-scan --split simple --format jsonl`: 16,728 train and 4,182 test rows from the grammar."""
    parent = tmp_path_factory.mktemp("scan")
    return built(benchbuild("build-scan", "--split", "simple", "--format", "jsonl", "--out", parent), parent / "simple")


@pytest.fixture(scope="session")
def europarl_corpus(shared_data):
    """`write(folder, lines, extra)`: the first `lines` aligned lines of the Europarl sample, then the `extra` pairs,
    as `folder/ep.en` and `folder/ep.fr`; returns both paths."""
    sample = shared_data / "europarl-sample"

    def write(folder: Path, lines: int, extra: list[tuple[str, str]]) -> tuple[Path, Path]:
        english = (sample / "europarl-v7.fr-en.en").read_text(encoding="utf-8").split("\n")[:lines]
        french = (sample / "europarl-v7.fr-en.fr").read_text(encoding="utf-8").split("\n")[:lines]
        return (write_lines(folder / "ep.en", english + [en for en, _ in extra]),
                write_lines(folder / "ep.fr", french + [fr for _, fr in extra]))

    return write


@pytest.fixture(scope="session")
def nounadj_benchmark(europarl_corpus, tmp_path_factory) -> Path:
    """`build-noun-adj` (spaCy) on 300 Europarl lines and `SWAPPED_PAIRINGS`: train 266, validation 30, test 3."""
    folder = tmp_path_factory.mktemp("nounadj")
    english, french = europarl_corpus(folder, 300, SWAPPED_PAIRINGS)
    return built(benchbuild("build-noun-adj", "--en", english, "--fr", french, "--out", folder / "na"), folder / "na")


@pytest.fixture(scope="session")
def react_published_benchmark(shared_data, tmp_path_factory) -> Path:
    """`import react` of the published valid/test/cg_test with 300 lowercased WMT14 pairs as train (parquet)."""
    folder = tmp_path_factory.mktemp("react-published")
    wmt = shared_data / "wmt14-ende-sample"
    for side in ("de", "en"):
        lines = (wmt / f"train.{side}").read_text(encoding="utf-8").lower().split("\n")[:300]
        write_lines(folder / f"train.{side}", lines)
    done = benchbuild("import", "react", shared_data / "react", "--split",
                      f"train={folder / 'train.de'},{folder / 'train.en'}", "--format", "parquet", "--out",
                      folder / "react")
    return built(done, folder / "react")


@pytest.fixture(scope="session")
def react_built_benchmark(tmp_path_factory) -> Path:
    """A `build-react` of one tiny ensemble member: train 40 rows (`degree`), cg_test 3 (`degree`, `rmi`,
    `rmi_rank`)."""
    folder = tmp_path_factory.mktemp("react-built")
    done = build_react(folder, ["a b c d e f", "j i h g", "c a e", "b d f h"], "--allow-small", "--pool-size", "10",
                       "--drop-top", "0", "--band", "5", "--sample", "3")
    return built(done, folder / "out")


@pytest.fixture(scope="session")
def lake_baroni_benchmark(tmp_path_factory) -> Path:
    """`build-lake-baroni-fr` on 48 pairs "<subject> <adjective>." written here: train 30 (+ 3 'daxy' copies), test
    18, daxy 8."""
    folder = tmp_path_factory.mktemp("lake-baroni")
    subjects = {"I am": "Je suis", "You are": "Tu es", "He is": "Il est", "She is": "Elle est", "We are": "Nous sommes",
                "They are": "Ils sont"}
    pairs = write_lines(folder / "eng-fra.txt", [f"{english} {adjective}.\t{french} {adjective}."
                                                 for english, french in subjects.items()
                                                 for adjective in ("calm", "sure", "busy", "ready", "late", "here",
                                                                   "free", "tired")])
    done = benchbuild("build-lake-baroni-fr", "--pairs", pairs, "--train-size", "30", "--dax-repetitions", "3",
                      "--out", folder / "lb")
    return built(done, folder / "lb")


@dataclass
class Publication:
    """A benchmark folder, the folder `benchbuild publish` wrote from it, and what the command said."""

    benchmark: Path
    out: Path
    done: subprocess.CompletedProcess


BENCHMARKS = [pytest.param("scan", id="scan"),
              pytest.param("nounadj", id="nounadj", marks=pytest.mark.shared),
              pytest.param("react_published", id="react_published", marks=pytest.mark.shared),
              pytest.param("react_built", id="react_built"),
              pytest.param("lake_baroni", id="lake_baroni")]


@pytest.fixture(scope="session", params=BENCHMARKS)
def publication(request, tmp_path_factory) -> Publication:
    """`benchbuild publish BENCH --out DIR` of each benchmark above."""
    benchmark = request.getfixturevalue(f"{request.param}_benchmark")
    out = tmp_path_factory.mktemp("published") / request.param
    return Publication(benchmark, out, benchbuild("publish", benchmark, "--out", out))
