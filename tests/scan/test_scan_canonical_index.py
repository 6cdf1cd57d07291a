"""The SCAN index files shipped in benchbuild/scan/canonical/: what they hold, and that the maintainer script makes
them, byte for byte, from the canonical SCAN files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scan_counts import COMMANDS, SIMPLE

from benchbuild.errors import BenchbuildError
from benchbuild.scan.canonical_index import (
    FOLDER,
    SIMPLE_TEST,
    TASKS_ORDER,
    index_files,
    simple_test_mask,
    tasks_order,
    write_index,
)
from benchbuild.scan.grammar import generate_commands

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_files_are_small_and_carry_scans_licence():
    assert SIMPLE_TEST.stat().st_size == -(-COMMANDS // 8) == 2_614
    assert TASKS_ORDER.stat().st_size == 2 * COMMANDS == 41_820
    notice = (FOLDER / "LICENSE").read_text(encoding="utf-8")
    assert "github.com/brendenlake/SCAN" in notice and "BSD License" in notice
    assert "Redistributions in binary form must reproduce the above copyright notice" in notice


def test_the_simple_mask_flags_a_fifth_of_the_commands_and_the_order_is_a_permutation():
    mask = simple_test_mask()
    assert mask.dtype == bool and len(mask) == COMMANDS and int(mask.sum()) == SIMPLE["test"]
    assert sorted(tasks_order().tolist()) == list(range(COMMANDS))
    with pytest.raises(ValueError):
        mask[0] = not mask[0]  # cached for every later build: read-only


def test_only_simple_and_the_length_cutoffs_read_an_index():
    assert index_files("simple") == {"benchbuild/scan/canonical/simple_test.bits": SIMPLE_TEST}
    assert index_files("length_cutoff_26") == {"benchbuild/scan/canonical/tasks_order.u16le": TASKS_ORDER}
    assert index_files("simple_p8") == index_files("length") == index_files("addprim_jump_num1_rep1") == {}


@pytest.mark.shared
def test_the_order_is_that_of_the_canonical_tasks_txt(shared_data):
    commands = generate_commands()
    lines = (shared_data / "scan" / "tasks.txt").read_text().splitlines()
    assert [commands[i] for i in tasks_order()] == [line[len("IN: "):].split(" OUT: ")[0] for line in lines]


@pytest.mark.shared
def test_the_maintainer_script_regenerates_the_shipped_files_byte_for_byte(shared_data, tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "scan_canonical_index.py"), str(shared_data / "scan"),
                             "--out", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr
    assert "tasks_order.u16le: 41,820 bytes" in result.stdout
    for name in ("simple_test.bits", "tasks_order.u16le", "LICENSE"):
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name


@pytest.mark.shared
def test_a_checkout_whose_simple_files_miss_a_command_is_refused(shared_data, tmp_path):
    scan = tmp_path / "scan"
    (scan / "simple_split").mkdir(parents=True)
    for name in ("tasks.txt", "LICENSE", "simple_split/tasks_train_simple.txt"):
        (scan / name).write_bytes((shared_data / "scan" / name).read_bytes())
    test = (shared_data / "scan" / "simple_split" / "tasks_test_simple.txt").read_text().splitlines()
    (scan / "simple_split" / "tasks_test_simple.txt").write_text("\n".join(test[1:]) + "\n")
    with pytest.raises(BenchbuildError, match="train and test together are not each SCAN command once"):
        write_index(scan, tmp_path / "out")
    assert not (tmp_path / "out").exists()
