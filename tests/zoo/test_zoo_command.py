"""`benchbuild zoo` lists every catalogue model (kind, paper ids, summary) readably at 80 columns; `--papers` the
papers it cites."""

from __future__ import annotations

from typer.testing import CliRunner

from benchbuild import cli
from benchbuild.papers import PAPERS
from benchbuild.zoo import list_entries


def zoo(monkeypatch, *args: str, width: int = 80) -> list[str]:
    monkeypatch.setattr(cli.out, "width", width)
    result = CliRunner().invoke(cli.app, ["zoo", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def blocks(lines: list[str]) -> dict[str, str]:
    """Each model's block (its name on a line of its own, then indented lines) as one whitespace-joined text."""
    found: dict[str, list[str]] = {}
    for line in lines[1:]:
        if line and not line.startswith(" "):
            found[line] = []
        elif line:
            found[list(found)[-1]].append(line.strip())
    return {name: " ".join(text) for name, text in found.items()}


def test_zoo_lists_every_model_with_kind_paper_and_summary_within_80_columns(monkeypatch):
    lines = zoo(monkeypatch)
    assert max(map(len, lines)) <= 80 and not any(line.endswith(" ") for line in lines)
    listed = blocks(lines)
    entries = list_entries()
    assert list(listed) == [entry.name for entry in entries]
    for entry in entries:
        assert listed[entry.name].startswith(f"{entry.architecture['kind']} · paper {entry.paper}")
        assert listed[entry.name].endswith(entry.summary)
    assert "extends sag" in listed["sag_t5"] and "extends" not in listed["transformer"]


def test_zoo_papers_gives_every_paper_its_full_citation_and_models(monkeypatch):
    lines = zoo(monkeypatch, "--papers")
    assert max(map(len, lines)) <= 80
    assert [line[:3] for line in lines if line and not line.startswith(" ")] == list(PAPERS)
    text = " ".join(" ".join(lines).split())
    for paper in PAPERS.values():
        assert f"{paper.id} {paper.citation()} benchbuild: {paper.implements}" in text
    assert "zoo: dangle, rdangle_sep, rdangle_shr" in text


def recipe_blocks(lines: list[str]) -> dict[str, str]:
    """`zoo --model NAME`'s block per recipe ("[recipe.mt] 36,663,296 parameters ...") as one whitespace-joined text."""
    text = " ".join(" ".join(lines).split())
    return {part.split("]")[0]: part for part in text.split("[recipe.")[1:]}


def parameters(block: str) -> int:
    return int(block.split("] ")[1].split(" parameters")[0].replace(",", ""))


def test_zoo_model_shows_each_recipe_familys_architecture_and_parameter_count(monkeypatch):
    lines = zoo(monkeypatch, "--model", "transformer")
    assert max(map(len, lines)) <= 80 and lines[0] == "transformer"
    recipes = recipe_blocks(lines)
    assert list(recipes) == ["mt", "mt_001", "nounadj", "scan", "scan_000"]
    mt, scan = recipes["mt"], recipes["scan"]
    assert "d_model = 512" in mt and "encoder_layers = 6" in mt and "dropout = 0.3" in mt
    assert "select = best_validation" in mt and "(separate source and target dictionaries, counted at 10,000 each" in mt
    assert "(vocabulary 40,000)" in recipes["nounadj"]  # one dictionary shared by encoder, decoder and output
    assert "d_model = 128" in scan and "select = last" in scan and "keys this recipe changes: none" in scan
    assert parameters(mt) > 30_000_000 > parameters(scan)
    assert "d_model = 1024" in recipes["nounadj"] and "num_heads = 16" in recipes["nounadj"]


def test_zoo_model_counts_the_parameters_of_every_recipe_of_every_model(monkeypatch):
    import dataclasses

    from benchbuild.zoo import build_model
    from benchbuild.zoo.catalogue import resolved_architecture

    for entry in list_entries():
        recipes = recipe_blocks(zoo(monkeypatch, "--model", entry.name))
        assert set(recipes) == set(entry.recipes), entry.name
        for name in ("scan", "scan_000"):  # the small ones, built for real: the printed count is the model's
            if name in recipes:
                vocabulary = entry.recipes[name].get("bpe_vocab_size") or 32
                network = build_model(dataclasses.replace(entry, architecture=resolved_architecture(entry, name)),
                                      vocab_size=vocabulary, pad_token_id=0, bos_token_id=1, eos_token_id=2)
                assert parameters(recipes[name]) == sum(p.numel() for p in network.parameters()), (entry.name, name)
    sag_conv, sag = (recipe_blocks(zoo(monkeypatch, "--model", name))["scan"] for name in ("sag_conv", "sag"))
    assert parameters(sag_conv) < parameters(sag)  # 000 §3: convolutions are lighter than self-attention


def test_zoo_model_says_which_reported_numbers_each_recipe_made(monkeypatch):
    recipes = recipe_blocks(zoo(monkeypatch, "--model", "transformer"))
    assert ("reported numbers made with it: [reproduced] scan/addprim_jump exact_match 3.4 (000 Table 3)"
            in recipes["scan_000"])
    assert "react/cg_test bleu 11.4 (001 Table 5)" in recipes["mt_001"]
    assert "reported numbers made with it: none" in recipes["scan"]


def test_zoo_papers_says_which_recipe_and_selection_rule_made_each_number(monkeypatch):
    text = " ".join(" ".join(zoo(monkeypatch, "--papers")).split())
    assert ("transformer: recipe scan_000, select last: scan/addprim_jump, scan/template_around_right, "
            "scan/simple") in text
    assert "transformer: recipe mt_001, select best_validation by bleu: react/cg_test" in text
    assert "sag: recipe nounadj, select best_validation by loss: nounadj" in text
    assert "relative_transformer: recipe scan, select last: scan/length_cutoff_26" in text
    assert "syntactic_attention: recipe scan, select best_validation by exact_match: scan/simple" in text
