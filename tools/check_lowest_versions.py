#!/usr/bin/env python3
"""Whether benchbuild still works with the lowest transformers, tokenizers and huggingface_hub its pyproject.toml
allows (issue #30): a throwaway venv gets those three at exactly their `>=` bounds (torch at the Makefile's
`torch==2.13.0` or `$TORCH`, every other dependency at the newest release pip finds that fits), benchbuild installed
from a copy of this checkout, and a short real flow runs in it. Exit status 0 when every step passed, 1 when one
failed (its output is printed). About 4 minutes on 2 busy cores with pip's cache warm, 7 the first time.

    python3.11 tools/check_lowest_versions.py            # build the venv in a temporary folder, run the flow
    python3.11 tools/check_lowest_versions.py --keep DIR # build it in DIR and keep it
    .venv/bin/python tools/check_lowest_versions.py --here   # only the flow, with this interpreter's packages

The flow, for each case of `CASES` (a Transformer with a word dictionary, one with separate BPE dictionaries, the
LSTM with attention, and transformers' own BART through the `hf` entry): `benchbuild train` for 30 steps on a SCAN
benchmark of 60 training and 16 test rows, `benchbuild eval` of its test split (greedy), then in a fresh interpreter
what a user of a run folder does, `import benchbuild.zoo; AutoTokenizer.from_pretrained(run);
AutoModelForSeq2SeqLM.from_pretrained(run).generate(...)`, whose predictions must equal eval's.

pip's cache (~/.cache/pip) keeps the wheels, so a rerun downloads nothing. Not part of the test suite nor of .ci/run:
tests/test_lowest_versions.py runs it when BENCHBUILD_CHECK_LOWEST=1. With transformers 4.57.6 the flow stops at its
first `train`: the zoo imports `transformers.initialization` (new in 5.0.0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The packages installed at their lowest allowed version (pyproject.toml's `>=` bound).
LOWEST = ("transformers", "tokenizers", "huggingface_hub")

TRAIN_ROWS, TEST_ROWS, MAX_ACTIONS = 60, 16, 4
# 30 steps: enough for every case to predict some non-empty outputs, so comparing predictions checks something.
RECIPE = {"steps": 30, "batch_size": 16, "learning_rate": 5e-3, "eval_every": 30, "select": "last"}
# (run name, [architecture], recipe keys beyond RECIPE): each model kind whose loading and decoding go through its own
# transformers classes, and both kinds of dictionary.
CASES = [
    ("transformer_word", {"kind": "transformer", "d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1,
                          "decoder_layers": 1}, {}),
    ("transformer_separate_bpe", {"kind": "transformer", "d_model": 16, "num_heads": 2, "d_ff": 32,
                                  "encoder_layers": 1, "decoder_layers": 1},
     {"bpe_vocab_size": 40, "dictionaries": "separate"}),
    ("lstm_attention", {"kind": "lstm_attention", "d_embedding": 16, "hidden_size": 16, "num_layers": 1}, {}),
    ("bart", {"kind": "hf", "model_type": "bart", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 32,
              "decoder_ffn_dim": 32, "max_position_embeddings": 64}, {}),
]

# Run in a fresh interpreter with a run folder and its eval's predictions.jsonl: what README tells a user to do.
RELOAD = """\
import json, sys
from pathlib import Path
import benchbuild.zoo
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

run = Path(sys.argv[1])
rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
cap = json.loads((run / "metrics.json").read_text(encoding="utf-8"))["max_new_tokens"]
source = AutoTokenizer.from_pretrained(run)
target = AutoTokenizer.from_pretrained(run / "target_tokenizer") if (run / "target_tokenizer").is_dir() else source
model = AutoModelForSeq2SeqLM.from_pretrained(run).eval()
# eval decodes sources shortest first in batches of 64, so these 16 rows in one padded batch: the same numbers.
order = sorted(range(len(rows)), key=lambda i: (len(source(rows[i]["source"])["input_ids"]), i))
encoded = source([rows[i]["source"] for i in order], return_tensors="pt", padding=True)
generated = model.generate(**encoded, do_sample=False, num_beams=1, max_new_tokens=cap,
                           decoder_start_token_id=target.bos_token_id, bos_token_id=target.bos_token_id,
                           eos_token_id=target.eos_token_id, pad_token_id=target.pad_token_id)
texts = [" ".join(text.split()) for text in target.batch_decode(generated, skip_special_tokens=True)]
for i, text in zip(order, texts):
    assert text == rows[i]["prediction"], f"row {i}: generate() gave {text!r}, eval {rows[i]['prediction']!r}"
reference = rows[0]["target"]
assert target.decode(target(reference)["input_ids"], skip_special_tokens=True) == reference, reference
print(type(model).__name__, type(source).__name__, f"{sum(map(bool, texts))}/{len(texts)} non-empty predictions")
"""


class CheckFailed(Exception):
    """A step of the check failed; the message holds the command and the end of its output."""


def run(command: list[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        shown: str | None = None) -> str:
    """`command` (printed as `shown`, default itself) run to its end; its output, or CheckFailed with the last 60
    lines of it."""
    started = time.monotonic()
    shown = shown or " ".join(map(str, command))
    print(f"$ {shown}", flush=True)
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        tail = "\n".join(output.splitlines()[-60:])
        raise CheckFailed(f"`{shown}` exited with {done.returncode}:\n{tail}")
    print(f"  ok ({time.monotonic() - started:.0f} s)", flush=True)
    return done.stdout


def lowest_versions(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """Each `LOWEST` package that pyproject.toml's dependencies bound with `>=` → that version."""
    bounds = {}
    for requirement in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)(,\s*<[0-9.]+)?", requirement.strip())
        if match:
            bounds[match[1].lower().replace("-", "_")] = match[2]
    return {name: bounds[name] for name in LOWEST if name in bounds}


def build_venv(venv: Path, pins: dict[str, str]) -> Path:
    """A venv at `venv` with torch, `pins` (package → version) and benchbuild, installed from a copy of the sources
    (the checkout gets no build/ or egg-info); its python. pip picks every other dependency, the newest release
    that fits the pins, as a user's `pip install benchbuild transformers==X` would (constraints.txt's exact versions
    would not fit: its datasets needs a newer huggingface_hub)."""
    print("pinned: " + ", ".join(f"{name}=={version}" for name, version in pins.items()), flush=True)
    run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    source = venv / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "benchbuild", source / "benchbuild", ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in os.environ.items() if key not in ("PIP_CONSTRAINT", "VIRTUAL_ENV")}
    pip = [python, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
    torch = os.environ.get("TORCH", "torch==2.13.0").split()  # as the Makefile's TORCH: the CPU build
    if torch:
        run([*pip, *torch], env=env)
    run([*pip, source, *(f"{name}=={version}" for name, version in pins.items())], env=env)
    return python


def write_benchmark(out: Path) -> Path:
    """A SCAN benchmark folder (family `scan`) of grammar rows with at most MAX_ACTIONS actions: TRAIN_ROWS for
    training, the next TEST_ROWS for test. Its splits and build.json, without the card (as tests/small_inputs.py
    writes one): training and evaluation read only these."""
    import random

    import datasets

    from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
    from benchbuild.progress import quiet_datasets
    from benchbuild.scan.grammar import generate

    examples = [example for example in generate() if example.length <= MAX_ACTIONS]
    random.Random(0).shuffle(examples)
    rows = [{"id": f"scan-{i}", "source": e.command, "target": e.actions}
            for i, e in enumerate(examples[:TRAIN_ROWS + TEST_ROWS])]
    splits = {"train": rows[:TRAIN_ROWS], "test": rows[TRAIN_ROWS:]}
    info = BuildInfo(family="scan", name="lowest_versions", parameters={"rows": {k: len(v) for k, v in splits.items()}})
    card = CardFacts(pretty_name="lowest versions check", summary="SCAN grammar rows", languages=["en"], license="-")
    built = Benchmark.from_splits(splits, info, card)
    with quiet_datasets():
        datasets.DatasetDict(built.splits).save_to_disk(str(out))
    (out / "build.json").write_text(built.info.to_json(), encoding="utf-8")
    return out


def model_file(folder: Path, name: str, architecture: dict, recipe: dict) -> Path:
    """A catalogue entry (TOML) `name` with `architecture` and a `[recipe.scan]` of RECIPE and `recipe`."""
    def table(values: dict) -> str:
        return "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())

    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\npaper = "test"\nsummary = "A tiny model for the lowest-versions check."\n\n'
                    f"[architecture]\n{table(architecture)}\n[recipe.scan]\n{table({**RECIPE, **recipe})}",
                    encoding="utf-8")
    return path


def flow(work: Path) -> None:
    """The flow of the module docstring with this interpreter's benchbuild, in `work`."""
    import importlib.metadata

    import benchbuild

    command = Path(sys.executable).parent / "benchbuild"
    print("versions: " + ", ".join(f"{name}=={importlib.metadata.version(name)}"
                                   for name in (*LOWEST, "torch", "accelerate", "datasets")), flush=True)
    print(f"benchbuild: {Path(benchbuild.__file__).parent}", flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    benchmark = write_benchmark(work / "benchmark")
    for name, architecture, recipe in CASES:
        print(f"-- {name}", flush=True)
        model = model_file(work, name, architecture, recipe)
        run_dir = work / "runs" / name
        run([command, "train", "--model", model, "--data", benchmark, "--out", run_dir, "--device", "cpu"], env=env)
        run([command, "eval", "--run", run_dir, "--data", benchmark, "--beam", "1", "--device", "cpu"], env=env)
        reloaded = run([sys.executable, "-c", RELOAD, run_dir], env=env, cwd=work,
                       shown=f"{sys.executable} -c RELOAD {run_dir}")
        print(f"  {reloaded.strip()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--here", action="store_true", help="run only the flow, with this interpreter's packages")
    parser.add_argument("--keep", type=Path, help="build the venv and run the flow in this (new) folder; keep it")
    parser.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION",
                        help="install this version instead of pyproject.toml's lowest, within its bounds (repeatable)")
    options = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="benchbuild-lowest-") as temporary:
        work = options.keep if options.keep is not None else Path(temporary)
        work.mkdir(parents=True, exist_ok=options.keep is None)
        try:
            if options.here:
                flow(work)
            else:
                pins = {**lowest_versions(), **dict(pin.split("==", 1) for pin in options.pin)}
                if missing := [name for name in LOWEST if name not in pins]:
                    raise CheckFailed(f"pyproject.toml states no `>=` bound for {', '.join(missing)}")
                python = build_venv(work / "venv", pins)
                print(run([python, Path(__file__).resolve(), "--here", "--keep", work / "flow"]), end="")
        except CheckFailed as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            return 1
    print(f"passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
