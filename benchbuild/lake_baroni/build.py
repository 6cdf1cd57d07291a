"""Build Lake & Baroni's (2018, §5) English→French benchmark, by rule like SCAN.

The rules, as Lake & Baroni describe them and as the files Russin et al. (2019, 002 Table 3) released show them:

1. Each pair is normalised as the PyTorch sequence-to-sequence tutorial their data comes from does: lower-cased,
   accents stripped to ASCII, `.`, `!` and `?` split off as tokens, every other run of characters that is not an
   ASCII letter made one space (`I'm 17, too.` → `i m too .`).
2. A pair is kept when its English side starts with one of the tutorial's English prefixes (`ENGLISH_PREFIXES`:
   "i am", "he is", "she is", "you are", "we are", "they are" and their contractions) and neither side has more than
   `max_tokens` tokens (9: the tutorial's "fewer than 10 words").
3. The kept pairs are split at random (seeded) into `train_size` training pairs (10,000) and a test split of the
   rest (1,190 in 002's copy), each in the file's order.
4. The novel adjective: `dax_repetitions` copies of "i am daxy ." → "je suis daxiste ." are added to train.
5. The `daxy` split: the eight sentences that use "daxy" in new combinations — subjects "i am", "you are", "he is"
   with no modifier, "not" or "very", less the one seen in training — with their French translations by rule.
"""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path
from typing import Iterator

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.corpus import CorpusStats, read_lines
from benchbuild.errors import BenchbuildError
from benchbuild.lake_baroni.parameters import LakeBaroniParameters

FAMILY = NAME = "lake_baroni_en_fr"  # 002 Table 3's `[[reported]]` rows name `lake_baroni_en_fr/syntactic_attention_mt`,
# the import of 002's own files, which this builder's benchmark is not
# The English prefixes of the PyTorch tutorial's filter; "he is", "she s" and the uncontracted forms have no trailing
# space there, so "she s" also keeps "she smiled ." (which 002's released training file holds).
ENGLISH_PREFIXES = ("i am ", "i m ", "he is", "he s ", "she is", "she s", "you are", "you re ", "we are", "we re ",
                    "they are", "they re ")
DAX_TRAIN = ("i am daxy .", "je suis daxiste .")
# Subject → (English, French, French negated); the daxy split's sentences are made from these.
SUBJECTS = (("i am", "je suis", "je ne suis pas"), ("you are", "tu es", "tu n es pas"),
            ("he is", "il est", "il n est pas"))
MODIFIERS = ("", "not", "very")


def normalise(text: str) -> str:
    """A sentence as the tutorial normalises it (rule 1), tokens joined by single spaces."""
    text = unicodedata.normalize("NFD", text.lower().strip())
    text = "".join(character for character in text if unicodedata.category(character) != "Mn")
    text = re.sub(r"([.!?])", r" \1", text)
    text = re.sub(r"[^a-zA-Z.!?]+", " ", text)
    return " ".join(text.split())


def daxy_pairs() -> list[tuple[str, str]]:
    """The `daxy` split (rule 5): each modifier, then each subject, "i am daxy ." (seen in training) left out."""
    pairs = []
    for modifier in MODIFIERS:
        for english, french, negated in SUBJECTS:
            source = " ".join(filter(None, (english, modifier, "daxy .")))
            if source == DAX_TRAIN[0]:
                continue
            target = {"": f"{french} daxiste .", "not": f"{negated} daxiste .", "very": f"{french} tres daxiste ."}
            pairs.append((source, target[modifier]))
    return pairs


def read_pairs(path: Path, encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    """`(line number, English, French)` of each line of the pairs file; a line without a tab is an error naming it
    (the file is not the tab-separated pairs file), a third column onwards is ignored."""
    for number, line in read_lines(path, encoding_errors=encoding_errors, stats=stats):
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) < 2:
            raise BenchbuildError(f"`{path}` line {number} has no tab: --pairs takes one 'English<TAB>French' pair a "
                                  "line (Tatoeba's eng-fra.txt)")
        yield number, columns[0], columns[1]


def build_lake_baroni(parameters: LakeBaroniParameters) -> Benchmark:
    """The benchmark: `train`, `test` and `daxy` splits by rules 1–5; refused when fewer than `train_size` + 1 pairs
    pass the filter (no test pair would be left)."""
    assert parameters.pairs is not None
    stats = CorpusStats()
    kept: list[tuple[int, str, str]] = []
    counts = {"pairs read": 0, "pairs dropped: an empty side": 0, "pairs dropped: English prefix not in the list": 0,
              f"pairs dropped: a side over {parameters.max_tokens} tokens": 0}
    for number, english, french in read_pairs(parameters.pairs, parameters.encoding_errors, stats):
        source, target = normalise(english), normalise(french)
        if not source or not target:
            counts["pairs dropped: an empty side"] += 1
        elif not source.startswith(ENGLISH_PREFIXES):
            counts["pairs dropped: English prefix not in the list"] += 1
        elif max(len(source.split()), len(target.split())) > parameters.max_tokens:
            counts[f"pairs dropped: a side over {parameters.max_tokens} tokens"] += 1
        else:
            kept.append((number, source, target))
    counts["pairs read"] = stats.pairs_read
    counts["pairs dropped: an empty side"] += stats.empty_dropped
    if len(kept) <= parameters.train_size:
        raise BenchbuildError(f"only {len(kept):,} pairs of `{parameters.pairs}` pass the filter (English prefix, at "
                              f"most {parameters.max_tokens} tokens a side), so --train-size {parameters.train_size:,} "
                              "leaves no test pair: give the full pairs file or a smaller --train-size")
    order = list(range(len(kept)))
    random.Random(parameters.seed).shuffle(order)
    in_train = set(order[:parameters.train_size])
    rows: dict[str, list[dict[str, str]]] = {"train": [], "test": []}
    for index, (number, source, target) in enumerate(kept):
        split = "train" if index in in_train else "test"
        rows[split].append({"id": f"line-{number}", "source": source, "target": target})
    rows["train"] += [{"id": f"dax-{copy}", "source": DAX_TRAIN[0], "target": DAX_TRAIN[1]}
                      for copy in range(parameters.dax_repetitions)]
    rows["daxy"] = [{"id": f"daxy-{index}", "source": source, "target": target}
                    for index, (source, target) in enumerate(daxy_pairs())]
    counts["pairs kept by the filter"] = len(kept)
    if stats.replaced_characters_lines:
        counts["lines with invalid UTF-8 replaced"] = stats.replaced_characters_lines
    recorded = {"train_size": parameters.train_size, "max_tokens": parameters.max_tokens,
                "dax_repetitions": parameters.dax_repetitions, "english_prefixes": list(ENGLISH_PREFIXES),
                "encoding_errors": parameters.encoding_errors}
    info = BuildInfo.with_inputs(FAMILY, NAME, recorded, parameters.seed, {"pairs": parameters.pairs})
    card = CardFacts(
        pretty_name="Lake & Baroni (2018) English–French with the novel word 'daxy'",
        languages=["en", "fr"], license="cc-by-2.0",
        summary="", counts=counts, task_categories=["translation"],
        rules={
            "train": f"{parameters.train_size:,} filtered pairs drawn with the seed, in the file's order, then "
                     f"{parameters.dax_repetitions:,} copies of 'i am daxy .' → 'je suis daxiste .'",
            "test": "every other filtered pair, in the file's order: a split of the kind 002 Table 3 reports BLEU on, "
                    "not 002's rows (002's own files: `benchbuild import syntactic_attention_mt`; they have 9,999 "
                    "training pairs without daxy copies and the daxy sentences in test)",
            "daxy": "the eight sentences using 'daxy' in new combinations (subjects i am / you are / he is × no "
                    "modifier, 'not', 'very', less the training sentence), translated by rule",
        },
        citation=CITATION,
        extra={"prefixes": ENGLISH_PREFIXES},
    )
    return Benchmark.from_splits(rows, info, card)


CITATION = """@inproceedings{lake2018generalization,
  title = {Generalization without Systematicity: On the Compositional Skills of Sequence-to-Sequence Recurrent Networks},
  author = {Lake, Brenden and Baroni, Marco},
  booktitle = {Proceedings of the 35th International Conference on Machine Learning},
  pages = {2873--2882},
  year = {2018}
}"""
