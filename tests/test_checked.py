"""`benchbuild zoo --model` says what each entry was checked against (benchbuild/checked.py): every catalogue entry
has a statement, and a claim of "tested equal" names a test module that exists and runs the authors' code."""

from __future__ import annotations

from pathlib import Path

from commands import benchbuild_in_process as benchbuild

from benchbuild.checked import CHECKS
from benchbuild.zoo import list_entries

ROOT = Path(__file__).resolve().parent.parent


def test_every_entry_says_what_it_was_checked_against_and_tested_claims_have_their_tests():
    assert {entry.name for entry in list_entries()} == set(CHECKS)
    for name, check in CHECKS.items():
        assert check.how in ("tested equal", "read", "paper only"), name
        if check.how == "tested equal":
            module = ROOT / check.tests
            assert module.is_file() and "pytest.mark.reference" in module.read_text(encoding="utf-8"), name
            assert "@" in check.against  # a repository at a commit


def test_zoo_model_prints_it():
    text = " ".join(benchbuild("zoo", "--model", "syntactic_attention").stdout.split())
    assert ("Checked: tested equal to jlrussin/syntactic_attention @ f8219ca (SyntacticAttention.py, train_test.py) "
            "(tests/reference/test_syntactic_attention_002.py)") in text
    sag_t5 = " ".join(benchbuild("zoo", "--model", "sag_t5").stdout.split())
    assert "Checked: no public code: checked against the paper's text" in sag_t5 and "robertodessi/fairseq" in sag_t5


def test_every_statement_reads_whole():
    from benchbuild.checked import checked_against

    for name, check in CHECKS.items():
        words = checked_against(name)
        assert not words.rstrip(".").endswith((";", ":", " ")) and "; ." not in words and check.what, name
        assert bool(check.tests) == (check.how == "tested equal"), name
