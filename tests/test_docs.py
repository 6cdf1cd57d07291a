"""The documentation shows commands that run: every `benchbuild` command README.md and docs/*.md show (a line of a
fenced block, or an inline `benchbuild ...` span) names a command of `benchbuild.cli.app` and only options that command
has; every `make` line names targets of the Makefile; every pipeline file a command names exists; docs/commands.md
lists every command; and every relative link (and its #anchor) leads to a file and a heading that exist."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from benchbuild.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
# `$ ` prompts and `NAME=value ` environment assignments may precede the program.
PROGRAM = re.compile(r"^(?:\$\s+)?(?:[A-Za-z_]\w*=\S*\s+)*(benchbuild|make)(?:\s+|$)(.*)$", re.DOTALL)
# In prose: `benchbuild ...`, or the module run by a launcher (`python -m benchbuild ...`, `accelerate launch -m ...`).
INLINE_PROGRAM = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)*benchbuild\s+(.*)$|\s-m\s+benchbuild\s+(.*)$", re.DOTALL)
INLINE_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
# What follows a command on its line and is not part of it: a shell comment, or, in the listing of docs/commands.md,
# a description set off by three or more spaces.
DESCRIPTION = re.compile(r"\s#\s|\s{3,}")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Shown:
    """One command a document shows: where (file:line), the program, and the words after it."""

    where: str
    program: str
    words: str


def where(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def numbered_lines(path: Path, fenced: bool) -> list[tuple[int, str]]:
    """(line number, text) of the lines inside fenced code blocks (`fenced`), or of the lines outside them."""
    inside, lines = False, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            inside = not inside
        elif inside == fenced:
            lines.append((number, line))
    return lines


def fenced_commands(path: Path) -> list[Shown]:
    """The `benchbuild` and `make` command lines of a document's fenced blocks. A line ending in `\\` continues on the
    next; so does an indented line right after a command (the listing of docs/commands.md wraps long ones so)."""
    shown: list[Shown] = []
    current: dict | None = None
    previous = None
    for number, line in numbered_lines(path, fenced=True):
        adjacent, previous = previous == number - 1, number
        text = line.rstrip()
        continues = text.endswith("\\")
        text = text.removesuffix("\\")
        if current and adjacent and (current["continues"] or line[:1].isspace()):
            current["words"] += " " + DESCRIPTION.split(text.strip(), maxsplit=1)[0]
            current["continues"] = continues
            continue
        if current:
            shown.append(Shown(current["where"], current["program"], " ".join(current["words"].split())))
            current = None
        found = PROGRAM.match(text.strip())
        if found:
            current = {"where": f"{where(path)}:{number}", "program": found.group(1), "continues": continues,
                       "words": DESCRIPTION.split(found.group(2), maxsplit=1)[0]}
    if current:
        shown.append(Shown(current["where"], current["program"], " ".join(current["words"].split())))
    return shown


def inline_commands(path: Path) -> list[Shown]:
    """The `benchbuild ...` spans of a document's prose (a span may wrap onto the next line of its paragraph)."""
    lines = numbered_lines(path, fenced=False)
    shown = []
    for index, (number, _) in enumerate(lines):
        if index and lines[index - 1][0] == number - 1 and lines[index - 1][1].strip():
            continue  # not the first line of a paragraph
        paragraph = []
        for next_number, text in lines[index:]:
            if next_number != number + len(paragraph) or not text.strip():
                break
            paragraph.append(text)
        text = "\n".join(paragraph)
        for span in INLINE_CODE.finditer(text):
            found = INLINE_PROGRAM.search(span.group(1))
            if found:
                line = number + text.count("\n", 0, span.start())
                shown.append(Shown(f"{where(path)}:{line}", "benchbuild", " ".join((found.group(1) or found.group(2)).split())))
    return shown


FENCED = [command for path in DOCS for command in fenced_commands(path)]
BENCHBUILD = [command for command in FENCED if command.program == "benchbuild"] + [
    command for path in DOCS for command in inline_commands(path)]
MAKE = [command for command in FENCED if command.program == "make"]


@functools.cache
def group():
    return typer.main.get_command(app)


def option_names(command) -> set[str]:
    """A click command's option names, `--help` included (typer >= 0.24 carries its own copy of click, so parameters
    are told apart by `param_type_name`, not by class)."""
    names = {name for parameter in command.params if parameter.param_type_name == "option"
             for name in (*parameter.opts, *parameter.secondary_opts)}
    help_option = command.get_help_option(typer.Context(command))
    return names | set(help_option.opts if help_option else ())


def problems_of(words: str) -> list[str]:
    """What is wrong with `benchbuild WORDS`: an unknown command, or an option its command does not have. A word that is
    not a command name where the command stands (`benchbuild COMMAND --help`, `benchbuild ...`) is a placeholder: then
    only the options before it are checked, against the group's."""
    tokens = words.split()
    while tokens and tokens[0].startswith("--"):
        if tokens[0] not in option_names(group()):
            return [f"benchbuild has no option {tokens[0]}"]
        tokens.pop(0)
    if not tokens or not re.fullmatch(r"[a-z][a-z0-9-]*", tokens[0]):
        return []
    name = tokens[0]
    if name not in group().commands:
        return [f"benchbuild has no command {name!r}"]
    known = option_names(group().commands[name])
    return [f"benchbuild {name} has no option {option}"
            for option in OPTION.findall(" ".join(tokens[1:])) if option not in known]


def makefile_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        rule = re.match(r"^([^\s:#=][^:=]*?)\s*:(?!=)", line)
        if rule:
            targets.update(rule.group(1).split())
    return targets


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (word characters, hyphens and spaces kept),
    spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in numbered_lines(path, fenced=False):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return found


def relative_links(path: Path) -> list[tuple[Path, str, str]]:
    """(document, where, target) of every link in the document's prose that is not a URL."""
    links = []
    for number, line in numbered_lines(path, fenced=False):
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: and the like are not checked
                links.append((path, f"{where(path)}:{number}", target))
    return links


LINKS = [link for path in DOCS for link in relative_links(path)]


def test_the_documents_are_read_and_their_commands_found():
    assert {"README.md", "commands.md", "catalogue.md"} <= {path.name for path in DOCS}
    assert len(BENCHBUILD) > 50 and len(LINKS) > 10
    assert {"quickstart", "test", "test-quick"} <= {word for command in MAKE for word in command.words.split()}


@pytest.mark.parametrize("shown", BENCHBUILD, ids=lambda shown: shown.where)
def test_a_shown_benchbuild_command_has_every_option_it_uses(shown):
    assert not problems_of(shown.words), f"{shown.where}: benchbuild {shown.words}"


@pytest.mark.parametrize("shown", MAKE, ids=lambda shown: shown.where)
def test_a_shown_make_command_names_targets_of_the_makefile(shown):
    words = [word for word in shown.words.split() if "=" not in word and not word.startswith("-")]
    missing = set(words) - makefile_targets()
    assert words and not missing, f"{shown.where}: make {shown.words}: no target {sorted(missing)}"


@pytest.mark.parametrize("shown", BENCHBUILD, ids=lambda shown: shown.where)
def test_a_pipeline_file_a_shown_command_names_exists(shown):
    named = re.findall(r"(?<![\w/.])pipelines/[\w.-]+\.toml", shown.words)
    assert all((ROOT / name).is_file() for name in named), f"{shown.where}: {named}"


def test_the_command_line_page_lists_every_command():
    listed = {command.words.split()[0] for command in fenced_commands(ROOT / "docs" / "commands.md")
              if command.program == "benchbuild" and command.words}
    assert set(group().commands) <= listed, sorted(set(group().commands) - listed)


@pytest.mark.parametrize(("document", "where", "target"), LINKS, ids=[where for _, where, _ in LINKS])
def test_a_relative_link_leads_to_a_file_and_heading_that_exist(document, where, target):
    file, _, anchor = target.partition("#")
    destination = (document.parent / file).resolve() if file else document
    assert destination.exists(), f"{where}: {target}: no such file"
    if anchor and destination.suffix == ".md":
        assert anchor in anchors(destination), f"{where}: {target}: {destination.name} has no heading #{anchor}"


def test_an_option_a_command_does_not_have_is_found():
    assert problems_of("train --model transformer --data D --out R --max-step 5") == [
        "benchbuild train has no option --max-step"]
    assert problems_of("trian --model transformer") == ["benchbuild has no command 'trian'"]
    assert problems_of("--verbose zoo") == ["benchbuild has no option --verbose"]
    assert problems_of("--debug COMMAND ...") == [] and problems_of("sweep S.toml --jobs 4 --help") == []


def test_continued_lines_comments_and_prompts_are_read_as_a_shell_reads_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nOMP_NUM_THREADS=1 benchbuild degree --train-src a \\\n    --pool b --bogus\n"
                    "benchbuild zoo   # --not-checked\n"
                    "benchbuild sweep S.toml [--jobs N]\n           [--dry-run]\n                 a description\n"
                    "$ make test TORCH=\n```\n\nProse: `accelerate launch -m benchbuild train\n--bogus` and `benchbuild`.\n",
                    encoding="utf-8")
    assert [(shown.program, shown.words) for shown in fenced_commands(page)] == [
        ("benchbuild", "degree --train-src a --pool b --bogus"), ("benchbuild", "zoo"),
        ("benchbuild", "sweep S.toml [--jobs N] [--dry-run] a description"), ("make", "test TORCH=")]
    assert inline_commands(page) == [Shown("page.md:11", "benchbuild", "train --bogus")]
    assert problems_of(fenced_commands(page)[0].words) == ["benchbuild degree has no option --bogus"]


def test_github_anchors_drop_punctuation_and_number_repeats(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# On a GPU\n\n## Stacked runs (GPUs)\n\n## ReaCT and `degree` on a cluster\n\n## Notes\n\n## Notes\n"
                    "\n```bash\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"on-a-gpu", "stacked-runs-gpus", "react-and-degree-on-a-cluster", "notes", "notes-1"}
