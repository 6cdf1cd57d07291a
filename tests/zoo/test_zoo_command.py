"""`benchbuild zoo` lists every catalogue model (kind, paper ids, summary) readably at 80 columns; `--papers` the
papers it cites."""

from __future__ import annotations

from typer.testing import CliRunner

from benchbuild import cli
from benchbuild.papers import PAPERS
from benchbuild.zoo import list_entries


def zoo(monkeypatch, *args: str, width: int = 80) -> list[str]:
    monkeypatch.setattr(cli.out, "width", width)
    result = CliRunner().invoke(cli.app, ["zoo", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def blocks(lines: list[str]) -> dict[str, str]:
    """Each model's block (its name on a line of its own, then indented lines) as one whitespace-joined text."""
    found: dict[str, list[str]] = {}
    for line in lines[1:]:
        if line and not line.startswith(" "):
            found[line] = []
        elif line:
            found[list(found)[-1]].append(line.strip())
    return {name: " ".join(text) for name, text in found.items()}


def test_zoo_lists_every_model_with_kind_paper_and_summary_within_80_columns(monkeypatch):
    lines = zoo(monkeypatch)
    assert max(map(len, lines)) <= 80 and not any(line.endswith(" ") for line in lines)
    listed = blocks(lines)
    entries = list_entries()
    assert list(listed) == [entry.name for entry in entries]
    for entry in entries:
        assert listed[entry.name].startswith(f"{entry.architecture['kind']} · paper {entry.paper}")
        assert listed[entry.name].endswith(entry.summary)
    assert "extends sag" in listed["sag_t5"] and "extends" not in listed["transformer"]


def test_zoo_papers_gives_every_paper_its_full_citation_and_models(monkeypatch):
    lines = zoo(monkeypatch, "--papers")
    assert max(map(len, lines)) <= 80
    assert [line[:3] for line in lines if line and not line.startswith(" ")] == list(PAPERS)
    text = " ".join(" ".join(lines).split())
    for paper in PAPERS.values():
        assert f"{paper.id} {paper.citation()} benchbuild: {paper.implements}" in text
    assert "zoo: dangle, rdangle_sep, rdangle_shr" in text


def test_zoo_model_shows_each_recipe_familys_architecture_and_parameter_count(monkeypatch):
    lines = zoo(monkeypatch, "--model", "transformer")
    assert max(map(len, lines)) <= 80 and lines[0] == "transformer"
    text = " ".join(" ".join(lines).split())
    mt, scan = text.split("[recipe.mt] ")[1].split("[recipe.scan] ")
    assert "d_model = 512" in mt and "encoder_layers = 6" in mt and "dropout = 0.3" in mt
    assert "select = best_validation" in mt and "(vocabulary 10,000)" in mt
    assert "d_model = 128" in scan and "select = last" in scan and "keys this recipe changes: none" in scan
    assert int(mt.split(" parameters")[0].replace(",", "")) > 30_000_000 > int(scan.split(" parameters")[0]
                                                                               .replace(",", ""))
