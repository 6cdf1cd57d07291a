"""The pairs table: Table 2 by default, a validated `--pairs` TOML otherwise, and the noun prefilter it gives."""

from __future__ import annotations

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.pairs import TABLE_2, english_plural, load_pairs

VALID = """
source_lang = "en"
target_lang = "fr"

[[backward]]
adjective = "specific"
noun = "answer"
fr_adjective = "spécifique"
fr_noun = "réponse"

[[forward]]
adjective = "new"
noun = "child"
fr_adjective = "nouveau"
fr_noun = "enfant"
noun_forms = ["children"]
"""


def test_default_is_table_2():
    pairs = load_pairs(None)
    assert pairs is TABLE_2
    assert [(p.adjective, p.noun) for p in pairs.pairs if p.order == "backward"] == [
        ("specific", "response"), ("particular", "institution"), ("effective", "organisation"), ("permanent", "solution")]
    assert pairs.adjectives("forward") == {"new", "good", "big", "first"}
    assert {p.noun: p.fr_noun for p in pairs.pairs}["responsibility"] == "responsabilité"
    assert {p.adjective: p.fr_adjective for p in pairs.pairs}["good"] == "bon"


def test_plurals():
    assert english_plural("responsibility") == "responsibilities"
    assert english_plural("source") == "sources"
    assert english_plural("day") == "days"


def test_prefilter_matches_whole_word_forms_of_target_nouns_only():
    pattern = TABLE_2.noun_pattern()
    assert pattern.search("Our RESPONSIBILITIES are clear.")
    assert pattern.search("two solutions, one source")
    assert not pattern.search("natural resources and resourceful people")
    assert not pattern.search("he responded to the organisational change")


def test_a_valid_file_loads_with_extra_noun_forms(tmp_path):
    path = tmp_path / "pairs.toml"
    path.write_text(VALID, encoding="utf-8")
    pairs = load_pairs(path)
    assert [p.noun for p in pairs.pairs] == ["answer", "child"]
    assert pairs.noun_lemmas()["children"] == "child"
    assert pairs.origin == str(path)


@pytest.mark.parametrize("text, message", [
    (VALID + '\ncolour = "red"\n', "unknown key 'colour'"),
    (VALID.replace('noun_forms = ["children"]', 'noun_form = ["children"]'), r"unknown key 'noun_form' in \[\[forward\]\] pair 1"),
    (VALID.replace('fr_noun = "enfant"\n', ""), r"\(child\) is missing 'fr_noun' \(the target-language lemma\)"),
    (VALID.replace('adjective = "new"', 'adjective = "specific"'), "'specific' is in both the backward and the forward column"),
    (VALID.replace('noun = "child"', 'noun = "answer"'), "'answer' is in both"),
    (VALID.replace("[[forward]]", "[[backward]]"), r"needs at least one \[\[forward\]\] pair"),
    ("not toml [", "is not valid TOML"),
])
def test_bad_pairs_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchbuildError, match=message) as error:
        load_pairs(path)
    assert "bad.toml" in str(error.value)


def test_a_noun_in_two_pairs_is_an_error(tmp_path):
    path = tmp_path / "twice.toml"
    path.write_text(VALID + '\n[[forward]]\nadjective = "big"\nnoun = "child"\nfr_adjective = "grand"\n'
                    'fr_noun = "enfant"\n', encoding="utf-8")
    with pytest.raises(BenchbuildError, match="the noun 'child' .* is in two pairs"):
        load_pairs(path)


def test_missing_pairs_file(tmp_path):
    with pytest.raises(BenchbuildError, match="does not exist"):
        load_pairs(tmp_path / "none.toml")
