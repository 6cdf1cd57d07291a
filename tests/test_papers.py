"""The papers table: 000-004 with full citations; every id the catalogue cites is in it."""

from __future__ import annotations

from benchbuild.papers import PAPERS, cited_ids
from benchbuild.zoo import list_entries


def test_the_five_shared_papers_have_full_citations():
    assert list(PAPERS) == ["000", "001", "002", "003", "004"]
    for paper in PAPERS.values():
        assert paper.authors and paper.title and paper.venue and 2018 <= paper.year <= 2024 and paper.implements
    assert PAPERS["003"].citation() == (
        "Róbert Csordás, Kazuki Irie, Jürgen Schmidhuber (2021). The Devil is in the Detail: Simple Tricks Improve "
        "Systematic Generalization of Transformers. Proceedings of the 2021 Conference on Empirical Methods in "
        "Natural Language Processing (EMNLP).")


def test_cited_ids_reads_paper_fields_and_table_references():
    assert cited_ids("000, 003") == ["000", "003"]
    assert cited_ids("002 Table 1 (baseline); Lake & Baroni 2018; Bastings et al. 2018") == ["002"]
    assert cited_ids("—") == []


def test_every_paper_the_catalogue_cites_is_in_the_table():
    for entry in list_entries():
        cited = cited_ids(entry.paper) + [id for row in entry.reported for id in cited_ids(row["table"])]
        assert entry.name == "hf" or cited, entry.name
        assert set(cited) <= set(PAPERS), entry.name
