"""What a published benchmark asks its users to cite: the BibTeX of the paper(s) its family follows, the entries its
card already cites, and benchbuild itself (generated from the repository's `CITATION.cff`).

`FAMILY_PAPERS` is keyed by a BuildInfo's `family`; a family it does not list (an import filed under a new name)
is cited by its card's entries alone.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any, Iterable, Mapping

import yaml

from benchbuild.errors import BenchbuildError

PAPER_BIBTEX: Mapping[str, str] = {
    "lake2018generalization": """\
@inproceedings{lake2018generalization,
  title     = {Generalization without Systematicity: On the Compositional Skills of Sequence-to-Sequence Recurrent
               Networks},
  author    = {Lake, Brenden M. and Baroni, Marco},
  booktitle = {Proceedings of the 35th International Conference on Machine Learning},
  year      = {2018}
}""",
    "russin2020compositional": """\
@inproceedings{russin2020compositional,
  title     = {Compositional Generalization by Factorizing Alignment and Translation},
  author    = {Russin, Jacob and Jo, Jason and O'Reilly, Randall C. and Bengio, Yoshua},
  booktitle = {Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics: Student
               Research Workshop},
  pages     = {313--327},
  year      = {2020}
}""",
    "chaabouni-etal-2021-transformers": """\
@inproceedings{chaabouni-etal-2021-transformers,
  title     = {Can Transformers Jump Around Right in Natural Language? Assessing Performance Transfer from {SCAN}},
  author    = {Chaabouni, Rahma and Dess{\\`i}, Roberto and Kharitonov, Eugene},
  booktitle = {Proceedings of the Fourth BlackboxNLP Workshop on Analyzing and Interpreting Neural Networks for NLP},
  year      = {2021},
  publisher = {Association for Computational Linguistics}
}""",
    "zheng-lapata-2023-real": """\
@inproceedings{zheng-lapata-2023-real,
  title     = {Real-World Compositional Generalization with Disentangled Sequence-to-Sequence Learning},
  author    = {Zheng, Hao and Lapata, Mirella},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2023},
  year      = {2023}
}""",
}

# The papers whose construction each family follows (a SCAN splitting's card adds the paper of its rule: Loula et
# al. for template splits, Csordás et al. for length cutoffs).
FAMILY_PAPERS: Mapping[str, tuple[str, ...]] = {
    "scan": ("lake2018generalization",),
    "nounadj": ("chaabouni-etal-2021-transformers",),
    "react": ("zheng-lapata-2023-real",),
    # Lake & Baroni's English-French set (§5), as Russin et al. (002 Table 3) released and scored it.
    "lake_baroni_en_fr": ("lake2018generalization", "russin2020compositional"),
}

_ENTRY_START = re.compile(r"^@\s*(\w+)\s*[{(]\s*([^,\s]+)\s*,", re.MULTILINE)


def bibtex_entries(text: str) -> dict[str, str]:
    """The entries of a BibTeX text by key, in order; text outside entries (`%` comments) is left out."""
    starts = list(_ENTRY_START.finditer(text))
    entries = {}
    for start, following in zip(starts, [*starts[1:], None]):
        body = text[start.start():following.start() if following else len(text)]
        entries[start.group(2)] = _without_trailing_comments(body)
    return entries


def _without_trailing_comments(entry: str) -> str:
    lines = entry.rstrip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("%")):
        lines.pop()
    return "\n".join(lines)


def benchmark_citations(family: str, card_bibtex: str) -> dict[str, str]:
    """The BibTeX entries a benchmark of `family` asks to cite, by key: its card's own (`card_bibtex`, what the build
    or import recorded), then the papers `FAMILY_PAPERS` gives the family that the card does not already cite."""
    entries = bibtex_entries(card_bibtex)
    for key in FAMILY_PAPERS.get(family, ()):
        entries.setdefault(key, PAPER_BIBTEX[key])
    return entries


def read_citation_file() -> dict[str, Any]:
    """benchbuild's `CITATION.cff` (the repository root's, shipped inside the package) as a mapping."""
    text = files("benchbuild.publishing").joinpath("CITATION.cff").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def software_bibtex(cff: Mapping[str, Any]) -> str:
    """A `@software` BibTeX entry from a Citation File Format mapping: title, authors (persons and entities), version,
    year of `date-released`, DOI, URL and licence, where the file gives them."""
    missing = [key for key in ("title", "authors") if not cff.get(key)]
    if missing:
        raise BenchbuildError(f"CITATION.cff lacks {' and '.join(missing)}: a citation needs both")
    fields = {"title": f"{{{cff['title']}}}",  # braced once more: BibTeX styles keep its capitals
              "author": " and ".join(map(_bibtex_name, cff["authors"]))}
    if cff.get("version") is not None:
        fields["version"] = str(cff["version"])
    if cff.get("date-released") is not None:
        fields["year"] = str(cff["date-released"])[:4]
    if cff.get("doi"):
        fields["doi"] = str(cff["doi"])
    url = cff.get("repository-code") or cff.get("url")
    if url:
        fields["url"] = str(url)
    if cff.get("license"):
        fields["license"] = str(cff["license"])
    key = re.sub(r"[^a-z0-9]+", "", str(cff["title"]).split(":")[0].lower()) or "software"
    width = max(map(len, fields))
    body = ",\n".join(f"  {name.ljust(width)} = {{{value}}}" for name, value in fields.items())
    return f"@software{{{key},\n{body}\n}}"


def _bibtex_name(author: Mapping[str, Any]) -> str:
    """A CFF person as `von Last, Jr, First`; an entity (a `name`) braced, so BibTeX keeps it whole."""
    if author.get("family-names"):
        last = " ".join(filter(None, (author.get("name-particle"), author["family-names"])))
        return ", ".join(filter(None, (last, author.get("name-suffix"), author.get("given-names"))))
    if author.get("name"):
        return f"{{{author['name']}}}"
    raise BenchbuildError(f"CITATION.cff author {dict(author)!r} has neither family-names nor name")


def citation_block(entries: Iterable[str]) -> str:
    """The entries as one BibTeX text, a blank line between them."""
    return "\n\n".join(entry.strip() for entry in entries) + "\n"
