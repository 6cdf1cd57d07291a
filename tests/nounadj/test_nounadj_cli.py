"""`benchbuild build-noun-adj` through the real entry point: the Europarl sample, and each bad input's error line."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import datasets
import pytest

from benchbuild.cli import main
from benchbuild.nounadj.pairs import TABLE_2

SAMPLE = "europarl-sample"


def run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["benchbuild", *args])
    with pytest.raises(SystemExit) as stop:
        main()
    return stop.value.code, capsys.readouterr().err


@pytest.fixture(scope="module")
def europarl(shared_data, tmp_path_factory):
    """The sample built once through the CLI: (output folder, exit code, the English lines)."""
    folder = shared_data / SAMPLE
    out = tmp_path_factory.mktemp("europarl") / "na"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["benchbuild", "build-noun-adj", "--en", str(folder / "europarl-v7.fr-en.en"),
                                    "--fr", str(folder / "europarl-v7.fr-en.fr"), "--out", str(out),
                                    "--allow-small"])  # the sample holds no clean swap: its test split is empty
        with pytest.raises(SystemExit) as stop:
            main()
    english = (folder / "europarl-v7.fr-en.en").read_bytes().decode("utf-8").split("\n")
    return out, stop.value.code, english


def placed(out: Path) -> dict[int, str]:
    splits = datasets.load_from_disk(str(out))
    return {int(row_id.split("-")[1]): name for name, split in splits.items() for row_id in split["id"]}


@pytest.mark.shared
def test_europarl_sample_builds_a_loadable_benchmark_with_a_complete_card(europarl, shared_data):
    out, code, english = europarl
    assert code == 0
    splits = datasets.load_from_disk(str(out))
    assert set(splits) == {"train", "validation", "test"}
    # The card's counts, counted here from the sample: pairs with an empty side, and of the others those whose English
    # holds a form of a Table 2 noun (its lemma or plural, as a whole word, any case): 6 and 173.
    french = (shared_data / SAMPLE / "europarl-v7.fr-en.fr").read_bytes().decode("utf-8").split("\n")
    pairs = list(zip(english, french))
    empty = [pair for pair in pairs if not pair[0].strip() or not pair[1].strip()]
    forms = {form for pair in TABLE_2.pairs for form in pair.surface_forms()}
    with_a_form = [en for en, fr in pairs if en.strip() and fr.strip()
                   and forms & {word.lower() for word in re.findall(r"\w+", en)}]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"| sentences sent to the parser (hold a target-noun form) | {len(with_a_form)} |" in card
    assert f"| pairs dropped: empty or whitespace-only side | {len(empty)} |" in card
    assert (len(empty), len(with_a_form)) == (6, 173)
    assert "europarl-v7.fr-en.en" in card and "## Citation" in card


@pytest.mark.shared
def test_europarl_sample_sentences_are_placed_by_the_rules(europarl):
    out, _, english = europarl
    where = placed(out)
    assert "new sources of employment" in english[352 - 1]
    assert where[352] in ("train", "validation")       # source with its own adjective, new
    assert english[2906 - 1].startswith("A big responsibility")
    assert where[2906] in ("train", "validation")      # responsibility with its own adjective, big
    assert where[1] in ("train", "validation")         # no target noun: kept unparsed
    assert "a workable solution" in english[129 - 1]
    assert 129 not in where                             # a non-table adjective on a target noun
    assert "an effective response" in english[222 - 1]
    assert 222 not in where                             # effective is backward-column but not response's own
    assert "a new institution" in english[1652 - 1]
    assert 1652 not in where                            # the swap sits beside "numerous and varied institutions"
    assert 550 not in where                             # an empty French line: dropped
    assert len(datasets.load_from_disk(str(out))["test"]) == 0  # the 3,000-line sample holds no clean swap


@pytest.mark.shared
def test_an_existing_output_is_not_overwritten(europarl, monkeypatch, capsys, shared_data):
    out, _, _ = europarl
    folder = shared_data / SAMPLE
    code, err = run_cli(["build-noun-adj", "--en", str(folder / "europarl-v7.fr-en.en"),
                         "--fr", str(folder / "europarl-v7.fr-en.fr"), "--out", str(out)], monkeypatch, capsys)
    assert code == 1 and "already exists: pass --overwrite" in err


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def assert_one_error_line(code: int, err: str, *needles: str) -> None:
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchbuild: error: ")
    for needle in needles:
        assert needle in lines[0]


def test_misaligned_files_fail_before_parsing_without_output(tmp_path, monkeypatch, capsys):
    en = write(tmp_path / "train.en", b"A new solution.\nA good decision.\nThe end.\n")
    fr = write(tmp_path / "train.fr", b"Une nouvelle solution.\nUne bonne d\xc3\xa9cision.\n")
    out = tmp_path / "out"
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(out)], monkeypatch, capsys)
    assert_one_error_line(code, err, "train.fr` has 2 lines but", "train.en` has 3", "not aligned")
    assert not out.exists()


def test_invalid_utf8_names_file_and_line_without_output(tmp_path, monkeypatch, capsys):
    en = write(tmp_path / "c.en", b"A new solution.\nA good \xff decision.\n")
    fr = write(tmp_path / "c.fr", b"Une nouvelle solution.\nUne bonne d\xc3\xa9cision.\n")
    out = tmp_path / "out"
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(out)], monkeypatch, capsys)
    assert_one_error_line(code, err, "c.en` line 2 is not valid UTF-8", "--encoding-errors replace")
    assert sorted(tmp_path.iterdir()) == sorted([en, fr])  # no output and no partial folder beside it


def test_encoding_errors_replace_builds_and_counts_the_line(tmp_path, monkeypatch, capsys):
    en = write(tmp_path / "c.en", b"A permanent solution.\nA good \xff decision.\n")
    fr = write(tmp_path / "c.fr", b"Une solution permanente.\nUne bonne d\xc3\xa9cision.\n")
    out = tmp_path / "out"
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(out),
                         "--encoding-errors", "replace", "--valid-fraction", "0", "--allow-small"], monkeypatch,
                        capsys)
    assert code == 0, err
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| lines with invalid UTF-8 replaced (--encoding-errors replace) | 1 |" in card
    assert datasets.load_from_disk(str(out))["train"]["source"] == ["A permanent solution.", "A good \ufffd decision."]


@pytest.mark.parametrize("pairs_text, needle", [
    ('[[backward]]\nadjective = "specific"\nnoun = "response"\nfr_adjective = "spécifique"\nfr_noun = "réponse"\n'
     'colour = "red"\n[[forward]]\nadjective = "new"\nnoun = "source"\nfr_adjective = "nouveau"\nfr_noun = "source"\n',
     "unknown key 'colour'"),
    ('[[backward]]\nadjective = "new"\nnoun = "response"\nfr_adjective = "nouveau"\nfr_noun = "réponse"\n'
     '[[forward]]\nadjective = "new"\nnoun = "source"\nfr_adjective = "nouveau"\nfr_noun = "source"\n',
     "'new' is in both the backward and the forward column"),
    ('[[backward]]\nadjective = "specific"\nnoun = "response"\nfr_noun = "réponse"\n'
     '[[forward]]\nadjective = "new"\nnoun = "source"\nfr_adjective = "nouveau"\nfr_noun = "source"\n',
     "(response) is missing 'fr_adjective'"),
])
def test_bad_pairs_files_fail_without_output(tmp_path, monkeypatch, capsys, pairs_text, needle):
    en = write(tmp_path / "c.en", b"A new solution.\n")
    fr = write(tmp_path / "c.fr", b"Une nouvelle solution.\n")
    pairs = tmp_path / "pairs.toml"
    pairs.write_text(pairs_text, encoding="utf-8")
    out = tmp_path / "out"
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--pairs", str(pairs), "--out", str(out)],
                        monkeypatch, capsys)
    assert_one_error_line(code, err, "pairs.toml", needle)
    assert not out.exists()


def test_missing_models_fail_before_reading_without_output(tmp_path, monkeypatch, capsys):
    en = write(tmp_path / "c.en", b"A new solution.\n")
    fr = write(tmp_path / "c.fr", b"Une nouvelle solution.\n")
    out = tmp_path / "out"
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(out),
                         "--spacy-model", "en_core_web_trf"], monkeypatch, capsys)
    assert_one_error_line(code, err, "spaCy model `en_core_web_trf` is not installed")
    code, err = run_cli(["build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", str(out),
                         "--parser", "stanza", "--stanza-dir", str(tmp_path / "no-models")], monkeypatch, capsys)
    assert_one_error_line(code, err, "stanza models are missing", "no-models")
    assert not out.exists()


def test_the_europarl_recipe_names_valid_options_and_asks_for_the_full_corpus(tmp_path, monkeypatch, capsys):
    recipe = Path(__file__).resolve().parents[2] / "pipelines" / "noun_adj_europarl.toml"
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(["run", str(recipe)], monkeypatch, capsys)
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("benchbuild: error: `europarl/europarl-v7.fr-en.en` does not exist")
    assert not (tmp_path / "out").exists()
