"""The 95% confidence interval beside every mean of a report's grid tables and of the LaTeX table: the t-interval over
seeds where a configuration has several, the one run's bootstrap over its test rows where it has one, nothing where
neither is known. The intervals are recomputed here from Student's t quantile, on seeds whose values differ."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from scipy.stats import t

from benchbuild.report.grid import Configuration, Grid, GridCell, html_grid, latex_grid, markdown_grid
from benchbuild.report.latex import latex_table
from benchbuild.report.rows import ReportRow

WIDE = [31.5, 47.0, 40.25]  # three seeds of one configuration
NARROW = [52.0, 53.5]  # two of the other, the rule's pick
BOOTSTRAP = [61.2, 70.8]  # the recorded bootstrap interval of a one-seed run


def t_interval(values: list[float]) -> tuple[float, float]:
    mean = statistics.mean(values)
    half = t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean - half, mean + half


def row(model: str, values: list[float], intervals: list | None = None) -> ReportRow:
    return ReportRow(model, "scan/addprim_jump", "test", "exact_match", values=list(values),
                     seeds=list(range(len(values))), example_intervals=intervals or [None] * len(values))


@pytest.fixture
def grid() -> Grid:
    wide = Configuration("sag", {"span": 1}, [Path("a")], [row("sag", WIDE)])
    narrow = Configuration("sag", {"span": 2}, [Path("b")], [row("sag", NARROW)])
    single = Configuration("tf", {"layers": 4}, [Path("c")], [row("tf", [66.0], [BOOTSTRAP])])
    cells = [GridCell("sag", "scan/addprim_jump", "test", "exact_match", [wide, narrow], narrow),
             GridCell("tf", "scan/addprim_jump", "test", "exact_match", [single], single)]
    return Grid("best_mean", cells, [narrow.rows[0], single.rows[0]], {Path("b"), Path("c")})


def test_the_fixture_intervals_have_a_width_and_differ():
    low, high = t_interval(WIDE)
    assert high - low > 10 and t_interval(NARROW) != (low, high)


def test_the_markdown_grid_gives_every_configuration_its_interval(grid):
    text = markdown_grid(grid)
    picked, every = text.split("Every configuration")
    for values, label in ((WIDE, "span-1"), (NARROW, "**span-2**")):
        low, high = t_interval(values)
        line = next(line for line in every.splitlines() if f"| {label} |" in line)
        assert line.endswith(f"| [{low:.2f}, {high:.2f}]: t-interval of the mean over {len(values)} seeds |"), line
    low, high = t_interval(NARROW)
    assert f"| 52.75 ± 0.75 | [{low:.2f}, {high:.2f}]: t-interval of the mean over 2 seeds | " in picked
    one_seed = next(line for line in picked.splitlines() if line.startswith("| tf |"))
    assert "| 66.00 | [61.20, 70.80]: bootstrap over the test rows (the run's metrics.json) | " in one_seed


def test_the_latex_grid_sets_the_interval_after_the_picks_mean(grid):
    text = latex_grid(grid)
    low, high = t_interval(NARROW)
    line = next(line for line in text.splitlines() if line.startswith("sag & "))
    assert f"& $52.75 \\pm 0.75$ {{\\scriptsize $[{low:.2f}, {high:.2f}]$}} & " in line
    assert "& $66.00$ {\\scriptsize $[61.20, 70.80]$} & " in text
    assert "in brackets its 95\\% confidence interval" in text


def test_the_html_grid_gives_every_configuration_its_interval(grid):
    cells = {cell["model"]: cell for cell in html_grid(grid)["cells"]}
    low, high = t_interval(NARROW)
    assert cells["sag"]["ci"] == f"[{low:.2f}, {high:.2f}]"
    wide_low, wide_high = t_interval(WIDE)
    assert [c["ci"] for c in cells["sag"]["configurations"]] == [f"[{wide_low:.2f}, {wide_high:.2f}]",
                                                                f"[{low:.2f}, {high:.2f}]"]
    assert cells["tf"]["ci"] == "[61.20, 70.80]"


def test_the_latex_table_sets_each_ours_cell_s_interval_after_it_and_none_where_none_is_known():
    rows = [row("sag", WIDE), row("tf", [66.0], [BOOTSTRAP]), row("old", [12.0])]
    text = latex_table(rows)
    cells = {line.split(" & ")[0]: line.split(" & ")[1] for line in text.splitlines()
             if re.match(r"(sag|tf|old) & ", line)}
    low, high = t_interval(WIDE)
    mean, error = statistics.mean(WIDE), statistics.stdev(WIDE) / 3 ** 0.5
    assert cells["sag"] == f"${mean:.2f} \\pm {error:.2f}$ {{\\scriptsize $[{low:.2f}, {high:.2f}]$}}"
    assert cells["tf"] == "$66.00$ {\\scriptsize $[61.20, 70.80]$}"
    assert cells["old"] == "$12.00$"  # evaluated before intervals were recorded: no bracket
    assert "then in brackets its 95\\% confidence interval: the t-interval over seeds" in text


def test_the_grid_says_how_much_of_the_picks_mean_is_selection(grid):
    """Beside the pick, the best, median and worst of the configurations' means (issue #43: 000's numbers are the
    best of a grid), in the Markdown picks table and on the page; nothing for a cell of one configuration."""
    means = sorted([statistics.mean(WIDE), statistics.mean(NARROW)], reverse=True)
    spread = (f"best of 2 configurations' means {means[0]:.2f}, their median {statistics.median(means):.2f}, the "
              f"worst {means[1]:.2f}")
    picked = markdown_grid(grid).split("Every configuration")[0]
    sag = next(line for line in picked.splitlines() if line.startswith("| sag |"))
    assert sag.endswith(f"| {spread} |")
    assert next(line for line in picked.splitlines() if line.startswith("| tf |")).endswith("|  |")
    cells = {cell["model"]: cell for cell in html_grid(grid)["cells"]}
    assert cells["sag"]["spread"] == spread and cells["tf"]["spread"] == ""
