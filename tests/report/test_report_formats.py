"""`write_report` over real tiny runs: every format is written, every figure the runs allow is drawn and not blank,
the LaTeX table carries the CSV's numbers and the papers' table references, the page links what it shows."""

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.shared

EXPECTED_FIGURES = {
    "learning curves scan/tiny", "learning curves react/tiny", "learning curves nounadj/tiny", "results",
    "bleu by degree react/tiny (cg_test)", "noun adjective pairs nounadj/tiny (test)",
    "relative position biases tiny_sag_t5 scan/tiny seed 0", "degree histogram react/tiny",
    "length histograms scan/tiny", "per-seed results",
}


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def unescape(latex: str) -> str:
    return latex.replace("\\_", "_")


def latex_cells(text: str, label: str = "Ours") -> dict[tuple[str, str, str, str],
                                                         tuple[float, float | None, tuple[float, float] | None]]:
    """(model, benchmark, split, metric name) -> (number, its ± part, the bracketed interval after it) of every cell
    under sub-heading `label` ("Ours": mean, standard error and 95% CI; "As paper": the paper's statistic and its
    spread) of the table."""
    lines = text.splitlines()
    top = lines.index("\\toprule")
    groups, metrics = [], []  # per table column after the model's
    for width, benchmark, split in re.findall(r"\\multicolumn\{(\d+)\}\{c\}\{(.*?) \((.*?)\)\}", lines[top + 1]):
        groups += [(unescape(benchmark), unescape(split))] * int(width)
    for width, metric in re.findall(r"\\multicolumn\{(\d+)\}\{c\}\{(.*?)\}", lines[top + 2]):
        metrics += [metric] * int(width)
    labels = lines[top + 4].removesuffix(" \\\\").split(" & ")[1:]
    cells = {}
    for line in lines[lines.index("\\midrule") + 1:lines.index("\\bottomrule")]:
        parts = [part.strip() for part in line.removesuffix("\\\\").split(" & ")]
        for index, (benchmark, split) in enumerate(groups):
            found = re.fullmatch(r"\$(-?[\d.]+)(?: \\pm ([\d.]+))?\$(?:\\textsuperscript\{[\d,]+\})?"
                                 r"(?: \{\\scriptsize \$\[(-?[\d.]+), (-?[\d.]+)\]\$\})?", parts[1 + index])
            if labels[index] == label and found:
                cells[(unescape(parts[0]), benchmark, split, metrics[index])] = (
                    float(found.group(1)), None if found.group(2) is None else float(found.group(2)),
                    None if found.group(3) is None else (float(found.group(3)), float(found.group(4))))
    return cells


def test_every_format_is_written_under_the_prefix(full_report):
    suffixes = sorted(path.suffix for path in full_report.files)
    assert suffixes == [".bib", ".csv", ".html", ".md", ".tex"]
    assert all(path.is_file() and path.stat().st_size > 0 for path in full_report.files)


def test_each_figure_the_runs_allow_is_drawn_as_a_non_blank_png_and_a_pdf(full_report):
    from matplotlib.image import imread

    assert {figure.title for figure in full_report.figures} == EXPECTED_FIGURES
    for figure in full_report.figures:
        pixels = imread(figure.png)[..., :3]
        not_white = (pixels < 0.95).any(axis=-1).mean()
        assert pixels.std() > 0.05 and not_white > 0.02, figure.title
        assert figure.pdf.read_bytes().startswith(b"%PDF"), figure.title


def test_the_latex_table_holds_the_csv_numbers_at_two_decimals(full_report):
    prefix = full_report.files[0].with_suffix("")
    cells = latex_cells(prefix.with_suffix(".tex").read_text(encoding="utf-8"))
    names = {"exact_match": "exact match", "bleu": "BLEU", "comp": "COMP"}
    table = {(r["model"], r["benchmark"], r["split"], names.get(r["metric"], r["metric"])): r
             for r in read_csv(prefix.with_suffix(".csv"))}
    assert cells, "no number parsed from the LaTeX table"
    for key, (mean, error, interval) in cells.items():
        row = table[key]
        assert mean == pytest.approx(float(row["mean"]), abs=0.005 + 1e-9), key
        if row["standard_error"]:
            assert error == pytest.approx(float(row["standard_error"]), abs=0.005 + 1e-9), key
        else:
            assert error is None, key
        if row["ci_low"]:  # the 95% CI after it, as the CSV's bounds
            assert interval == pytest.approx((float(row["ci_low"]), float(row["ci_high"])), abs=0.005 + 1e-9), key
        else:
            assert interval is None, key
    assert any(interval is not None and interval[0] < interval[1] for _, _, interval in cells.values())
    # The headline numbers are all there: exact match on SCAN, BLEU on ReaCT, BLEU and COMP (reported) on nounadj.
    assert {key[2:] for key in cells} >= {("test", "exact match"), ("cg_test", "BLEU"), ("test", "COMP")}
    # Beside each paper number, ours by the paper's statistic (the catalogue's default: a mean, no spread).
    as_paper = latex_cells(prefix.with_suffix(".tex").read_text(encoding="utf-8"), "As paper")
    assert set(as_paper) == {key for key, row in table.items() if (row["paper"] or row["published"]) and key in cells}
    for key, (value, spread, _) in as_paper.items():
        assert value == pytest.approx(float(table[key]["ours_by_paper_statistic"]), abs=0.005 + 1e-9), key
        assert spread is None and table[key]["ours_statistic"].startswith("mean of "), key


def test_the_latex_table_puts_the_papers_number_beside_ours_with_its_table(full_report):
    text = full_report.files[0].with_suffix(".tex").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("tiny\\_transformer &"))
    legend = next(line for line in text.splitlines() if "Paper:" in line)
    mark = re.search(r"\$50\^\{(\w)\}\$", line).group(1)
    assert f"$^{{{mark}}}$~test Table 1" in legend
    assert "\\toprule" in text and "\\bottomrule" in text and text.rstrip().endswith("\\end{tabular}")


def test_seeds_of_a_model_are_averaged_with_their_standard_error(full_report, trained_runs):
    exact = [json.loads((run / "metrics.json").read_text())["exact_match"] for run in trained_runs.transformer_scan]
    row = next(r for r in full_report.rows if (r.model, r.benchmark, r.metric) ==
               ("tiny_transformer", "scan/tiny", "exact_match"))
    assert row.values == exact and row.mean == pytest.approx(np.mean(exact))
    assert row.standard_error == pytest.approx(np.std(exact, ddof=1) / np.sqrt(2))
    assert (row.paper, row.paper_source) == (50.0, "test Table 1")


def test_the_page_links_existing_figures_predictions_and_run_folders(full_report):
    page = next(path for path in full_report.files if path.suffix == ".html")
    html = page.read_text(encoding="utf-8")
    links = re.findall(r'(?:src|href)="([^"]+)"', html)
    local = [link for link in links if not link.startswith(("data:", "#"))]
    assert sum(link.endswith("predictions.jsonl") for link in local) == 5
    assert sum(link.endswith(".png") for link in local) == len(EXPECTED_FIGURES)
    from urllib.parse import unquote

    assert all((page.parent / unquote(link)).exists() for link in local), local
    assert "http://" not in html and "https://" not in html


def test_the_error_view_marks_where_prediction_and_reference_differ(full_report, trained_runs):
    html = full_report.files[0].with_suffix(".html").read_text(encoding="utf-8")
    wrong = [json.loads(line) for line in (trained_runs.transformer_react / "predictions.jsonl").read_text()
             .splitlines() if not json.loads(line)["correct"]]
    assert wrong, "the tiny ReaCT run should get some rows wrong"
    assert "<del>" in html and "<ins>" in html
    assert f"tiny_transformer seed 0: {len(wrong)} of 20 wrong" in html


def test_markdown_keeps_the_table_and_adds_what_is_missing(full_report):
    markdown = full_report.files[0].with_suffix(".md").read_text(encoding="utf-8")
    # What the runs lack first, as on the page (README), under the comment that marks the file as benchbuild's.
    assert markdown.startswith("<!-- Written by `benchbuild report` -->\n\n## What is missing\n")
    assert markdown.index("## What is missing") < markdown.index("| model | benchmark | split | metric |")
    assert "tiny_sag_t5 on scan/tiny (test): one seed (0), so no standard error." in markdown
    assert "tiny_sag_t5 on scan/tiny (test): the catalogue has no paper number for exact_match." in markdown
