"""Reading the canonical SCAN files (`IN: … OUT: …` lines) from a checkout of the SCAN repository."""

from __future__ import annotations

import re
from pathlib import Path

from benchbuild.errors import BenchbuildError
from benchbuild.scan.grammar import Example, interpret
from benchbuild.text_files import read_text

_PATTERNS = [
    (r"simple", "simple_split/tasks_{split}_simple.txt"),
    (r"simple_p(\d+)", "simple_split/size_variations/tasks_{split}_simple_p{0}.txt"),
    (r"length", "length_split/tasks_{split}_length.txt"),
    (r"addprim_(jump|turn_left)", "add_prim_split/tasks_{split}_addprim_{0}.txt"),
    (r"addprim_jump_num(\d+)_rep(\d+)", "add_prim_split/with_additional_examples/tasks_{split}_addprim_complex_jump_num{0}_rep{1}.txt"),
    (r"template_(\w+)", "template_split/tasks_{split}_template_{0}.txt"),
    (r"filler_num(\d+)", "filler_split/tasks_{split}_filler_num{0}.txt"),
    (r"fewshot_num(\d+)_rep(\d+)", "few_shot_split/tasks_{split}_fewshot_num{0}_rep{1}.txt"),
]


def official_files(name: str) -> dict[str, str] | None:
    """The canonical train/test file of a splitting, relative to a SCAN checkout; None where the repository has none."""
    for pattern, path in _PATTERNS:
        match = re.fullmatch(pattern, name)
        if match:
            return {split: path.format(*match.groups(), split=split) for split in ("train", "test")}
    return None


def check_official(root: Path, names: list[str]) -> None:
    """Fail before building anything when a requested splitting's canonical file is missing."""
    if not root.is_dir():
        raise BenchbuildError(f"--official {root} is not a folder (expected a checkout of the SCAN repository)")
    for name in names:
        files = official_files(name)
        for relative in (files or {}).values():
            if not (root / relative).is_file():
                raise BenchbuildError(f"--official {root} has no {relative} (needed for {name}); "
                                      f"choose splittings it has with --split")


def read_scan_file(path: Path) -> list[Example]:
    """Rows of one canonical file, each checked against the grammar's interpretation."""
    examples = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        match = re.fullmatch(r"IN: (.+?) OUT: (.+)", line.strip())
        if not match:
            raise BenchbuildError(f"{path}, line {number}: not a SCAN line ('IN: <command> OUT: <actions>')")
        command, actions = match.groups()
        try:
            expected = interpret(command)
        except (KeyError, ValueError, IndexError):
            raise BenchbuildError(f"{path}, line {number}: {command!r} is not a SCAN command") from None
        if expected != actions:
            raise BenchbuildError(f"{path}, line {number}: the actions of {command!r} are not what the grammar gives")
        examples.append(Example(command, actions))
    return examples
