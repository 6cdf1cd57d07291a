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
_DANGLE = "mswellhao/Dangle @ 27223eb (fairseq/fairseq/models/transformer_*dangle*.py)"
_PROTOTYPE = ("the paper's text (000 §3, App. A); the nearest code, the authors' 2020 prototype robertodessi/fairseq "
              "dev @ f85f0b88 (fairseq/models/ctronn*.py), is not yet run beside it")
_NOT_YET = "not yet run beside it (issue #56)"
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
    "transformer": Check("read", f"{_003} for the scan recipe, fairseq's Transformer in {_DANGLE} for the MT recipes",
                         what=f"with init = \"003\", attention_bias = false and output_bias = true it is tested equal "
                              f"to 003's opennmt variant ({_003_TESTS}); as catalogued (the zoo's own draw, attention "
                              f"biases) and against fairseq, {_NOT_YET}"),
    "transformer_noscale": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "transformer_ped": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "relative_transformer": Check("tested equal", _003, _003_TESTS,
                                  f"{_003_WHAT}; greedy decoding on 200 real sources"),
    "relative_universal_transformer": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "universal_transformer": Check("tested equal", _003, _003_TESTS, _003_WHAT),
    "dangle": Check("read", _DANGLE, what=f"{_NOT_YET}; tests/zoo/test_dangle_official.py restates its pieces"),
    "rdangle_shr": Check("read", _DANGLE, what=_NOT_YET),
    "rdangle_sep": Check("read", _DANGLE, what=_NOT_YET),
    "sag": Check("paper only", _PROTOTYPE, what="000 released no code for its final models"),
    "sag_conv": Check("paper only", _PROTOTYPE, what="000 released no code for its final models"),
    "sag_fixed_span": Check("paper only", _PROTOTYPE, what="000 released no code for its final models"),
    "sag_t5": Check("paper only", _PROTOTYPE, what="000 released no code for its final models"),
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
