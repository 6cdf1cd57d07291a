"""`benchbuild build-react`: ReaCT (001 §4) from a training corpus and a candidate pool, stage by stage.

normalize → OOV filter (and pool pairs over --max-length tokens set aside) → n-gram dictionary → compositional degree → non-overlapping candidate pool (top by degree)
→ ensemble (zoo models trained with seeds 0…K−1) → beam decoding + reverse mutual information → drop the most
uncertain, sample from the next band → a `Benchmark` (whose card's prose is in `data_cards/react.md.j2`). Stages 1–5,
the ensemble and the uncertainty scores are cached under `cache_dir` by their inputs and parameters, so a rerun
resumes after the last finished stage. Inputs that cannot give a benchmark (an empty corpus, no candidate left,
fewer candidates than --drop-top) are refused before the ensemble trains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.corpus import CorpusStats, ParallelInput
from benchbuild.device import member_devices, resolve_device
from benchbuild.errors import BenchbuildError
from benchbuild.fingerprint import input_fingerprint
from benchbuild.react.cache import StageCache, stage_key
from benchbuild.react.degree import CHUNK_LINES, DegreeScorer
from benchbuild.react.normalize import Normalizer
from benchbuild.react.parameters import ReactParameters
from benchbuild.progress import progress_bar
from benchbuild.react.selection import candidate_pool, select_by_uncertainty
from benchbuild.react.stats import table2

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


def build_react(parameters: ReactParameters, *, cache: StageCache | None = None,
                progress: bool = False) -> Benchmark:
    """Build ReaCT (see the module docstring for the stages); `cache` (default: one at `parameters.cache_dir`) is read
    and filled, and its `hits` say which stages this build reused."""
    parameters.check()
    train, pools, valid, test = parameters.train(), parameters.pools(), parameters.validation(), parameters.test()
    for corpus in (train, valid, test, *pools):
        if corpus is not None:
            corpus.validate()
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
        raise BenchbuildError(f"the training corpus ({_described(train)}) has no non-empty pair: give a training "
                              "corpus with sentences on both sides")
    scorer = DegreeScorer(training.sources, parameters.degree(), normalized=True)

    candidates_key = stage_key("candidates", inputs=prints, normalization=normalization,
                               encoding_errors=parameters.encoding_errors,
                               degree=asdict(parameters.degree()), pool_size=parameters.pool_size,
                               allow_small=parameters.allow_small, max_length=parameters.max_length)
    candidates = cache.json(candidates_key, lambda: _candidates(pools, corpora, scorer, parameters, source_norm,
                                                                target_norm, progress))
    _check_enough_candidates(candidates, parameters)

    train_prints = {label: value for label, value in prints.items() if label.split(":")[0] in ("train", "validation")}
    ensemble_key = stage_key("ensemble", inputs=train_prints, normalization=normalization,
                             encoding_errors=parameters.encoding_errors,
                             model=parameters.ensemble_model, size=parameters.ensemble_size,
                             max_steps=parameters.max_steps, architecture=parameters.architecture_overrides,
                             recipe=parameters.recipe_overrides)
    members = cache.json(ensemble_key, lambda: _train_ensemble(cache.path(ensemble_key), corpora, parameters, progress))

    uncertainty_key = stage_key("uncertainty", candidates=candidates_key, ensemble=ensemble_key, beam=parameters.beam)
    sources = [row["source"] for row in candidates["rows"]]
    uncertainty = cache.json(uncertainty_key, lambda: _uncertainty(members["run_dirs"], sources, parameters, progress))

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


def _candidates(pools: Sequence[ParallelInput], corpora: dict[str, Corpus], scorer: DegreeScorer,
                parameters: ReactParameters, source_norm: Normalizer, target_norm: Normalizer,
                progress: bool) -> dict[str, Any]:
    """Stages 1–5 on the pool, streamed in chunks: only OOV-filter survivors are kept in memory."""
    seen = {source for corpus in corpora.values() for source in corpus.sources}
    origin: list[tuple[int, int]] = []
    sources: list[str] = []
    targets: list[str] = []
    degrees: list[float] = []
    read = oov = empty = replaced = too_long = 0
    for index, pool in enumerate(pools):
        stats = CorpusStats()
        with progress_bar(f"compositional degree of pool {index}", pool.validate(), progress) as advance:
            chunk: list[tuple[int, str, str]] = []
            rows = pool.rows(encoding_errors=parameters.encoding_errors, stats=stats)
            for row in chain(rows, [None]):  # None: flush the last chunk
                if row is not None:
                    source, target = source_norm(row[1]), target_norm(row[2])
                    # Attention is quadratic in length: one huge line would stall the ensemble's decoding.
                    if max(len(source.split()), len(target.split())) > parameters.max_length:
                        too_long += 1
                        advance(amount=1)
                    else:
                        chunk.append((row[0], source, target))
                if chunk and (row is None or len(chunk) == CHUNK_LINES):
                    scores = scorer.score([source for _, source, _ in chunk], normalized=True)
                    for keep, degree, (line, source, target) in zip(scores.in_vocabulary.tolist(),
                                                                    scores.degree.tolist(), chunk):
                        if keep:
                            origin.append((index, line))
                            sources.append(source)
                            targets.append(target)
                            degrees.append(degree)
                    oov += len(chunk) - int(scores.in_vocabulary.sum())
                    advance(amount=len(chunk))
                    chunk = []
        if stats.pairs_kept == 0:
            raise BenchbuildError(f"candidate pool {index} ({_described(pool)}) has no non-empty pair: give a pool "
                                  "with sentences on both sides")
        read += stats.pairs_read
        empty += stats.empty_dropped
        replaced += stats.replaced_characters_lines
    pool = candidate_pool(sources, np.asarray(degrees, dtype=np.float64), np.ones(len(sources), dtype=bool), seen,
                          parameters.pool_size, allow_small=parameters.allow_small)
    counts = {"pool: pairs read": read, "pool: empty pairs dropped": empty,
              "pool: pairs with invalid UTF-8 replaced": replaced,
              f"pool: pairs longer than {parameters.max_length:,} tokens set aside (--max-length)": too_long,
              "dropped by the OOV filter": oov,
              **{key: value for key, value in pool.counts.items()
                 if key not in ("pool lines", "dropped by the OOV filter")}}
    rows = [{"pool": origin[i][0], "line": origin[i][1], "source": sources[i], "target": targets[i],
             "degree": degrees[i]} for i in pool.indices]
    return {"rows": rows, "counts": counts, "shortfall": pool.shortfall}


def _described(corpus: ParallelInput) -> str:
    return ", ".join(str(path) for path in corpus.files().values())


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


def _train_ensemble(folder: Path, corpora: dict[str, Corpus], parameters: ReactParameters,
                    progress: bool) -> dict[str, Any]:
    from benchbuild.training import train

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
    run_dirs = []
    devices = member_devices(parameters.device, parameters.ensemble_size)
    for member in range(parameters.ensemble_size):
        run_dir = members_dir / f"member-{member}"
        if _complete(run_dir):
            run_dirs.append(str(run_dir))
            continue
        train(parameters.ensemble_model, corpus_dir, run_dir, seed=member, max_steps=parameters.max_steps,
              device=devices[member], recipe="mt", overrides=parameters.recipe_overrides or None,
              architecture_overrides=parameters.architecture_overrides or None, progress=progress)
        run_dirs.append(str(run_dir))
    return {"run_dirs": run_dirs}


def _complete(run_dir: Path) -> bool:
    from benchbuild.training.run_folder import RUN_FILE, read_run

    return (run_dir / RUN_FILE).is_file() and read_run(run_dir).get("status") == "complete"


def _uncertainty(run_dirs: Sequence[str], sources: Sequence[str], parameters: ReactParameters,
                 progress: bool) -> dict[str, Any]:
    from benchbuild.react.uncertainty import Ensemble, ensemble_rmi

    ensemble = Ensemble.load(run_dirs, device=resolve_device(parameters.device))
    with progress_bar("ensemble uncertainty", len(sources), progress) as advance:
        rmi, _ = ensemble_rmi(ensemble, sources, beam=parameters.beam, batch_size=parameters.batch_size,
                              advance=advance)
    return {"rmi": rmi}
