"""The authors' code in `<shared>/reference/`, imported as it is (never copied or edited): each test module loads the
files of one repository from there, and skips where `../shared` is absent (fails when BENCHBUILD_REQUIRE_SHARED=1)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

def shared_root() -> Path:
    """`$BENCHBUILD_SHARED` if set, else `../shared` beside the checkout (as tests/conftest.py)."""
    return Path(os.environ.get("BENCHBUILD_SHARED", Path(__file__).resolve().parents[3] / "shared"))


def reference_folder(name: str) -> Path:
    """`<shared>/reference/<name>`, or a skip (a failure under BENCHBUILD_REQUIRE_SHARED=1) where it is absent."""
    folder = shared_root() / "reference" / name
    if not folder.is_dir():
        reason = f"the authors' code {folder} is absent (set BENCHBUILD_SHARED or put ../shared beside the checkout)"
        if os.environ.get("BENCHBUILD_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " and BENCHBUILD_REQUIRE_SHARED=1")
        pytest.skip(reason)
    return folder


def import_reference(folder: Path, module: str, alias: str) -> ModuleType:
    """Import `folder/module.py` as `alias`, with `folder` first on sys.path while it runs, so that its own imports
    (`from data import ...`) find its sibling files and nothing of ours."""
    if alias in sys.modules:
        return sys.modules[alias]
    spec = importlib.util.spec_from_file_location(alias, folder / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(loaded)
    finally:
        sys.path.remove(str(folder))
    sys.modules[alias] = loaded
    return loaded
