"""The authors' code in `<shared>/reference/`, imported as it is (never copied or edited): each test module loads the
files of one repository from there, and skips where `../shared` is absent (fails when BENCHBUILD_REQUIRE_SHARED=1)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
from small_inputs import shared_folder


def reference_folder(name: str) -> Path:
    """`<shared>/reference/<name>`, or a skip (a failure under BENCHBUILD_REQUIRE_SHARED=1) where it is absent."""
    return shared_folder(f"reference/{name}", "the authors' code")


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


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """torch's default dtype set to `dtype` within the block: the authors' code makes tensors with it (torch.zeros
    without a dtype), so float64 comparisons need it float64."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)
