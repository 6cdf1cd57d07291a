"""CTER equals CoGnition's official evaluator on the shared cg-test set, for references and corrupted references.

The expected numbers come from CoGnition's `eval/eval.py` (github.com/yafuly/CoGnition at commit
f2f980af0b04b98948a97a90a1bb347a2fcd9e5d), run unchanged with Python 3.11 outside the project:
    paste cg-test.en cg-test.compound HYPOTHESES > in.tsv && python eval.py in.tsv lexicon
where HYPOTHESES is `cg-test.zh` or one of the corrupted files this module's `CORRUPTIONS` write (one prediction a
line). Per-line verdicts are the lines whose printed flag contains `P0`; `VERDICTS` keeps the sha256 of the 0/1
string (1 = wrong, in line order) and the count; the rates are its two last lines.
"""

import hashlib

import pytest

from benchbuild.evaluation.cter import compound_verdicts, cter, read_lexicon

pytestmark = pytest.mark.shared

MOD_PHRASES = {"he liked": "mod0", "at the store": "mod1", "on the floor": "mod2"}


def _alternatives(raw: dict, word: str) -> list[str]:
    return [option for option in raw[word].split("/") if option]


def _noun_first(line: str, compound: str, raw: dict) -> str:
    """Move the noun's translation (its first alternative found) to the front of the line."""
    noun = compound
    for phrase in MOD_PHRASES:
        noun = noun.replace(phrase, "")
    noun = noun.split()[-1]
    found = next((option for option in _alternatives(raw, noun) if option in line), None)
    return line if found is None else found + line.replace(found, "")


def _drop_head(line: str, compound: str, raw: dict) -> str:
    """Delete every alternative of the compound's first word (verb, preposition or determiner)."""
    for option in sorted(_alternatives(raw, compound.split()[0]), key=len, reverse=True):
        line = line.replace(option, "")
    return line


def _modifier_last(line: str, compound: str, raw: dict) -> str:
    """Move the modifier's translation (its first alternative found) to the end of the line."""
    mod = next((placeholder for phrase, placeholder in MOD_PHRASES.items() if phrase in compound), None)
    found = mod and next((option for option in _alternatives(raw, mod) if option in line), None)
    return line if not found else line.replace(found, "") + found


# name -> (every how many lines, offset, change); line i is changed when i % every == offset.
CORRUPTIONS = {
    "noun_first": (3, 0, _noun_first),
    "drop_head": (4, 1, _drop_head),
    # Not "": the official script cannot read a line whose hypothesis is empty (its split finds 2 fields).
    "content_dropped": (7, 3, lambda line, compound, raw: "。"),
    "modifier_last": (2, 0, _modifier_last),
}

# hypotheses -> (instance and aggregate error rate as eval.py prints them, lines it flags P0, sha256 of the 0/1 string)
OFFICIAL = {
    "references": ("2.620%", "9.815%", 283, "d1fba097dd61384b0bd8cbba161ec6e18453c2fb21c17a3b39d0a63afff4a8ee"),
    "noun_first": ("34.620%", "98.102%", 3739, "179394b3334f01ba192385566e8b0ad360d23972388f206c8ee9162e4546c5be"),
    "drop_head": ("22.481%", "82.870%", 2428, "0625cc6c3a354e3a769fbb60e0c5607c160621bdcaafccc7654fa257872c29e2"),
    "content_dropped": ("16.472%", "74.398%", 1779, "69f6810e90d7c5cb8eec023accbb0dc59ddc83707251f0356cfa722b3b28d55d"),
    "modifier_last": ("23.852%", "47.963%", 2576, "20f5d8326651c6de2afc41c638cffdf2109d8b891846467cb257858c2c3d16b8"),
}


def corrupt(name: str, references: list[str], compounds: list[str], raw: dict) -> list[str]:
    every, offset, change = CORRUPTIONS[name]
    return [change(line, compound, raw) if i % every == offset else line
            for i, (line, compound) in enumerate(zip(references, compounds))]


@pytest.fixture(scope="module")
def cognition(shared_data):
    folder = shared_data / "cognition"
    raw = dict(line.split("\t") for line in (folder / "lexicon").read_text(encoding="utf-8").splitlines())
    return (read_lexicon(folder / "lexicon"), raw, (folder / "cg-test.zh").read_text(encoding="utf-8").splitlines(),
            (folder / "cg-test.compound").read_text(encoding="utf-8").splitlines())


def hypotheses(name: str, cognition) -> list[str]:
    _, raw, references, compounds = cognition
    return references if name == "references" else corrupt(name, references, compounds, raw)


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_cter_equals_the_official_evaluator(name, cognition):
    lexicon, _, _, compounds = cognition
    predictions = hypotheses(name, cognition)
    instance, aggregate, wrong, digest = OFFICIAL[name]
    verdicts = compound_verdicts(predictions, compounds, lexicon)
    flags = "".join("0" if correct else "1" for correct in verdicts)
    assert (flags.count("1"), hashlib.sha256(flags.encode()).hexdigest()) == (wrong, digest)
    result = cter(predictions, compounds, lexicon)
    assert (f"{result['instance']:.3f}%", f"{result['aggregate']:.3f}%") == (instance, aggregate)
    assert (result["instances"], result["compounds"]) == (10800, 2160)
