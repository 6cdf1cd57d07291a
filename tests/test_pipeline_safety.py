"""A pipeline step's option holds what a command line can: a string, a number, true/false or a list of them. A TOML
table or date is refused where the file is read, in one line naming the step and the key, before any step runs
(it once became an argument such as "{'path': 'x'}", and so a folder of that name)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.pipeline import load_recipe

WRONG_TYPES = {
    "a table": ('out = { path = "x" }\nsplit = ["simple"]\n', "[[steps]] #2 [options] out must be",
                "not {'path': 'x'}"),
    "a table in a list": ('out = "scan"\nsplit = [{ name = "simple" }]\n', "[[steps]] #2 [options] split must be",
                          "not [{'name': 'simple'}]"),
    "a date": ('out = "scan"\nsplit = ["simple"]\nseed = 1979-05-27\n', "[[steps]] #2 [options] seed must be",
               "not datetime.date(1979, 5, 27)"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_an_option_of_the_wrong_type_is_refused_naming_the_step_and_key(case, tmp_path, monkeypatch):
    options, where, what = WRONG_TYPES[case]
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text('[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "first"\nsplit = ["simple"]\n'
                        f'[[steps]]\ncommand = "build-scan"\n[steps.options]\n{options}', encoding="utf-8")
    with pytest.raises(BenchbuildError) as refusal:
        load_recipe(pipeline)
    assert str(refusal.value).startswith(f"{pipeline}: {where} ") and what in str(refusal.value)
    assert "\n" not in str(refusal.value)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "pipeline.toml"], standalone_mode=False)
    assert isinstance(result.exception, BenchbuildError) and where in str(result.exception)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipeline.toml"], "no step ran"

