"""The citation block a publication carries: benchbuild's BibTeX generated from the repository's CITATION.cff, and the
papers a benchmark follows, from its card and the family table, each cited once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchbuild import __version__
from benchbuild.errors import BenchbuildError
from benchbuild.publishing.citation import (FAMILY_PAPERS, PAPER_BIBTEX, benchmark_citations, bibtex_entries,
                                            read_citation_file, software_bibtex)

ROOT = Path(__file__).resolve().parents[2]

SCAN_TEMPLATE_CARD_CITATION = """\
@inproceedings{lake2018generalization,
  title     = {Generalization without Systematicity},
  year      = {2018}
}

@inproceedings{loula2018rearranging,
  title     = {Rearranging the Familiar: Testing Compositional Generalization in Recurrent Networks},
  year      = {2018}
}
"""


def test_the_package_reads_the_repositorys_citation_file_and_agrees_with_its_version():
    cff = read_citation_file()
    assert cff == yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and str(cff["version"]) == __version__


def test_benchbuilds_bibtex_is_a_software_entry_of_the_citation_file():
    assert software_bibtex(read_citation_file()) == (
        "@software{benchbuild,\n"
        "  title   = {{benchbuild: compositional-generalization benchmarks for sequence-to-sequence models}},\n"
        "  author  = {{The benchbuild maintainers}},\n"
        f"  version = {{{__version__}}},\n"
        "  license = {MIT}\n"
        "}")


def test_persons_entities_release_year_and_doi_become_bibtex_fields():
    cff = {"title": "Croissant: a metadata format", "date-released": "2024-03-01", "doi": "10.1/x",
           "authors": [{"family-names": "Akhtar", "given-names": "Mubashara"},
                       {"family-names": "Bruin", "name-particle": "de", "given-names": "Jan"},
                       {"name": "MLCommons"}]}
    entry = software_bibtex(cff)
    assert entry.startswith("@software{croissant,\n")
    assert "  author = {Akhtar, Mubashara and de Bruin, Jan and {MLCommons}},\n" in entry
    assert "  year   = {2024},\n" in entry and "  doi    = {10.1/x}\n}" in entry


def test_a_citation_file_without_authors_is_refused():
    with pytest.raises(BenchbuildError, match="CITATION.cff lacks authors"):
        software_bibtex({"title": "x", "authors": []})


def test_a_cards_entries_come_first_and_the_familys_papers_are_not_cited_twice():
    cited = benchmark_citations("scan", SCAN_TEMPLATE_CARD_CITATION)
    assert list(cited) == ["lake2018generalization", "loula2018rearranging"]
    assert cited["lake2018generalization"] == SCAN_TEMPLATE_CARD_CITATION.split("\n\n")[0]  # the card's own text


def test_a_family_whose_card_cites_nothing_gets_the_papers_of_the_family_table():
    assert benchmark_citations("lake_baroni_en_fr", "") == {key: PAPER_BIBTEX[key] for key in (
        "lake2018generalization", "russin2020compositional")}
    assert benchmark_citations("cogs", "% Imported from files benchbuild does not know: cite the dataset's own "
                                       "paper.\n") == {}


def test_every_family_paper_has_its_bibtex_under_its_own_key():
    assert {key for keys in FAMILY_PAPERS.values() for key in keys} == set(PAPER_BIBTEX)
    for key, entry in PAPER_BIBTEX.items():
        assert list(bibtex_entries(entry)) == [key]
