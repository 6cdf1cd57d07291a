"""Small real inputs that tests in several folders build: text files, benchmark folders in the on-disk contract, and
the command-line options of a ReaCT ensemble small enough to train in seconds.

Imported as `small_inputs` (pytest puts `tests/` on `sys.path` when it loads `tests/conftest.py`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import datasets
from commands import benchbuild_in_process

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts


# Ten one-letter words: sentences made of them are in any tokenizer's vocabulary and cost nothing to train on.
WORDS = "a b c d e f g h i j".split()


def shared_root() -> Path:
    """`$BENCHBUILD_SHARED` if set, else `../shared` beside the checkout."""
    return Path(os.environ.get("BENCHBUILD_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def shared_folder(name: str, what: str) -> Path:
    """`<shared>/NAME`, or a skip where it is absent, a failure when BENCHBUILD_REQUIRE_SHARED=1 (as CI sets it)."""
    import pytest

    folder = shared_root() / name
    if not folder.is_dir():
        reason = f"{what} {folder} is absent (set BENCHBUILD_SHARED or put ../shared beside the checkout)"
        if os.environ.get("BENCHBUILD_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " and BENCHBUILD_REQUIRE_SHARED=1")
        pytest.skip(reason)
    return folder


def tiny_transformer_toml(**recipe: Any) -> str:
    """A catalogue entry file of a transformer with one 16-wide layer each side and a `scan` recipe of `recipe`'s keys
    (default: 1 step of 4 rows), for tests that need a run in a second."""
    keys = {"steps": 1, "batch_size": 4, "learning_rate": 1e-3, "eval_every": 1, **recipe}
    lines = [f"{key} = {value!r}" if not isinstance(value, str) else f'{key} = "{value}"' for key, value in keys.items()]
    return ('name = "tiny"\npaper = "test"\nsummary = "tiny"\n\n[architecture]\nkind = "transformer"\nd_model = 16\n'
            "num_heads = 2\nd_ff = 32\nencoder_layers = 1\ndecoder_layers = 1\n\n[recipe.scan]\n" + "\n".join(lines) + "\n")


def word_lines(count: int = 40, width: int = 5) -> list[str]:
    """`count` sentences of `width` words from `WORDS`, row r word k being WORDS[(7r + 3k) mod 10]: ten distinct
    sentences, each repeated, every word in several of them."""
    return [" ".join(WORDS[(row * 7 + column * 3) % len(WORDS)] for column in range(width)) for row in range(count)]


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    """`path` (its folder made if missing) holding `lines`, each ended by a newline (UTF-8)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_benchmark(out: Path, splits: dict[str, list[dict[str, Any]]], family: str, name: str) -> Path:
    """A benchmark folder at `out`: the splits and `build.json` (family, name, rows per split). The card is left
    out: training, evaluation and the report read only these."""
    rows = {split: len(split_rows) for split, split_rows in splits.items()}
    info = BuildInfo(family=family, name=name, parameters={"rows": rows})
    card = CardFacts(pretty_name=name, summary="test data", languages=["en"], license="-")
    benchmark = Benchmark.from_splits(splits, info, card)
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(out))
    (out / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    return out


def scan_file_rows(path: Path, prefix: str, limit: int, max_actions: int) -> list[dict[str, str]]:
    """The first `limit` lines (`IN: … OUT: …`) of a canonical SCAN file whose action sequence has at most
    `max_actions` actions, as rows `{id, source, target}`."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        if len(target.split()) <= max_actions:
            rows.append({"id": f"{prefix}-{len(rows)}", "source": source, "target": target})
        if len(rows) == limit:
            break
    return rows


def scan_grammar_rows(count: int, max_actions: int, seed: int) -> list[dict[str, str]]:
    """`count` SCAN commands of at most `max_actions` actions generated from the grammar, in an order shuffled by
    `seed`, as rows `{id, source, target}`."""
    import random

    from benchbuild.scan.grammar import generate

    examples = [example for example in generate() if len(example.actions.split()) <= max_actions]
    random.Random(seed).shuffle(examples)
    return [{"id": f"scan-{i}", "source": e.command, "target": e.actions} for i, e in enumerate(examples[:count])]


def tiny_transformer_entry(name: str, family: str, paper: str = "test", **recipe: Any) -> str:
    """A catalogue entry (TOML) of a one-layer Transformer of width 16 without dropout, whose step takes milliseconds
    on a CPU, with one recipe: `[recipe.FAMILY]` holding `recipe` (ints, floats and strings); `paper` its paper id."""
    keys = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in recipe.items())
    return (f'name = "{name}"\npaper = "{paper}"\nsummary = "A one-layer Transformer of width 16."\n\n'
            '[architecture]\nkind = "transformer"\nd_model = 16\nnum_heads = 2\nd_ff = 32\nencoder_layers = 1\n'
            "decoder_layers = 1\ndropout = 0.0\nattention_dropout = 0.0\nactivation_dropout = 0.0\n\n"
            f"[recipe.{family}]\n{keys}")


# A one-layer Transformer of width 32 for every ensemble member.
TINY_MEMBER_ARCHITECTURE = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}


def tiny_ensemble(**recipe: Any) -> list[str]:
    """`build-react` options giving each ensemble member `TINY_MEMBER_ARCHITECTURE` and the recipe keys `recipe`
    (`bpe_vocab_size=100` becomes `--ensemble-set bpe_vocab_size=100`)."""
    options = []
    for key, value in TINY_MEMBER_ARCHITECTURE.items():
        options += ["--ensemble-architecture", f"{key}={value}"]
    for key, value in recipe.items():
        options += ["--ensemble-set", f"{key}={value}"]
    return options


# `build-react` options of an ensemble of one tiny member trained for two steps, words and n-grams counted from one
# occurrence: a whole build takes seconds.
TINY_REACT = ["--ensemble-size", "1", "--max-steps", "2",
              *tiny_ensemble(bpe_vocab_size=100, batch_size=16, warmup_steps=1, eval_every=1000),
              "--min-word-count", "1", "--min-ngram-count", "1", "--device", "cpu"]


def build_react(folder: Path, pool: list[str], *extra: str, train: list[str] | None = None
                ) -> subprocess.CompletedProcess:
    """`benchbuild build-react` (in this process) in `folder` (output `folder/out`) with `train` (default `word_lines()`) as both sides
    of the training corpus, `pool` as both sides of the candidate pool, `TINY_REACT` and `extra`."""
    train = word_lines() if train is None else train
    train_src, train_tgt = write_lines(folder / "train.de", train), write_lines(folder / "train.en", train)
    pool_src, pool_tgt = write_lines(folder / "pool.de", pool), write_lines(folder / "pool.en", pool)
    return benchbuild_in_process("build-react", "--out", folder / "out", "--train-src", train_src, "--train-tgt",
                                 train_tgt, "--pool-src", pool_src, "--pool-tgt", pool_tgt, "--cache-dir",
                                 folder / "cache", *TINY_REACT, *extra)
