"""Evaluation: decoding, metrics (exact match, BLEU, chrF, COMP, CTER, BLEU by degree), scoring and reports."""
