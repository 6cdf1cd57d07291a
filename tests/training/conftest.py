"""Small real SCAN benchmark folders and a tiny catalogue entry for training tests."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts

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


def scan_rows(path: Path, prefix: str, limit: int, max_target_words: int) -> list[dict]:
    """The first `limit` SCAN lines (`IN: … OUT: …`) of `path` whose action sequence is short."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        if len(target.split()) <= max_target_words:
            rows.append({"id": f"{prefix}-{len(rows)}", "source": source, "target": target})
        if len(rows) == limit:
            break
    return rows


def write_benchmark(out: Path, splits: dict[str, list[dict]], family: str = "scan", name: str = "simple") -> Path:
    """A benchmark folder in the on-disk contract (splits + build.json); the card is not needed to train."""
    info = BuildInfo(family=family, name=name, parameters={"rows": {k: len(v) for k, v in splits.items()}})
    card = CardFacts(pretty_name="tiny", summary="test data", rules={}, languages=["en"], license="BSD", citation="")
    benchmark = Benchmark.from_splits(splits, info, card)
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(out))
    (out / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def tiny_scan(shared_data: Path, tmp_path_factory) -> Path:
    """120 train and 20 test rows of SCAN `simple` with at most 4 actions (held-out validation: 12 rows)."""
    folder = shared_data / "scan" / "simple_split"
    splits = {"train": scan_rows(folder / "tasks_train_simple.txt", "train", 120, 4),
              "test": scan_rows(folder / "tasks_test_simple.txt", "test", 20, 4)}
    return write_benchmark(tmp_path_factory.mktemp("bench") / "simple", splits)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny_transformer.toml"
    path.write_text(TINY_MODEL, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def benchmark_writer():
    """`write_benchmark(out, splits, family, name)` for tests that need their own benchmark folder."""
    return write_benchmark
