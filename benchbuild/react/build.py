"""`benchbuild build-react`: ReaCT (001 §4) from a training corpus and a candidate pool, stage by stage.

normalize → OOV filter (and pool pairs over --max-length tokens set aside) → n-gram dictionary → compositional degree → non-overlapping candidate pool (top by degree)
→ ensemble (zoo models trained with seeds 0…K−1) → beam decoding + reverse mutual information → drop the most
uncertain, sample from the next band → a `Benchmark` (whose card's prose is in `data_cards/react.md.j2`). Stages 1–5,
the ensemble and the uncertainty scores are cached under `cache_dir` by their inputs and parameters, so a rerun
resumes after the last finished stage. Inputs that cannot give a benchmark (an empty corpus, no candidate left,
fewer candidates than --drop-top) are refused before the ensemble trains.

The heavy stages are tasks of an `Engine` (this process, or Dask workers): the pool's shards (`react.pool`), one
task per ensemble member (on a GPU of its own when there are GPUs; with several GPUs and no Dask, one process per
GPU), and the candidates' decoding batches, each on a worker that loads the members once. A member on the CPU
trains and scores on one torch thread in either engine, so the benchmark's bytes do not depend on where it ran.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.corpus import CorpusStats, ParallelInput
from benchbuild.device import cpu_threads, member_devices, resolve_device, visible_cuda_devices
from benchbuild.engine import Engine, EngineParameters, LocalEngine, ProcessPoolEngine, worker_cached
from benchbuild.errors import BenchbuildError
from benchbuild.fingerprint import input_fingerprint
from benchbuild.react.cache import StageCache, stage_key
from benchbuild.react.degree import DegreeScorer
from benchbuild.react.normalize import Normalizer
from benchbuild.react.parameters import ReactParameters
from benchbuild.react.pool import PoolRules, described, pool_candidates
from benchbuild.progress import progress_bar
from benchbuild.react.selection import select_by_uncertainty
from benchbuild.react.stats import table2

# Torch threads of a member on the CPU, in either engine: Dask workers run one thread each, and results computed
# with another thread count are not guaranteed to be the same bytes.
CPU_MEMBER_THREADS = 1


@dataclass
class Corpus:
    """A normalized parallel corpus with the line numbers its rows came from."""

    label: str
    lines: list[int]
    sources: list[str]
    targets: list[str]
    stats: CorpusStats


def _read(corpus: ParallelInput, label: str, source: Normalizer, target: Normalizer, progress: bool,
          encoding_errors: str = "strict") -> Corpus:
    stats = CorpusStats()
    lines, sources, targets = [], [], []
    total = corpus.validate()
    with progress_bar(f"normalizing {label}", total, progress) as advance:
        for number, source_text, target_text in corpus.rows(encoding_errors=encoding_errors, stats=stats):
            lines.append(number)
            sources.append(source(source_text))
            targets.append(target(target_text))
            advance(amount=1)
    return Corpus(label, lines, sources, targets, stats)


def _fingerprints(inputs: dict[str, ParallelInput | None]) -> dict[str, str]:
    prints = {}
    for label, corpus in inputs.items():
        if corpus is not None:
            for name, path in corpus.files().items():
                prints[f"{label}:{name}"] = input_fingerprint(path)
    return prints


def build_react(parameters: ReactParameters, *, cache: StageCache | None = None, progress: bool = False,
                engine: Engine | None = None) -> Benchmark:
    """Build ReaCT (see the module docstring for the stages); `cache` (default: one at `parameters.cache_dir`) is read
    and filled, and its `hits` say which stages this build reused; `engine` (default: this process) runs the heavy
    stages."""
    parameters.check()
    engine = engine if engine is not None else LocalEngine()
    _check_members_can_run(parameters, engine)
    train, pools, valid, test = parameters.train(), parameters.pools(), parameters.validation(), parameters.test()
    for corpus in (train, valid, test):
        if corpus is not None:
            corpus.validate()
    pool_rows = sum(pool.validate() or 0 for pool in pools)
    cache = cache if cache is not None else StageCache(parameters.cache_dir)
    source_norm = parameters.degree().normalizer()
    target_norm = Normalizer(parameters.lowercase, parameters.tokenize, parameters.target_lang)  # type: ignore[arg-type]
    normalization = {"source": source_norm.signature(), "target": target_norm.signature()}
    inputs = {"train": train, "validation": valid, "test": test,
              **{f"pool{index}": pool for index, pool in enumerate(pools)}}
    prints = _fingerprints(inputs)

    corpora = {label: _read(corpus, label, source_norm, target_norm, progress, parameters.encoding_errors)
               for label, corpus in (("train", train), ("validation", valid), ("test", test)) if corpus is not None}
    training = corpora["train"]
    if not training.sources:
        raise BenchbuildError(f"the training corpus ({described(train)}) has no non-empty pair: give a training "
                              "corpus with sentences on both sides")
    scorer = DegreeScorer(training.sources, parameters.degree(), normalized=True)

    candidates_key = stage_key("candidates", inputs=prints, normalization=normalization,
                               encoding_errors=parameters.encoding_errors,
                               degree=asdict(parameters.degree()), pool_size=parameters.pool_size,
                               allow_small=parameters.allow_small, max_length=parameters.max_length)
    candidates = cache.json(candidates_key, lambda: _candidates(pools, pool_rows, corpora, scorer, parameters,
                                                                source_norm, target_norm, progress, engine))
    _check_enough_candidates(candidates, parameters)

    train_prints = {label: value for label, value in prints.items() if label.split(":")[0] in ("train", "validation")}
    ensemble_key = stage_key("ensemble", inputs=train_prints, normalization=normalization,
                             encoding_errors=parameters.encoding_errors,
                             model=parameters.ensemble_model, size=parameters.ensemble_size,
                             max_steps=parameters.max_steps, architecture=parameters.architecture_overrides,
                             recipe=parameters.member_overrides)
    members = cache.json(ensemble_key, lambda: _train_ensemble(cache.path(ensemble_key), corpora, parameters, progress,
                                                               engine))

    uncertainty_key = stage_key("uncertainty", candidates=candidates_key, ensemble=ensemble_key, beam=parameters.beam)
    sources = [row["source"] for row in candidates["rows"]]
    uncertainty = cache.json(uncertainty_key, lambda: _uncertainty(members["run_dirs"], sources, parameters, progress,
                                                                   engine))

    selection = select_by_uncertainty(uncertainty["rmi"], parameters.drop_top, parameters.band, parameters.sample,
                                      np.random.default_rng(parameters.seed), allow_small=parameters.allow_small)
    rows = candidates["rows"]
    cg_test = [{"id": f"pool{rows[p]['pool']}-{rows[p]['line']:08d}", "source": rows[p]["source"],
                "target": rows[p]["target"], "degree": rows[p]["degree"], "rmi": uncertainty["rmi"][p],
                "rmi_rank": rank} for p, rank in zip(selection.positions, selection.ranks)]
    if not cg_test:
        raise BenchbuildError("the selection is empty: raise --sample or give a larger pool")
    splits = {"cg_test": cg_test}
    split_names = {"train": "train", "validation": "validation", "test": "test"}
    for label, corpus in corpora.items():
        degrees = scorer.degree_of(corpus.sources, normalized=True)
        splits[split_names[label]] = [{"id": f"{label}-{line:08d}", "source": s, "target": t, "degree": float(d)}
                                      for line, s, t, d in zip(corpus.lines, corpus.sources, corpus.targets,
                                                               degrees.tolist())]

    counts: dict[str, int] = {}
    for label, corpus in corpora.items():
        counts[f"{label}: pairs read"] = corpus.stats.pairs_read
        counts[f"{label}: empty pairs dropped"] = corpus.stats.empty_dropped
        counts[f"{label}: pairs with invalid UTF-8 replaced"] = corpus.stats.replaced_characters_lines
    counts["training vocabulary (word types)"] = len(scorer.vocabulary)
    for order, number in scorer.dictionary.counts_by_order.items():
        counts[f"n-gram dictionary: {order}-grams"] = number
    counts.update(candidates["counts"])
    counts["ensemble members"] = len(members["run_dirs"])
    counts.update(selection.counts)
    statistics = table2([row["source"] for row in cg_test], training.sources, parameters.source_lang,
                        parameters.degree())
    info = BuildInfo.with_inputs("react", "react", parameters.recorded(), parameters.seed,
                                 {f"{label}:{name}": path for label, corpus in inputs.items() if corpus is not None
                                  for name, path in corpus.files().items()})
    card = CardFacts(
        pretty_name="ReaCT (benchbuild build)",
        languages=[parameters.source_lang, parameters.target_lang],
        license="other: inherits the licenses of the input corpora (IWSLT14 / TED: CC BY-NC-ND; WMT14)",
        counts=counts,
        extra={"band": selection.band, "table2": statistics.rows(), "table2_skipped": statistics.skipped,
               "shortfall": {"pool": candidates["shortfall"], "selection": selection.shortfall}},
    )
    return Benchmark.from_splits(splits, info, card)


def _candidates(pools: Sequence[ParallelInput], pool_rows: int, corpora: dict[str, Corpus], scorer: DegreeScorer,
                parameters: ReactParameters, source_norm: Normalizer, target_norm: Normalizer,
                progress: bool, engine: Engine) -> dict[str, Any]:
    """Stages 1–5 on the pool, shard by shard as engine tasks, keeping the top --pool-size only (`react.pool`)."""
    rules = PoolRules(scorer=scorer, seen=frozenset(source for corpus in corpora.values() for source in corpus.sources),
                      source_norm=source_norm, target_norm=target_norm, max_length=parameters.max_length,
                      pool_size=parameters.pool_size, encoding_errors=parameters.encoding_errors)
    return pool_candidates(pools, rules, engine, allow_small=parameters.allow_small, progress=progress,
                           total=pool_rows)


def _check_enough_candidates(candidates: dict[str, Any], parameters: ReactParameters) -> None:
    """Before the ensemble trains: refuse a candidate set from which no cg_test row could be selected."""
    number, counts = len(candidates["rows"]), candidates["counts"]
    if number == 0:
        raise BenchbuildError(
            f"no pool sentence is left as a candidate: of {counts['pool: pairs read']:,} pool pairs, "
            f"{counts['dropped by the OOV filter']:,} have a source word seen fewer than --min-word-count "
            f"{parameters.min_word_count} times in the training source, "
            f"{counts['dropped: source in the training/validation/test corpora']:,} are in the training/validation/"
            f"test corpora and {counts['dropped: duplicate within the pool']:,} repeat an earlier pool line: give a "
            "pool in the training corpus's vocabulary, a larger training corpus, or a lower --min-word-count")
    if number <= parameters.drop_top:
        raise BenchbuildError(f"only {number:,} candidates remain and --drop-top {parameters.drop_top:,} would drop "
                              "them all as noise: lower --drop-top or give a larger pool")


def engine_gpus(parameters: ReactParameters, engine: EngineParameters) -> int:
    """GPU slots for an embedded Dask cluster: this machine's GPUs, unless the members are to run on the CPU."""
    if engine.engine != "dask" or engine.scheduler is not None or parameters.device == "cpu":
        return 0
    return visible_cuda_devices()


def _check_members_can_run(parameters: ReactParameters, engine: Engine) -> None:
    """Before the first stage: --device cuda on Dask needs workers that advertise a GPU."""
    if engine.name == "dask" and parameters.device.startswith("cuda") and engine.gpus == 0:
        raise BenchbuildError(f"--device {parameters.device} was asked for but no worker of the Dask cluster "
                              "advertises a GPU: start workers with `dask worker ADDRESS --resources GPU=1`, or use "
                              "--device auto or cpu")


@dataclass(frozen=True)
class Placement:
    """Where the members run: the engine of their tasks, the device each task names in its process, and the
    resources each task asks of a Dask worker."""

    engine: Engine
    devices: list[str]
    resources: dict[str, float] | None = None


def member_placement(parameters: ReactParameters, engine: Engine) -> Placement:
    """Dask: a GPU worker per member task when the cluster has GPUs and --device allows them (the worker sees its
    own GPU as `cuda`), else the CPU. This process: one process per GPU when there are several (`auto`/`cuda`),
    else today's devices (`benchbuild.device.member_devices`)."""
    size = parameters.ensemble_size
    if engine.name == "dask":
        if parameters.device != "cpu" and engine.gpus > 0:
            return Placement(engine, ["cuda"] * size, {"GPU": 1})
        return Placement(engine, ["cpu"] * size)
    gpus = visible_cuda_devices() if parameters.device in ("auto", "cuda") else 0
    if gpus > 1 and size > 1:
        return Placement(ProcessPoolEngine([{"CUDA_VISIBLE_DEVICES": gpu} for gpu in _visible_gpu_ids(gpus)]),
                         ["cuda"] * size)
    return Placement(engine, member_devices(parameters.device, size))


def _visible_gpu_ids(count: int) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entry of each of this process's `count` GPUs (the parent's own list, if set)."""
    visible = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return visible[:count] if len(visible) >= count else [str(index) for index in range(count)]


@dataclass(frozen=True)
class MemberTask:
    """One ensemble member to train (or finish) into `run_dir`, with absolute paths (for a worker elsewhere)."""

    model: str
    corpus_dir: str
    run_dir: str
    seed: int
    max_steps: int | None
    device: str
    overrides: dict[str, Any] | None
    architecture: dict[str, Any] | None
    progress: bool


def train_member(task: MemberTask) -> str:
    """One task: train the member unless its folder is complete (a retried or resumed member continues from its
    last checkpoint); returns its run folder."""
    from benchbuild.training import train

    if not _complete(Path(task.run_dir)):
        with member_threads(task.device):
            train(task.model, task.corpus_dir, task.run_dir, seed=task.seed, max_steps=task.max_steps,
                  device=task.device, recipe="mt", overrides=task.overrides,
                  architecture_overrides=task.architecture, progress=task.progress)
    return task.run_dir


def member_threads(device: str) -> AbstractContextManager[None]:
    """On the CPU, torch (and numba) run `CPU_MEMBER_THREADS` threads inside the block (`device.cpu_threads`)."""
    return cpu_threads(CPU_MEMBER_THREADS) if device == "cpu" else nullcontext()


def _train_ensemble(folder: Path, corpora: dict[str, Corpus], parameters: ReactParameters,
                    progress: bool, engine: Engine) -> dict[str, Any]:
    corpus_dir = folder / "corpus"
    splits = {split: [{"id": f"{label}-{line:08d}", "source": s, "target": t}
                      for line, s, t in zip(corpus.lines, corpus.sources, corpus.targets)]
              for label, split, corpus in ((label, label, c) for label, c in corpora.items() if label != "test")}
    if not (corpus_dir / "build.json").is_file():
        info = BuildInfo(family="generic", name="react-ensemble-corpus", parameters={})
        card = CardFacts(pretty_name="ReaCT ensemble training corpus", summary="The normalized training corpus.",
                         languages=[parameters.source_lang, parameters.target_lang], license="other")
        Benchmark.from_splits(splits, info, card).save(corpus_dir, overwrite=True)
    members_dir = Path(parameters.ensemble_dir) if parameters.ensemble_dir is not None else folder / "members"
    run_dirs = [members_dir / f"member-{member}" for member in range(parameters.ensemble_size)]
    placement = member_placement(parameters, engine)
    # Progress bars from the training loop only where it runs in this process; else one bar over the members.
    in_process = placement.engine.name == "local"
    tasks = [MemberTask(parameters.ensemble_model, str(corpus_dir.resolve()), str(run_dir.resolve()), member,
                        parameters.max_steps, placement.devices[member], parameters.member_overrides,
                        parameters.architecture_overrides or None, progress and in_process)
             for member, run_dir in enumerate(run_dirs) if not _complete(run_dir)]
    with progress_bar("training ensemble members", len(tasks), progress and not in_process) as advance:
        for _ in placement.engine.map(train_member, tasks, resources=placement.resources, retries=1):
            advance(amount=1)
    return {"run_dirs": [str(run_dir) for run_dir in run_dirs]}


def _complete(run_dir: Path) -> bool:
    from benchbuild.run_folder import RUN_FILE, read_run

    return (run_dir / RUN_FILE).is_file() and read_run(run_dir).get("status") == "complete"


@dataclass(frozen=True)
class ScoringBatch:
    """One decoding batch of candidates (`uncertainty.rmi_batches`) for the ensemble in `run_dirs` on `device`."""

    run_dirs: tuple[str, ...]
    device: str
    beam: int
    texts: tuple[str, ...]
    max_new_tokens: int


def score_batch(batch: ScoringBatch) -> list[float]:
    """One task: the sentence RMI of a batch, by the ensemble this process loaded once (kept for later batches)."""
    from benchbuild.react.uncertainty import Ensemble, batch_rmi

    with member_threads(batch.device):
        stamp = tuple(_stamp(path) for path in batch.run_dirs)  # a member retrained in place is loaded again
        ensemble = worker_cached(("react-ensemble", batch.run_dirs, batch.device, stamp),
                                 lambda: Ensemble.load(batch.run_dirs, device=batch.device), group="react-ensemble")
        rmi, _ = batch_rmi(ensemble, batch.texts, beam=batch.beam, max_new_tokens=batch.max_new_tokens)
    return rmi


def _stamp(run_dir: str) -> tuple[int, int]:
    from benchbuild.run_folder import RUN_FILE

    status = (Path(run_dir) / RUN_FILE).stat()
    return status.st_mtime_ns, status.st_size


def _uncertainty(run_dirs: Sequence[str], sources: Sequence[str], parameters: ReactParameters,
                 progress: bool, engine: Engine) -> dict[str, Any]:
    from benchbuild.zoo.loading import load_tokenizer

    from benchbuild.react.uncertainty import rmi_batches

    # On Dask, the batches go where the members trained; without it, to this process (one GPU at most).
    placement = member_placement(parameters, engine)
    device, resources = ((placement.devices[0], placement.resources) if engine.name == "dask"
                         else (resolve_device(parameters.device), None))
    absolute = tuple(str(Path(path).resolve()) for path in run_dirs)
    batches = rmi_batches(load_tokenizer(absolute[0]), sources, parameters.batch_size)
    tasks = (ScoringBatch(absolute, device, parameters.beam, tuple(sources[index] for index in chunk), limit)
             for chunk, limit in batches)
    rmi: list[float] = [0.0] * len(sources)
    with progress_bar("ensemble uncertainty", len(sources), progress) as advance:
        for (chunk, _), values in zip(batches, engine.map(score_batch, tasks, resources=resources, retries=1)):
            for index, value in zip(chunk, values):
                rmi[index] = value
            advance(amount=len(chunk))
    return {"rmi": rmi}
