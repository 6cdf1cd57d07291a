"""The reproduction ledger (benchbuild/ledger.toml, benchbuild/ledger.py): one record per number the catalogue quotes,
every stored status the one its runs support, the docs table generated from it, and `zoo` showing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild

from benchbuild.ledger import (TABLE_END, TABLE_START, LedgerRecord, LedgerRun, assess, catalogue_numbers, key_of,
                               load_ledger, markdown_table)
from benchbuild.zoo import list_entries

ROOT = Path(__file__).resolve().parent.parent
LEDGER = load_ledger()
NUMBERS = catalogue_numbers(list_entries())


def reported(model: str, benchmark: str, table: str) -> dict:
    return next(row for name, row in NUMBERS if name == model and row["benchmark"] == benchmark
                and row["table"] == table)


def runs(*values, **fields) -> tuple[LedgerRun, ...]:
    return tuple(LedgerRun(seed=seed, value=value, **fields) for seed, value in enumerate(values))


def record(model="m", runs_=(), status="not run") -> LedgerRecord:
    return LedgerRecord(model=model, benchmark="b", metric="exact_match", table="t", status=status, runs=runs_)


def test_every_catalogue_number_has_one_record_and_every_record_a_number():
    keys = [key_of(model, row) for model, row in NUMBERS]
    assert len(keys) == len(set(keys)) == 96
    assert set(LEDGER) == set(keys)


@pytest.mark.parametrize("model,row", NUMBERS, ids=[" ".join(key_of(m, r)) for m, r in NUMBERS])
def test_each_stored_status_is_the_one_its_runs_support(model, row):
    entry = LEDGER[key_of(model, row)]
    assessment = assess(entry, row)
    assert entry.status == assessment.status, assessment.in_words()
    if assessment.status == "not reproduced":
        assert entry.ruled_out, "a number not reproduced says what has been ruled out"
    if entry.runs:
        assert entry.command, "a record with runs names the command that reproduces them"
    for run in entry.runs:
        assert run.value is None or (row["metric"] != "exact_match" or 0.0 <= run.value <= 100.0)
        if run.interval is not None:
            assert run.interval[0] <= run.value <= run.interval[1]
        assert run.date and run.device


def test_the_status_claims_no_more_than_the_runs_show():
    jump = reported("transformer", "scan/addprim_jump", "000 Table 3")  # 3.4 ± 2.0 (se) over 3 runs
    assert assess(record(runs_=runs(2.18, 2.78, 1.70)), jump).status == "reproduced"
    # two seeds are fewer than the paper's three: partial, whatever their values
    assert assess(record(runs_=runs(3.4, 3.4)), jump).status == "partial"
    # a run short of the protocol does not count
    short = runs(2.18, 2.78) + (LedgerRun(seed=2, value=1.7, protocol="first 4,000 of 14,327 steps"),)
    assert assess(record(runs_=short), jump).status == "partial"
    # three seeds far from the paper: outside the spread, and Welch's test rejects
    far = assess(record(runs_=runs(40.0, 41.0, 42.0)), jump)
    assert far.status == "not reproduced" and "rejects" in far.rule
    t5 = reported("sag_t5", "scan/addprim_jump", "000 Table 3")  # 43.0 ± 9.5 (se)
    assert assess(record(runs_=runs(30.0, 35.0, 38.0)), t5).status == "reproduced"  # within one SEM: 34.3
    assert assess(record(), t5).status == "not run"


def test_002s_exclusion_rule_is_applied_from_each_seeds_train_exact_match():
    jump = reported("syntactic_attention", "scan/addprim_jump", "002 Table 1")  # median of 25, ≤ 10% excluded
    assert jump["min_train_exact_match"] == 10.0 and jump["runs"] == 25
    trained = [LedgerRun(seed=seed, value=90.0 + seed % 5, train_exact_match=99.0) for seed in range(25)]
    untrained = [LedgerRun(seed=25 + seed, value=0.0, train_exact_match=8.0) for seed in range(5)]
    result = assess(record(runs_=tuple(trained + untrained)), jump)
    assert result.status == "reproduced" and result.counted == 25 and result.ours == 92.0
    # without the rule's exclusion the 5 untrained runs would pull the median down; with 4 trained runs too few
    few = assess(record(runs_=tuple(trained[:24] + untrained)), jump)
    assert few.status == "partial" and "5 excluded" in few.reason and few.counted == 24
    # a run whose train exact match was not measured cannot be counted under the rule
    unscored = [LedgerRun(seed=seed, value=90.0) for seed in range(25)]
    result = assess(record(runs_=tuple(unscored)), jump)
    assert result.status == "partial" and "25 without a train exact match" in result.reason


def test_a_median_without_spread_is_compared_with_our_runs_range():
    cutoff = reported("universal_transformer", "scan/length_cutoff_26", "003 Table 1")  # median 21 of 5, no spread
    assert assess(record(runs_=runs(5.0, 15.0, 22.0, 30.0, 60.0)), cutoff).status == "reproduced"
    assert assess(record(runs_=runs(50.0, 55.0, 60.0, 70.0, 80.0)), cutoff).status == "not reproduced"


def test_the_docs_table_is_the_ledger():
    text = (ROOT / "docs" / "catalogue.md").read_text(encoding="utf-8")
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    assert text[start:end] == markdown_table(list_entries(), LEDGER), "run tools/ledger_table.py"
    assert text[start:end].count("\n| `") == 96


def test_each_table_row_has_its_seven_cells_though_a_rule_writes_bars():
    # "outside the paper's spread: |92.26 - 100| > 0": the bars are escaped, so a renderer keeps them in the cell
    table = markdown_table(list_entries(), LEDGER)
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    spread_rules = [line for line in rows if "outside the paper's spread" in line]
    assert spread_rules and all("\\|" in line for line in spread_rules)
    for line in rows:
        cells = line.replace("\\|", "").split("|")[1:-1]
        assert len(cells) == 7, line


def test_zoo_shows_the_status_beside_each_number_and_carries_it_in_json():
    text = " ".join(benchbuild("zoo", "--model", "syntactic_attention").stdout.split())
    assert "[partial] scan/addprim_jump exact_match 91 (002 Table 1)" in text
    # its 5 seeds: 99.89 against 100.0 ± 0.0 over 5 runs, Welch's test does not reject equality (p = 0.35)
    assert "[reproduced] scan/simple exact_match 100 (002 Table 1)" in text
    assert "[reproduced] scan/length exact_match 15.2 (002 Table 1)" in text  # by Welch's test (p = 0.61)
    assert "[not run] lake_baroni_en_fr/syntactic_attention_mt bleu 36.8 (002 Table 3)" in text
    listing = benchbuild("zoo", "--format", "json").stdout
    models = {model["name"]: model for model in json.loads(listing)["models"]}
    jump = next(row for row in models["transformer"]["reported"] if row["benchmark"] == "scan/addprim_jump")
    assert jump["ours"]["status"] == "reproduced" and jump["ours"]["values"] == [2.18, 2.78, 1.7]
    assert jump["ours"]["command"].startswith("benchbuild build-scan")
    assert sum(len(model["reported"]) for model in models.values()) == 96


def test_tools_ledger_run_prints_a_block_the_ledger_reads_back(tmp_path):
    """tools/ledger_run.py: the `[[number.runs]]` block of an evaluated run folder, which the ledger's own parser
    reads into the run's figures; an unfinished run is refused."""
    import hashlib
    import sys

    from benchbuild.ledger import _parsed

    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from ledger_run import record as ledger_block
    finally:
        sys.path.remove(str(ROOT / "tools"))
    run = tmp_path / "seed3"
    (run / "train-eval").mkdir(parents=True)
    state = {"status": "complete", "seed": 3, "environment": {"benchbuild_commit": "0123456789abcdef"},
             "steps_done": 200000, "step_budget": 200000, "stopped_by": "step budget",
             "segments": [{"from_step": 0, "benchbuild_commit": "a35cb7e0", "benchbuild_dirty": False},
                          {"from_step": 79327, "benchbuild_commit": "0123456789abcdef", "benchbuild_dirty": True}]}
    (run / "run.json").write_text(json.dumps(state), encoding="utf-8")
    validations = [(25000 * k, value) for k, value in enumerate([12.0, 100.0, 99.0, 97.25, 99.5, 98.0, 99.75], 1)]
    (run / "train_log.jsonl").write_text("".join(
        json.dumps({"step": step, "loss": 0.1}) + "\n" + json.dumps({"step": step, "validation_exact_match": value})
        + "\n" for step, value in validations) + '{"step": 175001, "loss": 0.', encoding="utf-8")  # cut by a kill
    (run / "metrics.json").write_text(json.dumps({"split": "test", "exact_match": 41.23456, "selected_step": 50000,
                                                   "exact_match_ci": [40.1049, 42.3651]}), encoding="utf-8")
    (run / "train-eval" / "metrics.json").write_text(json.dumps({"exact_match": 9.996}), encoding="utf-8")
    block = ledger_block(run, "2-core CPU", "2026-12-05")
    parsed = _parsed(f'[[number]]\nmodel = "m"\nbenchmark = "b"\nmetric = "exact_match"\ntable = "t"\n'
                     f'status = "partial"\n\n{block}\n')
    (filed,) = next(iter(parsed.values())).runs
    assert filed == LedgerRun(seed=3, value=41.23, interval=(40.1, 42.37), train_exact_match=10.0, steps=50000,
                              commit="0123456", device="2-core CPU", date="2026-12-05",
                              metrics_sha256=hashlib.sha256((run / "metrics.json").read_bytes()).hexdigest(),
                              note="validation 12.00% at 25,000, 100.00% at 50,000 (kept), ..., 99.50% at 125,000, "
                                   "98.00% at 150,000, 99.75% at 175,000; 200,000 of 200,000 updates (step budget); "
                                   "trained from 0 at a35cb7e, from 79,327 at 0123456 with uncommitted changes")
    (run / "run.json").write_text(json.dumps({**state, "status": "running"}), encoding="utf-8")
    with pytest.raises(SystemExit, match="not complete"):
        ledger_block(run, "2-core CPU", "2026-12-05")
