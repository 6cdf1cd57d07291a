"""`benchbuild import`: benchmarks made elsewhere (a published release, COGS, any split files) as benchmark folders
with the same contract, card and fingerprints as a built one, so `train`, `eval`, `score` and `report` take them alike.

`parameters.py` holds the command's options, `files.py` reads one split's files, `layouts.py` knows the published
releases by name (CoGnition, ReaCT, fairseq's IWSLT14) and checks them, `build.py` makes the `Benchmark`.
"""
