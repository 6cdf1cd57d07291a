"""Invalid input is refused before the expensive stages, with one line naming what to fix, and nothing written;
a build that cannot give a usable benchmark is refused; a rerun builds only what is missing (real runs on tiny
files; killed builds: test_kill_builds.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import WORDS, build_react, write_lines

from benchbuild.benchmark import read_build_info


def test_react_pool_with_no_in_vocabulary_line_is_refused_before_the_ensemble_trains(tmp_path):
    done = build_react(tmp_path, ["xx yy", "zz qq"], "--allow-small", "--pool-size", "10", "--drop-top", "0",
                       "--band", "5", "--sample", "2")
    refused(done, "no pool sentence is left as a candidate", "2 have a source word seen fewer than")
    assert "training ━" not in done.stderr  # the members' progress bar: the ensemble never started
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "cache").glob("ensemble-*"))


def test_react_allow_small_with_fewer_candidates_than_asked_builds_a_small_cg_test_and_records_the_shortfall(
        tmp_path):
    pool = ["a b c d e f", "j i h g", "c a e"]
    done = build_react(tmp_path, pool, "--allow-small", "--pool-size", "10", "--drop-top", "0", "--band", "5",
                       "--sample", "2")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "candidate pool is 7 sentences short of `pool_size`" in card
    assert "candidate pool (top by degree) | 3" in card


def test_react_fewer_candidates_than_drop_top_is_refused_before_the_ensemble_trains(tmp_path):
    done = build_react(tmp_path, ["a b c d e f", "j i h g"], "--allow-small", "--pool-size", "10", "--drop-top", "5",
                       "--band", "5", "--sample", "2")
    refused(done, "only 2 candidates remain and --drop-top 5")
    assert not (tmp_path / "out").exists()


def test_react_pool_line_longer_than_max_length_is_set_aside_and_counted(tmp_path):
    long_line = " ".join(WORDS[i % len(WORDS)] for i in range(300))
    pool = ["a b c d e f", long_line, "j i h g", "c a e"]
    done = build_react(tmp_path, pool, "--allow-small", "--pool-size", "10", "--drop-top", "0", "--band", "5",
                       "--sample", "3", "--max-length", "100")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "pool: pairs longer than 100 tokens set aside (--max-length) | 1" in card
    assert "candidate pool (top by degree) | 3" in card
    assert read_build_info(tmp_path / "out").parameters["max_length"] == 100


def test_react_empty_training_corpus_is_refused_naming_the_file(tmp_path):
    done = build_react(tmp_path, ["a b c"], "--allow-small", train=[])
    refused(done, "training corpus", "train.de", "no non-empty pair")
    assert not (tmp_path / "out").exists()


def test_react_empty_pool_is_refused_naming_the_file(tmp_path):
    done = build_react(tmp_path, [], "--allow-small")
    refused(done, "candidate pool 0", "pool.de", "no non-empty pair")
    assert not (tmp_path / "out").exists()


NOUNADJ_CORPUS = [
    ("We need a permanent solution to this problem.", "Nous avons besoin d'une solution permanente à ce problème."),
    ("The Commission found a new solution for the farmers.",
     "La Commission a trouvé une nouvelle solution pour les agriculteurs."),
    ("This is a good decision.", "C'est une bonne décision."),
    ("Parliament took a specific decision yesterday.", "Le Parlement a pris une décision spécifique hier."),
    ("The report is about energy.", "Le rapport porte sur l'énergie."),
    ("The institutions are open.", "Les institutions sont ouvertes."),
]


def _noun_adj(tmp_path: Path, pairs: list[tuple[str, str]]) -> list[str]:
    en = write_lines(tmp_path / "corpus.en", [english for english, _ in pairs])
    fr = write_lines(tmp_path / "corpus.fr", [french for _, french in pairs])
    return ["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(tmp_path / "out")]


def test_noun_adj_empty_corpus_is_refused_naming_the_files(tmp_path):
    done = benchbuild(*_noun_adj(tmp_path, []))
    refused(done, "corpus.en", "corpus.fr", "is empty")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.en", "corpus.fr"]


def test_noun_adj_corpus_without_a_target_noun_is_refused_as_an_empty_test_split(tmp_path):
    corpus = [("The weather is nice today.", "Il fait beau aujourd'hui."), ("We thank the rapporteur.",
                                                                            "Nous remercions le rapporteur.")]
    done = benchbuild(*_noun_adj(tmp_path, corpus))
    refused(done, "corpus.en", "holds a target noun", "test split would be empty")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.en", "corpus.fr"]


def _scan(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return benchbuild("build-scan", "--split", "simple", "--split", "addprim_jump", "--out", out, *extra)


def test_scan_rerun_of_the_same_command_builds_only_the_missing_splittings(tmp_path):
    import shutil

    assert _scan(tmp_path / "scan").returncode == 0
    kept = {path: path.stat().st_mtime_ns for path in (tmp_path / "scan" / "addprim_jump").rglob("*")}
    shutil.rmtree(tmp_path / "scan" / "simple")  # as if the first run had been killed before `simple`

    rerun = _scan(tmp_path / "scan")
    assert rerun.returncode == 0, rerun.stderr
    assert "wrote 1 SCAN benchmark(s)" in rerun.stdout and "kept 1" in rerun.stdout
    assert (tmp_path / "scan" / "simple" / "build.json").is_file()
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "scan" / "addprim_jump").rglob("*")} == kept


def test_scan_rerun_with_other_options_still_needs_overwrite_naming_the_folder(tmp_path):
    assert _scan(tmp_path / "scan").returncode == 0
    card = (tmp_path / "scan" / "simple" / "README.md").read_bytes()
    done = _scan(tmp_path / "scan", "--format", "jsonl")
    refused(done, str(tmp_path / "scan" / "simple"), "--overwrite")
    assert (tmp_path / "scan" / "simple" / "README.md").read_bytes() == card
    assert not (tmp_path / "scan" / "simple" / "data").exists()


def test_noun_adj_build_whose_test_split_would_be_empty_is_refused_naming_allow_small_and_writes_nothing(tmp_path):
    corpus = [NOUNADJ_CORPUS[index] for index in (0, 2, 4, 5)]  # target nouns, but none with a held-out pairing
    done = benchbuild(*_noun_adj(tmp_path, corpus))
    refused(done, "the test split would be empty", "none of the 3 sentences holding a target noun has a held-out "
            "pairing", "give a larger corpus", "--allow-small")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.en", "corpus.fr"]  # no output, no work folder


def test_noun_adj_require_reference_match_dropping_every_test_row_is_refused_naming_it(tmp_path):
    corpus = [("The first solution was rejected.", "La solution initiale a été rejetée."), NOUNADJ_CORPUS[0]]
    done = benchbuild(*[*_noun_adj(tmp_path, corpus), "--require-reference-match"])
    refused(done, "--require-reference-match dropped all 1 sentences with a held-out pairing", "--allow-small")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.en", "corpus.fr"]


def test_noun_adj_allow_small_saves_an_empty_test_split_and_says_so_on_stderr_and_in_the_card(tmp_path):
    corpus = [NOUNADJ_CORPUS[index] for index in (0, 2, 4, 5)]
    done = benchbuild(*[*_noun_adj(tmp_path, corpus), "--allow-small"])
    assert done.returncode == 0, done.stderr
    assert "warning: the test split is empty (saved with --allow-small" in done.stderr
    assert "test 0" in done.stdout
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "| rows: test | 0 |" in card and "No test rows." in card
