"""`benchbuild zoo` lists every catalogue model with its paper and summary."""

from __future__ import annotations

from typer.testing import CliRunner

from benchbuild import cli
from benchbuild.zoo import list_entries


def test_zoo_command_lists_every_model_with_paper_and_summary(monkeypatch):
    monkeypatch.setattr(cli.out, "width", 400)  # one table row per model, nothing wrapped
    result = CliRunner().invoke(cli.app, ["zoo"])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 4}
    for entry in list_entries():
        assert entry.paper in rows[entry.name] and entry.summary in rows[entry.name]
    assert len([name for name in rows if name != "name"]) == len(list_entries())
