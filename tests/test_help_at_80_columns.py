"""Every `--help` read at 80 columns (a laptop terminal) shows each option's full name, no `<bool>` on flags, no
cut-off text, and the command list gives each command's first sentence whole."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from benchbuild.cli import app

COMMAND = typer.main.get_command(app)
NAMES = sorted(COMMAND.commands)


@pytest.mark.parametrize("name", NAMES)
def test_help_at_80_columns_names_every_option_in_full(name):
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.output
    for parameter in COMMAND.commands[name].params:
        for option in parameter.opts:
            if option.startswith("--"):
                assert re.search(rf"(^|\s){re.escape(option)}(\s|$|,|=)", text, re.M), (name, option, text)
    assert "<bool>" not in text and "\\[" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), name


def test_the_command_list_gives_each_first_sentence_whole():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}, terminal_width=80)
    text = " ".join(result.output.split("Commands:")[1].split())
    assert "..." not in text
    assert "build-noun-adj Build the English→French noun–adjective order benchmark (Chaabouni et al. 2021, §4.2) from a " \
           "parallel corpus" in text
    assert "train Train a zoo model on a benchmark " in text
