"""Compound translation error rate (CTER) of CoGnition (Li et al. 2021; 004 §3.1), from an atom lexicon.

A compound (`[VERB|PREP] DET [ADJ] NOUN [MOD]`, e.g. `lost the dog he liked`) is translated correctly in one
sentence when every atom that has a lexicon translation appears in the prediction (any of its `/`-separated
translations) and the determiner, adjective and modifier translations come before the noun's, as Chinese
orders them. Instance CTER: the share of sentences whose compound is wrong. Aggregate CTER: the share of
compounds (each appears in 5 contexts) with at least one wrong sentence.

Matching is on text with whitespace removed, so tokenized (`他 喜欢 的 狗`) and raw Chinese score alike.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from benchbuild.errors import BenchbuildError

DETERMINERS = frozenset({"the", "every", "any", "another", "each"})
# The lexicon names CoGnition's three modifier phrases by placeholder; these are their English forms.
MOD_PHRASES: Mapping[str, str] = {"he liked": "mod0", "at the store": "mod1", "on the floor": "mod2"}
ORDERED_ROLES = ("DET", "ADJ", "MOD")


@dataclass(frozen=True)
class Atom:
    role: str  # HEAD (verb or preposition), DET, ADJ, NOUN or MOD
    word: str  # the lexicon key: an English word, or mod0/mod1/mod2


@dataclass
class Lexicon:
    """Atom -> its accepted translations (empty when the atom may go untranslated, like `the`)."""

    translations: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __contains__(self, atom: str) -> bool:
        return atom in self.translations

    def __getitem__(self, atom: str) -> tuple[str, ...]:
        return self.translations[atom]


def read_lexicon(path: str | Path) -> Lexicon:
    """Read `atom<TAB>translation/translation/...` lines; an atom listed twice accepts both lines' translations."""
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"{path}: no such lexicon file")
    translations: dict[str, list[str]] = OrderedDict()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip():
            raise BenchbuildError(f"{path}, line {number}: expected 'atom<TAB>translation/translation...', got {line!r}")
        options = translations.setdefault(parts[0].strip(), [])
        for option in parts[1].split("/"):
            option = _squash(option)
            if option and option not in options:
                options.append(option)
    return Lexicon({atom: tuple(options) for atom, options in translations.items()})


def parse_compound(compound: str, lexicon: Lexicon) -> list[Atom]:
    """The atoms of a CoGnition compound in English order, each with its syntactic role."""
    words = compound.split()
    mod = None
    for phrase, placeholder in MOD_PHRASES.items():
        if compound.endswith(" " + phrase):
            mod, words = Atom("MOD", placeholder), compound[: -len(phrase) - 1].split()
            break
    atoms = []
    if words and words[0] not in DETERMINERS:
        atoms.append(Atom("HEAD", words[0]))
        words = words[1:]
    if len(words) < 2 or words[0] not in DETERMINERS or len(words) > 3:
        raise ValueError(f"compound {compound!r} is not [VERB|PREP] DET [ADJ] NOUN [MOD]")
    atoms.append(Atom("DET", words[0]))
    if len(words) == 3:
        atoms.append(Atom("ADJ", words[1]))
    atoms.append(Atom("NOUN", words[-1]))
    if mod is not None:
        atoms.append(mod)
    for atom in atoms:
        if atom.word not in lexicon:
            raise ValueError(f"compound {compound!r}: atom {atom.word!r} is not in the lexicon")
    return atoms


def compound_correct(prediction: str, atoms: Sequence[Atom], lexicon: Lexicon) -> bool:
    """Whether `prediction` translates the compound: every translatable atom present, DET/ADJ/MOD before NOUN."""
    text = _squash(prediction)
    first: dict[Atom, int] = {}
    for atom in atoms:
        options = lexicon[atom.word]
        if not options:
            continue
        found = [start for option in options for start in _occurrences(text, option)]
        if not found:
            return False
        first[atom] = min(found)
    nouns = [atom for atom in atoms if atom.role == "NOUN" and atom in first]
    if not nouns:
        return True
    noun_starts = [start for option in lexicon[nouns[0].word] for start in _occurrences(text, option)]
    last_noun = max(noun_starts)
    return all(first[atom] < last_noun for atom in atoms if atom.role in ORDERED_ROLES and atom in first)


def cter(predictions: Sequence[str], compounds: Sequence[str], lexicon: Lexicon) -> dict:
    """Instance- and aggregate-level CTER in percent, with the counts they come from."""
    if len(predictions) != len(compounds):
        raise BenchbuildError(f"{len(predictions)} predictions for {len(compounds)} compounds")
    parsed: dict[str, list[Atom]] = {}
    wrong_lines = 0
    compound_wrong: dict[str, bool] = OrderedDict()
    for number, (prediction, compound) in enumerate(zip(predictions, compounds), start=1):
        compound = " ".join(compound.split())
        if compound not in parsed:
            try:
                parsed[compound] = parse_compound(compound, lexicon)
            except ValueError as error:
                raise BenchbuildError(f"compound of row {number}: {error}") from error
        correct = compound_correct(prediction, parsed[compound], lexicon)
        wrong_lines += not correct
        compound_wrong[compound] = compound_wrong.get(compound, False) or not correct
    wrong_compounds = sum(compound_wrong.values())
    return {
        "instance": 100.0 * wrong_lines / len(compounds) if compounds else 0.0,
        "aggregate": 100.0 * wrong_compounds / len(compound_wrong) if compound_wrong else 0.0,
        "wrong_instances": wrong_lines, "instances": len(compounds),
        "wrong_compounds": wrong_compounds, "compounds": len(compound_wrong),
    }


def read_compounds(source: str | Path | None, rows: Sequence[Mapping], where: str = "--compound") -> list[str]:
    """The compound of each row: a column of the rows, or a file with one compound a line."""
    if source is None:
        raise BenchbuildError(f"CTER needs the compound of each row: pass {where} COLUMN_OR_FILE")
    columns = set(rows[0]) if rows else set()
    if str(source) in columns:
        return [str(row[str(source)]) for row in rows]
    path = Path(source)
    if not path.is_file():
        raise BenchbuildError(f"{where} {source!r} is neither a column ({', '.join(sorted(columns))}) nor a file")
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != len(rows):
        raise BenchbuildError(f"{path} has {len(lines)} compounds but the split has {len(rows)} rows")
    return lines


def _squash(text: str) -> str:
    return "".join(text.split())


def _occurrences(text: str, option: str) -> Iterable[int]:
    start = text.find(option)
    while start != -1:
        yield start
        start = text.find(option, start + 1)
