"""The papers benchbuild implements, by the id the catalogue and the docs cite them with (000-004).

The ids are those of the texts in `../shared/papers/` (`000_….txt` …); a catalogue entry's `paper` and a reported
number's `table` ("000 Table 3") start with them, and `benchbuild zoo --papers` prints this table. The ids are for
the catalogue and the command line; what a reader sees names a paper by authors and year ("Chaabouni et al. (2021),
Table 3": `source_in_words`) and cites it from BibTeX entries generated here (`Paper.bibtex`, keys such as
`chaabouni2021`). Here too: the catalogue's reported numbers and fidelity tables in words, as `benchbuild zoo` prints
them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class Paper:
    """One paper: its full citation and what benchbuild takes from it."""

    id: str
    authors: str  # "First Last, First Last, ...", as the paper lists them
    title: str
    venue: str  # the proceedings, or "arXiv:NNNN.NNNNN" for a preprint
    year: int
    implements: str
    pages: str = ""  # "313-327"
    note: str = ""  # what a reader needs besides: an earlier version, a later revision

    def citation(self) -> str:
        venue = self.venue + (f", pages {self.pages}" if self.pages else "") + (f" ({self.note})" if self.note else "")
        return f"{self.authors} ({self.year}). {self.title}. {venue}."

    @property
    def surnames(self) -> list[str]:
        """The authors' last names, in order: the last word of each name."""
        return [name.split()[-1] for name in self.authors.split(", ")]

    @property
    def in_text(self) -> str:
        """The paper as a text citation names it (natbib's `\\citet`): "Chaabouni et al. (2021)", "Zheng and Lapata
        (2023)"."""
        names = self.surnames
        who = names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2 else f"{names[0]} et al."
        return f"{who} ({self.year})"

    @property
    def bibtex_key(self) -> str:
        """First author's last name (ASCII, lower case) and year, "chaabouni2021"; where another paper of `PAPERS`
        shares that, the first word of the title follows ("zheng2023real", "zheng2023layer")."""
        key = f"{_ascii_word(self.surnames[0])}{self.year}"
        if any(other.id != self.id and f"{_ascii_word(other.surnames[0])}{other.year}" == key
               for other in PAPERS.values()):
            key += next(word for word in map(_ascii_word, re.split(r"[\s-]+", self.title))
                        if word not in ("", "a", "an", "the"))
        return key

    def bibtex(self) -> str:
        """The paper as a BibTeX entry: `@inproceedings` (its venue as `booktitle`), or `@misc` for a preprint; the
        title braced once more, so a style keeps its capitals."""
        preprint = self.venue.startswith("arXiv:")
        fields = {"author": " and ".join(_bibtex_name(name) for name in self.authors.split(", ")),
                  "title": f"{{{_bibtex_text(self.title)}}}",
                  ("howpublished" if preprint else "booktitle"): _bibtex_text(self.venue),
                  "year": str(self.year)}
        if self.pages:
            fields["pages"] = self.pages.replace("-", "--")
        if self.note:
            fields["note"] = _bibtex_text(self.note)
        width = max(map(len, fields))
        body = ",\n".join(f"  {name.ljust(width)} = {{{value}}}" for name, value in fields.items())
        return f"@{'misc' if preprint else 'inproceedings'}{{{self.bibtex_key},\n{body}\n}}"


PAPERS: dict[str, Paper] = {paper.id: paper for paper in (
    Paper("000", "Rahma Chaabouni, Roberto Dessì, Eugene Kharitonov",
          "Can Transformers Jump Around Right in Natural Language? Assessing Performance Transfer from SCAN",
          "Proceedings of the Fourth BlackboxNLP Workshop on Analyzing and Interpreting Neural Networks for NLP", 2021,
          "noun-adjective order split (Table 2, §4.2), COMP (§5), SAG / conv / fixed-span / T5-bias Transformers "
          "(§3, App. A)"),
    Paper("001", "Hao Zheng, Mirella Lapata",
          "Real-World Compositional Generalization with Disentangled Sequence-to-Sequence Learning",
          "Findings of the Association for Computational Linguistics: ACL 2023", 2023,
          "ReaCT (§4: OOV filter, compositional degree, ensemble reverse mutual information), Dangle / R-Dangle "
          "(§2-3, App. B)"),
    Paper("002", "Jacob Russin, Jason Jo, Randall C. O'Reilly, Yoshua Bengio",
          "Compositional Generalization by Factorizing Alignment and Translation",
          "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics: Student Research "
          "Workshop", 2020,
          "Syntactic Attention (§2), SCAN grammar and semantics (App. A), template splits (App. D.3)",
          pages="313-327", note="first on arXiv as 1904.09708, 2019"),
    Paper("003", "Róbert Csordás, Kazuki Irie, Jürgen Schmidhuber",
          "The Devil is in the Detail: Simple Tricks Improve Systematic Generalization of Transformers",
          "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing (EMNLP)", 2021,
          "relative positional attention (App. C), embedding scaling TEU / none / PED (App. D), Universal "
          "Transformer, length cutoffs (§3)"),
    Paper("004", "Yafang Zheng, Lei Lin, Zhaohong Lai, Binling Wang, Shan Liu, Biao Fu, Wenhao Rao, Peigen Ye, "
          "Yidong Chen, Xiaodong Shi",
          "Layer-wise Representation Fusion for Compositional Generalization",
          "arXiv:2307.10799v1", 2023, "fuse-attention module (§2.2), CTER on CoGnition (§3.1)",
          note="the FUSION version; revised as LRF for AAAI 2024"),
)}


_BIBTEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_"}


def _bibtex_text(text: str) -> str:
    """`text` in a BibTeX field: LaTeX's special characters escaped (a .bib file is read as UTF-8)."""
    return "".join(_BIBTEX_SPECIAL.get(character, character) for character in text)


def _bibtex_name(name: str) -> str:
    """"Randall C. O'Reilly" as BibTeX's "O'Reilly, Randall C."."""
    *given, last = name.split()
    return _bibtex_text(", ".join(filter(None, (last, " ".join(given)))))


def _ascii_word(word: str) -> str:
    """`word` in lower-case ASCII letters, accents dropped: "Csordás" -> "csordas"."""
    return re.sub(r"[^a-z]", "", unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower())


_SOURCE = re.compile(r"^(\d{3})(?!\d)[ ,]*(.*)$", re.DOTALL)


def source_parts(source: str) -> tuple[Paper | None, str]:
    """A reported number's `table` as its paper and where in it: "000 Table 3" -> (PAPERS["000"], "Table 3"); (None,
    the text as it is) when it does not start with the id of a paper of `PAPERS`."""
    found = _SOURCE.match(source.strip())
    if found is None or found.group(1) not in PAPERS:
        return None, source
    return PAPERS[found.group(1)], found.group(2)


def cited_paper(source: str) -> Paper | None:
    """The paper a reported number's `table` ("000 Table 3") cites, when `PAPERS` has it."""
    return source_parts(source)[0]


def source_in_words(source: str) -> str:
    """A reported number's `table` with its paper named by authors and year: "000 Table 3" -> "Chaabouni et al.
    (2021), Table 3"; a reference that does not start with a paper of `PAPERS` is returned as it is."""
    paper, where = source_parts(source)
    if paper is None:
        return source
    return f"{paper.in_text}, {where}" if where else paper.in_text


def bibtex_file(papers: Iterable[Paper] | None = None) -> str:
    """The BibTeX entries of `papers` (default: every paper of `PAPERS`), a blank line between them."""
    papers = PAPERS.values() if papers is None else papers
    return "% UTF-8\n\n" + "\n\n".join(paper.bibtex() for paper in papers) + "\n"


def cited_ids(text: str) -> list[str]:
    """The paper ids a catalogue field cites, in order: "000, 003" -> ["000", "003"]; "—" -> []."""
    return re.findall(r"(?<!\d)\d{3}(?!\d)", text)


def reported_with(paper_id: str, entries: Iterable[Any]) -> list[str]:
    """How each number paper `paper_id` reports for a catalogue entry is trained here: one line per model and
    recipe, "transformer: recipe scan_000, select last: scan/addprim_jump, scan/simple" (entries: `ModelEntry`s)."""
    lines = []
    for entry in entries:
        benchmarks: dict[str, list[str]] = {}
        for row in entry.reported:
            if paper_id in cited_ids(row["table"]):
                names = benchmarks.setdefault(row.get("recipe", ""), [])
                if row["benchmark"] not in names:
                    names.append(row["benchmark"])
        for recipe, names in benchmarks.items():
            how = f"recipe {recipe}, select {selection_rule(entry.recipes[recipe])}" if recipe else "no recipe named"
            lines.append(f"{entry.name}: {how}: {', '.join(names)}")
    return lines


SPREADS = {"se": "s.e.", "std": "std", "iqr": "IQR"}


def statistic_in_words(row: Mapping[str, Any]) -> str:
    """What a `[[reported]]` number is, as its paper computed it (`catalogue.ReportedNumber`): "mean of 3 runs, ± 2
    (s.e.)", "median of 25 runs, runs with train exact match ≤ 10% excluded, ± 27.4 (std)", "a single run"."""
    statistic, runs = row.get("statistic", "mean"), row.get("runs")
    if statistic == "single":
        words = "a single run"
    elif runs is None:
        words = f"{statistic} (runs not recorded)"
    else:
        words = f"{statistic} of {runs} run{'' if runs == 1 else 's'}"
    if row.get("min_train_exact_match") is not None:
        words += f", runs with train exact match ≤ {row['min_train_exact_match']:g}% excluded"
    spread = row.get("spread", "none")
    if spread != "none":
        value = row.get("spread_value")
        words += f", ± {value:g} ({SPREADS[spread]})" if value is not None else f", spread: {SPREADS[spread]}"
    if row.get("selection"):
        words += f"; {row['selection']}"
    return words


def reported_in_words(row: Mapping[str, Any]) -> str:
    """One `[[reported]]` row in a line: "scan/addprim_jump exact_match 91 (002 Table 1), median of 25 runs, ...",
    then the model the number belongs to when it is another (`model_reported`) and the row's note."""
    words = f"{row['benchmark']} {row['metric']} {row['value']:g} ({row['table']}), {statistic_in_words(row)}"
    if row.get("model_reported"):
        words += f"; the paper's number is for {row['model_reported']}"
    return words + (f"; {row['note']}" if row.get("note") else "")


def known_differences(entry: Any) -> int:
    """How many differences from its papers the catalogue lists for `entry` (a `ModelEntry`), over all its recipes."""
    return sum(len(table["differences"]) for table in entry.fidelity.values())


def differences_of(entry: Any, recipe: str) -> list[str]:
    """What the catalogue lists as differing from the paper for recipe `recipe` of `entry` (a `ModelEntry`): the
    `what` of each `[[fidelity.<recipe>.differences]]` row, in order; none when the recipe has no fidelity table."""
    return [row["what"] for row in entry.fidelity.get(recipe, {}).get("differences", [])]


def selection_rule(recipe: Mapping[str, Any]) -> str:
    """A catalogue recipe's checkpoint selection in words: `last`, or `best_validation by <validate_by>`."""
    select = recipe.get("select", "best_validation")
    return select if select == "last" else f"{select} by {recipe.get('validate_by', 'exact_match')}"


def reported_on(reported: str, benchmark_family: str, benchmark_name: str, splits: Iterable[str] = ()) -> bool:
    """Whether a `[[reported]]` row's `benchmark` names this built benchmark: the family alone (`nounadj`), the family
    and the benchmark's name (`scan/addprim_jump` for the folder `build-scan` names `scan/addprim_jump`), or the family
    and one of its splits (`react/cg_test`)."""
    family, _, rest = reported.partition("/")
    return family == benchmark_family and (not rest or rest == benchmark_name.split("/")[-1] or rest in set(splits))
