"""One row of the report is one configuration: runs of one model on one benchmark split that differ in architecture,
recipe or budget get a row each, named by what differs; a seed given twice is counted once and said; no interval of a
percentage leaves [0, 100]."""

from __future__ import annotations

import shutil

import pytest

from benchbuild.report.rows import ReportRow, build_report, run_configuration
from benchbuild.run_folder import read_run


@pytest.fixture(scope="module")
def mixed_runs(trained_runs, tmp_path_factory):
    """The session's two seeds of tiny_transformer on SCAN, the same model 8 wide (seed 0) and 20 steps longer
    (seed 1), and a copy of seed 0's folder: the same seed of the same configuration given twice."""
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("configurations")
    model = trained_runs.transformer_scan[0].parent.parent / "models" / "tiny_transformer.toml"
    narrow, longer = root / "narrow-seed0", root / "longer-seed1"
    train(model, trained_runs.scan, narrow, seed=0, device="cpu", progress=False,
          architecture_overrides={"d_model": 8, "d_ff": 16})
    train(model, trained_runs.scan, longer, seed=1, device="cpu", progress=False, max_steps=40)
    for run_dir in (narrow, longer):
        evaluate_run(run_dir, trained_runs.scan, device="cpu")
    again = root / "seed0-again"
    shutil.copytree(trained_runs.transformer_scan[0], again)
    return [*trained_runs.transformer_scan, narrow, longer, again]


def exact_match_rows(rows: list[ReportRow]) -> dict[str, ReportRow]:
    return {row.model: row for row in rows if row.metric == "exact_match" and row.benchmark == "scan/tiny"}


def test_runs_of_three_configurations_and_a_repeated_seed_make_three_rows_each_seed_once(mixed_runs):
    rows = exact_match_rows(build_report(mixed_runs))
    assert sorted(rows) == ["tiny_transformer [d_model=16, d_ff=32, steps=20]",
                            "tiny_transformer [d_model=16, d_ff=32, steps=40]",
                            "tiny_transformer [d_model=8, d_ff=16, steps=20]"]
    default = rows["tiny_transformer [d_model=16, d_ff=32, steps=20]"]
    assert default.seeds == [0, 1] and default.repeated_seeds == [0]  # the copy of seed 0 is counted once
    assert rows["tiny_transformer [d_model=8, d_ff=16, steps=20]"].seeds == [0]
    assert rows["tiny_transformer [d_model=16, d_ff=32, steps=40]"].seeds == [1]
    assert default.configuration == "d_model=16, d_ff=32, steps=20"
    # One configuration alone keeps the plain model name.
    alone = exact_match_rows(build_report(mixed_runs[:2]))
    assert list(alone) == ["tiny_transformer"] and alone["tiny_transformer"].seeds == [0, 1]


def test_the_configuration_ignores_the_seed_and_holds_what_changes_the_update(mixed_runs):
    first, second, narrow, longer, again = (run_configuration(read_run(run)) for run in mixed_runs)
    assert first == second == again
    assert narrow["d_model"] == 8 and first["d_model"] == 16 and longer["steps"] == 40
    assert "eval_every" not in first and "seed" not in first and first["recipe"] == "scan"


def test_the_report_says_a_seed_was_counted_once(mixed_runs, tmp_path):
    from benchbuild.report.write import write_report

    write_report(mixed_runs, tmp_path / "report", formats=("md",))
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "seed 0 was given by more than one run of the same configuration: counted once" in " ".join(text.split())
    # The 8-wide runs set architecture keys: a grid configuration of their own; the others differ in budget alone.
    assert "tiny_transformer [steps=40]" in text and "tiny_transformer [steps=20]" in text


@pytest.mark.parametrize(("values", "bounds"), [([0.0, 0.0, 2.0], (0.0, None)), ([100.0, 99.0], (None, 100.0))])
def test_a_t_interval_of_a_percentage_is_clipped_to_0_100_and_says_so(values, bounds):
    row = ReportRow("m", "scan/addprim_jump", "test", "exact_match", values=values, seeds=list(range(len(values))),
                    example_intervals=[None] * len(values))
    (low, high), how = row.interval
    assert 0.0 <= low <= high <= 100.0 and how.endswith("clipped to [0, 100]")
    assert bounds[0] is None or low == bounds[0]
    assert bounds[1] is None or high == bounds[1]
    inside = ReportRow("m", "scan/addprim_jump", "test", "exact_match", values=[40.0, 42.0, 41.0], seeds=[0, 1, 2],
                       example_intervals=[None] * 3)
    assert not inside.interval[1].endswith("clipped to [0, 100]")
