"""benchbuild works with the lowest transformers, tokenizers and huggingface_hub pyproject.toml allows (issue #30):
tools/check_lowest_versions.py builds a venv with exactly those versions and trains, evaluates and reloads runs in
it. It takes minutes and installs from PyPI, so it runs only when BENCHBUILD_CHECK_LOWEST=1 (not in .ci/run)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "check_lowest_versions.py"


def check_script():
    spec = importlib.util.spec_from_file_location("check_lowest_versions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pyproject_bounds_every_package_the_check_pins():
    script = check_script()
    bounds = script.lowest_versions()
    assert set(bounds) == set(script.LOWEST)
    assert int(bounds["transformers"].split(".")[0]) >= 5  # 4.57 cannot import the zoo (pyproject.toml says why)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # it builds a venv from PyPI: longer than the suite's hang limit
@pytest.mark.skipif(os.environ.get("BENCHBUILD_CHECK_LOWEST") != "1",
                    reason="builds a venv from PyPI for minutes: set BENCHBUILD_CHECK_LOWEST=1")
def test_the_flow_passes_with_the_lowest_versions(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--keep", str(tmp_path / "check")], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    # The flow ran with exactly pyproject.toml's lower bounds, every case reloaded with the predictions eval wrote.
    [versions] = [line for line in done.stdout.splitlines() if line.startswith("versions: ")]
    for name, version in check_script().lowest_versions().items():
        assert f"{name}=={version}," in versions + ",", versions
    assert done.stdout.count("non-empty predictions") == len(check_script().CASES), done.stdout
