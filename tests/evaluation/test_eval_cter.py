"""CTER (004 §3.1) on the CoGnition compositional test set and on hand-made sentences."""

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.cter import compound_correct, cter, parse_compound, read_lexicon

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def cognition(shared_data):
    folder = shared_data / "cognition"
    lexicon = read_lexicon(folder / "lexicon")
    references = (folder / "cg-test.zh").read_text(encoding="utf-8").splitlines()
    compounds = (folder / "cg-test.compound").read_text(encoding="utf-8").splitlines()
    return lexicon, references, compounds


def test_lexicon_merges_repeated_atoms_and_keeps_untranslated_ones_empty(cognition):
    lexicon, _, _ = cognition
    assert lexicon["building"] == ("建筑", "楼", "房子")  # listed twice in the file
    assert lexicon["the"] == () and lexicon["liked"] == ("喜欢",)
    assert lexicon["mod0"] == ("他喜欢的",)


def test_compounds_parse_into_head_determiner_adjective_noun_and_modifier(cognition):
    lexicon, _, _ = cognition
    atoms = parse_compound("liked another large building he liked", lexicon)
    assert [(a.role, a.word) for a in atoms] == [("HEAD", "liked"), ("DET", "another"), ("ADJ", "large"),
                                                 ("NOUN", "building"), ("MOD", "mod0")]
    assert [(a.role, a.word) for a in parse_compound("the dog", lexicon)] == [("DET", "the"), ("NOUN", "dog")]
    with pytest.raises(ValueError, match="'cat' is not in the lexicon"):
        parse_compound("the cat", lexicon)


def test_the_papers_example_needs_every_atom_and_the_modifier_before_the_noun(cognition):
    lexicon, _, _ = cognition
    atoms = parse_compound("lost the dog he liked", lexicon)
    assert compound_correct("我丢失了他喜欢的狗。", atoms, lexicon)
    assert compound_correct("我 丢失 了 他 喜欢 的 狗 。", atoms, lexicon)
    assert not compound_correct("我丢失了狗他喜欢的。", atoms, lexicon)  # 004 Fig. 1b: MOD after N
    assert not compound_correct("我丢失了他喜欢的猫。", atoms, lexicon)  # noun missing
    assert not compound_correct("我找到了他喜欢的狗。", atoms, lexicon)  # verb missing


def test_references_score_as_the_lexicon_says_line_by_line(cognition):
    lexicon, references, compounds = cognition
    result = cter(references, compounds, lexicon)
    assert (result["instances"], result["compounds"]) == (10800, 2160)
    # Line 1 translates "the dog" as 狗; the reference of "every red doctor" says 红医, not the lexicon's 医生.
    index = next(i for i, (c, r) in enumerate(zip(compounds, references)) if r == "每个红医都从高兴到疯狂。")
    assert cter(references[:1], compounds[:1], lexicon)["wrong_instances"] == 0
    assert cter([references[index]], [compounds[index]], lexicon)["wrong_instances"] == 1
    wrong = [c for c, r in zip(compounds, references) if not compound_correct(r, parse_compound(c, lexicon), lexicon)]
    assert result["wrong_instances"] == len(wrong)
    assert result["wrong_compounds"] == len(set(wrong))
    assert result["instance"] == pytest.approx(100 * len(wrong) / 10800)
    assert result["aggregate"] == pytest.approx(100 * len(set(wrong)) / 2160)


def test_corrupting_references_raises_the_error_rates_by_the_hand_counted_amount(cognition):
    lexicon, references, compounds = cognition
    base = cter(references, compounds, lexicon)
    lines_of = {}
    for index, compound in enumerate(compounds):
        lines_of.setdefault(compound, []).append(index)
    clean = [c for c, lines in lines_of.items()
             if all(compound_correct(references[i], parse_compound(c, lexicon), lexicon) for i in lines)]
    ordered = [c for c in clean if any(a.role in ("ADJ", "MOD") for a in parse_compound(c, lexicon))]
    dropped, swapped = clean[:10], [c for c in ordered if c not in clean[:10]][:10]
    corrupted = list(references)
    for compound in dropped:  # one context loses the noun's translation
        noun = next(a.word for a in parse_compound(compound, lexicon) if a.role == "NOUN")
        line = lines_of[compound][0]
        for option in lexicon[noun]:
            corrupted[line] = corrupted[line].replace(option, "某物")
    for compound in swapped:  # two contexts move the noun in front of its determiner, adjective and modifier
        noun = next(a.word for a in parse_compound(compound, lexicon) if a.role == "NOUN")
        for line in lines_of[compound][:2]:
            text = corrupted[line]
            for option in lexicon[noun]:
                text = text.replace(option, "")
            corrupted[line] = lexicon[noun][0] + text
    result = cter(corrupted, compounds, lexicon)
    assert result["wrong_instances"] == base["wrong_instances"] + 10 + 2 * 10
    assert result["wrong_compounds"] == base["wrong_compounds"] + 20
    assert result["instance"] == pytest.approx(100 * (base["wrong_instances"] + 30) / 10800)
    assert result["aggregate"] == pytest.approx(100 * (base["wrong_compounds"] + 20) / 2160)


def test_malformed_lexicon_lines_are_errors_naming_file_and_line(tmp_path):
    path = tmp_path / "lexicon"
    path.write_text("dog\t狗/犬\ncat 猫\n", encoding="utf-8")
    with pytest.raises(BenchbuildError, match=r"lexicon, line 2: expected 'atom<TAB>"):
        read_lexicon(path)
