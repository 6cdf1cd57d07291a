"""The SCAN builder: typed parameters in, one `(name, Benchmark)` per splitting out, nothing written."""

from __future__ import annotations

import pytest
from scan_counts import SIMPLE

from benchbuild.errors import BenchbuildError
from benchbuild.fingerprint import sha256_file
from benchbuild.scan.build import build_scan
from benchbuild.scan.canonical_index import SIMPLE_TEST, TASKS_ORDER
from benchbuild.scan.parameters import ScanParameters


def test_each_requested_splitting_comes_out_in_canonical_order_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    built = list(build_scan(ScanParameters(split=["length", "simple_p64", "simple"], seed=3)))
    assert [name for name, _ in built] == ["simple", "simple_p64", "length"]
    simple, simple_p64, length = (benchmark for _, benchmark in built)
    assert {name: len(split) for name, split in simple.splits.items()} == SIMPLE
    assert simple_p64.info.seed == 3 and length.info.seed is None, "a deterministic rule records no seed"
    assert simple_p64.info.parameters == {"splitting": "simple_p64", "source": "grammar + rule"}
    assert list(tmp_path.iterdir()) == []


def test_a_splitting_drawn_from_a_shipped_index_records_its_fingerprint_and_no_seed():
    [(_, simple), (_, cutoff)] = build_scan(ScanParameters(split=["simple", "length_cutoff_26"], seed=3))
    assert simple.info.parameters == {"splitting": "simple", "source": "grammar + canonical index"}
    assert simple.info.inputs == {"benchbuild/scan/canonical/simple_test.bits": sha256_file(SIMPLE_TEST)}
    assert cutoff.info.inputs == {"benchbuild/scan/canonical/tasks_order.u16le": sha256_file(TASKS_ORDER)}
    assert simple.info.seed is None and cutoff.info.seed is None
    assert simple.card.extra["canonical_index"] == ["benchbuild/scan/canonical/simple_test.bits"]


def test_an_unknown_splitting_fails_before_any_work_naming_the_nearest_one_in_a_short_line():
    with pytest.raises(BenchbuildError, match="unknown SCAN split 'addprim_jmp': did you mean 'addprim_jump'") as error:
        ScanParameters(split=["addprim_jmp"]).check()
    message = str(error.value)
    # Not the whole list of 115 names (2,410 characters): how many there are, their families, where to find them.
    assert "115 splittings" in message and "fewshot*" in message and "README.md" in message and len(message) < 250
    with pytest.raises(BenchbuildError, match=r"unknown SCAN split 'zzz': \(115 splittings"):
        ScanParameters(split=["zzz"]).check()


def test_no_splitting_named_means_all_of_them():
    names = ScanParameters().names()
    # simple and its 7 training shares (1-64%); length and its 11 cutoffs (22-40: 003 Table 1, after Newman et al.
    # 2020); the 2 add-primitive splittings and addprim_jump with 1-32 jump commands in training, 5 draws each (Lake &
    # Baroni 2018); 4 templates, 4 filler levels and few-shot with 1-1024 examples, 5 draws each (Loula et al. 2018).
    splittings = (1 + 7) + (1 + 11) + (2 + 6 * 5) + 4 + 4 + 11 * 5
    assert len(names) == splittings == 115 and names[0] == "simple" and names[-1] == "fewshot_num1024_rep5"


@pytest.mark.shared
def test_official_files_are_read_as_is_and_the_card_names_them(shared_data, tmp_path):
    [(name, benchmark)] = build_scan(ScanParameters(split=["length"], official=shared_data / "scan"))
    assert name == "length" and benchmark.info.parameters["source"] == "official files"
    card = (benchmark.save(tmp_path / "length") / "README.md").read_text(encoding="utf-8")
    assert "- **train**: the canonical file `length_split/tasks_train_length.txt` of the SCAN repository, as is" in card
    assert "The rows were read from the canonical SCAN files." in card
