"""The typed TOML reader: unknown keys, wrong types and missing keys are errors naming the file, section and key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import check_table, from_table, read_toml


@dataclass(frozen=True)
class Step:
    command: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    steps: list[Step]
    rate: float = 1.0
    size: int | None = None
    mode: Literal["fast", "slow"] = "fast"
    tags: tuple[str, ...] = ()
    limits: dict[Literal["scan", "mt"], int] = field(default_factory=dict)
    quiet: bool = False

    def __post_init__(self):
        if self.rate <= 0:
            raise ValueError(f"rate must be positive; got {self.rate}")


def test_a_valid_table_becomes_the_dataclass_with_nested_tables_and_converted_values():
    job = from_table(Job, {"steps": [{"command": "build", "options": {"seed": 1}}], "rate": 2, "size": 3,
                           "mode": "slow", "tags": ["a", "b"], "limits": {"mt": 5}, "quiet": True}, "job.toml")
    assert job == Job(steps=[Step("build", {"seed": 1})], rate=2.0, size=3, mode="slow", tags=("a", "b"),
                      limits={"mt": 5}, quiet=True)
    assert isinstance(job.rate, float)


def test_an_unknown_key_names_the_file_the_section_and_the_allowed_keys():
    with pytest.raises(BenchbuildError) as error:
        check_table(Step, {"command": "x", "optoins": {}}, "models/x.toml", "[recipe.scan]")
    assert str(error.value) == "models/x.toml: unknown key 'optoins' in [recipe.scan] (allowed: command, options)"


def test_an_unknown_key_of_a_nested_table_names_its_place():
    with pytest.raises(BenchbuildError, match=r"^job.toml: unknown key 'cmd' in \[\[steps\]\] #2 "):
        from_table(Job, {"steps": [{"command": "a"}, {"cmd": "b"}]}, "job.toml")
    with pytest.raises(BenchbuildError, match=r"^job.toml: unknown key 'cjk' in \[limits\] \(allowed: mt, scan\)"):
        from_table(Job, {"steps": [], "limits": {"cjk": 1}}, "job.toml")


@pytest.mark.parametrize("table, message", [
    ({"steps": [], "rate": "fast"}, "job.toml: rate must be a number, not 'fast'"),
    ({"steps": [], "size": 2.5}, "job.toml: size must be an integer, not 2.5"),
    ({"steps": [], "size": True}, "job.toml: size must be an integer, not True"),
    ({"steps": [], "quiet": 1}, "job.toml: quiet must be true or false, not 1"),
    ({"steps": [], "mode": "medium"}, "job.toml: mode is 'medium': choose one of fast, slow"),
    ({"steps": [], "tags": "a"}, "job.toml: tags must be a list, not 'a'"),
    ({"steps": [], "tags": ["a", 2]}, "job.toml: tags item 2 must be a string, not 2"),
    ({"steps": "build"}, "job.toml: steps must be a list, not 'build'"),
    ({"steps": [{"command": 3}]}, "job.toml: [[steps]] #1 command must be a string, not 3"),
    ({"rate": 1.0}, "job.toml: missing key 'steps'"),
    ({"steps": [], "rate": -1.0}, "job.toml: rate must be positive; got -1.0"),
])
def test_wrong_values_are_errors_naming_the_key(table, message):
    with pytest.raises(BenchbuildError) as error:
        from_table(Job, table, "job.toml")
    assert str(error.value) == message


def test_a_partial_check_returns_only_the_given_keys():
    assert check_table(Job, {"rate": 3}, "job.toml", complete=False) == {"rate": 3.0}


def test_read_toml_names_a_missing_or_malformed_file(tmp_path):
    with pytest.raises(BenchbuildError, match=f"^pipeline {tmp_path / 'none.toml'} does not exist$"):
        read_toml(tmp_path / "none.toml", "pipeline")
    (tmp_path / "bad.toml").write_text("a = [")
    with pytest.raises(BenchbuildError, match=f"^pipeline {tmp_path / 'bad.toml'} is not valid TOML: "):
        read_toml(tmp_path / "bad.toml", "pipeline")
