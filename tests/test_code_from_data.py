"""A model folder is data: benchbuild never imports code shipped in it (`auto_map` + a Python module), never asks
whether it may, and refuses such a folder in one line before any work (real commands and real transformers loads
on tiny folders)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from commands import benchbuild

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.errors import BenchbuildError
from benchbuild.zoo import build_model, load_entry

BART = dict(model_type="bart", vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32)
# Imported, this module leaves a MARKER file beside itself: the proof that code from the folder ran.
CUSTOM_CODE = """\
import pathlib
pathlib.Path(__file__).with_name("MARKER").write_text("imported")
from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerFast
class CustomConfig(BartConfig):
    model_type = "custom_bart"
class CustomModel(BartForConditionalGeneration):
    config_class = CustomConfig
class CustomTokenizer(PreTrainedTokenizerFast):
    pass
"""


def _folder_with_custom_code(folder: Path) -> Path:
    """A model folder whose config.json asks transformers to import `custom.py` from it."""
    folder.mkdir()
    config = {**BART, "model_type": "custom_bart",
              "auto_map": {"AutoConfig": "custom.CustomConfig", "AutoModelForSeq2SeqLM": "custom.CustomModel"}}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "custom.py").write_text(CUSTOM_CODE, encoding="utf-8")
    return folder


def _entry(path: Path, architecture: str) -> Path:
    path.write_text(f'name = "custom"\npaper = "-"\nsummary = "x"\n[architecture]\nkind = "hf"\n{architecture}\n'
                    '[recipe.mt]\nsteps = 2\nbatch_size = 4\nlearning_rate = 1e-3\n', encoding="utf-8")
    return path


def _benchmark(out: Path) -> Path:
    rows = [{"id": str(i), "source": f"jump {i % 3}", "target": f"JUMP {i % 3}"} for i in range(12)]
    card = CardFacts(pretty_name="toy", languages=["en"], license="other", summary="toy")
    Benchmark.from_splits({"train": rows, "test": rows[:3]}, BuildInfo("generic", "toy", {}), card).save(out)
    return out


@pytest.mark.parametrize("answer", ["", "y\n"])
def test_train_refuses_an_hf_folder_with_custom_code_in_one_line_without_asking(tmp_path, answer):
    folder = _folder_with_custom_code(tmp_path / "model")
    entry = _entry(tmp_path / "custom.toml", 'path = "model"')
    done = benchbuild("train", "--model", str(entry), "--data", str(_benchmark(tmp_path / "data")),
                      "--out", str(tmp_path / "run"), "--device", "cpu", "--max-steps", "1", input=answer)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("benchbuild: error: "), done.stderr
    assert f"{folder / 'config.json'} declares custom model code" in done.stderr
    assert "custom.py" in done.stderr and "never runs code from a model folder" in done.stderr
    assert "[y/N]" not in done.stdout + done.stderr  # no prompt, whatever stdin holds
    assert not (folder / "MARKER").exists()  # the module was never imported
    assert not (tmp_path / "run").exists()  # refused when the entry is read, before the run folder is made


def test_load_entry_refuses_an_hf_path_with_custom_code(tmp_path):
    _folder_with_custom_code(tmp_path / "model")
    with pytest.raises(BenchbuildError, match="declares custom model code"):
        load_entry(_entry(tmp_path / "custom.toml", 'path = "model"'))
    assert not (tmp_path / "model" / "MARKER").exists()


@pytest.mark.parametrize("key", ["auto_map", "trust_remote_code"])
def test_an_hf_architecture_from_a_model_type_may_not_ask_for_custom_code(tmp_path, key):
    value = '{ AutoModelForSeq2SeqLM = "custom.CustomModel" }' if key == "auto_map" else "true"
    with pytest.raises(BenchbuildError, match=f"may not set '{key}'"):
        load_entry(_entry(tmp_path / "custom.toml", f'model_type = "bart"\n{key} = {value}'))


def test_load_model_refuses_a_folder_with_custom_code_before_transformers_reads_it(tmp_path):
    from benchbuild.zoo.loading import load_model

    folder = _folder_with_custom_code(tmp_path / "run")
    with pytest.raises(BenchbuildError, match=r"config.json declares custom model code .*shipped as custom.py"):
        load_model(folder)
    assert not (folder / "MARKER").exists()


def test_load_tokenizer_refuses_a_tokenizer_config_with_auto_map(tmp_path):
    from benchbuild.training.tokenization import build_tokenizer
    from benchbuild.zoo.loading import load_tokenizer

    folder = tmp_path / "run"
    build_tokenizer(["jump twice", "walk"], "word").save_pretrained(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoTokenizer": [None, "custom.CustomTokenizer"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "custom.py").write_text(CUSTOM_CODE, encoding="utf-8")
    with pytest.raises(BenchbuildError, match="tokenizer_config.json declares custom model code"):
        load_tokenizer(folder)
    assert not (folder / "MARKER").exists()


def test_load_model_and_load_tokenizer_read_a_saved_model_and_tokenizer(tmp_path):
    from benchbuild.training.tokenization import build_tokenizer
    from benchbuild.zoo.loading import load_model, load_tokenizer

    tokenizer = build_tokenizer(["jump twice", "walk left"], "word")
    model = build_model(load_entry("transformer"), vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        overrides=dict(d_model=16, num_heads=2, d_ff=16, encoder_layers=1, decoder_layers=1))
    model.save_pretrained(tmp_path / "run")
    tokenizer.save_pretrained(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert loaded.config.d_model == 16 and type(loaded) is type(model)
    assert load_tokenizer(tmp_path / "run")("jump twice")["input_ids"] == tokenizer("jump twice")["input_ids"]


def test_load_model_names_a_truncated_weights_file_and_how_to_recover(tmp_path):
    from benchbuild.zoo.loading import load_model

    model = build_model(load_entry("transformer"), vocab_size=12, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        overrides=dict(d_model=16, num_heads=2, d_ff=16, encoder_layers=1, decoder_layers=1))
    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000002"
    model.save_pretrained(checkpoint)
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(BenchbuildError, match=rf"{re.escape(str(weights))} cannot be loaded .* truncated or corrupt; "
                                              rf"delete {re.escape(str(checkpoint))} to resume from the checkpoint"):
        load_model(checkpoint)
