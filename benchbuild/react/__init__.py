"""ReaCT (001 §4): normalization, OOV filter, n-gram dictionary and compositional degree (the fast path behind
`benchbuild degree`), then a model ensemble's reverse mutual information and the selection of `build-react`."""
