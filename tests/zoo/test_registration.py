"""Registration with transformers happens on `import benchbuild.zoo`, not on `import benchbuild`: checked in fresh
interpreters, where no other test has imported the zoo."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchbuild.zoo import load_entry
from tiny_zoo import zoo_network

LOAD = ("import sys\n{imports}\nfrom transformers import AutoModelForSeq2SeqLM\n"
        "model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1])\n"
        "print(type(model).__name__, model.config.model_type)\n")


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    zoo_network(load_entry("transformer"), vocab_size=12).save_pretrained(folder)
    return folder


def test_after_import_benchbuild_zoo_from_pretrained_loads_a_run(saved_run):
    result = subprocess.run([sys.executable, "-c", LOAD.format(imports="import benchbuild.zoo"), str(saved_run)],
                            capture_output=True, text=True, cwd=saved_run)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["TransformerForSeq2Seq", "benchbuild_transformer"]


def test_import_benchbuild_alone_registers_nothing(saved_run):
    result = subprocess.run([sys.executable, "-c", LOAD.format(imports="import benchbuild"), str(saved_run)],
                            capture_output=True, text=True, cwd=saved_run)
    assert result.returncode != 0 and "benchbuild_transformer" in result.stderr
