"""`build-noun-adj --engine dask`: the Europarl sample's candidate sentences, parsed in shards by the workers of a
real Dask cluster, give the local build's benchmark folder byte for byte; each worker loads its spaCy model once;
options the workers cannot honour are refused before any work.

Each build runs in a folder of its own with `--out na`, so the two builds record the same command line (less the
engine options, which build.json leaves out)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchbuild.cli import main
from benchbuild.corpus import CorpusStats, read_parallel
from benchbuild.engine import EngineParameters, open_engine
from benchbuild.nounadj.pairs import TABLE_2
from benchbuild.nounadj.parsers import ParserSettings, ShardedParser, SpacyParser, make_parser, worker_parser
from both_workers import after_another_worker
from commands import folder_bytes

pytestmark = [pytest.mark.distributed, pytest.mark.shared]

SAMPLE = "europarl-sample"
BATCH = "16"  # 173 candidate sentences: 11 shards over the two workers


def europarl_files(shared_data: Path) -> tuple[Path, Path]:
    folder = shared_data / SAMPLE
    return folder / "europarl-v7.fr-en.en", folder / "europarl-v7.fr-en.fr"


def build(folder: Path, shared_data: Path, *options: str) -> tuple[int, Path]:
    """`benchbuild build-noun-adj` on the Europarl sample, run in `folder`: (exit code, output folder)."""
    en, fr = europarl_files(shared_data)
    folder.mkdir(parents=True)
    argv = ["benchbuild", "build-noun-adj", "--en", str(en), "--fr", str(fr), "--out", "na", "--batch-size", BATCH,
            "--allow-small", *options]  # the sample holds no clean swap: its test split is empty
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as stop:
            main()
    return stop.value.code, folder / "na"



@pytest.fixture(scope="module")
def local_build(shared_data, tmp_path_factory) -> dict[str, bytes]:
    code, out = build(tmp_path_factory.mktemp("local") / "run", shared_data)
    assert code == 0
    return folder_bytes(out)


def test_a_joined_cluster_builds_the_local_benchmark_byte_for_byte(local_build, dask_scheduler, shared_data,
                                                                   tmp_path):
    code, out = build(tmp_path / "run", shared_data, "--engine", "dask", "--scheduler", dask_scheduler)
    assert code == 0
    built = folder_bytes(out)
    assert {"build.json", "README.md"} <= built.keys()
    assert built == local_build
    assert b"--engine" not in built["build.json"] and b"--batch-size 16" in built["build.json"]


def test_an_embedded_cluster_builds_the_local_benchmark_byte_for_byte(local_build, shared_data, tmp_path):
    code, out = build(tmp_path / "run", shared_data, "--engine", "dask", "--workers", "2")
    assert code == 0
    assert folder_bytes(out) == local_build


def _parser_held(item: int, settings: ParserSettings, rendezvous: str) -> tuple[int, int]:
    """In a worker (once another worker has taken a task too): its process id and the identity of the parser its
    shards use."""
    return after_another_worker(rendezvous), id(worker_parser(settings)[0])


def test_workers_parse_shards_as_the_local_parser_with_one_model_each(dask_scheduler, shared_data, tmp_path):
    en, fr = europarl_files(shared_data)
    pattern = TABLE_2.noun_pattern()
    candidates = [(source, line) for line, source, _ in read_parallel(en, fr, stats=CorpusStats())
                  if pattern.search(source)]
    settings = ParserSettings(batch_size=8)
    local = list(SpacyParser(settings.spacy_model, batch_size=settings.batch_size).parse(candidates))
    with open_engine(EngineParameters(engine="dask", scheduler=dask_scheduler)) as engine:
        parser = make_parser("spacy", batch_size=settings.batch_size, engine=engine)
        assert isinstance(parser, ShardedParser)
        sharded = list(parser.parse(iter(candidates)))
        held = list(engine.map(_parser_held, range(40), shared=(settings, str(tmp_path))))
    assert sharded == local  # the same parse, in corpus order, with each sentence's own context
    assert parser.description == SpacyParser(settings.spacy_model).description
    pids = {pid for pid, _ in held}
    assert len(pids) == 2 and os.getpid() not in pids
    assert len(set(held)) == len(pids)  # one parser per worker process, the same for every task


@pytest.mark.parametrize("options, needle", [
    (["--parser", "stanza", "--engine", "dask", "--workers", "1"], "--parser stanza runs with --engine local only"),
    (["--n-process", "2", "--engine", "dask", "--workers", "1"], "--n-process sizes spaCy's own processes"),
    (["--workers", "2"], "--workers only apply to --engine dask"),
])
def test_options_the_workers_cannot_honour_are_refused_before_any_work(options, needle, shared_data, tmp_path,
                                                                       capsys):
    code, out = build(tmp_path / "run", shared_data, *options)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("benchbuild: error: ") and needle in lines[0]
    assert not out.exists()


def test_a_pipeline_is_refused_at_planning_for_its_engine_options(shared_data, tmp_path, monkeypatch, capsys):
    en, fr = europarl_files(shared_data)
    recipe = tmp_path / "pipeline.toml"
    recipe.write_text(f'[[steps]]\ncommand = "build-noun-adj"\n[steps.options]\nen = "{en}"\nfr = "{fr}"\n'
                      'out = "first"\n\n[[steps]]\ncommand = "build-noun-adj"\n[steps.options]\n'
                      f'en = "{en}"\nfr = "{fr}"\nout = "second"\nengine = "dask"\nn-process = 2\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["benchbuild", "run", str(recipe)])
    with pytest.raises(SystemExit) as stop:
        main()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 1
    assert last.startswith("benchbuild: error: ") and "step 2 (build-noun-adj)" in last and "--n-process" in last
    assert not (tmp_path / "first").exists()
