"""The published benchmarks `benchbuild import LAYOUT DIR` recognises by name: where each split's files lie in the
release, how many lines the published files have, how the benchmark is scored, and what the card says about it.

`locate` finds a layout's files in DIR (or takes a split's files from `--split`) and refuses, in one line listing
everything that is wrong, a release with missing, misnamed, misaligned or truncated files, before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from benchbuild.errors import BenchbuildError
from benchbuild.importing.files import PublishedCount, SplitFiles, check_splits


@dataclass(frozen=True)
class PublishedSplit:
    """One split of a release: where its files may lie (paths relative to DIR, without the suffix), their suffixes in
    column order (source, target, extra columns) and the published line count. No suffixes: the stem is the one file
    (a layout of `IN: … OUT: …` files)."""

    name: str
    stems: tuple[str, ...]
    suffixes: tuple[str, ...]
    lines: int
    what: str

    def files(self, stem: str) -> list[str]:
        return [f"{stem}.{suffix}" for suffix in self.suffixes] if self.suffixes else [stem]


@dataclass(frozen=True)
class Layout:
    """A published benchmark: its splits, family/name (so the catalogue's `[[reported]]` rows find it), languages,
    metrics and card facts."""

    name: str
    family: str
    benchmark: str
    pretty_name: str
    summary: str
    release: str
    languages: tuple[str, str]
    license: str
    citation: str
    metrics: tuple[str, ...]
    splits: tuple[PublishedSplit, ...]
    remove_bpe: bool = False  # strip subword-nmt joiners (`@@ `): fairseq's --remove-bpe
    degree: bool = False  # add each row's compositional degree w.r.t. the train source (001 §4, Figure 1a)
    lexicon: tuple[str, ...] = ()  # where the CTER lexicon lies, relative to DIR
    in_out: bool = False  # each split one file of `IN: source OUT: target` lines (SCAN's format)


_IWSLT14_CITATION = """\
@inproceedings{cettolo-etal-2014-report,
  title = {Report on the 11th {IWSLT} Evaluation Campaign},
  author = {Cettolo, Mauro and Niehues, Jan and St{\\"u}ker, Sebastian and Bentivogli, Luisa and Federico, Marcello},
  booktitle = {Proceedings of the 11th International Workshop on Spoken Language Translation: Evaluation Campaign},
  year = {2014}
}"""

_IWSLT14_LICENSE = "cc-by-nc-nd-4.0"

_SYNTACTIC_ATTENTION_CITATION = """\
@article{russin-etal-2019-compositional,
  title = {Compositional generalization in a deep seq2seq model by separating syntax and semantics},
  author = {Russin, Jake and Jo, Jason and O'Reilly, Randall C. and Bengio, Yoshua},
  journal = {arXiv preprint arXiv:1904.09708},
  year = {2019}
}
@inproceedings{lake-baroni-2018-generalization,
  title = {Generalization without Systematicity: On the Compositional Skills of Sequence-to-Sequence Recurrent
           Networks},
  author = {Lake, Brenden and Baroni, Marco},
  booktitle = {Proceedings of the 35th International Conference on Machine Learning},
  year = {2018}
}"""

LAYOUTS: Mapping[str, Layout] = {layout.name: layout for layout in (
    Layout(
        name="cognition", family="cognition", benchmark="cognition/published",
        pretty_name="CoGnition (imported)",
        summary="CoGnition (Li et al., 2021), an English→Chinese translation benchmark of compositional "
                "generalization: a training set of 196,246 pairs, validation and random test sets of 10,000, and the "
                "CG test set of 10,800 sentences that combine known atoms into 2,160 novel compounds, each in 5 "
                "contexts on consecutive lines. Scored with CTER (compound translation error rate, instance and "
                "aggregate) with the release's lexicon, and BLEU (004 Table 1, 001 Table 4).",
        release="CoGnition's data/ folder (github.com/yafuly/CoGnition; cg-test/ inside it, eval/lexicon beside it)",
        languages=("en", "zh"), license="unknown",
        citation="""\
@inproceedings{li-etal-2021-compositional,
  title = {On Compositional Generalization of Neural Machine Translation},
  author = {Li, Yafu and Yin, Yongjing and Chen, Yulong and Zhang, Yue},
  booktitle = {Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th
               International Joint Conference on Natural Language Processing (Volume 1: Long Papers)},
  year = {2021}
}""",
        metrics=("cter", "bleu"),
        splits=(PublishedSplit("train", ("train",), ("en", "zh"), 196_246, "CoGnition's training set"),
                PublishedSplit("validation", ("valid",), ("en", "zh"), 10_000, "CoGnition's validation set"),
                PublishedSplit("test", ("test",), ("en", "zh"), 10_000, "CoGnition's random test set"),
                PublishedSplit("cg_test", ("cg-test/cg-test", "cg-test"), ("en", "zh", "compound"), 10_800,
                               "CoGnition's CG test set")),
        lexicon=("lexicon", "../eval/lexicon", "eval/lexicon", "cg-test/lexicon"),
    ),
    Layout(
        name="react", family="react", benchmark="react/published",
        pretty_name="ReaCT (published test set, imported)",
        summary="The published ReaCT benchmark (Zheng & Lapata, 2023, §4): IWSLT14 German→English for training, "
                "validation and the in-domain test, and the 3,000-sentence compositional test set (cg_test) selected "
                "from WMT14 by compositional degree and ensemble uncertainty, the one 001 Table 5 reports on. Each "
                "row carries its compositional degree w.r.t. the training source (001 Figure 1a's buckets). Scored "
                "with BLEU.",
        release="a folder of ReaCT's cg_test.de/en (github.com/mswellhao/Dangle, ReaCT_data/raw_data) with IWSLT14's "
                "train/valid/test.de/en (fairseq's prepare-iwslt14.sh)",
        languages=("de", "en"),
        license="other: IWSLT14 (TED talks, CC BY-NC-ND 4.0) and WMT14 news sentences (cg_test)",
        citation="""\
@inproceedings{zheng-lapata-2023-real,
  title = {Real-World Compositional Generalization with Disentangled Sequence-to-Sequence Learning},
  author = {Zheng, Hao and Lapata, Mirella},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2023},
  year = {2023}
}
""" + _IWSLT14_CITATION,
        metrics=("bleu",),
        splits=(PublishedSplit("train", ("train",), ("de", "en"), 160_239, "IWSLT14's train set "
                               "(prepare-iwslt14.sh)"),
                PublishedSplit("validation", ("valid",), ("de", "en"), 7_283, "ReaCT's validation set"),
                PublishedSplit("test", ("test",), ("de", "en"), 6_750, "ReaCT's in-domain test set"),
                PublishedSplit("cg_test", ("cg_test",), ("de", "en"), 3_000, "ReaCT's compositional test set")),
        remove_bpe=True, degree=True,
    ),
    Layout(
        name="iwslt14", family="iwslt14_de_en", benchmark="iwslt14_de_en/fairseq",
        pretty_name="IWSLT14 German→English (fairseq preparation, imported)",
        summary="IWSLT14 German→English (TED talks) as fairseq's examples/translation/prepare-iwslt14.sh leaves it: "
                "Moses-tokenized and lowercased, every 23rd training pair held out for validation, the test set the "
                "concatenation of dev2010, dev2012 and tst2010-2012 (000 Table 4). Scored with BLEU.",
        release="the folder fairseq's examples/translation/prepare-iwslt14.sh writes (iwslt14.tokenized.de-en)",
        languages=("de", "en"), license=_IWSLT14_LICENSE, citation=_IWSLT14_CITATION,
        metrics=("bleu",),
        splits=(PublishedSplit("train", ("train",), ("de", "en"), 160_239, "prepare-iwslt14.sh's train set"),
                PublishedSplit("validation", ("valid",), ("de", "en"), 7_283, "prepare-iwslt14.sh's valid set"),
                PublishedSplit("test", ("test",), ("de", "en"), 6_750, "prepare-iwslt14.sh's test set")),
        remove_bpe=True,
    ),
    Layout(
        name="syntactic_attention_mt", family="lake_baroni_en_fr", benchmark="lake_baroni_en_fr/syntactic_attention_mt",
        pretty_name="Lake & Baroni English→French, as 002 trained and tested on it (imported)",
        summary="The small English→French set of Lake & Baroni (2018, §5) in the files Russin et al. (002) trained "
                "and scored Table 3 on: 9,999 training pairs (no \"i am daxy\" copies), a test set of 1,191 pairs "
                "whose first 8 use the novel adjective \"daxy\" in new combinations, and the 783 test pairs without "
                "unknown words, on which 002's scripts select the checkpoint (validation). Scored with BLEU (002's "
                "own: NLTK over every reference of a source, targets under 4 words skipped).",
        release="the data/MT folder of github.com/jlrussin/syntactic_attention (train, test, test_no_unk.txt)",
        languages=("en", "fr"), license="unknown (Tatoeba sentences, CC BY 2.0 FR, as the PyTorch tutorial's)",
        citation=_SYNTACTIC_ATTENTION_CITATION,
        metrics=("bleu",),
        splits=(PublishedSplit("train", ("train",), (), 9_999, "002's training file (data/MT/train)"),
                PublishedSplit("validation", ("test_no_unk.txt",), (), 783,
                               "002's selection file (data/MT/test_no_unk.txt: test pairs without unknown words)"),
                PublishedSplit("test", ("test",), (), 1_191, "002's test file (data/MT/test)")),
        in_out=True,
    ),
)}


def locate(layout: Layout, folder: Path, given: Mapping[str, SplitFiles]) -> list[SplitFiles]:
    """Every split of `layout`: its files in `folder`, or those `given` for it (`--split`, which may add splits).
    Refuses, in one line naming everything that is wrong, missing or misnamed files, and files whose lines are not
    aligned or not as many as the published ones; nothing is read but line counts."""
    if not folder.is_dir():
        raise BenchbuildError(f"{layout.name}: `{folder}` is not a folder: give {layout.release}")
    splits: list[SplitFiles] = []
    missing: list[str] = []
    given = {name: replace(split, in_out=layout.in_out) for name, split in given.items()}
    for published in layout.splits:
        if published.name in given:
            splits.append(given[published.name])
            continue
        stem = next((stem for stem in published.stems
                     if all((folder / name).is_file() for name in published.files(stem))), None)
        if stem is None:
            missing.append(f"{published.name} ({' + '.join(published.files(published.stems[0]))})")
            continue
        splits.append(SplitFiles(published.name, tuple(folder / name for name in published.files(stem)),
                                 PublishedCount(published.lines, published.what), in_out=layout.in_out))
    known = {published.name for published in layout.splits}
    splits += [split for name, split in given.items() if name not in known]
    if missing:
        present = sorted(path.name for path in folder.iterdir() if not path.name.startswith("."))
        holds = ", ".join(present[:10]) + (f" and {len(present) - 10} more" if len(present) > 10 else "")
        raise BenchbuildError(f"{layout.name}: `{folder}` lacks the files of {'; '.join(missing)} (it holds: "
                              f"{holds or 'nothing'}); give {layout.release}, or a split's files "
                              "with --split NAME=FILES")
    check_splits(splits, prefix=f"{layout.name}: ")
    return splits


def find_lexicon(layout: Layout, folder: Path, given: Path | None) -> Path | None:
    """The CTER lexicon: `--lexicon`, else the first of the layout's places that holds one (None when the layout has
    no lexicon); a layout scored with CTER whose lexicon cannot be found is refused, naming where it looked."""
    if given is not None or not layout.lexicon:
        return given
    for relative in layout.lexicon:
        if (folder / relative).is_file():
            return folder / relative
    raise BenchbuildError(f"{layout.name}: no CTER lexicon in `{folder}` (looked for "
                          f"{', '.join(layout.lexicon)}): pass --lexicon FILE (CoGnition's eval/lexicon)")

