"""BLEU as each paper computed it, beside benchbuild's own (`metrics.bleu`: sacreBLEU's 13a, `zh` on Chinese), so a
paper's number stands beside a BLEU computed its way and never beside one computed another way without saying so.

Each `PaperBleu` is one paper's way, read from the authors' code (cited beside it); `FAMILY_BLEU` says which
ways a benchmark family's papers used, and `paper_bleu` scores them all for `metrics.json`'s `paper_bleu` entry. A
catalogue `[[reported]]` BLEU names its way in `bleu` (`benchbuild.bleu_ways.REPORTED_WAYS`): one of these, `sacrebleu` (benchbuild's own)
or `unstated` (the paper does not say).
"""

from __future__ import annotations

import re
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from benchbuild.bleu_ways import COMPUTED, OURS, UNSTATED



class PaperBleu(ABC):
    """One paper's BLEU: `name` (what `[[reported]]`'s `bleu` field and metrics.json's `paper_bleu` call it), the
    `paper` id, `words` that name it in a sentence ("002's multi-reference NLTK BLEU"), a table `label` and `how`, one
    sentence for metrics.json. `score` gives the metrics.json entry."""

    name: str
    paper: str
    words: str
    label: str
    how: str

    @abstractmethod
    def score(self, predictions: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The metrics.json entry of `predictions` of `rows` (each with `source` and `target`), in row order."""

    @property
    def metric(self) -> str:
        """The report's metric name of this BLEU: `bleu_<name>`, beside `bleu` (ours)."""
        return f"bleu_{self.name}"


@dataclass(frozen=True)
class SacrebleuWay(PaperBleu):
    """A paper BLEU that is sacreBLEU's corpus BLEU with `settings` (tokenizer, smoothing) on the lines as `prepare`
    leaves them: `characters` (every non-space character a token), `unspaced_hypothesis` (the hypothesis' spaces
    removed), `empty_as_eos` (an empty line the one token `</s>`)."""

    name: str
    paper: str
    words: str
    label: str
    how: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    characters: bool = False
    unspaced_hypothesis: bool = False
    empty_as_eos: bool = False

    def bleu(self):
        import sacrebleu

        return sacrebleu.BLEU(**self.settings, force=True)  # force: tokenized input is what these ways score

    def prepare(self, predictions: Sequence[str], references: Sequence[str]) -> tuple[list[str], list[str]]:
        hypotheses, references = list(predictions), list(references)
        if self.unspaced_hypothesis:
            hypotheses = [line.replace(" ", "") for line in hypotheses]
        if self.characters:
            hypotheses = [" ".join(line.replace(" ", "")) for line in hypotheses]
            references = [" ".join(line.replace(" ", "")) for line in references]
        if self.empty_as_eos:
            hypotheses = [line if line.split() else "</s>" for line in hypotheses]
            references = [line if line.split() else "</s>" for line in references]
        return hypotheses, references

    def score(self, predictions: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        from benchbuild.evaluation.uncertainty import sacrebleu_score_and_interval

        hypotheses, references = self.prepare(predictions, [row["target"] for row in rows])
        # The score and its interval from one extraction of sacrebleu's statistics.
        plain, interval, signature = sacrebleu_score_and_interval(self.bleu(), hypotheses, references)
        return {"value": plain["score"], "paper": self.paper, "how": self.how, "rows": len(rows),
                "signature": plain["signature"], "ci": interval,
                "ci_method": f"sacrebleu's bootstrap over {len(rows)} test rows ({signature})"}


@dataclass(frozen=True)
class MultiReferenceNltk(PaperBleu):
    """002's BLEU (jlrussin/syntactic_attention evaluate_bleu.py, the version with `get_reference_dict`): NLTK's
    `corpus_bleu(references_list, hypotheses)` with its defaults, weights (0.25,)*4 and no smoothing (L112), each
    hypothesis against every target of the split whose source is the same (`get_reference_dict`, L60-76: keyed by the
    source's tokens, short targets included), a row skipped when its own target has under 4 words (L91-92:
    `len(true_actions[0]) < 6` counts <SOS> and <EOS>); tokens are the whitespace-split words (data.py MTDataset,
    `example.split()`), the hypothesis the decoded words before <EOS> (L97-102). The script scores the train, the
    validation (test_no_unk.txt) and the test file alike and prints each under its own name (L165-178; an earlier
    version printed the train BLEU as "Test BLEU", fixed before Table 3's scripts ran), and 002 does not say which
    file its Table 3 number is on."""

    name: str = "nltk_multi_reference"
    paper: str = "002"
    words: str = "002's multi-reference NLTK BLEU"
    label: str = "BLEU (002: NLTK, multi-reference)"
    how: str = ("002's BLEU (evaluate_bleu.py): NLTK corpus_bleu, 4-gram, no smoothing, each hypothesis against every "
                "target of the split with the same source, rows whose target has under 4 words skipped")
    min_target_words: int = 4

    def score(self, predictions: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import nltk
        from nltk.translate.bleu_score import corpus_bleu

        if len(predictions) != len(rows):
            raise ValueError(f"{len(predictions)} predictions for {len(rows)} rows")
        by_source: dict[tuple[str, ...], list[list[str]]] = {}
        for row in rows:
            by_source.setdefault(tuple(row["source"].split()), []).append(row["target"].split())
        kept = [(prediction.split(), by_source[tuple(row["source"].split())])
                for prediction, row in zip(predictions, rows) if len(row["target"].split()) >= self.min_target_words]
        with warnings.catch_warnings():
            # NLTK warns that a missing n-gram order makes BLEU 0: that is this way's (no smoothing) result.
            warnings.simplefilter("ignore", UserWarning)
            value = 100.0 * corpus_bleu([references for _, references in kept], [words for words, _ in kept]) \
                if kept else None
        return {"value": value, "paper": self.paper, "how": self.how, "rows": len(kept),
                "rows_skipped": len(rows) - len(kept),
                "signature": f"nltk {nltk.__version__} corpus_bleu|weights:0.25x4|smooth:none|"
                             f"refs:same source|min target words:{self.min_target_words}"}


# 000 App. A.2 follows fairseq's IWSLT'14 example, whose `fairseq-generate --beam 5 --remove-bpe` (no --sacrebleu)
# scores with fairseq's C scorer: each line re-encoded to dictionary ids (whitespace tokens), `</s>` appended; trailing
# `</s>` trimmed, but never the first token, so an empty line stays the one token `</s>` (fairseq/clib/libbleu/
# libbleu.cpp L40-47); clipped n-gram matches and `len - n + 1` n-grams a line, summed over the corpus (L69-97,
# L126-139); BLEU-4 = BP · exp(mean log precision), BP = min(1, exp(1 - reflen/predlen)), no smoothing, a zero
# precision gives 0 (fairseq/scoring/bleu.py L131-150). That is sacreBLEU's corpus BLEU with tokenize='none' and
# smooth_method='none' on the same lines, an empty line made `</s>`. Not reproduced: a reference word outside
# fairseq's dictionary never matches there (bleu.py L116 makes <unk> -999), which BPE makes rare.
FAIRSEQ_TOKENIZED = SacrebleuWay(
    name="fairseq_tokenized", paper="000", words="000's fairseq tokenized BLEU",
    label="BLEU (000: fairseq, tokenized)",
    how="fairseq-generate's BLEU-4 as 000 scored IWSLT'14 (no --sacrebleu): the whitespace tokens of the tokenized, "
        "lowercased text, corpus n-gram counts, brevity penalty, no smoothing",
    settings={"tokenize": "none", "smooth_method": "none"}, empty_as_eos=True)
# 001's ReaCT numbers: run_react.sh's `fairseq-generate ... --remove-bpe --sacrebleu` in Dangle's fairseq fork, whose
# generate.py ends `scorer.result_string(tokenize='none')` (without --eval-cognition) and whose bleu.py
# SacrebleuScorer.result_string (L55-62) calls `sacrebleu.corpus_bleu(sys, [ref], tokenize='none')`: default exp
# smoothing, no lowercasing. Not reproduced: a reference word outside the dictionary is printed `<<unk>>` there.
SACREBLEU_NONE = SacrebleuWay(
    name="sacrebleu_none", paper="001", words="001's sacreBLEU with tokenize='none'",
    label="BLEU (001: sacreBLEU, tokenize none)",
    how="001's ReaCT BLEU (Dangle's fairseq-generate --sacrebleu): sacreBLEU corpus BLEU with tokenize='none' on the "
        "tokenized, lowercased text, its default exp smoothing",
    settings={"tokenize": "none"})
# 001's CoGnition numbers: run_cognition.sh's `fairseq-generate ... --sacrebleu --eval-cognition`; with
# --eval-cognition, Dangle's generate.py reads the released reference, joins the characters of both sides with
# spaces once their spaces are removed (`" ".join(list(s.replace(" ", "")))`) and calls `scorer.result_string()`:
# sacreBLEU's defaults, 13a and exp smoothing.
SACREBLEU_CHARACTERS = SacrebleuWay(
    name="sacrebleu_characters", paper="001", words="001's character-level sacreBLEU",
    label="BLEU (001: characters)",
    how="001's CoGnition BLEU (Dangle's fairseq-generate --sacrebleu --eval-cognition): sacreBLEU's default BLEU "
        "(13a, exp smoothing) over characters, spaces removed and every character a token on both sides",
    settings={"tokenize": "13a"}, characters=True)
# 004 §3.1 reports "character-level BLEU ... using SacreBLEU" on CoGnition, whose yafuly/CoGnition
# scripts/infer-one-click-run.sh removes the hypothesis' spaces (`sed -e 's/ //g'`) and runs `sacrebleu REF -i HYP
# -l en-zh -b`: the zh tokenizer sacreBLEU picks for Chinese, exp smoothing, the reference as released.
SACREBLEU_ZH_UNSPACED = SacrebleuWay(
    name="sacrebleu_zh_unspaced", paper="004", words="004's CoGnition sacreBLEU (zh, hypothesis unspaced)",
    label="BLEU (004: sacreBLEU zh)",
    how="CoGnition's scoring that 004 reports (scripts/infer-one-click-run.sh): `sacrebleu -l en-zh` (the zh "
        "tokenizer, exp smoothing) on the hypothesis with its spaces removed against the reference as released",
    settings={"tokenize": "zh"}, unspaced_hypothesis=True)
NLTK_MULTI_REFERENCE = MultiReferenceNltk()

WAYS: dict[str, PaperBleu] = {way.name: way for way in (FAIRSEQ_TOKENIZED, SACREBLEU_NONE, SACREBLEU_CHARACTERS,
                                                         SACREBLEU_ZH_UNSPACED, NLTK_MULTI_REFERENCE)}
assert tuple(WAYS) == COMPUTED, "benchbuild/bleu_ways.py names every way computed here"

# The ways the papers that report on a benchmark family used (build.json's `family`); every evaluation of the family
# scores them all. A family not here is scored with benchbuild's BLEU alone.
FAMILY_BLEU: dict[str, tuple[PaperBleu, ...]] = {
    "iwslt14_de_en": (FAIRSEQ_TOKENIZED,),
    "react": (SACREBLEU_NONE,),
    "cognition": (SACREBLEU_CHARACTERS, SACREBLEU_ZH_UNSPACED),
    "lake_baroni_en_fr": (NLTK_MULTI_REFERENCE,),
}


def paper_bleu(family: str, predictions: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """metrics.json's `paper_bleu`: each way of `FAMILY_BLEU[family]` by name, `{"value", "paper", "how", "rows",
    "signature"}` and, for the sacreBLEU ways, `ci` (sacreBLEU's bootstrap, as `bleu_ci`); empty for other families."""
    return {way.name: way.score(predictions, rows) for way in FAMILY_BLEU.get(family, ())}


def way_of(reported: Mapping[str, Any]) -> str:
    """How a `[[reported]]` BLEU was computed: its `bleu` field, `OURS` where it has none."""
    return reported.get("bleu") or OURS


def difference_words(reported: Mapping[str, Any], ours: str) -> str:
    """Why `ours` (benchbuild's BLEU in words, "sacreBLEU 13a BLEU") is not comparable with the `[[reported]]` BLEU:
    "" where the paper computed it as ours is."""
    way = way_of(reported)
    if way == OURS:
        return ""
    if way == UNSTATED:
        return f"{ours}; the paper does not say how it computed its BLEU"
    return f"{ours}, not {WAYS[way].words}"


def sacrebleu_tokenizer(signature: str) -> str | None:
    """The tokenizer a sacreBLEU signature names (`...|tok:13a|...` → "13a"); None in none."""
    found = re.search(r"(?:^|\|)tok:([^|]+)", signature)
    return found[1] if found else None
