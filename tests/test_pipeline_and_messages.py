"""Refusals a user can act on: a pipeline is checked whole before its first step runs; a corrupt checkpoint is named;
a loaded run generates without a warning; `report` writes beside the runs; the progress bar shows the logged loss."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchbuild.cli import main


def benchbuild(monkeypatch, capsys, *arguments: str) -> tuple[int, str]:
    """Run `benchbuild ARGUMENTS` in this process as the console entry point does: its exit code and stderr."""
    monkeypatch.setattr(sys, "argv", ["benchbuild", *arguments])
    with pytest.raises(SystemExit) as stop:
        main()
    return stop.value.code, capsys.readouterr().err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("benchbuild: error:")]


SCAN_STEP = """
[[steps]]
command = "build-scan"
options = {{ out = "{out}", split = ["simple"] }}
"""


@pytest.mark.parametrize("second_step, named", [
    ('command = "train"\noptions = {{ model = "transformer", data = "scan/simple" }}', "--out"),  # required
    ('command = "eval"\noptions = {{ run = "r", data = "d", beam = 0 }}', "--beam"),                 # out of range
    ('command = "train"\noptions = {{ model = "m", data = "d", out = "r", seed = "many" }}', "--seed"),  # type
    ('command = "train"\noptions = {{ model = "m", data = "d", out = "r", device = "gpu" }}', "--device"),  # callback
    ('command = "build-scan"\noptions = {{ out = "again", split = ["nosuch"] }}', "nosuch"),      # parameters check()
    ('command = "run"\noptions = {{ recipe = "{nested}" }}', "'beams'"),                         # nested recipe
])
def test_a_bad_later_step_is_refused_before_the_first_step_writes_anything(monkeypatch, capsys, tmp_path,
                                                                           second_step, named):
    nested = tmp_path / "nested.toml"
    nested.write_text('[[steps]]\ncommand = "eval"\noptions = { run = "r", data = "d", beams = 4 }\n', encoding="utf-8")
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(SCAN_STEP.format(out=tmp_path / "scan") + "\n[[steps]]\n"
                        + second_step.format(nested=nested) + "\n", encoding="utf-8")

    code, stderr = benchbuild(monkeypatch, capsys, "run", str(pipeline))

    assert code in (1, 2)
    [line] = error_lines(stderr)
    assert named in line and "step" in line
    assert "Traceback" not in stderr
    assert not (tmp_path / "scan").exists()


def test_a_nested_recipe_that_runs_its_parent_is_refused_before_any_step(monkeypatch, capsys, tmp_path):
    pipeline, nested = tmp_path / "pipeline.toml", tmp_path / "nested.toml"
    pipeline.write_text(SCAN_STEP.format(out=tmp_path / "scan") + f'\n[[steps]]\ncommand = "run"\noptions = {{ recipe = "{nested}" }}\n',
                        encoding="utf-8")
    nested.write_text(f'[[steps]]\ncommand = "run"\noptions = {{ recipe = "{pipeline}" }}\n', encoding="utf-8")

    code, stderr = benchbuild(monkeypatch, capsys, "run", str(pipeline))

    assert code == 1
    assert "runs itself" in error_lines(stderr)[0]
    assert not (tmp_path / "scan").exists()


def test_a_valid_pipeline_runs_its_steps_in_order_with_a_nested_recipe_in_its_place(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # short relative paths: each step's announcement stays on one line
    Path("nested.toml").write_text(SCAN_STEP.format(out="second"), encoding="utf-8")
    Path("pipeline.toml").write_text(SCAN_STEP.format(out="first")
                                     + '\n[[steps]]\ncommand = "run"\noptions = { recipe = "nested.toml" }\n'
                                     + SCAN_STEP.format(out="third"), encoding="utf-8")

    code, stderr = benchbuild(monkeypatch, capsys, "run", "pipeline.toml")

    assert code == 0, stderr
    announced = [line.split(":")[0] for line in stderr.splitlines() if ".toml step " in line]
    assert announced == ["pipeline.toml step 1/3", "pipeline.toml step 2/3", "nested.toml step 1/1",
                         "pipeline.toml step 3/3"]
    # Each build finished before the next began: the nested recipe's between its parent's steps 1 and 3.
    written = [Path(out, "simple", "build.json").stat().st_mtime_ns for out in ("first", "second", "third")]
    assert written == sorted(written) and len(set(written)) == 3


def test_a_pipeline_rerun_goes_past_a_build_this_same_command_finished(shared_data, tmp_path, monkeypatch):
    """A pipeline whose later step failed is rerun as it is: its finished build-noun-adj step is kept (not refused
    with "already exists"), and the rerun fails only where the first run did."""
    from commands import benchbuild

    europarl = shared_data / "europarl-sample"
    for side in ("en", "fr"):
        lines = (europarl / f"europarl-v7.fr-en.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / f"corpus.{side}").write_text("".join(lines[:300]), encoding="utf-8")
    (tmp_path / "pipeline.toml").write_text(
        '[[steps]]\ncommand = "build-noun-adj"\n[steps.options]\nen = "corpus.en"\nfr = "corpus.fr"\n'
        'out = "out/nounadj"\nallow_small = true\n\n'
        '[[steps]]\ncommand = "train"\n[steps.options]\nmodel = "transformer"\ndata = "out/missing"\n'
        'out = "runs/x"\n', encoding="utf-8")
    runs = [benchbuild("run", "pipeline.toml", cwd=tmp_path) for _ in range(2)]
    built = (tmp_path / "out/nounadj/build.json").read_bytes()
    for result in runs:
        assert result.returncode == 1
        assert "out/missing" in result.stderr.splitlines()[-1]
    assert "already exists" not in runs[1].stderr and "kept" in runs[1].stderr
    assert (tmp_path / "out/nounadj/build.json").read_bytes() == built
