"""Property: whatever output path a user gives — an input itself, its folder, a path inside it, a link to it, an
empty path, a path through `..` — no command that writes changes a byte of its inputs, and none answers with a
traceback (hypothesis over every writing command, run through the real entry point in this process)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from commands import file_hashes
from small_inputs import tiny_transformer_toml

TINY_MODEL = tiny_transformer_toml()

RELATIONS = ["same", "parent", "child", "link", "empty", "dotdot", "new"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A tiny benchmark, a model file, a trained and evaluated run, two text files and a predictions file."""
    import datasets

    from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("inputs")
    rows = [{"id": str(i), "source": f"jump {'twice ' * (i % 3)}".strip(), "target": " ".join(["I_JUMP"] * (i % 3 + 1))}
            for i in range(12)]
    info = BuildInfo(family="scan", name="scan/tiny", parameters={})
    card = CardFacts(pretty_name="t", summary="t", rules={}, languages=["en"], license="BSD", citation="")
    benchmark = Benchmark.from_splits({"train": rows, "test": rows[:4]}, info, card)
    bench = root / "bench"
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(bench))
    (bench / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    model = root / "model.toml"
    model.write_text(TINY_MODEL)
    run = root / "run"
    train(model, bench, run, device="cpu", progress=False)
    evaluate_run(run, bench, device="cpu")
    text = "".join(f"a b c {word}\n" for word in "d e f g h i".split())
    (root / "train.de").write_text(text)
    (root / "pool.de").write_text(text)
    (root / "pred.txt").write_text("I_JUMP\nI_JUMP I_JUMP\nI_JUMP\nI_JUMP\n")
    return {"bench": bench, "model": model, "run": run, "train": root / "train.de", "pool": root / "pool.de",
            "pred": root / "pred.txt"}


# command -> (the inputs it must never change, its argv with {out} for the output path)
COMMANDS = {
    "degree": (["train", "pool"], ["degree", "--train-src", "{train}", "--pool", "{pool}", "--out", "{out}"]),
    "score": (["bench", "pred"], ["score", "--data", "{bench}", "--predictions", "{pred}", "--out", "{out}"]),
    "train": (["bench", "model"], ["train", "--model", "{model}", "--data", "{bench}", "--out", "{out}",
                                   "--device", "cpu"]),
    "eval": (["bench"], ["eval", "--run", "{run}", "--data", "{bench}", "--out", "{out}", "--device", "cpu"]),
    "report": (["run", "bench"], ["report", "{run}", "--data", "{bench}", "--out", "{out}", "--format", "md,csv"]),
    "build-noun-adj": (["train", "pool"], ["build-noun-adj", "--en", "{train}", "--fr", "{pool}", "--out", "{out}"]),
    "build-react": (["train", "pool"], ["build-react", "--train-src", "{train}", "--train-tgt", "{pool}",
                                        "--pool-src", "{pool}", "--pool-tgt", "{train}", "--out", "{out}"]),
}
# Outputs these commands accept would start real work (spaCy, an ensemble): only the refused relations are drawn.
EXPENSIVE = {"build-noun-adj", "build-react"}


def _output(relation: str, target: Path, scratch: Path) -> str:
    if relation == "same":
        return str(target)
    if relation == "parent":
        return str(target.parent)
    if relation == "child":
        return str(target / "out")
    if relation == "link":
        link = scratch / "link"
        link.symlink_to(target)
        return str(link)
    if relation == "empty":
        return ""
    if relation == "dotdot":
        return str(scratch / ".." / os.path.relpath(target, scratch.parent))
    return str(scratch / "new-output")


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """`benchbuild ARGV` through the console entry point, in this process: its exit code and what it printed."""
    import contextlib
    import io

    from benchbuild import cli

    stderr = io.StringIO()
    before, argv_before = os.getcwd(), sys.argv
    os.chdir(cwd)
    sys.argv = ["benchbuild", *argv]
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            cli.main()
    except SystemExit as stop:
        return int(stop.code or 0), stderr.getvalue()
    finally:
        os.chdir(before)
        sys.argv = argv_before
    return 0, stderr.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(COMMANDS)), relation=st.sampled_from(RELATIONS),
       target=st.sampled_from(["bench", "model", "run", "train", "pool", "pred"]), overwrite=st.booleans())
def test_no_output_path_changes_an_input(inputs, tmp_path_factory, command, relation, target, overwrite):
    protected, template = COMMANDS[command]
    if command in EXPENSIVE:  # only outputs that must be refused: the input itself, its folder, inside it, a link
        relation = "same" if relation == "new" else relation
        target = target if target in protected else protected[0]
    scratch = tmp_path_factory.mktemp("scratch")
    out = _output(relation, inputs[target], scratch)
    argv = [part.format(out=out, **{name: str(path) for name, path in inputs.items()}) for part in template]
    if overwrite and command not in ("score", "eval", "report"):
        argv.append("--overwrite")
    before = {name: file_hashes(inputs[name]) for name in protected}
    code, printed = _run(argv, scratch)
    assert "Traceback" not in printed, printed
    for name in protected:
        assert file_hashes(inputs[name]) == before[name], (argv, code, printed)
    # (A report's --out is a prefix: PREFIX.md beside a run or a link is a new file, not the run or the link.)
    if relation == "empty" or (command != "report" and (relation == "link" or (
            relation in ("same", "dotdot", "parent", "child") and target in protected))):
        assert code != 0, (argv, printed)
    shutil.rmtree(scratch, ignore_errors=True)
