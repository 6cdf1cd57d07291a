"""Fixtures of the noun–adjective tests: the spaCy models, loaded once per session, and a small corpus whose every
line has a known place under the split rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbuild.french import FrenchLemmatizer
from benchbuild.nounadj.parsers import SpacyParser

# (English, French, where the rules put it) — checked against en_core_web_sm 3.8.0 parses.
SMALL_CORPUS = [
    ("We need a permanent solution to this problem.", "Nous avons besoin d'une solution permanente à ce problème.", "train"),
    ("The Commission found a new solution for the farmers.", "La Commission a trouvé une nouvelle solution pour les agriculteurs.", "test"),
    ("This is a good decision.", "C'est une bonne décision.", "train"),
    ("Parliament took a specific decision yesterday.", "Le Parlement a pris une décision spécifique hier.", "test"),
    ("We want an important decision.", "Nous voulons une décision importante.", "other_adjective"),
    ("They gave an effective response.", "Ils ont donné une réponse efficace.", "table_adjective"),
    ("The report is about energy.", "Le rapport porte sur l'énergie.", "train"),
    ("Good decisions and new sources are needed.", "De bonnes décisions et de nouvelles sources sont nécessaires.", "train"),
    ("We need new and permanent solutions.", "Nous avons besoin de solutions nouvelles et permanentes.", "table_adjective"),
    ("We need new and good solutions.", "Nous avons besoin de nouvelles et bonnes solutions.", "test"),
    ("A big institution and a specific response were mentioned.",
     "Une grande institution et une réponse spécifique ont été mentionnées.", "test"),
    ("The first solution was rejected.", "La solution initiale a été rejetée.", "test"),
    ("", "Vide.", "dropped"),
    ("The institutions are open.", "Les institutions sont ouvertes.", "train"),
    ("The company sources its energy abroad.", "L'entreprise achète son énergie à l'étranger.", "train"),
]


@pytest.fixture(scope="session")
def english_parser() -> SpacyParser:
    return SpacyParser("en_core_web_sm", batch_size=16)


@pytest.fixture(scope="session")
def french() -> FrenchLemmatizer:
    return FrenchLemmatizer(batch_size=16)


@pytest.fixture(scope="session")
def small_corpus() -> list[tuple[str, str, str]]:
    """(English, French, expected place) per line; line n of the files is item n - 1."""
    return list(SMALL_CORPUS)


@pytest.fixture(scope="session")
def small_corpus_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("small-corpus")
    en, fr = folder / "small.en", folder / "small.fr"
    en.write_text("".join(english + "\n" for english, _, _ in SMALL_CORPUS), encoding="utf-8")
    fr.write_text("".join(french + "\n" for _, french, _ in SMALL_CORPUS), encoding="utf-8")
    return en, fr
