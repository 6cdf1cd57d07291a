"""The ways a paper computed the BLEU it reports, by name: what a catalogue `[[reported]]` BLEU's `bleu` field may
say. The computations themselves are `benchbuild.evaluation.paper_bleu`'s; the names live here, importing nothing, so
the catalogue can check an entry without importing evaluation code."""

COMPUTED = ("fairseq_tokenized", "sacrebleu_none", "sacrebleu_characters", "sacrebleu_zh_unspaced",
            "nltk_multi_reference")
OURS = "sacrebleu"  # a reported BLEU computed as `metrics.bleu` computes ours; what an entry without `bleu` means
UNSTATED = "unstated"  # the paper does not say how it computed its BLEU
REPORTED_WAYS = (*COMPUTED, OURS, UNSTATED)
