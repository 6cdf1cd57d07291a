"""Compound translation error rate (CTER) of CoGnition (Li et al. 2021; 004 §3.1), as the official evaluator scores it.

This reimplements the rules of CoGnition's `eval/eval.py` (github.com/yafuly/CoGnition, read at commit
f2f980af0b04b98948a97a90a1bb347a2fcd9e5d); tests/evaluation/test_eval_cter_official.py pins its numbers.

A compound (`[VERB|PREP] DET [ADJ] NOUN [MOD]`, e.g. `lost the dog he liked`) is translated correctly in one
sentence when
- every atom is found in the prediction: some `/`-separated lexicon alternative occurs in it. An atom whose whole
  entry is `/` (`the`, `on`) needs no translation; an empty alternative (`liked<TAB>喜欢/`) occurs everywhere, so
  such an atom always counts as translated;
- the determiner, adjective and modifier come before the noun, as Chinese orders them: the first occurrence of
  any of the atom's alternatives precedes the last occurrence of any of the noun's. The modifier is exempt when
  the compound has a verb, since a modifier of a verb phrase may attach to the verb (`bought the car at the
  store`).
Instance CTER: the share of sentences whose compound is wrong. Aggregate CTER: the test set lists each compound
in 5 consecutive contexts; the share of those groups of 5 lines with at least one wrong line.

Predictions are matched after removing BPE joiners (`@@ `) and spaces, so tokenized (`他 喜欢 的 狗`) and raw
Chinese score alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchbuild.errors import BenchbuildError
from benchbuild.text_files import read_text

CONTEXTS_PER_COMPOUND = 5
# The lexicon names CoGnition's three modifier phrases by placeholder; these are their English forms.
MOD_PHRASES: Mapping[str, str] = {"he liked": "mod0", "at the store": "mod1", "on the floor": "mod2"}
# CoGnition's atoms by role, as the official evaluator lists them.
ATOMS_BY_ROLE: Mapping[str, tuple[str, ...]] = {
    "PREP": ("about", "around", "before", "behind", "except", "for", "from", "inside", "like", "near", "on", "to",
             "toward", "towards", "under", "with", "without"),
    "VERB": ("asked", "visited", "heard", "lost", "hated", "stopped", "woke", "found", "watched", "took", "saw",
             "told", "caught", "liked", "left", "gave", "invited", "met", "chose"),
    "DET": ("the", "every", "any", "another", "each"),
    "ADJ": ("small", "red", "dirty", "lazy", "smart", "large", "special", "silly", "quiet", "empty", "fake"),
    "NOUN": ("dog", "doctor", "sandwich", "hat", "waiter", "lawyer", "peanut", "farmer", "car", "girl", "boyfriend",
             "child", "chair", "building", "clown", "bee", "apartment", "farm", "airplane"),
    "MOD": tuple(MOD_PHRASES.values()),
}
ATOM_ROLES: Mapping[str, str] = {word: role for role, words in ATOMS_BY_ROLE.items() for word in words}
ORDERED_ROLES = ("DET", "ADJ", "MOD")


@dataclass(frozen=True)
class Atom:
    role: str  # PREP, VERB, DET, ADJ, NOUN or MOD
    word: str  # the lexicon key: an English word, or mod0/mod1/mod2


@dataclass
class Lexicon:
    """Atom -> its accepted translations, empty alternatives kept; `()` when the atom needs none (entry `/`)."""

    translations: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __contains__(self, atom: str) -> bool:
        return atom in self.translations

    def __getitem__(self, atom: str) -> tuple[str, ...]:
        return self.translations[atom]


def read_lexicon(path: str | Path) -> Lexicon:
    """Read `atom<TAB>translation/translation/...` lines; an atom listed twice keeps its last line, as officially."""
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"{path}: no such lexicon file")
    translations: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split("\t")
        if len(parts) != 2 or not parts[0].strip():
            raise BenchbuildError(f"{path}, line {number}: expected 'atom<TAB>translation/translation...', got {line!r}")
        translations[parts[0]] = () if parts[1] == "/" else tuple(parts[1].split("/"))
    return Lexicon(translations)


def parse_compound(compound: str, lexicon: Lexicon) -> list[Atom]:
    """The atoms of a CoGnition compound in English order, each with its role from `ATOM_ROLES`."""
    for phrase, placeholder in MOD_PHRASES.items():
        compound = compound.replace(phrase, placeholder)
    atoms = []
    for word in compound.split():
        if word not in ATOM_ROLES:
            raise ValueError(f"compound {compound!r}: {word!r} is none of CoGnition's atoms")
        if word not in lexicon:
            raise ValueError(f"compound {compound!r}: atom {word!r} is not in the lexicon")
        atoms.append(Atom(ATOM_ROLES[word], word))
    roles = [atom.role for atom in atoms]
    if len(set(roles)) != len(roles) or "NOUN" not in roles:
        raise ValueError(f"compound {compound!r} is not [VERB|PREP] DET [ADJ] NOUN [MOD]")
    return atoms


def compound_correct(prediction: str, atoms: Sequence[Atom], lexicon: Lexicon) -> bool:
    """Whether `prediction` translates the compound: every atom found, DET/ADJ(/MOD without a verb) before NOUN."""
    text = prediction.strip().replace("@@ ", "").replace(" ", "")
    span: dict[str, tuple[int, int]] = {}  # role -> (first, last) start of any of its atom's alternatives
    for atom in atoms:
        options = lexicon[atom.word]
        if not options:
            continue
        starts = [match.start() for option in options for match in re.finditer(re.escape(option), text)]
        if not starts:
            return False
        span[atom.role] = (min(starts), max(starts))
    if "NOUN" not in span:
        return True
    last_noun = span["NOUN"][1]
    checked = [role for role in ORDERED_ROLES if not (role == "MOD" and "VERB" in span)]
    return all(span[role][0] < last_noun for role in checked if role in span)


def compound_verdicts(predictions: Sequence[str], compounds: Sequence[str], lexicon: Lexicon) -> list[bool]:
    """Per line, whether its compound is translated correctly."""
    if len(predictions) != len(compounds):
        raise BenchbuildError(f"{len(predictions)} predictions for {len(compounds)} compounds")
    parsed: dict[str, list[Atom]] = {}
    verdicts = []
    for number, (prediction, compound) in enumerate(zip(predictions, compounds), start=1):
        compound = " ".join(compound.split())
        if compound not in parsed:
            try:
                parsed[compound] = parse_compound(compound, lexicon)
            except ValueError as error:
                raise BenchbuildError(f"compound of row {number}: {error}") from error
        verdicts.append(compound_correct(prediction, parsed[compound], lexicon))
    return verdicts


def cter(predictions: Sequence[str], compounds: Sequence[str], lexicon: Lexicon) -> dict:
    """Instance- and aggregate-level CTER in percent, with the counts they come from.

    Aggregation is over consecutive groups of 5 lines, as officially; a trailing partial group is left out.
    """
    verdicts = compound_verdicts(predictions, compounds, lexicon)
    check_compound_groups(compounds)
    groups = len(verdicts) // CONTEXTS_PER_COMPOUND
    wrong_lines = verdicts.count(False)
    wrong_groups = sum(not all(verdicts[g * CONTEXTS_PER_COMPOUND:(g + 1) * CONTEXTS_PER_COMPOUND])
                       for g in range(groups))
    return {
        "instance": 100.0 * wrong_lines / len(verdicts) if verdicts else 0.0,
        "aggregate": 100.0 * wrong_groups / groups if groups else 0.0,
        "wrong_instances": wrong_lines, "instances": len(verdicts),
        "wrong_compounds": wrong_groups, "compounds": groups,
    }


def check_compound_groups(compounds: Sequence[str]) -> None:
    """Raise unless each full group of 5 consecutive rows holds one compound, as aggregate CTER assumes."""
    for start in range(0, len(compounds) - CONTEXTS_PER_COMPOUND + 1, CONTEXTS_PER_COMPOUND):
        group = compounds[start:start + CONTEXTS_PER_COMPOUND]
        if len({" ".join(compound.split()) for compound in group}) > 1:
            raise BenchbuildError(f"rows {start + 1}-{start + CONTEXTS_PER_COMPOUND} hold different compounds: "
                                  f"aggregate CTER needs each compound's {CONTEXTS_PER_COMPOUND} contexts on "
                                  "consecutive rows, in CoGnition's order")


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
    lines = read_text(path).splitlines()
    if len(lines) != len(rows):
        raise BenchbuildError(f"{path} has {len(lines)} compounds but the split has {len(rows)} rows")
    return lines
