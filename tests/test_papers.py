"""The papers table: 000-004 with full citations; every id the catalogue cites is in it."""

from __future__ import annotations

from benchbuild.papers import PAPERS, cited_ids, reported_with
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


def test_reported_with_gives_each_papers_numbers_recipe_and_selection_rule():
    from benchbuild.zoo import load_entry

    entries = [load_entry(name) for name in ("transformer", "sag", "dangle")]
    assert reported_with("000", entries) == [
        "transformer: recipe scan_000, select last: scan/addprim_jump, scan/template_around_right, scan/simple",
        "transformer: recipe mt, select best_validation by bleu: iwslt14_de_en",
        "transformer: recipe nounadj, select best_validation by loss: nounadj",
        "sag: recipe scan, select last: scan/addprim_jump, scan/template_around_right, scan/simple",
        "sag: recipe mt, select best_validation by bleu: iwslt14_de_en",
        "sag: recipe nounadj, select best_validation by loss: nounadj"]
    assert reported_with("001", entries) == [
        "transformer: recipe mt_001, select best_validation by bleu: react/cg_test",
        "dangle: recipe mt, select best_validation by bleu: cognition/cg_test, react/cg_test"]
    assert reported_with("004", entries) == []


def test_reported_with_says_when_a_number_names_no_recipe(tmp_path):
    from benchbuild.zoo import load_entry

    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\npaper = "003"\nsummary = "x"\nextends = "transformer"\n[[reported]]\n'
                    'benchmark = "scan/length"\nmetric = "exact_match"\nvalue = 1.0\ntable = "003 Table 1"\n')
    assert reported_with("003", [load_entry(path)]) == ["mine: no recipe named: scan/length"]


def test_000s_table_3_numbers_say_they_are_the_best_of_a_grid_picked_on_the_test_set():
    """000 Table 3 reports "the mean accuracy of the best hyperparameter configuration" of a grid, and scores SCAN on
    test directly: every such number says so, with the grid's size for the model, wherever it is shown."""
    from benchbuild.papers import statistic_in_words
    from benchbuild.zoo import load_entry

    sizes = {"transformer": (24, 576), "sag": (24, 576), "sag_conv": (48, 768), "sag_fixed_span": (24, 192),
             "sag_t5": (24, 192)}
    for model, (tied, independent) in sizes.items():
        rows = [row for row in load_entry(model).reported if row["table"] == "000 Table 3"]
        assert len(rows) == 3, model
        for row in rows:
            words = statistic_in_words(row)
            assert words.startswith("mean of 3 runs") and "picked on the test set" in words, (model, words)
            assert f"N = {tied} with one value for encoder and decoder, {independent} if" in words, (model, words)
    plain = next(row for row in load_entry("syntactic_attention").reported if row["benchmark"] == "scan/simple")
    assert "picked" not in statistic_in_words(plain)
