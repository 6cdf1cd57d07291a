"""Options declared once: a parameters dataclass's fields become a command's options and come back as the dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import pytest
import typer
from typer.testing import CliRunner

from benchbuild.errors import BenchbuildError
from benchbuild.options import key_values, option_parameters, with_parameters


@dataclass(frozen=True)
class Sizes:
    """Two options of a toy command."""

    width: Annotated[int, typer.Option("--width", min=1, help="How wide.")] = 3
    names: Annotated[Optional[list[str]], typer.Option("--name", help="A name (repeatable).")] = None


def toy_app(seen: list) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @with_parameters
    def toy(
        label: Annotated[str, typer.Option("--label", help="Before the group.")],
        sizes: Sizes,
        loud: Annotated[bool, typer.Option("--loud", help="After the group.")] = False,
    ) -> None:
        """A toy command."""
        seen.append((label, sizes, loud))

    return app


def test_the_command_receives_the_dataclass_built_from_its_options():
    seen: list = []
    result = CliRunner().invoke(toy_app(seen), ["--label", "x", "--width", "5", "--name", "a", "--name", "b", "--loud"])
    assert result.exit_code == 0, result.output
    assert seen == [("x", Sizes(width=5, names=["a", "b"]), True)]


def test_unset_options_take_the_dataclass_defaults():
    seen: list = []
    assert CliRunner().invoke(toy_app(seen), ["--label", "x"]).exit_code == 0
    assert seen == [("x", Sizes(), False)]


def test_the_group_s_options_stand_in_its_place_in_the_help_with_their_declared_checks():
    app = toy_app([])
    help_text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"}).output
    positions = [help_text.index(flag) for flag in ("--label", "--width", "--name", "--loud")]
    assert positions == sorted(positions)
    assert "How wide." in help_text and "[default: 3]" in help_text
    refused = CliRunner().invoke(app, ["--label", "x", "--width", "0"])
    assert refused.exit_code != 0 and "--width" in refused.output


def test_a_field_without_a_typer_option_is_refused():
    @dataclass(frozen=True)
    class Undeclared:
        width: int = 3

    with pytest.raises(TypeError, match="Undeclared.width declares no typer.Option"):
        option_parameters(Undeclared)


def test_key_values_read_toml_values_and_keep_other_text():
    assert key_values(["steps=500", "lr=1e-3", "warm=true", "name=big model"], "--set") == {
        "steps": 500, "lr": 0.001, "warm": True, "name": "big model"}
    with pytest.raises(BenchbuildError, match="--set 'steps': expected KEY=VALUE"):
        key_values(["steps"], "--set")
