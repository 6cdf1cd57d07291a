"""The built wheel works outside a source checkout: installed on its own and run from an empty folder, it lists the
zoo, builds a SCAN benchmark with its card and trains a model, reading every data file from the installed package."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(command: list[str], **kwargs) -> str:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (the checkout stays untouched), installed into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "benchbuild", source / "benchbuild", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run([*pip, "wheel", "--no-deps", "--no-index", "--no-build-isolation", "--wheel-dir", work / "dist", source])
    [wheel] = (work / "dist").glob("benchbuild-*.whl")
    run([*pip, "install", "--no-deps", "--no-index", "--target", work / "site", wheel])
    return work / "site"


def outside_the_checkout(installed: Path, cwd: Path, *args: str) -> str:
    """`python -S ARGS` where only the install folder and the dependencies are importable (this interpreter's
    site-packages; -S leaves out its .pth hooks, among them the editable install of the checkout)."""
    dependencies = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=os.pathsep.join([str(installed), *sorted(dependencies)]), HF_HUB_OFFLINE="1",
               BENCHBUILD_KERNEL_CACHE=str(cwd / "kernels"))
    return run([sys.executable, "-S", *args], cwd=cwd, env=env)


def benchbuild(installed: Path, cwd: Path, *args: str) -> str:
    """The installed console script."""
    return outside_the_checkout(installed, cwd, str(installed / "bin" / "benchbuild"), *args)


WHERE = """
import sys
import benchbuild, benchbuild.cards, benchbuild.zoo
print(benchbuild.__file__)
print(benchbuild.zoo.catalogue.CATALOGUE / "transformer.toml")
print(benchbuild.cards._environment().get_template("scan.md.j2").filename)
kernels = [module.SOURCE for name, module in list(sys.modules.items())
           if name.startswith("benchbuild.") and str(getattr(module, "SOURCE", "")).endswith(".c")]
assert kernels, "no module of the zoo names its C kernel source"
print(*kernels, sep="\\n")
"""


@pytest.mark.slow
def test_the_installed_wheel_lists_the_zoo_builds_a_benchmark_and_trains(installed, tmp_path):
    for data in ("zoo/models/transformer.toml", "zoo/models/sag_t5.toml", "data_cards/scan.md.j2",
                 "data_cards/base.md.j2", "scan/canonical/simple_test.bits", "scan/canonical/tasks_order.u16le",
                 "scan/canonical/LICENSE"):
        assert (installed / "benchbuild" / data).is_file(), data
    assert list((installed / "benchbuild").rglob("*.c")), "the attention kernel's C source is not in the wheel"
    empty = tmp_path / "empty"
    empty.mkdir()

    for path in outside_the_checkout(installed, empty, "-c", WHERE).splitlines():
        assert Path(path).is_file() and Path(path).is_relative_to(installed / "benchbuild"), path

    listing = benchbuild(installed, empty, "zoo")
    from_checkout = sorted(path.stem for path in (ROOT / "benchbuild" / "zoo" / "models").glob("*.toml"))
    listed = [line for line in listing.splitlines() if line and not line.startswith((" ", "benchbuild model zoo"))]
    assert listed == from_checkout

    benchbuild(installed, empty, "build-scan", "--split", "simple", "--out", "scan")
    card = (empty / "scan" / "simple" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "pretty_name: SCAN" in card
    built = json.loads((empty / "scan" / "simple" / "build.json").read_text())
    assert built["splits"]["train"]["rows"] == 16_728, "the canonical simple split, read from the installed index"
    index = (ROOT / "benchbuild" / "scan" / "canonical" / "simple_test.bits").read_bytes()
    assert built["inputs"] == {"benchbuild/scan/canonical/simple_test.bits": hashlib.sha256(index).hexdigest()}

    (empty / "tiny.toml").write_text('name = "tiny"\npaper = "-"\nsummary = "the zoo Transformer, shrunk"\n'
                                     'extends = "transformer"\n[architecture]\nd_model = 32\nnum_heads = 2\n'
                                     'd_ff = 64\nencoder_layers = 1\ndecoder_layers = 1\n', encoding="utf-8")
    trained = benchbuild(installed, empty, "train", "--model", "tiny.toml", "--data", "scan/simple", "--out", "run",
                         "--max-steps", "20", "--device", "cpu", "--set", "batch_size=32", "--set", "eval_every=20")
    assert "trained 20 steps" in trained
    assert (empty / "run" / "model.safetensors").is_file()
