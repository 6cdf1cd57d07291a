"""Every citation of this repository's own code by line names what it cites, and the cited lines hold that name.

The one form: `FILE Lnnn (NAME)` or `FILE Lnnn-mmm (NAME)`, e.g. `training/loop.py L196 (validate_and_checkpoint)`,
`zoo/recipe.py L262-267 (TrainingRecipe.learning_rate_factor)`, `models/sag.toml L21 (init)`:

- FILE is a path relative to benchbuild/ or benchbuild/zoo/ (`metrics.py`, `zoo/recipe.py`, `models/sag.toml`);
- then one space, `L`, the first line, and for a range `-` and the last line (no second `L`);
- then one space and NAME in parentheses: an identifier, dotted for a method or attribute (`Class.method`).

NAME holds when it appears as a whole word on one of the cited lines (for a .toml file: in the key or table header
of one of them), or, for a .py file, when it names a `def` or `class` enclosing the first cited line (a dotted NAME:
the trailing names of the enclosing chain, `Class.method`). Two places are two citations, each with its own name.

Searched: benchbuild/zoo/models/*.toml, docs/*.md, pipelines/*.toml and every benchbuild/**/*.py (docstrings and
comments). A citation fails when it has no name in that form, when its file is not under benchbuild/ or
benchbuild/zoo/, when a line is past the end of the file, or when its name is not on (or around) the cited lines.
A bare line number (`and L395`) after a file of ours fails too: it is a citation without its file and name.

Other repositories' files (the authors' code: `run_react.sh L78`, `fairseq/...`) are cited in free form; their paths
are listed in FOREIGN, and a new one is added there, so that a misspelt path of ours cannot pass as someone else's."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "benchbuild"
BASES = (PACKAGE, PACKAGE / "zoo")

# Paths of other repositories' files cited by line (as written before the `L`); none of them is a file of ours.
FOREIGN = frozenset({
    "bleu.py",
    "ctronn_attention.py",
    "ctronn_decoder.py",
    "ctronn_encoder.py",
    "evaluate_bleu.py",
    "examples/scaling_nmt/README.md",
    "fairseq/data/encoders/space_tokenizer.py",
    "fairseq/models/ctronn_attention.py",
    "fairseq/models/transformer.py",
    "fairseq/optim/adam.py",
    "fairseq/scoring/bleu.py",
    "layers/tied_embedding.py",
    "layers/transformer/multi_head_relative_pos_attention.py",
    "libbleu.cpp",
    "preprocess_cognition.sh",
    "run_react.sh",
    "scripts/infer-one-click-run.sh",
    "scripts/train.sh",
    "train.sh",
    "train_defaults_fra_MT_test_lr0p00015.sh",
    "train_synact_fra_MT_test_lr0p00015.sh",
    "train_test.py",
})

EXTENSIONS = "py|toml|md|sh|cpp|json|yaml|yml|txt|cfg"
# A file path: at least one word character before its extension, not part of a longer path or word.
PATH = rf"(?<![\w/.-])(?:[\w.-]+/)*[\w.-]*\w\.(?:{EXTENSIONS})(?![\w/-])"
PATH_TOKEN = re.compile(PATH)
# A path followed by a line number: whitespace between, a wrapped comment's `#` included.
CANDIDATE = re.compile(rf"(?P<file>{PATH})(?:\s|\n\s*#)+(?=L\d)")
# What must follow a candidate of ours: the one form.
CITED = re.compile(r"L(?P<first>\d+)(?:-(?P<last>\d+))? \((?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\)")
LINE_NUMBER = re.compile(r"(?<![\w/.-])L\d+(?:-L?\d+)?\b")
PARAGRAPH_BREAK = re.compile(r"\n\s*(?:#\s*)?\n")


def cited_files() -> list[Path]:
    models = sorted((PACKAGE / "zoo" / "models").glob("*.toml"))
    docs = sorted((ROOT / "docs").glob("*.md"))
    pipelines = sorted((ROOT / "pipelines").glob("*.toml"))
    code = sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)
    return [*models, *docs, *pipelines, *code]


@dataclass(frozen=True)
class Citation:
    """One `FILE Lnnn...` found in `source` (at line `line`), and what follows it."""

    source: Path
    line: int
    file: str
    text: str

    def where(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}: {self.text!r}"


def ours(file: str) -> Path | None:
    """The file of ours a cited path names (relative to benchbuild/ or benchbuild/zoo/), or None."""
    for base in BASES:
        path = base / file
        if path.is_file():
            return path
    return None


@functools.cache
def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@functools.cache
def scopes_of(path: Path) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first line, last line, qualified names) of every def and class of a Python file, decorators included."""
    scopes: list[tuple[int, int, tuple[str, ...]]] = []

    def visit(node: ast.AST, outer: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = (*outer, child.name)
                start = min([child.lineno, *(decorator.lineno for decorator in child.decorator_list)])
                scopes.append((start, child.end_lineno, names))
                visit(child, names)
            else:
                visit(child, outer)

    visit(ast.parse(path.read_text(encoding="utf-8")), ())
    return scopes


def whole_word(name: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def toml_key(line: str) -> str:
    """The key (or table header) of a TOML line: what precedes its `=`, or its `[...]`."""
    stripped = line.strip()
    if stripped.startswith("["):
        return stripped.split("]", 1)[0]
    return stripped.split("=", 1)[0] if "=" in stripped else ""


def holds(path: Path, first: int, last: int, name: str) -> bool:
    cited = lines_of(path)[first - 1:last]
    if path.suffix == ".toml":
        return any(whole_word(name, toml_key(line)) for line in cited)
    if any(whole_word(name, line) for line in cited):
        return True
    if path.suffix == ".py":
        parts = tuple(name.split("."))
        return any(start <= first <= end and names[-len(parts):] == parts
                   for start, end, names in scopes_of(path))
    return False


def problem(citation: Citation, after: str) -> str | None:
    """Why a citation of our code is wrong, or None when it is right."""
    path = ours(citation.file)
    if path is None:
        return (f"no file {citation.file} under benchbuild/ or benchbuild/zoo/ (if it is another repository's file, "
                "add its path to FOREIGN)")
    match = CITED.match(after)
    if match is None:
        return "not in the form `FILE Lnnn (NAME)` or `FILE Lnnn-mmm (NAME)`: it names nothing"
    first = int(match["first"])
    last = int(match["last"] or first)
    length = len(lines_of(path))
    if not 1 <= first <= last:
        return f"lines {first}-{last} are not a range"
    if last > length:
        return f"{citation.file} has {length} lines, not {last}"
    if not holds(path, first, last, match["name"]):
        where = "in a key of" if path.suffix == ".toml" else "on"
        around = f" nor a def/class around line {first}" if path.suffix == ".py" else ""
        return f"{match['name']} is not {where} {citation.file} lines {first}-{last}{around}"
    return None


def paragraph_start(text: str, offset: int) -> int:
    starts = [match.end() for match in PARAGRAPH_BREAK.finditer(text, 0, offset)]
    return starts[-1] if starts else 0


def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def bad_citations() -> tuple[list[str], int]:
    """Every bad citation of our code, as `source:line: text: why`, and how many citations of our code there are."""
    bad: list[str] = []
    count = 0
    for source in cited_files():
        text = source.read_text(encoding="utf-8")
        consumed: set[int] = set()
        for match in CANDIDATE.finditer(text):
            file = match["file"]
            consumed.add(match.end())
            if file in FOREIGN:
                continue
            count += 1
            after = text[match.end():match.end() + 200]
            shown = text[match.start():match.end()] + after.split("\n", 1)[0][:80]
            citation = Citation(source, line_at(text, match.start()), file, " ".join(shown.split()))
            why = problem(citation, after)
            if why is not None:
                bad.append(f"{citation.where()}: {why}")
        # A line number not right after its file belongs to the nearest file named before it in the same paragraph:
        # one of ours means a citation without its file and name.
        for match in LINE_NUMBER.finditer(text):
            if match.start() in consumed:
                continue
            start = paragraph_start(text, match.start())
            files = [token.group() for token in PATH_TOKEN.finditer(text, start, match.start())]
            if files and files[-1] not in FOREIGN and ours(files[-1]) is not None:
                count += 1
                bad.append(f"{source.relative_to(ROOT)}:{line_at(text, match.start())}: {match.group()!r} after "
                           f"{files[-1]}: write each line number as its own `{files[-1]} Lnnn (NAME)`")
    return bad, count


def test_foreign_paths_are_not_ours():
    assert [file for file in sorted(FOREIGN) if ours(file) is not None] == []


def test_every_citation_of_our_code_names_what_its_lines_hold():
    bad, count = bad_citations()
    assert count > 0
    assert not bad, (f"{len(bad)} of {count} citations of benchbuild's code are wrong (the form is "
                     "`FILE Lnnn (NAME)`, see tests/test_code_citations.py):\n" + "\n".join(bad))
