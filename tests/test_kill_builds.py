"""A long command SIGKILLed at a random point of its work (as an out-of-memory kill or a lost machine would stop it)
leaves nothing that looks complete unless it finished, and the same command run again finishes it: exit 0 and an
output byte-identical to an uninterrupted run's. One case each for build-scan, build-noun-adj, build-react and
degree (twice: its kill window is short), each run a process of its own in a process group of its own (forked from
the tests' fork server, tests/commands.py), on tiny real inputs (`../shared/data`; build-scan generates SCAN from its
grammar).

The kill point is random and reproducible: the command is started, the test waits until the command has begun its
work (its first work folder, partial output or cache entry appears), then waits a random share of the rest of an
uninterrupted run's duration (timed just before, on the same machine) and kills the process group. The share comes
from the session's `kill_seed` (tests/conftest.py: `BENCHBUILD_KILL_SEED` when set, else drawn afresh); every case
prints it and every failure names it, so `BENCHBUILD_KILL_SEED=N pytest tests/test_kill_builds.py` draws the same
shares again. Under load the kill may land anywhere, after the command finished included; every assertion holds
wherever it lands.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from commands import Started, benchbuild, started
from small_inputs import tiny_ensemble, write_lines

TINY_ENSEMBLE = ["--ensemble-size", "1", "--max-steps", "2",
                 *tiny_ensemble(bpe_vocab_size=100, batch_size=16, warmup_steps=1, eval_every=1000), "--device", "cpu"]


@dataclass(frozen=True)
class Build:
    """A command as a user types it, run in a folder of its own (every path it writes is relative to that folder,
    so two runs in two folders record the same command line)."""

    arguments: list[str]
    output: str  # the file or folder it writes
    many: bool  # the output is a parent folder of several benchmark folders, each saved on its own
    started: Callable[[Path], bool]  # whether the command, run in this folder, has begun its work
    rerun_completes_a_finished_output: bool  # False: a rerun over a finished output asks for --overwrite


def _exists(pattern: str) -> Callable[[Path], bool]:
    return lambda folder: any(folder.glob(pattern))


def _head(path: Path, count: int) -> list[str]:
    """The first `count` lines of `path`, without their line ends."""
    with path.open(encoding="utf-8") as lines:
        return [line.rstrip("\n") for _, line in zip(range(count), lines)]


def _pairs(folder: Path, name: str) -> list[tuple[str, str]]:
    return list(zip((folder / f"{name}.de").read_text(encoding="utf-8").splitlines(),
                    (folder / f"{name}.en").read_text(encoding="utf-8").splitlines()))


def _write_pairs(inputs: Path, name: str, pairs: list[tuple[str, str]]) -> list[str]:
    """The pairs as `NAME.de`/`NAME.en` in `inputs`, and the options naming them (--NAME-src, --NAME-tgt)."""
    for side, lines in (("de", [source for source, _ in pairs]), ("en", [target for _, target in pairs])):
        write_lines(inputs / f"{name}.{side}", lines)
    return [f"--{name}-src", str(inputs / f"{name}.de"), f"--{name}-tgt", str(inputs / f"{name}.en")]


def _react_inputs(shared_data: Path, inputs: Path) -> list[str]:
    """1,000 training pairs of the ReaCT data; 4 short validation pairs; a pool of 12 short test pairs whose every
    source word the training side holds (the OOV filter keeps them). Short sentences keep the untrained members'
    decoding (up to twice the source length) short."""
    valid = _pairs(shared_data / "react", "valid")
    train = valid[:1_000]
    vocabulary = {word for source, _ in train for word in source.split()}
    short = [pair for pair in valid[1_000:] if all(pair) and len(pair[0].split()) <= 6][:4]
    pool = [pair for pair in _pairs(shared_data / "react", "test")
            if all(pair) and len(pair[0].split()) <= 5 and set(pair[0].split()) <= vocabulary][:12]
    return [*_write_pairs(inputs, "train", train), *_write_pairs(inputs, "valid", short),
            *_write_pairs(inputs, "pool", pool)]


def _build(name: str, shared_data: Callable[[], Path], inputs: Path) -> Build:
    if name == "build-scan":  # from the grammar: no input files
        splits = [f"fewshot_num{n}_rep{r}" for n in (1, 2, 4, 8) for r in (1, 2)] + ["simple", "length"]
        return Build(["build-scan", "--out", "scan", *[f"--split={split}" for split in splits]], "scan", True,
                     _exists("scan/*"), True)
    shared = shared_data()
    if name == "build-noun-adj":
        europarl = shared / "europarl-sample"
        english = write_lines(inputs / "corpus.en", _head(europarl / "europarl-v7.fr-en.en", 1_000))
        french = write_lines(inputs / "corpus.fr", _head(europarl / "europarl-v7.fr-en.fr", 1_000))
        # The sample holds no clean swap: its test split is empty, which only --allow-small saves.
        return Build(["build-noun-adj", "--en", str(english), "--fr", str(french), "--out", "out", "--allow-small"],
                     "out", False, _exists(".out.work-*"), False)
    if name == "build-react":
        return Build(["build-react", *_react_inputs(shared, inputs), "--out", "out", "--cache-dir", "cache",
                      *TINY_ENSEMBLE, "--min-word-count", "1", "--min-ngram-count", "1", "--pool-size", "10",
                      "--drop-top", "1", "--band", "6", "--sample", "3", "--beam", "1"],
                     "out", False, _exists("cache/ensemble-*/members/member-0"), False)
    assert name == "degree"
    pool = write_lines(inputs / "pool.de", _head(shared / "wmt14-ende-sample" / "train.de", 10_000) * 4)
    return Build(["degree", "--train-src", str(shared / "react" / "valid.de"), "--pool", str(pool),
                  "--out", "degree.tsv", "--min-word-count", "1"], "degree.tsv", False,
                 _exists("degree.tsv.partial"), False)


def _start(build: Build, folder: Path, environment: dict[str, str]) -> Started:
    """The command in `folder`, its stderr in `folder`.log beside it."""
    folder.mkdir(exist_ok=True)
    return started(*build.arguments, cwd=folder, environment=environment, stdout=folder.parent / f"{folder.name}.out",
                   stderr=folder.parent / f"{folder.name}.log")


def _wait_until_started(build: Build, folder: Path, process: Started) -> None:
    while process.poll() is None and not build.started(folder):
        time.sleep(0.005)


def _snapshot(path: Path) -> bytes | dict[str, bytes]:
    """A file's bytes, or a folder's files (relative path -> bytes)."""
    if path.is_file():
        return path.read_bytes()
    return {str(file.relative_to(path)): file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file()}


def _visible_outputs(build: Build, folder: Path) -> dict[str, bytes | dict[str, bytes]]:
    """What a user would take for finished output: the output itself, or each benchmark folder under it (names
    starting with a dot are the work and partial folders of a save in progress)."""
    output = folder / build.output
    if not output.exists():
        return {}
    if not build.many:
        return {build.output: _snapshot(output)}
    return {child.name: _snapshot(child) for child in sorted(output.iterdir()) if not child.name.startswith(".")}


def _leftovers(build: Build, folder: Path) -> list[str]:
    """Work, partial and replaced files or folders of the command's saves (its cache aside)."""
    beside = [path.name for path in folder.iterdir() if path.name.startswith(".") or path.name.endswith(".partial")]
    output = folder / build.output
    if build.many and output.is_dir():
        beside += [path.name for path in output.iterdir() if path.name.startswith(".")]
    return beside


@pytest.mark.parametrize("name, attempt", [
    ("build-scan", 0),
    *[pytest.param(name, attempt, marks=pytest.mark.shared)
      for name, attempt in (("build-noun-adj", 0), ("build-react", 0), ("degree", 0), ("degree", 1))],
])
def test_a_command_killed_at_a_random_point_leaves_nothing_that_looks_complete_and_its_rerun_finishes_it(
        name, attempt, kill_seed, request, tmp_path):
    inputs, system_temp = tmp_path / "inputs", tmp_path / "system-temp"
    inputs.mkdir()
    system_temp.mkdir()
    build = _build(name, lambda: request.getfixturevalue("shared_data"), inputs)
    environment = {**os.environ, "TMPDIR": str(system_temp)}

    reference = tmp_path / "uninterrupted"
    begun = time.monotonic()
    process = _start(build, reference, environment)
    _wait_until_started(build, reference, process)
    work_began = time.monotonic() - begun
    assert process.wait() == 0, (tmp_path / "uninterrupted.log").read_text()
    rest = time.monotonic() - begun - work_began
    expected = _visible_outputs(build, reference)
    assert expected and not _leftovers(build, reference)

    interrupted = tmp_path / "interrupted"
    share = random.Random(f"{kill_seed} {name} {attempt}").uniform(0.0, 1.1)  # past 1: it may come after the end
    print(f"BENCHBUILD_KILL_SEED={kill_seed}: {name} (attempt {attempt}) killed at {share:.3f} of the work")
    process = _start(build, interrupted, environment)
    _wait_until_started(build, interrupted, process)
    try:
        process.wait(timeout=share * rest)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may end in between
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    where = (f"{name} killed {share:.2f} of {rest:.1f} s after its work began (exit {process.returncode}; replay: "
             f"BENCHBUILD_KILL_SEED={kill_seed})")
    assert process.returncode in (0, -signal.SIGKILL), where

    for output, content in _visible_outputs(build, interrupted).items():
        assert content == expected[output], f"{where}: {output} looks complete but differs from the uninterrupted one"
    finished = _visible_outputs(build, interrupted) == expected
    if not finished or build.rerun_completes_a_finished_output:
        rerun = benchbuild(*build.arguments, cwd=interrupted, environment=environment)
        assert rerun.returncode == 0, f"{where}; the rerun says: {rerun.stderr}"
        assert _visible_outputs(build, interrupted) == expected, where
        assert not _leftovers(build, interrupted), where
    ours = [path.name for path in system_temp.iterdir() if path.name.startswith("benchbuild")]  # torch caches aside
    assert not ours, f"{where}: left {ours} in the system temp folder"
