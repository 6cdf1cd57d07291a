"""The noun–adjective order benchmark (000 §4.2): parse a parallel corpus, keep each target noun with one adjective in
train, and test the swapped pairings."""
