"""Publishing a benchmark for a dataset venue or the Hub (`benchbuild publish`): parquet splits, the card with the
full citation, Croissant metadata with its Responsible-AI fields (checked with mlcroissant) and CITATION.bib."""
