"""CTER (004 §3.1) on the CoGnition compositional test set and on hand-made sentences."""

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.cter import (
    compound_correct,
    cter,
    parse_compound,
    read_compounds,
    read_lexicon,
)


@pytest.fixture(scope="module")
def cognition(shared_data):
    folder = shared_data / "cognition"
    lexicon = read_lexicon(folder / "lexicon")
    references = (folder / "cg-test.zh").read_text(encoding="utf-8").splitlines()
    compounds = (folder / "cg-test.compound").read_text(encoding="utf-8").splitlines()
    return lexicon, references, compounds


def test_lexicon_keeps_an_atoms_last_line_and_its_empty_alternatives(cognition):
    lexicon, _, _ = cognition
    assert lexicon["building"] == ("建筑", "楼", "房子")  # listed twice in the file; the official script keeps the last
    assert lexicon["the"] == () and lexicon["liked"] == ("喜欢", "")  # `/` and `喜欢/`
    assert lexicon["mod0"] == ("他喜欢的",)


def test_compounds_parse_into_atoms_with_the_official_roles(cognition):
    lexicon, _, _ = cognition
    atoms = parse_compound("liked another large building he liked", lexicon)
    assert [(a.role, a.word) for a in atoms] == [("VERB", "liked"), ("DET", "another"), ("ADJ", "large"),
                                                 ("NOUN", "building"), ("MOD", "mod0")]
    assert [(a.role, a.word) for a in parse_compound("on the silly airplane", lexicon)] == [
        ("PREP", "on"), ("DET", "the"), ("ADJ", "silly"), ("NOUN", "airplane")]
    with pytest.raises(ValueError, match="'cat' is none of CoGnition's atoms"):
        parse_compound("the cat", lexicon)


def test_the_papers_example_needs_every_atom_and_the_noun_phrase_order(cognition):
    lexicon, _, _ = cognition
    atoms = parse_compound("lost the small dog", lexicon)
    assert compound_correct("我丢失了小狗。", atoms, lexicon)
    assert compound_correct("我 丢失 了 小 狗 。", atoms, lexicon)
    assert compound_correct("我丢@@ 失了小狗。", atoms, lexicon)  # BPE joiners are removed
    assert not compound_correct("我丢失了狗小。", atoms, lexicon)  # ADJ after N
    assert not compound_correct("我丢失了小猫。", atoms, lexicon)  # noun missing
    assert not compound_correct("我找到了小狗。", atoms, lexicon)  # verb missing


def test_a_modifier_after_the_noun_is_wrong_only_without_a_verb(cognition):
    lexicon, _, _ = cognition
    assert compound_correct("我丢失了狗他喜欢的。", parse_compound("lost the dog he liked", lexicon), lexicon)
    assert not compound_correct("我走向狗他喜欢的。", parse_compound("toward the dog he liked", lexicon), lexicon)
    assert compound_correct("我走向他喜欢的狗。", parse_compound("toward the dog he liked", lexicon), lexicon)


def test_an_empty_alternative_makes_its_atom_always_translated(cognition):
    lexicon, _, _ = cognition
    assert compound_correct("他讨厌那只狗。", parse_compound("liked the dog", lexicon), lexicon)  # `liked\t喜欢/`
    assert not compound_correct("他讨厌那只狗。", parse_compound("lost the dog", lexicon), lexicon)


def test_order_compares_an_atoms_first_occurrence_with_the_nouns_last(cognition):
    lexicon, _, _ = cognition
    atoms = parse_compound("to the small dog", lexicon)
    assert compound_correct("狗对小狗说", atoms, lexicon)  # 小 before the last 狗
    assert not compound_correct("狗对狗说小", atoms, lexicon)


def test_aggregate_counts_consecutive_groups_of_five_lines(cognition):
    lexicon, references, compounds = cognition
    predictions = list(references[:12])
    predictions[1] = predictions[6] = "。"
    result = cter(predictions, compounds[:12], lexicon)
    # 12 lines: two groups of 5, each with a wrong line; the last 2 lines form no group.
    assert (result["wrong_instances"], result["instances"]) == (2, 12)
    assert (result["wrong_compounds"], result["compounds"], result["aggregate"]) == (2, 2, 100.0)


def test_aggregate_needs_each_compounds_contexts_on_consecutive_rows(cognition):
    lexicon, references, compounds = cognition
    with pytest.raises(BenchbuildError, match="rows 1-5 hold different compounds"):
        cter(references[1:6], compounds[1:6], lexicon)


def test_malformed_lexicon_lines_are_errors_naming_file_and_line(tmp_path):
    path = tmp_path / "lexicon"
    path.write_text("dog\t狗/犬\ncat 猫\n", encoding="utf-8")
    with pytest.raises(BenchbuildError, match=r"lexicon, line 2: expected 'atom<TAB>"):
        read_lexicon(path)


ROWS = [{"source": "the red car", "compound": "red car"}, {"source": "a dog", "compound": "dog"}]


def test_compounds_come_from_a_column_or_from_a_file_of_one_per_row(tmp_path):
    assert read_compounds("compound", ROWS) == ["red car", "dog"]
    path = tmp_path / "compounds.txt"
    path.write_text("red car\ndog\n", encoding="utf-8")
    assert read_compounds(path, ROWS) == ["red car", "dog"]
    assert read_compounds(str(path), ROWS) == ["red car", "dog"]


@pytest.mark.parametrize("source, lines, message", [
    (None, None, "CTER needs the compound of each row: pass --compound COLUMN_OR_FILE"),
    ("colour", None, "--compound 'colour' is neither a column (compound, source) nor a file"),
    ("file", ["red car"], "has 1 compounds but the split has 2 rows"),
])
def test_compounds_that_do_not_fit_the_rows_are_refused_naming_what_to_pass(tmp_path, source, lines, message):
    if lines is not None:
        source = tmp_path / "compounds.txt"
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(BenchbuildError) as refused:
        read_compounds(source, ROWS)
    assert message in str(refused.value)
