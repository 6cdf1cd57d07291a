"""What `pip install benchbuild` may take is what CI tests (issue #60): every runtime and extra dependency of
pyproject.toml is bounded below the next minor release after the version constraints.txt pins for the suite (torch:
the Makefile's TORCH), so a new release (transformers 5.25.0 broke resuming a killed stacked sweep) reaches users
only once the suite has passed with it and the bound is raised."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pinned() -> dict[str, str]:
    versions = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Za-z0-9_.\-]+)==([0-9][^\s;]*)", line)
        if match:
            versions[match[1].lower().replace("_", "-")] = match[2]
    torch = re.search(r"^TORCH \?= torch==([0-9.]+)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    versions["torch"] = torch[1]
    return versions


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *(requirement for name in ("stanza", "distributed", "publish")
                                        for requirement in extras[name])]


def test_every_dependency_is_bounded_to_the_minor_release_ci_tests():
    versions = pinned()
    for requirement in requirements():
        match = re.fullmatch(r"([A-Za-z0-9_\-]+)(\[[a-z]+\])?>=[0-9.]+,<([0-9]+)\.([0-9]+)", requirement)
        assert match, f"{requirement}: a lower bound and an upper bound '<MAJOR.MINOR' expected"
        name = match[1].lower().replace("_", "-")
        assert name in versions, f"{name}: not in constraints.txt, so CI does not say which version it tests"
        major, minor = versions[name].split(".")[:2]
        assert (match[3], match[4]) == (major, str(int(minor) + 1)), (
            f"{requirement}: CI tests {name} {versions[name]}: the bound should be <{major}.{int(minor) + 1}")
