"""Tiny real runs for the report tests, trained and evaluated once per session: two seeds of a small Transformer
and one of a `t5_bias` model on a SCAN benchmark, and one Transformer each on a ReaCT benchmark (rows with their
compositional degree against the training corpus) and a noun–adjective benchmark. Dropout is off and models are
tiny, so each run trains in about a second."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from small_inputs import write_benchmark

ARCHITECTURE = """\
[architecture]
kind = "transformer"
d_model = 16
num_heads = 2
d_ff = 32
dropout = 0.0
attention_dropout = 0.0
activation_dropout = 0.0
"""

RECIPES = """\
[recipe.scan]
steps = 20
batch_size = 16
learning_rate = 3e-3
eval_every = 5
select = "last"

[recipe.mt]
steps = 20
batch_size = 16
learning_rate = 3e-3
eval_every = 5
bpe_vocab_size = 150
"""

TINY_TRANSFORMER = f"""\
name = "tiny_transformer"
paper = "test"
summary = "A one-layer Transformer small enough to train in a second."
{ARCHITECTURE}encoder_layers = 1
decoder_layers = 1

{RECIPES}
[[reported]]
benchmark = "scan/tiny"
recipe = "scan"
metric = "exact_match"
value = 50.0
table = "test Table 1"

[[reported]]
benchmark = "react"
recipe = "mt"
metric = "bleu"
value = 20.0
table = "test Table 2"

[[reported]]
benchmark = "nounadj"
recipe = "mt"
metric = "comp"
value = 70.0
table = "test Table 3"
"""

TINY_T5 = f"""\
name = "tiny_sag_t5"
paper = "test"
summary = "Two-layer Transformer with a learned per-head relative-position bias (T5-style, span 2)."
{ARCHITECTURE}encoder_layers = 2
decoder_layers = 2
position = "t5_bias"
span = 2

{RECIPES}"""

# English -> French rows of the noun-adjective benchmark: in train each target noun has its own adjective (in that
# adjective's French order); test pairs the nouns with the other column's adjectives (000 §4.2).
NOUN_ADJECTIVE_TRAIN = [
    ("the specific response was clear .", "la réponse spécifique était claire ."),
    ("we want a specific response .", "nous voulons une réponse spécifique ."),
    ("the european institution works .", "l' institution européenne travaille ."),
    ("this european institution is old .", "cette institution européenne est vieille ."),
    ("a new plan is ready .", "un nouveau plan est prêt ."),
    ("the new plan works .", "le nouveau plan fonctionne ."),
    ("the good idea came late .", "la bonne idée est venue tard ."),
    ("it is a good idea .", "c' est une bonne idée ."),
    ("the new law is specific .", "la nouvelle loi est spécifique ."),
    ("a good day for europe .", "un bon jour pour l' europe ."),
    ("the specific case is clear .", "le cas spécifique est clair ."),
    ("the european parliament works .", "le parlement européen travaille ."),
]
NOUN_ADJECTIVE_TEST = [
    ("the new response was clear .", "la nouvelle réponse était claire .", "response", "new", "réponse", "nouveau",
     "forward"),
    ("we want a new response .", "nous voulons une nouvelle réponse .", "response", "new", "réponse", "nouveau",
     "forward"),
    ("the good institution works .", "la bonne institution travaille .", "institution", "good", "institution",
     "bon", "forward"),
    ("the specific plan is ready .", "le plan spécifique est prêt .", "plan", "specific", "plan", "spécifique",
     "backward"),
    ("the european idea came late .", "l' idée européenne est venue tard .", "idea", "european", "idée",
     "européen", "backward"),
    ("it is a european idea .", "c' est une idée européenne .", "idea", "european", "idée", "européen",
     "backward"),
]


def scan_benchmark(out: Path) -> Path:
    """SCAN commands of at most four actions, from the grammar: 150 seeded train rows, 24 test rows and 12 validation
    rows (the SCAN recipe selects the last step, which holds no train rows out: these give the learning curves)."""
    from benchbuild.scan.grammar import generate

    examples = [example for example in generate() if len(example.actions.split()) <= 4]
    random.Random(0).shuffle(examples)
    rows = [{"id": f"scan-{i}", "source": e.command, "target": e.actions} for i, e in enumerate(examples[:186])]
    return write_benchmark(out, {"train": rows[:150], "validation": rows[174:], "test": rows[150:174]}, "scan", "tiny")


def react_benchmark(out: Path, shared_data: Path) -> Path:
    """400 short IWSLT14 lines as the training corpus; as test, 10 further IWSLT14 lines and 10 WMT-sourced cg_test
    lines (low and high compositional degree); each row with its degree against the training sources (001 §4), as
    `build-react` writes them."""
    from benchbuild.react.degree import DegreeScorer

    def short_pairs(stem: str, limit: int) -> list[tuple[str, str]]:
        german = (shared_data / "react" / f"{stem}.de").read_text(encoding="utf-8").splitlines()
        english = (shared_data / "react" / f"{stem}.en").read_text(encoding="utf-8").splitlines()
        pairs = [(de, en) for de, en in zip(german, english) if 3 <= len(de.split()) <= 10 and len(en.split()) <= 10]
        return pairs[:limit]

    iwslt = short_pairs("valid", 410)
    train, test = iwslt[:400], iwslt[400:] + short_pairs("cg_test", 10)
    scorer = DegreeScorer([de for de, _ in train])
    splits = {}
    for name, pairs in (("train", train), ("cg_test", test)):
        degrees = scorer.degree_of([de for de, _ in pairs])
        splits[name] = [{"id": f"{name}-{i}", "source": de, "target": en, "degree": float(degree)}
                        for i, ((de, en), degree) in enumerate(zip(pairs, degrees))]
    return write_benchmark(out, splits, "react", "tiny")


def noun_adjective_benchmark(out: Path) -> Path:
    """The hand-written rows above, with the columns `build-noun-adj` gives test rows (train rows: nulls)."""
    empty = {"noun": None, "adjective": None, "fr_noun": None, "fr_adjective": None, "order": None}
    train = [{"id": f"train-{i}", "source": en, "target": fr, **empty}
             for i, (en, fr) in enumerate(NOUN_ADJECTIVE_TRAIN * 3)]
    test = [{"id": f"test-{i}", "source": en, "target": fr, "noun": noun, "adjective": adjective, "fr_noun": fr_noun,
             "fr_adjective": fr_adjective, "order": order}
            for i, (en, fr, noun, adjective, fr_noun, fr_adjective, order) in enumerate(NOUN_ADJECTIVE_TEST)]
    return write_benchmark(out, {"train": train, "test": test}, "nounadj", "tiny")


@dataclass(frozen=True)
class TrainedRuns:
    """The session's run folders and the benchmark folders they were trained and evaluated on."""

    scan: Path
    react: Path
    nounadj: Path
    transformer_scan: tuple[Path, Path]
    t5_scan: Path
    transformer_react: Path
    transformer_nounadj: Path

    @property
    def all(self) -> list[Path]:
        return [*self.transformer_scan, self.t5_scan, self.transformer_react, self.transformer_nounadj]


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory, shared_data) -> TrainedRuns:
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("report-runs")
    models = root / "models"
    models.mkdir()
    (models / "tiny_transformer.toml").write_text(TINY_TRANSFORMER, encoding="utf-8")
    (models / "tiny_sag_t5.toml").write_text(TINY_T5, encoding="utf-8")
    scan = scan_benchmark(root / "scan-tiny")
    react = react_benchmark(root / "react-tiny", shared_data)
    nounadj = noun_adjective_benchmark(root / "nounadj-tiny")

    def trained(model: str, data: Path, name: str, seed: int = 0, split: str = "test") -> Path:
        run_dir = root / "runs" / name
        train(models / f"{model}.toml", data, run_dir, seed=seed, device="cpu", progress=False)
        evaluate_run(run_dir, data, split=split, device="cpu")
        return run_dir

    return TrainedRuns(
        scan=scan, react=react, nounadj=nounadj,
        transformer_scan=(trained("tiny_transformer", scan, "transformer-scan-seed0"),
                          trained("tiny_transformer", scan, "transformer-scan-seed1", seed=1)),
        t5_scan=trained("tiny_sag_t5", scan, "t5-scan-seed0"),
        transformer_react=trained("tiny_transformer", react, "transformer-react-seed0", split="cg_test"),
        transformer_nounadj=trained("tiny_transformer", nounadj, "transformer-nounadj-seed0"))


@pytest.fixture(scope="session")
def full_report(trained_runs, tmp_path_factory):
    """`write_report` over every session run, with the ReaCT and SCAN folders as `--data`, all formats."""
    from benchbuild.report.write import write_report

    prefix = tmp_path_factory.mktemp("report") / "report"
    return write_report(trained_runs.all, prefix, data_dirs=[trained_runs.react, trained_runs.scan])
