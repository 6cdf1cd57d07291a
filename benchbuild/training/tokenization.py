"""The run's dictionaries: one shared source+target vocabulary (word-level for SCAN-like data, BPE from `tokenizers`
for MT), or a source and a target dictionary (`TranslationTokenizer`), as fairseq builds them by default.

A dictionary is a `transformers.PreTrainedTokenizerFast` saved in the run folder, so `AutoTokenizer.from_pretrained
(run_dir)` loads the one that encodes sources; with separate dictionaries the target one lies in `target_tokenizer/`
beside it (`benchbuild.zoo.loading.load_tokenizer` loads the pair). Building is deterministic: the same texts give
the same vocabulary and ids (ensemble members trained on one benchmark share their dictionaries).

Separate dictionaries follow the papers' fairseq setups:

- fairseq's IWSLT'14 De-En example (examples/translation/prepare-iwslt14.sh, which 000 App. A.2 starts from): BPE
  is learned once on the German and English training text together (`learn_bpe.py -s 10000` on their concatenation)
  and applied to both; `fairseq-preprocess` without `--joined-dictionary` then builds a German dictionary from the
  BPE'd German and an English one from the BPE'd English, and the model (`--share-decoder-input-output-embed`, as
  mswellhao/Dangle run_react.sh trains 001's models, not `--share-all-embeddings`) has an encoder embedding of the
  German dictionary and a decoder embedding of the English one, tied to its output layer. Here: `bpe_tokenizer` on
  both sides' texts, then `restricted_bpe` keeps, per side, the tokens that side's training text is encoded with.
- CoGnition (yafuly/CoGnition, English→Chinese; 004 §3.1 follows it): the Chinese side is segmented into words with
  jieba (the released train/valid/test .zh files are segmented; cg-test.zh is not), scripts/process-bpe.sh learns
  BPE (subword-nmt, 2,000 merges) on the English and Chinese training text together and applies it to the Chinese
  files only, English words are kept whole, and `fairseq-preprocess` builds separate dictionaries: 2,008 English
  and 5,504 Chinese types (data/processed/bin/preprocess.log); 004 states a 5,500-subword Chinese vocabulary from
  3,000 merges and a 2,000-word English one. Here: `jieba_segmented` Chinese, a BPE of `bpe_vocab_size` learned on
  the sides that use BPE (the Chinese only: learning on the English too would only spend merges on a side that
  never applies them), and a word-level English dictionary.

Segmentation marks word boundaries with `SEGMENT_BOUNDARY` (a zero-width space) where the text writes no space; a
BPE dictionary of segmented text never merges across one and drops it, so decoding gives back the text as written
(`他喜欢的狗`, not `他 喜欢 的 狗`) and a reference stays producible. A plain `AutoTokenizer` load of a segmented
dictionary does not segment: `zoo.loading.TranslationTokenizer` does, from the `segmentation` its tokenizer_config.json
records.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Literal, Sequence

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.loading import SEGMENT_BOUNDARY, Segmenter, TranslationTokenizer, segmented_texts

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
TokenizerKind = Literal["word", "bpe"]


def word_level_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """Whitespace tokens; ids: the special tokens, then words by descending count, ties in code-point order."""
    counts = Counter(token for text in texts for token in text.split())
    words = sorted((word for word in counts if word not in SPECIAL_TOKENS), key=lambda word: (-counts[word], word))
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # Word-level ids decode by joining with spaces; the WordPiece decoder without a prefix does exactly that.
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return _wrap(tokenizer)


def bpe_tokenizer(texts: Iterable[str], vocab_size: int, segmented: bool = False) -> PreTrainedTokenizerFast:
    """Byte-pair encoding learned on `texts` (SentencePiece-style `▁` word boundaries, so decoding restores spaces).

    `segmented`: some texts mark word boundaries with `SEGMENT_BOUNDARY` (`segmented_texts`); no merge crosses one,
    and the mark itself is dropped, never a token, so no `▁` is written there and decoding joins the words as the
    text did."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise BenchbuildError(f"bpe_vocab_size must exceed {len(SPECIAL_TOKENS)} (the special tokens); got {vocab_size}")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
    if segmented:
        # "first": a piece after a removed boundary gets no `▁`; only the text's start and its spaces do.
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(SEGMENT_BOUNDARY, behavior="removed"),
            pre_tokenizers.Metaspace(prepend_scheme="first")])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    # Sorted input makes the learned merges independent of row order as well as of the run.
    tokenizer.train_from_iterator(sorted(texts), trainer=trainer)
    return _wrap(tokenizer)


def build_tokenizer(texts: Iterable[str], kind: TokenizerKind, vocab_size: int | None = None) -> PreTrainedTokenizerFast:
    """The run's tokenizer over `texts` (sources and targets together): `word` or `bpe` with `vocab_size`."""
    if kind == "word":
        return word_level_tokenizer(texts)
    if kind == "bpe":
        if vocab_size is None:
            raise BenchbuildError("a BPE tokenizer needs bpe_vocab_size (set it in the recipe)")
        return bpe_tokenizer(list(texts), vocab_size)
    raise BenchbuildError(f"unknown tokenizer kind {kind!r}: choose word or bpe")


def build_dictionaries(sources: Sequence[str], targets: Sequence[str], *, source_kind: TokenizerKind,
                       target_kind: TokenizerKind, bpe_vocab_size: int | None = None,
                       segment_source: Segmenter | None = None,
                       segment_target: Segmenter | None = None) -> TranslationTokenizer:
    """A source and a target dictionary over the training `sources` and `targets` (module docstring): each side
    `word` (its own whitespace words) or `bpe`; one BPE of `bpe_vocab_size` is learned on the texts of the sides
    that use it, segmented first where that side has a segmenter, and each BPE side keeps the tokens its own text
    uses (`restricted_bpe`)."""
    for side, kind, segmenter in (("source", source_kind, segment_source), ("target", target_kind, segment_target)):
        if segmenter is not None and kind != "bpe":
            raise BenchbuildError(f"segment_{side} = {segmenter!r} needs {side}_tokens = 'bpe': word-level ids decode "
                                  "with a space between words, so segmented text would not decode back as written")
    texts = {"source": segmented_texts(sources, segment_source), "target": segmented_texts(targets, segment_target)}
    kinds = {"source": source_kind, "target": target_kind}
    segmenters = {"source": segment_source, "target": segment_target}
    learned = [side for side in ("source", "target") if kinds[side] == "bpe"]
    if learned and bpe_vocab_size is None:
        raise BenchbuildError("a BPE dictionary needs bpe_vocab_size (set it in the recipe)")
    bpe = bpe_tokenizer([text for side in learned for text in texts[side]], bpe_vocab_size,
                        segmented=any(segmenters[side] for side in learned)) if learned else None
    sides = {side: restricted_bpe(bpe, texts[side], segmenters[side]) if kinds[side] == "bpe"
             else word_level_tokenizer(texts[side]) for side in ("source", "target")}
    return TranslationTokenizer(sides["source"], sides["target"])


def restricted_bpe(bpe: PreTrainedTokenizerFast, texts: Sequence[str],
                   segmentation: Segmenter | None = None) -> PreTrainedTokenizerFast:
    """`bpe` with only the tokens that encoding `texts` ends in, the tokens merged into them, and the merges making
    those: one side's dictionary of a BPE learned on both (fairseq-preprocess counts a side's BPE'd training text).

    The merges a side keeps apply in their learned order, and none of the dropped ones ever applies to `texts` (its
    result would be a kept token), so `texts` encode into the same pieces as under `bpe`. fairseq's dictionary holds
    only the pieces that end up in the text; tokens used only on the way to a longer one are kept here as well
    (a few rows more), for without them the longer one could not be formed."""
    state = json.loads(bpe.backend_tokenizer.to_str())
    merges = [tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge)
              for merge in state["model"]["merges"]]
    parts = {left + right: (left, right) for left, right in merges}
    used: set[str] = set()
    pending = [token for encoding in bpe.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)
               for token in encoding.tokens]
    while pending:
        token = pending.pop()
        if token not in used:
            used.add(token)
            pending.extend(parts.get(token, ()))
    vocab = state["model"]["vocab"]
    kept = [*SPECIAL_TOKENS, *sorted((token for token in used if token not in SPECIAL_TOKENS), key=vocab.__getitem__)]
    state["model"]["vocab"] = {token: index for index, token in enumerate(kept)}
    state["model"]["merges"] = [[left, right] for left, right in merges if left + right in used]
    return _wrap(Tokenizer.from_str(json.dumps(state)), segmentation)


def _wrap(tokenizer: Tokenizer, segmentation: str | None = None) -> PreTrainedTokenizerFast:
    """A `transformers` tokenizer over `tokenizer`; `segmentation` (the segmenter its texts pass through first) is
    kept in its tokenizer_config.json."""
    eos_id = tokenizer.token_to_id(EOS)
    tokenizer.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                                            special_tokens=[(EOS, eos_id)])
    extra = {} if segmentation is None else {"segmentation": segmentation}
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                   unk_token=UNK, model_input_names=["input_ids", "attention_mask"], **extra)
