"""A tiny catalogue entry for training tests (their SCAN benchmark, `tiny_scan`, is in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_MODEL = """\
name = "tiny_transformer"
paper = "test"
summary = "A two-layer Transformer small enough to train in seconds on CPU."

[architecture]
kind = "transformer"
d_model = 32
num_heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1
dropout = 0.1

[recipe.scan]
steps = 30
batch_size = 16
learning_rate = 2e-3
schedule = "inverse_sqrt"
warmup_steps = 5
label_smoothing = 0.1
eval_every = 10

[recipe.mt]
steps = 30
batch_size = 16
learning_rate = 2e-3
eval_every = 10
bpe_vocab_size = 120
"""


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny_transformer.toml"
    path.write_text(TINY_MODEL, encoding="utf-8")
    return path
