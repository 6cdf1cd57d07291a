"""Evaluation computes metrics: `eval` (decode with `zoo.decoding`, score), COMP, CTER, scoring; the corpus metrics
(exact match, BLEU, chrF, BLEU by degree) are `benchbuild.metrics`. Every table of them is `benchbuild.report`'s."""
