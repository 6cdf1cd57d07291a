"""Where a command may write: the output-path rules every command checks before it starts working.

benchbuild never deletes, replaces or writes through anything it did not create. Every command that writes calls
`check_output` with its output and its inputs before any expensive stage:
- an output is never an input of the same command, never inside one, and never holds one;
- an existing output is replaced only with `--overwrite`, and only when it is something benchbuild wrote, of the
  kind the command writes (`OWNERS`: a benchmark folder, a published folder, a run folder, a degree TSV, a
  metrics JSON, a report file), recognised by the files it always writes; anything else is refused with one line
  saying what is there.
Names that become part of a path (a sweep's `name`, a benchmark's `name`) pass `check_name`; relative paths given in
a file (`out`, `data`) pass `check_relative`. An empty path is refused where it is parsed (`check_path_text`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable, Mapping

from benchbuild.errors import BenchbuildError


def check_path_text(value: Any, what: str) -> str:
    """`value` as a path text: a non-empty string (an empty shell variable gives "", which would mean the current
    folder)."""
    if isinstance(value, PurePath):
        value = str(value)
    if not isinstance(value, str):
        raise BenchbuildError(f"{what} must be a path (a string); got {type(value).__name__} {value!r}")
    if not value.strip():
        raise BenchbuildError(f"{what} is empty (an unset shell variable?): give a path")
    if "\0" in value:
        raise BenchbuildError(f"{what} holds a NUL character: give a path")
    return value


def check_name(value: Any, what: str) -> str:
    """A name that becomes one path component (a folder name): a non-empty string without separators, not `.` or
    `..`."""
    text = check_path_text(value, what)
    if "/" in text or "\\" in text or text in (".", "..") or text != text.strip():
        raise BenchbuildError(f"{what} {text!r} must be a plain name (no '/', '\\\\', '.', '..' or surrounding "
                              "spaces): it names a folder")
    return text


def check_relative(value: Any, what: str) -> str:
    """A relative path that must stay inside the folder it is taken from: no absolute path, no `..` part."""
    text = check_path_text(value, what)
    path = PurePath(text)
    if path.is_absolute() or ".." in path.parts:
        raise BenchbuildError(f"{what} {text!r} must be a relative path without '..': it is placed inside "
                              "the folder benchbuild writes")
    return text


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None


def is_benchmark_folder(path: Path) -> bool:
    """A folder `Benchmark.save` wrote: its `build.json` (a BuildInfo, perhaps missing a key) and its card."""
    info = _read_json(path / "build.json")
    return (path.is_dir() and not path.is_symlink() and isinstance(info, dict)
            and bool({"family", "splits", "command_line"} & info.keys()) and (path / "README.md").is_file())


def is_published_folder(path: Path) -> bool:
    """A folder `publish` wrote: a benchmark folder (build.json and README.md) with its `croissant.json`."""
    return is_benchmark_folder(path) and isinstance(_read_json(path / "croissant.json"), dict)


def is_run_folder(path: Path) -> bool:
    """A folder `train` wrote: its `run.json` with the run's identity."""
    run = _read_json(path / "run.json")
    return path.is_dir() and not path.is_symlink() and isinstance(run, dict) and "identity" in run


def is_degree_table(path: Path) -> bool:
    """A TSV `degree` wrote: its header line is `line<TAB>degree`."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return handle.readline() == "line\tdegree\n"
    except (OSError, UnicodeDecodeError):
        return False


def is_metrics_file(path: Path) -> bool:
    """A JSON file `score` or `eval` wrote: an object naming the benchmark and split it scores."""
    value = _read_json(path)
    return isinstance(value, dict) and "benchmark" in value and "split" in value


# How each report format begins (the html: its generator tag, within its head). Markdown reports begin with the
# comment since "What is missing" went first; those written before began with the table.
MARKDOWN_SIGNATURE = "<!-- Written by `benchbuild report` -->"
REPORT_SIGNATURES = {".md": (MARKDOWN_SIGNATURE, "| model | benchmark |"), ".csv": "model,benchmark,split,metric,",
                     ".tex": "% Written by `benchbuild report`", ".bib": "% Written by `benchbuild report`",
                     ".html": '<meta name="generator" content="benchbuild report">'}


def is_report_file(path: Path) -> bool:
    """A file `report` wrote, recognised by how its format begins (`REPORT_SIGNATURES`)."""
    signature = REPORT_SIGNATURES.get(path.suffix)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            head = handle.read(1024)
    except (OSError, UnicodeDecodeError):
        return False
    if signature is None:
        return False
    return signature in head if path.suffix == ".html" else head.startswith(signature)


def is_report_figures(path: Path) -> bool:
    """A figure folder `report` wrote: nothing but its PNG and PDF figures in it."""
    return path.is_dir() and not path.is_symlink() and all(
        entry.is_file() and not entry.is_symlink() and entry.suffix in (".png", ".pdf") for entry in path.iterdir())


OWNERS: Mapping[str, tuple[str, Callable[[Path], bool]]] = {
    "benchmark": ("a benchmark folder benchbuild wrote (build.json and README.md)", is_benchmark_folder),
    "published": ("a folder benchbuild publish wrote (croissant.json, README.md and build.json)", is_published_folder),
    "run": ("a run folder benchbuild wrote (run.json)", is_run_folder),
    "degree": ("a degree table benchbuild wrote (a TSV whose header is 'line<TAB>degree')", is_degree_table),
    "metrics": ("a metrics file benchbuild wrote (JSON naming its benchmark and split)", is_metrics_file),
    "report": ("a report file benchbuild wrote", is_report_file),
    "figures": ("a report's figure folder (PNG and PDF files only)", is_report_figures),
}


def _describe(path: Path) -> str:
    if path.is_symlink():
        return f"a symbolic link to {os.readlink(path)}"
    if path.is_dir():
        names = sorted(entry.name for entry in path.iterdir())
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return f"a folder holding {shown}" if names else "an empty folder"
    return f"a file of {path.stat().st_size:,} bytes"


def _resolved(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


def check_disjoint(out: Path, option: str, inputs: Iterable[tuple[str, Path | None]]) -> None:
    """Refuse an output that is an input, holds one, or lies inside one (symbolic links followed)."""
    target = _resolved(out)
    for name, given in inputs:
        if given is None or str(given) == "":
            continue
        source = _resolved(Path(given))
        if target == source:
            raise BenchbuildError(f"{option} {out} is the command's input {name} {given}: choose another {option}")
        if source.is_relative_to(target):
            raise BenchbuildError(f"{option} {out} holds the command's input {name} {given}: writing there could "
                                  f"replace it; choose another {option}")
        if target.is_relative_to(source):
            raise BenchbuildError(f"{option} {out} lies inside the command's input {name} {given}: choose an "
                                  f"{option} outside it")


def check_output(out: Path, option: str, kind: str, *, inputs: Iterable[tuple[str, Path | None]] = (),
                 overwrite: bool = False, exists: str = "refuse") -> None:
    """The output rules for `out` (given as `option`), checked before any work: disjoint from `inputs` (name, path)
    pairs; when it exists, `exists` says what the command does: "refuse" (unless `overwrite`), or "continue" (it
    resumes or adds to what is there, like `train` and `eval`): either way an existing output must be benchbuild's,
    of `kind`, to be replaced or continued. A symbolic link is never an output."""
    check_path_text(str(out), option)
    _check_name_length(out, option)
    check_disjoint(out, option, inputs)
    _check_not_in_benchmark(out, option)
    if out.is_symlink():
        raise BenchbuildError(f"{option} {out} is a symbolic link (to {os.readlink(out)}): benchbuild never writes "
                              "through a link; give the real path")
    if not out.exists():
        _check_creatable(out, option)
        return
    description, owned = OWNERS[kind]
    if exists == "refuse" and not overwrite:
        raise BenchbuildError(f"{option} {out} already exists: pass --overwrite to replace it")
    if owned(out) or (out.is_dir() and kind in ("run", "benchmark", "figures") and _only_claims(out)):
        return
    raise BenchbuildError(f"{option} {out} exists and is not {description}: it is {_describe(out)}; benchbuild "
                          f"replaces only what it wrote, so choose another {option}")


# A file system takes names of at most 255 bytes, and an output is first written under a temporary name beside it,
# its own name with about 30 bytes more (`atomic`: ".NAME.partial-<pid>-<8 hex>").
LONGEST_NAME = 255 - 30


def _check_name_length(out: Path, option: str) -> None:
    length = len(out.name.encode("utf-8", "surrogateescape"))
    if length > LONGEST_NAME:
        raise BenchbuildError(f"{option}: the name {out.name[:40]}... is {length} bytes long; benchbuild writes each "
                              f"output under a temporary name about 30 bytes longer beside it, and a file system "
                              f"takes names of at most 255 bytes: choose a name of at most {LONGEST_NAME} bytes")


def _check_not_in_benchmark(out: Path, option: str) -> None:
    """A benchmark folder is complete as `Benchmark.save` wrote it: nothing is written inside one (links followed)."""
    for folder in _resolved(out).parents:
        if is_benchmark_folder(folder):
            raise BenchbuildError(f"{option} {out} lies inside the benchmark folder {folder}: a benchmark folder "
                                  f"holds only what its build wrote; choose an {option} outside it")


def check_can_write(out: Path, option: str) -> None:
    """`out`, an existing folder the command writes in, or a new one, may be written by the user who runs the command
    (`os.access` asks as that user; a read-only file system refuses even root): checked before any work starts."""
    if out.is_dir():
        if not os.access(out, os.W_OK | os.X_OK):
            raise BenchbuildError(f"{option} {out}: cannot write in it (permission denied or a read-only file system)")
        return
    _check_creatable(out, option)


def _check_creatable(out: Path, option: str) -> None:
    """The nearest existing folder above a new output is a folder this process may write in."""
    parent = Path(os.path.abspath(out)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise BenchbuildError(f"{option} {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BenchbuildError(f"{option} {out}: cannot write in {parent} (permission denied or a read-only file "
                              "system)")


# Files other benchbuild commands put in a run folder before training starts (`sweep` records the run's
# configuration first; the lock comes with every claim): a folder holding only these is a new run's.
CLAIM_FILES = frozenset({"sweep_run.json", ".benchbuild.lock"})


def _only_claims(folder: Path) -> bool:
    return all(entry.name in CLAIM_FILES for entry in folder.iterdir())


def path_inputs(parameters: Any, skip: Iterable[str] = ()) -> list[tuple[str, Path | None]]:
    """The (option, path) pairs of every Path field of a parameters dataclass (lists expanded), less `skip`."""
    pairs: list[tuple[str, Path | None]] = []
    for field in dataclasses.fields(parameters):
        if field.name in skip:
            continue
        value = getattr(parameters, field.name)
        option = "--" + field.name.replace("_", "-")
        if isinstance(value, Path):
            pairs.append((option, value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(item, Path) for item in value):
            pairs += [(option, item) for item in value]
    return pairs
