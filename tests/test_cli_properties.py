"""Property: every command refuses any invalid option value (out of its range, not one of its choices, not a
device, not a number, an input that does not exist) cleanly: exit 1 or 2, one error line, no traceback, nothing
written. Driven in-process through the console entry point, with random values from hypothesis."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchbuild.cli import app, main
from benchbuild.device import check_device
from benchbuild.errors import BenchbuildError

GROUP = typer.main.get_command(app)
COMMANDS = {name: GROUP.get_command(typer.Context(GROUP), name) for name in GROUP.list_commands(typer.Context(GROUP))}
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)
NUMBER = re.compile(r"\s*[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?\s*|\s*[-+]?(inf|infinity|nan)\s*", re.IGNORECASE)


def benchbuild(*arguments: str) -> tuple[int, str]:
    """`benchbuild ARGUMENTS` through the console entry point, in this process: exit code and stderr."""
    stderr = io.StringIO()
    with mock.patch.object(sys, "argv", ["benchbuild", *arguments]), contextlib.redirect_stderr(stderr), \
            contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as stop:
        main()
    return stop.value.code, stderr.getvalue()


def required_arguments(name: str, work: Path) -> list[str]:
    """The command's required options and arguments, each given a value that parses (an input that is absent:
    the invalid value under test is refused before any input is read)."""
    arguments = []
    for parameter in COMMANDS[name].params:
        if not parameter.required:
            continue
        value = str(work / f"{parameter.name}-value")
        arguments += [value] if not parameter.opts[0].startswith("-") else [parameter.opts[0], value]
    return arguments


def invalid_values(parameter) -> st.SearchStrategy[str] | None:
    """Values the option's parser must refuse, or None for an option that takes any text or path."""
    kind = parameter.type_descriptor.annotation
    choices = getattr(parameter.type_descriptor, "choices", None)
    if parameter.name == "device":
        return TEXT.filter(lambda text: _not_a_device(text))
    if choices and not callable(choices):
        return TEXT.filter(lambda text: text not in choices)
    if kind in (int, float):
        garbage = TEXT.filter(lambda text: not NUMBER.fullmatch(text))
        out_of_range = []
        if parameter.min is not None:
            out_of_range.append(st.integers(max_value=int(parameter.min) - 1).map(str))
        if parameter.max is not None:
            out_of_range.append(st.integers(min_value=int(parameter.max) + 1).map(str))
        if parameter.name == "max_minutes":  # a time budget: positive
            out_of_range.append(st.floats(max_value=0.0, allow_nan=False, allow_subnormal=False).map(str))
        return st.one_of(garbage, *out_of_range)
    return None


def _not_a_device(text: str) -> bool:
    try:
        check_device(text)
    except BenchbuildError:
        return True
    return False


CASES = [(name, parameter.opts[0], strategy) for name, command in COMMANDS.items() for parameter in command.params
         if parameter.opts[0].startswith("--") and not parameter.is_flag
         and (strategy := invalid_values(parameter)) is not None]


def test_every_command_has_options_under_test():
    assert {name for name, _, _ in CASES} >= {"build-scan", "build-noun-adj", "build-react", "degree", "train",
                                              "eval"}
    assert ("eval", "--beam") in {(name, option) for name, option, _ in CASES}


# Options that count something: zero or a negative number is refused by the parser, naming the option.
COUNT_OPTIONS = [("train", "--max-steps"), ("eval", "--beam"), ("eval", "--batch-size"),
                 ("build-noun-adj", "--n-process"), ("build-noun-adj", "--batch-size"),
                 ("build-react", "--pool-size"), ("build-react", "--ensemble-size"), ("build-react", "--band"),
                 ("build-react", "--sample"), ("build-react", "--beam"), ("build-react", "--batch-size"),
                 ("build-react", "--max-steps"), ("degree", "--max-ngram"), ("degree", "--min-ngram-count")]


@pytest.mark.parametrize("name, option", COUNT_OPTIONS)
def test_a_count_option_declares_that_it_is_at_least_one(name, option):
    [parameter] = [parameter for parameter in COMMANDS[name].params if option in parameter.opts]
    assert parameter.min is not None and parameter.min >= 1


def assert_clean_refusal(code: int, stderr: str, work: Path) -> None:
    assert code in (1, 2), stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, stderr
    assert list(work.iterdir()) == [], f"written: {list(work.iterdir())}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), data=st.data())
def test_an_invalid_option_value_is_refused_in_one_line_before_anything_is_written(case, data):
    name, option, strategy = case
    value = data.draw(strategy, label=option)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        code, stderr = benchbuild(name, *required_arguments(name, work), f"{option}={value}")
        assert_clean_refusal(code, stderr, work)
        assert option in stderr, stderr


# Inputs a command reads first: (command, the option naming it or "" for an argument, other arguments it needs).
MISSING_INPUTS = [
    ("train", "--data", ["--model", "transformer", "--out", "{work}/run"]),
    ("eval", "--run", ["--data", "{work}/data", "--out", "{work}/eval"]),
    ("score", "--data", ["--predictions", "{work}/predictions.txt", "--out", "{work}/metrics.json"]),
    ("degree", "--train-src", ["--pool", "{work}/pool.txt", "--out", "{work}/degree.tsv"]),
    ("stats", "", []),
    ("report", "", ["--out", "{work}/report"]),
    ("run", "", []),
    ("build-scan", "--official", ["--out", "{work}/scan"]),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(MISSING_INPUTS),
       name=st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=10))
def test_an_input_that_does_not_exist_is_refused_in_one_line_before_anything_is_written(case, name):
    command, option, others = case
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        missing = str(work / "absent" / name)
        given_input = [option, missing] if option else [missing]
        code, stderr = benchbuild(command, *given_input, *[value.format(work=work) for value in others])
        assert_clean_refusal(code, stderr, work)
        assert name in stderr
