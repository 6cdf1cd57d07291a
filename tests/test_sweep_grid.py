"""Sweeps over a hyperparameter grid: `[[grid]]` tables expand into one run set per configuration (checked against
the model's architecture before anything runs), each in its own folder; a rerun skips them; the report shows, per
model and benchmark, the configuration the `[grid_selection]` rule picks, beside the paper's number, and lists every
configuration's mean. The real sweep is tests/sweep_grid/sweep.toml (2 tiny models x a 2-point grid each x 1
benchmark x 2 seeds); 000's grid (pipelines/table3_000.toml) is expanded, not run."""

from __future__ import annotations

import csv
import io
import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from commands import benchbuild
from small_inputs import word_lines, write_benchmark

from benchbuild.errors import BenchbuildError
from benchbuild.report.grid import configuration_label
from benchbuild.report.latex import escape
from benchbuild.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parent.parent
GRID_SWEEP = "tests/sweep_grid/sweep.toml"


def _copy_rows(prefix: str, count: int) -> list[dict[str, str]]:
    return [{"id": f"{prefix}-{index}", "source": line, "target": line} for index, line in enumerate(word_lines(count))]


@pytest.fixture(scope="session")  # built once per worker; `--dist loadfile` keeps this file's tests on one
def grid_sweep(tmp_path_factory):
    """tests/sweep_grid/sweep.toml run to the end (`--jobs 1`) in a folder of its own, beside the copy benchmark it
    trains on (ten 5-word sentences: each word's successor is fixed, the first word is read from the source)."""
    cwd = tmp_path_factory.mktemp("grid")
    (cwd / "tests").mkdir()
    (cwd / "tests" / "sweep_grid").symlink_to(ROOT / "tests" / "sweep_grid")
    write_benchmark(cwd / "out" / "copy", {"train": _copy_rows("train", 200), "test": _copy_rows("test", 20)},
                    "scan", "copy")
    result = _sweep(cwd)
    assert result.returncode == 0, result.stderr
    return cwd, result


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return benchbuild("sweep", GRID_SWEEP, "--jobs", "1", *args, cwd=cwd)


def _write(tmp_path: Path, grid: str, models: str = '["transformer"]') -> Path:
    """A sweep file of catalogue models on scan/simple (named, so no benchmark folder is needed) with `grid`."""
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "check"\nmodels = {models}\nseeds = [0]\n[[benchmarks]]\nname = "scan/simple"\n'
                    f'data = "out/scan/simple"\n{grid}', encoding="utf-8")
    return path


def test_the_jump_sweep_is_table3s_grid_for_the_transformer_and_sag_t5_on_addprim_jump():
    """Issue #33's GPU sweep: table3_000_tied.toml's configurations of the two models it compares, on jump only."""
    jump, whole = (load_sweep(ROOT / "pipelines" / name) for name in ("table3_000_jump.toml", "table3_000_tied.toml"))
    assert jump.configurations() == {"transformer": 24, "sag_t5": 24} and len(jump.runs) == 48 * 3
    assert {spec.benchmark for spec in jump.runs} == {"scan/addprim_jump"}
    same = {(spec.model, spec.configuration, spec.seed) for spec in whole.runs
            if spec.model in ("transformer", "sag_t5") and spec.benchmark == "scan/addprim_jump"}
    assert {(spec.model, spec.configuration, spec.seed) for spec in jump.runs} == same
    assert all(spec.overrides == {"precision": "fp32"} for spec in jump.runs + whole.runs)  # fairseq's float32


def test_the_fairseq_init_sweep_draws_both_models_as_fairseq_does_on_jump():
    """Issue #33's next candidate: the catalogue configuration of both models, 3 seeds, init = "fairseq"."""
    from benchbuild.zoo import build_model, load_entry

    sweep = load_sweep(ROOT / "pipelines" / "jump_fairseq_init.toml")
    assert sorted((spec.model, spec.seed) for spec in sweep.runs) == [(model, seed) for model in ("sag_t5", "transformer")
                                                                      for seed in (0, 1, 2)]
    assert all(spec.benchmark == "scan/addprim_jump" and spec.overrides == {"architecture": {"init": "fairseq"}, "precision": "fp32"}
               for spec in sweep.runs)
    for model in ("transformer", "sag_t5"):  # both embed as fairseq does (TEU), which init = "fairseq" needs
        built = build_model(load_entry(model), vocab_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                            overrides={"init": "fairseq", "d_model": 16, "d_ff": 32, "num_heads": 2})
        assert built.config.init == "fairseq"


def test_the_fairseq_defaults_sweep_unties_and_separates_both_models_on_jump():
    """Issue #33's next GPU candidate: fairseq's separate dictionaries and untied output layer on top of its draw."""
    from benchbuild.zoo.recipe import resolve_recipe
    from benchbuild.zoo import build_model, load_entry

    sweep = load_sweep(ROOT / "pipelines" / "jump_fairseq_defaults.toml")
    assert sorted((spec.model, spec.seed) for spec in sweep.runs) == [(model, seed) for model in ("sag_t5", "transformer")
                                                                      for seed in (0, 1, 2)]
    expected = {"architecture": {"init": "fairseq", "tie_output": False}, "dictionaries": "separate",
                "precision": "fp32"}
    assert all(spec.benchmark == "scan/addprim_jump" and spec.overrides == expected for spec in sweep.runs)
    for model in ("transformer", "sag_t5"):  # 000's sizes (4 + 4 layers of width 128) stay under the override
        entry = load_entry(model)
        recipe = resolve_recipe(entry.recipes, "scan_000" if model == "transformer" else "scan", expected)
        assert recipe.dictionaries == "separate"
        built = build_model(entry, vocab_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                            overrides={**recipe.architecture, "source_vocab_size": 12})
        assert (built.config.encoder_layers, built.config.decoder_layers, built.config.init) == (4, 4, "fairseq")
        assert built.output_projection.weight.shape == (16, 128) and built.source_embedding is not None


def test_the_jump_batching_sweep_cuts_000s_train_rows_into_fairseqs_58_batches_an_epoch(shared_data):
    """pipelines/jump_fairseq_batching.toml: on the canonical addprim_jump train file (14,670 rows), batches of 256
    rows in length order (the last 78), 58 an epoch, so 250 epochs are fairseq's 14,500 updates."""
    from benchbuild.training.batching import TokenBatches, encode_rows
    from benchbuild.zoo.recipe import planned_steps, resolve_recipe
    from benchbuild.training.tokenization import build_tokenizer
    from benchbuild.zoo import load_entry

    sweep = load_sweep(ROOT / "pipelines" / "jump_fairseq_batching.toml")
    assert sorted((spec.model, spec.seed) for spec in sweep.runs) == [
        (model, seed) for model in ("sag_t5", "transformer") for seed in (0, 1, 2)]
    assert all(spec.overrides == {"batch_tokens": 12544, "precision": "fp32"} for spec in sweep.runs)
    lines = (shared_data / "scan" / "add_prim_split" / "tasks_train_addprim_jump.txt").read_text().splitlines()
    rows = [dict(zip(("source", "target"), line.removeprefix("IN: ").split(" OUT: "))) for line in lines]
    tokenizer = build_tokenizer([text for row in rows for text in (row["source"], row["target"])], "word", None)
    encoded = encode_rows(tokenizer, rows)
    for model, family in (("sag_t5", "scan"), ("transformer", "scan_000")):
        recipe = resolve_recipe(load_entry(model).recipes, family, sweep.runs[0].overrides)
        assert (recipe.batch_size, recipe.batch_tokens, recipe.epochs, recipe.select) == (256, 12544, 250, "last")
        batches = TokenBatches.pack(encoded, recipe.batch_tokens, recipe.batch_size, seed=0)
        sizes = [len(batches.batch(number)) for number in range(len(batches))]
        assert (len(rows), len(batches), sizes[:-1], sizes[-1]) == (14670, 58, [256] * 57, 78)
        assert planned_steps(recipe, {"train": len(rows)}, token_batches=len(batches)) == 14500
        assert planned_steps(resolve_recipe(load_entry(model).recipes, family), {"train": len(rows)}) == 14327


def test_the_table3_grid_varies_encoder_and_decoder_independently_as_000_app_a1_says():
    """000 App. A.1: "We vary the Encoder and Decoder parameters independently": every size an axis per stack."""
    sweep = load_sweep(ROOT / "pipelines" / "table3_000.toml")
    assert sweep.configurations() == {"transformer": 576, "sag": 576, "sag_conv": 768, "sag_fixed_span": 192,
                                      "sag_t5": 192}
    assert sweep.grid_summary() == ("grid: 2,304 configurations (transformer 576, sag 576, sag_conv 768, "
                                    "sag_fixed_span 192, sag_t5 192) x 3 benchmarks x 3 seeds = 20,736 runs")
    assert all(spec.overrides == {"precision": "fp32", "dictionaries": "separate"} for spec in sweep.runs)
    t5 = [spec.architecture_overrides for spec in sweep.runs if spec.model == "sag_t5"]
    pairs = {(a["encoder_d_model"], a["d_model"], a["encoder_num_heads"], a["num_heads"], a["encoder_d_ff"],
              a["d_ff"]) for a in t5}
    assert len(pairs) == 64 and (128, 256, 8, 4, 512, 256) in pairs  # unequal widths, heads and FFN sizes
    assert {(a["encoder_layers"], a["decoder_layers"]) for a in t5} == {(4, 4)}
    layers = {(a["encoder_layers"], a["decoder_layers"]) for spec in sweep.runs if spec.model == "transformer"
              for a in [spec.architecture_overrides]}
    assert layers == {(e, d) for e in (4, 6, 8) for d in (4, 6, 8)}


def test_the_tied_table3_grid_has_000s_configurations_per_model():
    sweep = load_sweep(ROOT / "pipelines" / "table3_000_tied.toml")
    assert sweep.configurations() == {"transformer": 24, "sag": 24, "sag_conv": 48, "sag_fixed_span": 24,
                                      "sag_t5": 24}
    assert len(sweep.runs) == 144 * 3 * 3
    assert sweep.grid_summary() == ("grid: 144 configurations (transformer 24, sag 24, sag_conv 48, sag_fixed_span "
                                    "24, sag_t5 24) x 3 benchmarks x 3 seeds = 1,296 runs")
    spans = {(spec.model, spec.architecture_overrides.get("span")) for spec in sweep.runs}
    assert {span for model, span in spans if model in ("sag_conv", "sag_fixed_span", "sag_t5")} == {2, 4, 6}
    assert {span for model, span in spans if model in ("transformer", "sag")} == {None}
    layers = {(spec.model, spec.architecture_overrides["encoder_layers"], spec.architecture_overrides["decoder_layers"])
              for spec in sweep.runs}
    assert {(e, d) for model, e, d in layers if model in ("transformer", "sag")} == {(4, 4), (6, 6), (8, 8)}
    assert {(e, d) for model, e, d in layers if model == "sag_conv"} == {(4, 4), (6, 6)}
    assert {(e, d) for model, e, d in layers if model in ("sag_fixed_span", "sag_t5")} == {(4, 4)}
    first = sweep.runs[0]
    assert first.architecture_overrides == {"num_heads": 4, "d_model": 128, "d_ff": 256, "encoder_layers": 4,
                                            "decoder_layers": 4}
    assert first.folder == ("runs/table3_000_tied/transformer/d_ff-256_d_model-128_decoder_layers-4_encoder_layers-4_"
                            "num_heads-4/simple/seed0")
    assert len({spec.folder for spec in sweep.runs}) == len(sweep.runs)
    assert {spec.seed for spec in sweep.runs} == {0, 1, 2}
    assert sweep.file.grid_selection.rule == "best_mean"


def test_a_sweep_without_a_grid_keeps_its_folders_and_recorded_configuration():
    """Folders made before grids existed are still recognised: same path, same `sweep_run.json`."""
    sweep = load_sweep(ROOT / "pipelines" / "sweep_smoke.toml")
    assert sweep.configurations() == {"transformer": 1, "relative_transformer": 1, "universal_transformer": 1}
    spec = sweep.runs[0]
    assert spec.folder == "runs/sweep_smoke/transformer/addprim_turn_left/seed0"
    assert set(spec.config()) == {"model", "benchmark", "data", "seed", "recipe", "overrides", "max_steps",
                                  "max_minutes", "device", "split", "batch_size", "beam"}
    with_grid = replace(spec, architecture_overrides={"d_ff": 32})
    assert with_grid.config()["architecture_overrides"] == {"d_ff": 32}
    assert with_grid.configuration == "d_ff-32"


def test_configuration_labels_name_every_key_in_sorted_order():
    assert configuration_label({"num_heads": 4, "d_model": 128, "dropout": 0.1, "pre_norm": True}) == \
        "d_model-128_dropout-0.1_num_heads-4_pre_norm-true"
    assert configuration_label({}) == ""


@pytest.mark.parametrize("grid, message", [
    ('[[grid]]\narchitecture = { spam = [1, 2] }\n',
     "[[grid]] 1, model transformer on scan/simple, configuration spam-1: architecture: unknown architecture key "
     "'spam'"),
    ('[[grid]]\narchitecture = { d_ff = [64] }\n[[grid]]\nmodel = "transformer"\n'
     'architecture = { d_model = ["big"] }\n',
     "[[grid]] 2, model transformer on scan/simple, configuration d_ff-64_d_model-big: architecture d_model must be an "
     "integer"),
    ('[[grid]]\narchitecture = { d_model = [100] }\n',
     "[[grid]] 1, model transformer on scan/simple, configuration d_model-100: architecture: "),
    ('[[grid]]\nmodel = "sag"\narchitecture = { d_ff = [64] }\n',
     "[[grid]] 1 names model 'sag', which is not in models (transformer)"),
    ('[[grid]]\narchitecture = { d_ff = [64], "encoder_layers,d_ff" = [2] }\n', "[[grid]] 1 set 'd_ff' twice"),
    ('[[grid]]\narchitecture = { d_ff = [64] }\n[[grid]]\narchitecture = { d_ff = [32] }\n',
     "[[grid]] 1 and [[grid]] 2 set 'd_ff' twice for model transformer"),
    ('[[grid]]\narchitecture = { d_ff = [64, 64] }\n', "[[grid]] 1 d_ff must list at least one value, each once"),
    ('[[grid]]\narchitecture = { "encoder_layers," = [2] }\n', "[[grid]] 1 key 'encoder_layers,' must be"),
    ('[[grid]]\narchitecture = {}\n', "[[grid]] 1 has no architecture keys"),
    ('[grid_selection]\nrule = "best_last"\n', "rule is 'best_last': choose one of best_mean"),
])
def test_a_bad_grid_is_refused_before_anything_runs(tmp_path, grid, message):
    with pytest.raises(BenchbuildError) as refused:
        load_sweep(_write(tmp_path, grid))
    assert message in str(refused.value)
    assert not (tmp_path / "runs").exists()


def test_a_grid_value_is_checked_against_the_architecture_the_runs_build(tmp_path):
    """The transformer's `scan_000` recipe (its default on scan/simple) builds d_model 128 with 8 heads: 4 heads fit,
    3 do not; the refusal names the table whose key fails."""
    assert load_sweep(_write(tmp_path, '[[grid]]\narchitecture = { num_heads = [4, 8] }\n')).configurations() == \
        {"transformer": 2}
    with pytest.raises(BenchbuildError, match=r"\[\[grid\]\] 1, model transformer on scan/simple, configuration "
                                              r"num_heads-3: architecture: .*divisible"):
        load_sweep(_write(tmp_path, '[[grid]]\narchitecture = { num_heads = [4, 3] }\n'))


def _runs(cwd: Path) -> dict[str, dict]:
    """Every run folder of the sweep, by its path under runs/grid: model, configuration, seed and test exact match
    read from its own run.json, sweep_run.json and metrics.json."""
    found = {}
    for folder in sorted((cwd / "runs" / "grid").glob("*/*/copy/seed*")):
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        found[str(folder.relative_to(cwd / "runs" / "grid"))] = {
            "model": run["model"], "configuration": folder.parent.parent.name, "seed": run["seed"],
            "architecture": run["architecture_overrides"], "status": run["status"], "split": metrics["split"],
            "exact_match": metrics["exact_match"],
            "recorded": json.loads((folder / "sweep_run.json").read_text(encoding="utf-8"))["architecture_overrides"]}
    return found


@pytest.mark.slow
def test_every_configuration_runs_into_its_own_folder(grid_sweep):
    cwd, _ = grid_sweep
    runs = _runs(cwd)
    assert sorted(runs) == [f"{model}/{configuration}/copy/seed{seed}"
                            for model, configurations in (("tiny_copy", ("dropout-0.0", "dropout-0.9")),
                                                          ("tiny_copy_twin", ("decoder_layers-0_encoder_layers-0",
                                                                              "decoder_layers-1_encoder_layers-1")))
                            for configuration in configurations for seed in (0, 1)]
    for run in runs.values():
        assert run["status"] == "complete" and run["split"] == "test"
        assert run["architecture"] == run["recorded"]
        assert configuration_label(run["architecture"]) == run["configuration"]
    model_config = json.loads((cwd / "runs/grid/tiny_copy_twin/decoder_layers-0_encoder_layers-0/copy/seed0/"
                                      "config.json").read_text(encoding="utf-8"))
    assert (model_config["encoder_layers"], model_config["decoder_layers"]) == (0, 0)


@pytest.mark.slow
def test_a_rerun_skips_every_finished_configuration(grid_sweep):
    cwd, _ = grid_sweep
    files = {path: path.stat().st_mtime_ns for path in (cwd / "runs" / "grid").glob("*/*/copy/seed*/*.*")}
    rerun = _sweep(cwd)
    assert rerun.returncode == 0, rerun.stderr
    assert "finished runs/grid" not in rerun.stderr
    assert {path: path.stat().st_mtime_ns for path in files} == files


def _independent_picks(cwd: Path) -> dict[str, tuple[str, float, list[str]]]:
    """Per model, from the run folders alone: the configuration with the highest mean test exact match over its
    seeds, its mean, and every configuration in the order the report lists them."""
    means: dict[str, dict[str, list[float]]] = {}
    for run in _runs(cwd).values():
        means.setdefault(run["model"], {}).setdefault(run["configuration"], []).append(run["exact_match"])
    picks = {}
    for model, configurations in means.items():
        order = sorted(configurations)  # one numeric key each, single digits: text order is value order
        best = max(order, key=lambda label: (statistics.mean(configurations[label]), -order.index(label)))
        picks[model] = (best, statistics.mean(configurations[best]), order)
    return picks


@pytest.mark.slow
def test_the_report_names_the_configuration_the_rule_picks_with_its_mean(grid_sweep):
    cwd, _ = grid_sweep
    picks = _independent_picks(cwd)
    # The grid tells its points apart, the better one first for one model and last for the other, so a rule that
    # took the first, the last or the worst configuration would fail below.
    assert picks["tiny_copy"][0] == picks["tiny_copy"][2][0]
    assert picks["tiny_copy_twin"][0] == picks["tiny_copy_twin"][2][-1]
    for model, (best, mean, order) in picks.items():
        worst = [label for label in order if label != best][0]
        assert mean > statistics.mean(run["exact_match"] for run in _runs(cwd).values()
                                      if run["model"] == model and run["configuration"] == worst)
    report = cwd / "runs" / "grid" / "report"
    rows = list(csv.DictReader(io.StringIO(report.with_suffix(".csv").read_text(encoding="utf-8"))))
    exact = [row for row in rows if row["metric"] == "exact_match"]
    assert len(exact) == 4  # one row per configuration
    for model, (best, mean, order) in picks.items():
        of_model = [row for row in exact if row["model"] == model]
        assert [row["configuration"] for row in of_model] == order
        picked = [row for row in of_model if row["selected_by"] == "best_mean"]
        assert [row["configuration"] for row in picked] == [best]
        assert float(picked[0]["mean"]) == pytest.approx(mean, abs=1e-4)
        assert picked[0]["seeds"] == "0 1"
    markdown = report.with_suffix(".md").read_text(encoding="utf-8")
    main_table = markdown.split("## Hyperparameter grid")[0]
    grid_part = markdown.split("## Hyperparameter grid")[1]
    assert "rule `best_mean`" in grid_part and "this is our reading" in grid_part
    for model, (best, mean, order) in picks.items():
        assert f"| {model} | scan/copy | test | exact_match | 2 (0, 1) | {mean:.2f} ± " in main_table
        assert f"| {model} | scan/copy | test | exact match | {best} | 2 (0, 1) | {mean:.2f} ± " in grid_part
        for label in order:
            shown = f"**{label}**" if label == best else label
            assert f"| {model} | scan/copy | test | exact match | {shown} | 2 (0, 1) |" in grid_part
        # Each row ends with its 95% interval over 2 seeds (values: tests/report/test_report_grid_intervals.py).
        assert grid_part.count(f"| {model} | scan/copy | test | exact match |") == 1 + len(order)
    assert grid_part.count(": t-interval of the mean over 2 seeds |") == 2 + 4
    latex = report.with_suffix(".tex").read_text(encoding="utf-8")
    assert "rule `best\\_mean`" in latex
    for model, (best, mean, _) in picks.items():
        assert f"\\texttt{{{escape(best)}}} & ${mean:.2f} \\pm" in latex
    page = report.with_suffix(".html").read_text(encoding="utf-8")
    assert '<section id="grid">' in page and "this is our reading" in page
    for model, (best, _, order) in picks.items():
        assert f"<strong>{best}</strong> (picked)" in page
        assert all(label in page for label in order)


@pytest.mark.slow
def test_the_estimate_times_one_configuration_per_model_and_scales_the_rest_by_their_weights(grid_sweep,
                                                                                              monkeypatch):
    """A grid's dry run measures steps of each model's first configuration only; another configuration's seconds per
    step are the measured ones times its parameter count over the measured one's (the weights the trained runs saved
    are counted here, independently)."""
    from safetensors import safe_open

    from benchbuild.sweep.run import check_folders, estimate

    cwd, _ = grid_sweep
    monkeypatch.chdir(cwd)
    sweep = load_sweep(GRID_SWEEP)
    rows = {(row.model, row.configuration): (row.step_seconds, row.measured)
            for row in estimate(sweep, check_folders(sweep), jobs=1)}

    def saved_weights(model: str, configuration: str) -> int:
        with safe_open(cwd / "runs" / "grid" / model / configuration / "copy" / "seed0" / "model.safetensors",
                       "pt") as weights:
            return sum(_product(weights.get_slice(name).get_shape()) for name in weights.keys())

    model = "tests/sweep_grid/tiny_copy_twin.toml"
    measured, scaled = "decoder_layers-0_encoder_layers-0", "decoder_layers-1_encoder_layers-1"
    assert rows[(model, measured)][1] is True and rows[(model, scaled)][1] is False
    ratio = saved_weights("tiny_copy_twin", scaled) / saved_weights("tiny_copy_twin", measured)
    assert ratio > 1.5  # one layer each side more than doubles the weights of an embedding-only model
    assert rows[(model, scaled)][0] == pytest.approx(rows[(model, measured)][0] * ratio)


def _product(shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


@pytest.mark.slow
def test_the_status_table_names_each_runs_configuration(grid_sweep):
    cwd, _ = grid_sweep
    import os

    status = subprocess.run([sys.executable, "-m", "benchbuild", "sweep", GRID_SWEEP, "--status"], cwd=cwd,
                            capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})
    assert status.returncode == 0, status.stderr
    for label in ("dropout-0.0", "dropout-0.9", "decoder_layers-0_encoder_layers-0",
                  "decoder_layers-1_encoder_layers-1"):
        assert sum(label in line and " done " in line for line in status.stdout.splitlines()) == 2, label  # 2 seeds
