"""Evaluation: `eval` (decode with `zoo.decoding`, score), COMP, CTER, scoring and the report table; the corpus metrics
(exact match, BLEU, chrF, BLEU by degree) are `benchbuild.metrics`."""
