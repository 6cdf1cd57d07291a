"""What each zoo entry has been checked against: its authors' code run beside it (`tests/reference/`, the code in
`../shared/reference/`), or only read, or, where no code was released, the paper's text. `benchbuild zoo --model`
prints it; `tests/test_checked.py` keeps a claim of "tested equal" tied to a test module that exists."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    how: str  # "tested equal", "read", "paper only"
    against: str  # the code (repository @ commit: files) or the paper
    tests: str = ""  # the test module that runs ours beside theirs, for "tested equal"
    what: str = ""  # what the tests compare, or what is still open

    def in_words(self) -> str:
        if self.how == "tested equal":
            return f"tested equal to {self.against} ({self.tests}): {self.what}"
        if self.how == "read":
            return f"public code, compared by reading only: {self.against}; {self.what}"
        return f"no public code: checked against {self.against}; {self.what}"


_003 = "RobertCsordas/transformer_generalization @ 38f2734 (layers/transformer/, models/transformer_enc_dec.py)"
_PROTOTYPE = ("the paper's text (000 §3, App. A) and, where their forms coincide, the authors' 2020 prototype "
              "robertodessi/fairseq dev @ f85f0b88 (fairseq/models/ctronn*.py), run beside it in "
              "tests/reference/test_prototype_000.py")
_PROTOTYPE_WHAT = ("000 released no code for its final models. The prototype's T5 bias is ours with its table mirrored; "
                   "with the architecture keys head_width = \"model\" and attention_sublayer = \"prototype\" our "
                   "self-attention and encoder layer (gate aside) give its outputs from the same weights and draw as "
                   "it draws; what differs (heads as wide as the model, residual and LayerNorm inside its attention, "
                   "attention dropout on the output, its draws, no gate, a fixed-span mask that adds 1 instead of "
                   "masking, its convolution forms) is pinned by tests and listed in the fidelity rows")
_FAIRSEQ_001 = ("mswellhao/Dangle @ 27223eb (fairseq/fairseq/models/transformer.py, transformer_rdangle_kv_shared.py, "
                "transformer_rdangle_kv_sep.py)")
_FAIRSEQ_TESTS = "tests/reference/test_fairseq_transformer_001.py"
_DANGLE_TESTS = "tests/reference/test_dangle_001.py"
_DANGLE_WHAT = ("float64 logits on 8 real padded ReaCT rows of different lengths (training mode without dropout and "
                "evaluation mode), built by their own option parser from run_react.sh's flags at small sizes; one "
                "update with their criterion, clipping and Adam (dangle and rdangle_sep; rdangle_shr is Dangle's "
                "code at chunk size 2, whose logits are compared); not yet: the initial draw and incremental "
                "decoding")
_003_TESTS = "tests/reference/test_transformer_003.py"
_003_WHAT = ("float64 logits and gradients on 40 real padded length-split rows (training and evaluation mode, the "
             "grouped training pass), Adam steps with 003's clip, the initial draw family by family; differences "
             "pinned by tests: their encoder reads a start token and their decoder starts from the end row, their two "
             "embedding tables against our one, our loss over the whole vocabulary, the embeddings' Xavier bound over "
             "our vocabulary size")

CHECKS: dict[str, Check] = {
    "syntactic_attention": Check(
        "tested equal", "jlrussin/syntactic_attention @ f8219ca (SyntacticAttention.py, train_test.py)",
        "tests/reference/test_syntactic_attention_002.py",
        "float64 log-probabilities on real padded add-jump batches (training and evaluation mode), Adam steps with "
        "clipping, the loss and a 200-update loss curve (its softmax over the actions, as theirs), greedy actions on "
        "200 real sources, the initial draw tensor by tensor"),
    "transformer": Check("tested equal", f"fairseq's Transformer in {_FAIRSEQ_001} for 001's MT recipe (mt_001)",
                         _FAIRSEQ_TESTS,
                         "float64 logits and encoder states on 24 real padded ReaCT rows (training mode without "
                         "dropout and evaluation mode), one update with their label-smoothed criterion, clipping and "
                         "Adam, the initial draw under init = \"fairseq\" (but the embeddings, whose rows their "
                         "build_embedding normalises: pinned), greedy decoding on 200 real sources and beam 5 on 30 "
                         "against their SequenceGenerator (the differences pinned: their </s> decoder start, no empty "
                         f"output, their beam's choices); the scan recipe with init = \"003\", attention_bias = false "
                         f"and output_bias = true is 003's opennmt variant ({_003_TESTS})"),
    "transformer_noscale": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "transformer_ped": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "relative_transformer": Check("tested equal", _003, _003_TESTS,
                                  f"{_003_WHAT}; greedy decoding on 200 real sources"),
    "relative_universal_transformer": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "universal_transformer": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "dangle": Check("tested equal", _FAIRSEQ_001, _DANGLE_TESTS, _DANGLE_WHAT),
    "rdangle_shr": Check("tested equal", _FAIRSEQ_001, _DANGLE_TESTS, _DANGLE_WHAT),
    "rdangle_sep": Check("tested equal", _FAIRSEQ_001, _DANGLE_TESTS, _DANGLE_WHAT),
    "sag": Check("paper only", _PROTOTYPE, what=_PROTOTYPE_WHAT),
    "sag_conv": Check("paper only", _PROTOTYPE, what=_PROTOTYPE_WHAT),
    "sag_fixed_span": Check("paper only", _PROTOTYPE, what=_PROTOTYPE_WHAT),
    "sag_t5": Check("paper only", _PROTOTYPE, what=_PROTOTYPE_WHAT),
    "fusion": Check("paper only", "the paper's text (004 §2.2)", what="004 released no code"),
    "lstm_attention": Check("paper only", "Lake & Baroni 2018 and Bastings et al. 2018 (their code is not among the "
                            "references here)", what="the sizes and recipe are the papers'"),
    "hf": Check("read", "transformers' own BART code, which it runs as it is",
                what="nothing of benchbuild's to compare"),
}


def checked_against(name: str) -> str:
    """What entry `name` was checked against, in words; an entry outside the catalogue (a model file) is unchecked."""
    check = CHECKS.get(name)
    return check.in_words() if check is not None else "a model file outside the catalogue: not checked by benchbuild"
