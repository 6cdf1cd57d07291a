"""One shared source+target vocabulary per run: word-level for SCAN-like data, BPE (`tokenizers`) for MT.

The tokenizer is a `transformers.PreTrainedTokenizerFast` saved in the run folder, so
`AutoTokenizer.from_pretrained(run_dir)` loads it. Building is deterministic: the same texts give the same
vocabulary and ids (ensemble members trained on one benchmark share one vocabulary).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Literal

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from benchbuild.errors import BenchbuildError

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


def bpe_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-pair encoding learned on `texts` (SentencePiece-style `▁` word boundaries, so decoding restores spaces)."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise BenchbuildError(f"bpe_vocab_size must exceed {len(SPECIAL_TOKENS)} (the special tokens); got {vocab_size}")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
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


def _wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    eos_id = tokenizer.token_to_id(EOS)
    tokenizer.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                                            special_tokens=[(EOS, eos_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                   unk_token=UNK, model_input_names=["input_ids", "attention_mask"])
