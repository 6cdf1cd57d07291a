"""`benchbuild import` run through the console entry point in this process, and a tiny model whose catalogue rows name
the published benchmarks (so `train` picks their recipe and `report` puts the paper's number beside ours)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from unittest import mock

import pytest

from benchbuild.cli import main

TINY_MODEL = """\
name = "tiny_transformer"
paper = "test"
summary = "A one-layer Transformer small enough to train in seconds on CPU."

[architecture]
kind = "transformer"
d_model = 32
num_heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1
dropout = 0.0

[recipe.mt]
steps = 5
batch_size = 16
learning_rate = 2e-3
eval_every = 5
bpe_vocab_size = 1000

[[reported]]
benchmark = "cognition/cg_test"
recipe = "mt"
metric = "cter_instance"
value = 20.0
table = "004 Table 1"

[[reported]]
benchmark = "react/cg_test"
recipe = "mt"
metric = "bleu"
value = 11.4
table = "001 Table 5"
"""


@pytest.fixture(scope="session")
def benchbuild():
    """`benchbuild ARGUMENTS` through the console entry point: (exit code, stdout, stderr)."""

    def run(*arguments: str | Path) -> tuple[int, str, str]:
        stdout, stderr = io.StringIO(), io.StringIO()
        with mock.patch.object(sys, "argv", ["benchbuild", *map(str, arguments)]), \
                contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
                pytest.raises(SystemExit) as stop:
            main()
        return stop.value.code, stdout.getvalue(), stderr.getvalue()

    return run


@pytest.fixture
def refused(benchbuild):
    """Run a command that must be refused: exit 1, one `benchbuild: error:` line and no traceback; the error text."""

    def run(*arguments: str | Path) -> str:
        code, _, stderr = benchbuild(*arguments)
        assert code == 1, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchbuild: error: "), stderr
        return lines[0]

    return run


@pytest.fixture(scope="session")
def reporting_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny_transformer.toml"
    path.write_text(TINY_MODEL, encoding="utf-8")
    return path

