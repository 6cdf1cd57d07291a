"""BLEU as each paper computed it (`evaluation.paper_bleu`), equal to the paper's own scorer: fairseq's C scorer
(restated here from its clipped counts, fairseq/clib/libbleu/libbleu.cpp, since fairseq itself is not installed),
sacreBLEU called as Dangle's fairseq fork and CoGnition's script call it (the library, and its command line), and
NLTK's corpus_bleu with 002's references per source. The references are real rows of ../shared/data (IWSLT14 as
ReaCT prepared it, ReaCT's cg_test, CoGnition's cg-test), where each paper's BLEU differs from benchbuild's 13a;
the outputs are the references with words dropped and swapped, the same every run."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import sacrebleu
from nltk.translate.bleu_score import corpus_bleu

from benchbuild import metrics
from benchbuild.evaluation.paper_bleu import (FAIRSEQ_TOKENIZED, NLTK_MULTI_REFERENCE, SACREBLEU_CHARACTERS,
                                              SACREBLEU_NONE, SACREBLEU_ZH_UNSPACED, paper_bleu)
from benchbuild.evaluation.scoring import score_rows


def system_output(reference: str, line: int) -> str:
    """The reference with every fourth word dropped (from a place that moves with the line) and its first two words
    swapped: a translation that is close but not equal, n-gram by n-gram."""
    words = [word for index, word in enumerate(reference.split()) if (index + line) % 4 != 3]
    if len(words) > 2:
        words[0], words[1] = words[1], words[0]
    return " ".join(words)


def characters_dropped(reference: str, line: int) -> str:
    """A Chinese reference with every fifth character dropped, cut into two-character words with spaces between, as
    a model trained on segmented text prints them."""
    characters = [character for index, character in enumerate(reference) if (index + line) % 5 != 4]
    return " ".join("".join(characters[start:start + 2]) for start in range(0, len(characters), 2))


def lines(path: Path, count: int, containing: str = "") -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if containing in line][:count]


def fairseq_bleu(hypotheses: list[str], references: list[str]) -> float:
    """fairseq-generate's BLEU-4 as its C scorer computes it (libbleu.cpp bleu_add, bleu_addngram, bleu_rtrim;
    fairseq/scoring/bleu.py Scorer.score and brevity): a line is its whitespace tokens with `</s>` appended and the
    trailing `</s>` trimmed but never the first token, so an empty line is one token; per order, `len - n + 1`
    n-grams of the hypothesis and its matches clipped by the reference's counts, summed over the corpus; the geometric
    mean of the four precisions (0 if one is 0) times min(1, exp(1 - reflen / predlen))."""
    matches, totals = [0] * 4, [0] * 4
    reference_length = hypothesis_length = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        hypothesis_tokens, reference_tokens = hypothesis.split() or ["</s>"], reference.split() or ["</s>"]
        hypothesis_length += len(hypothesis_tokens)
        reference_length += len(reference_tokens)
        for n in range(1, 5):
            if len(hypothesis_tokens) < n:
                continue
            totals[n - 1] += len(hypothesis_tokens) - n + 1
            predicted = Counter(tuple(hypothesis_tokens[i:i + n]) for i in range(len(hypothesis_tokens) - n + 1))
            wanted = Counter(tuple(reference_tokens[i:i + n]) for i in range(len(reference_tokens) - n + 1))
            matches[n - 1] += sum(min(count, predicted[gram]) for gram, count in wanted.items())
    precisions = [match / total if total else 0.0 for match, total in zip(matches, totals)]
    if min(precisions) == 0.0:
        return 0.0
    brevity = min(1.0, math.exp(1 - reference_length / hypothesis_length))
    return 100.0 * brevity * math.exp(sum(math.log(p) for p in precisions) / 4)


def as_rows(sources: list[str], targets: list[str]) -> list[dict[str, str]]:
    return [{"id": str(index), "source": source, "target": target}
            for index, (source, target) in enumerate(zip(sources, targets, strict=True))]


@pytest.fixture(scope="module")
def iwslt(shared_data: Path) -> tuple[list[dict[str, str]], list[str]]:
    """120 lines of the IWSLT14 test set that hold `&apos;` (000 Table 4's test set; ReaCT's in-domain test) and
    outputs for them, the sixth one empty."""
    references = lines(shared_data / "react" / "test.en", 120, containing="&apos;")
    sources = lines(shared_data / "react" / "test.de", 10**6)
    english = lines(shared_data / "react" / "test.en", 10**6)
    rows = as_rows([sources[english.index(reference)] for reference in references], references)
    outputs = [system_output(reference, line) for line, reference in enumerate(references)]
    outputs[5] = ""
    return rows, outputs


def test_000s_tokenized_bleu_is_fairseqs_c_scorer_on_the_whitespace_tokens(iwslt):
    rows, outputs = iwslt
    references = [row["target"] for row in rows]
    scored = FAIRSEQ_TOKENIZED.score(outputs, rows)
    assert scored["value"] == pytest.approx(fairseq_bleu(outputs, references), rel=1e-12)
    assert (scored["paper"], scored["rows"]) == ("000", 120)
    assert "tok:none" in scored["signature"] and "smooth:none" in scored["signature"]
    # 13a re-splits `&apos;s` into `& apos ; s`: four tokens where the tokenized text has one.
    assert metrics.bleu(outputs, references)["score"] - scored["value"] > 1.0


def test_an_empty_output_counts_as_fairseqs_one_end_token(iwslt):
    rows, outputs = iwslt
    references = [row["target"] for row in rows]
    without_eos = sacrebleu.BLEU(tokenize="none", smooth_method="none").corpus_score(outputs, [references]).score
    assert FAIRSEQ_TOKENIZED.score(outputs, rows)["value"] == pytest.approx(fairseq_bleu(outputs, references))
    assert FAIRSEQ_TOKENIZED.score(outputs, rows)["value"] != pytest.approx(without_eos, abs=1e-6)


def test_001s_react_bleu_is_sacrebleu_with_tokenize_none_as_dangles_fairseq_calls_it(shared_data: Path):
    references = lines(shared_data / "react" / "cg_test.en", 100, containing="&apos;")
    outputs = [system_output(reference, line) for line, reference in enumerate(references)]
    rows = as_rows(references, references)
    scored = SACREBLEU_NONE.score(outputs, rows)
    # Dangle's fairseq/fairseq/bleu.py SacrebleuScorer.result_string(tokenize='none'), which generate.py calls.
    assert scored["value"] == pytest.approx(sacrebleu.corpus_bleu(outputs, [references], tokenize="none").score)
    assert scored["value"] != pytest.approx(metrics.bleu(outputs, references)["score"], abs=0.5)
    low, high = scored["ci"]
    assert low < scored["value"] < high and "bs:1000" in scored["ci_method"]


@pytest.fixture(scope="module")
def cognition(shared_data: Path) -> tuple[list[dict[str, str]], list[str]]:
    """80 CoGnition cg-test lines with digits (which sacreBLEU's zh tokenizer keeps whole, as one token) and outputs
    for them, with spaces between their words."""
    references = lines(shared_data / "cognition" / "cg-test.zh", 80, containing="0")
    outputs = [characters_dropped(reference, line) for line, reference in enumerate(references)]
    return as_rows(references, references), outputs


def test_001s_cognition_bleu_is_sacrebleu_over_characters_as_dangles_eval_cognition(cognition):
    rows, outputs = cognition
    references = [row["target"] for row in rows]
    scored = SACREBLEU_CHARACTERS.score(outputs, rows)

    def characters(line: str) -> str:  # Dangle's generate.py with --eval-cognition
        return " ".join(list(line.replace(" ", "")))

    assert scored["value"] == pytest.approx(sacrebleu.corpus_bleu([characters(line) for line in outputs],
                                                                  [[characters(line) for line in references]]).score)
    assert scored["value"] != pytest.approx(metrics.bleu(outputs, references)["score"], abs=0.1)


def test_004s_cognition_bleu_is_sacrebleus_command_line_on_the_unspaced_output(cognition, tmp_path):
    rows, outputs = cognition
    reference_file, output_file = tmp_path / "cg-test.ref", tmp_path / "cg-test.hyp.detok"
    reference_file.write_text("".join(row["target"] + "\n" for row in rows), encoding="utf-8")
    # CoGnition's scripts/infer-one-click-run.sh: `sed -e 's/ //g'`, then `sacrebleu REF -i HYP -l en-zh -b`.
    output_file.write_text("".join(line.replace(" ", "") + "\n" for line in outputs), encoding="utf-8")
    printed = subprocess.run([sys.executable, "-m", "sacrebleu", str(reference_file), "-i", str(output_file), "-l",
                              "en-zh", "-b", "-w", "6"], capture_output=True, text=True, check=True).stdout
    assert SACREBLEU_ZH_UNSPACED.score(outputs, rows)["value"] == pytest.approx(float(printed), abs=1e-6)
    assert "tok:zh" in SACREBLEU_ZH_UNSPACED.score(outputs, rows)["signature"]


# English -> French pairs normalised as Lake & Baroni's data is: several translations of one English sentence are
# several rows, and some targets are under 4 words.
LAKE_BARONI_TEST = [
    ("i m lucky .", "je suis chanceux ."), ("i m lucky .", "j ai de la chance ."), ("i m lucky .", "je suis veinard ."),
    ("you re tired .", "tu es fatigue ."), ("you re tired .", "vous etes fatigue ."),
    ("you re tired .", "vous etes fatigues ."), ("we re joking .", "nous plaisantons ."),
    ("we re joking .", "nous sommes en train de plaisanter ."), ("he s very tall .", "il est tres grand ."),
    ("she s late .", "elle est en retard ."), ("they re students .", "ils sont etudiants ."),
    ("they re students .", "ce sont des etudiantes ."), ("i m not sad .", "je ne suis pas triste ."),
    ("i m ready .", "je suis pret ."), ("i m ready .", "je suis prete ."),
]
LAKE_BARONI_OUTPUTS = ["je suis chanceux .", "je suis chanceux .", "je suis chanceux .", "tu es fatiguee .",
                       "tu es fatiguee .", "tu es fatiguee .", "nous sommes plaisantons .", "nous sommes plaisantons .",
                       "il est tres grand .", "elle est en retard .", "ils sont des etudiants .",
                       "ils sont des etudiants .", "je ne suis pas triste .", "je suis pret .", "je suis pret ."]


def test_002s_bleu_is_nltks_corpus_bleu_against_every_target_of_the_same_source():
    rows = as_rows(*map(list, zip(*LAKE_BARONI_TEST)))
    scored = NLTK_MULTI_REFERENCE.score(LAKE_BARONI_OUTPUTS, rows)
    # evaluate_bleu.py: references by source over the whole split (L60-76), a row skipped when its own target has
    # under 4 words (L91-92: "nous plaisantons ." is, though its source's other target is not), corpus_bleu (L112).
    kept = [index for index, (_, target) in enumerate(LAKE_BARONI_TEST) if len(target.split()) >= 4]
    references = [[target.split() for source, target in LAKE_BARONI_TEST if source == LAKE_BARONI_TEST[index][0]]
                  for index in kept]
    expected = 100 * corpus_bleu(references, [LAKE_BARONI_OUTPUTS[index].split() for index in kept])
    assert scored["value"] == pytest.approx(expected, rel=1e-12)
    assert (scored["rows"], scored["rows_skipped"], scored["paper"]) == (14, 1, "002")
    assert len(references[0]) == 3 and len(references[7]) == 1  # "i m lucky ." has three targets
    single = 100 * corpus_bleu([[LAKE_BARONI_TEST[index][1].split()] for index in kept],
                               [LAKE_BARONI_OUTPUTS[index].split() for index in kept])
    assert scored["value"] - single > 5.0  # the other targets of a source count: 002's number is not single-reference
    assert scored["value"] != pytest.approx(metrics.bleu(LAKE_BARONI_OUTPUTS, [t for _, t in LAKE_BARONI_TEST])
                                            ["score"], abs=1.0)


def test_002s_bleu_of_rows_whose_targets_are_all_short_is_undefined():
    rows = as_rows(["we re joking ."], ["nous plaisantons ."])
    assert NLTK_MULTI_REFERENCE.score(["nous plaisantons ."], rows)["value"] is None


def test_scoring_writes_the_paper_bleu_of_the_family_beside_ours_and_none_for_other_families(iwslt):
    rows, outputs = iwslt
    scores = score_rows(rows, outputs, family="iwslt14_de_en")
    assert list(scores["paper_bleu"]) == ["fairseq_tokenized"]
    entry = scores["paper_bleu"]["fairseq_tokenized"]
    assert entry["value"] == pytest.approx(fairseq_bleu(outputs, [row["target"] for row in rows]))
    assert entry["how"].startswith("fairseq-generate's BLEU-4") and entry["paper"] == "000"
    assert scores["bleu"]["score"] == pytest.approx(metrics.bleu(outputs, [row["target"] for row in rows])["score"])
    assert list(scores).index("paper_bleu") == list(scores).index("bleu_ci") + 1  # beside ours
    assert "paper_bleu" not in score_rows(rows, outputs, family="nounadj")
    assert "paper_bleu" not in score_rows(rows, outputs)
    assert list(paper_bleu("cognition", outputs, rows)) == ["sacrebleu_characters", "sacrebleu_zh_unspaced"]
