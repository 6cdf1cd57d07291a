"""SCAN: the grammar (generate + interpret) and the rules that split it into benchmarks."""
