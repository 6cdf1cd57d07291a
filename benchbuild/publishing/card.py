"""A benchmark's data card as text with parts: its Hugging Face front matter and its `## ` sections, read from the
README.md a build wrote and written back, with other sections, as the published folder's card."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchbuild.errors import BenchbuildError


@dataclass
class CardText:
    """A card: its front matter, and its sections as (title, text) in order; the part above the first `## ` heading
    (the `# ` title) has the title ""."""

    front: dict[str, Any]
    sections: list[tuple[str, str]]

    @classmethod
    def read(cls, path: Path) -> "CardText":
        """The card at `path`; one without a YAML front matter is a BenchbuildError naming it."""
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        match = re.match(r"---\n(.*?\n)---\n(.*)", text, re.DOTALL)
        front = yaml.safe_load(match.group(1)) if match else None
        if not isinstance(front, dict):
            raise BenchbuildError(f"{path} has no YAML front matter (a `---` block first): it is not a card "
                                  "benchbuild wrote; rebuild the benchmark folder")
        sections: list[tuple[str, str]] = [("", "")]
        for line in match.group(2).splitlines(keepends=True):
            if line.startswith("## "):
                sections.append((line[3:].strip(), ""))
            else:
                title, body = sections[-1]
                sections[-1] = (title, body + line)
        return cls(front=front, sections=[(title, body.strip("\n")) for title, body in sections])

    def section(self, title: str) -> str:
        """The text of the section `title` ("" when the card has none)."""
        return next((body for name, body in self.sections if name == title), "")

    def bullets(self, title: str) -> list[str]:
        """The top-level bullet points of section `title`, each as one line of text without its bold markers."""
        items: list[str] = []
        for line in self.section(title).splitlines():
            if line.startswith("- "):
                items.append(line[2:].replace("**", "").strip())
            elif items and line.startswith("  ") and not line.lstrip().startswith("- "):
                items[-1] += " " + line.strip()
        return items

    def code(self, title: str) -> str:
        """The content of the first fenced code block of section `title` ("" when it has none)."""
        match = re.search(r"```[^\n]*\n(.*?)```", self.section(title), re.DOTALL)
        return match.group(1) if match else ""

    def replaced(self, drop: tuple[str, ...], add: list[tuple[str, str]]) -> "CardText":
        """This card less the sections titled in `drop`, with `add` appended."""
        kept = [(title, body) for title, body in self.sections if title not in drop]
        return CardText(front=self.front, sections=kept + add)

    def render(self) -> str:
        """The README.md text, formatted as `benchbuild.cards.render_card` formats a card."""
        header = yaml.safe_dump(self.front, sort_keys=False, allow_unicode=True, width=1000)
        parts = [body if not title else f"## {title}\n\n{body}" for title, body in self.sections]
        return f"---\n{header}---\n\n" + "\n\n".join(part for part in parts if part) + "\n"
