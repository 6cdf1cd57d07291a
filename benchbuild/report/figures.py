"""The report's figures, drawn with matplotlib (its object API on the Agg canvas; imported only here, inside the
functions) and saved as PNG for the HTML page and PDF for papers. Each function takes the numbers `analyses`
computed and returns the `Figure` it wrote."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchbuild.report.rows import ReportRow
from benchbuild.papers import PAPERS
from benchbuild.report.analyses import PairScore, band, position_preferences
from benchbuild.report.headline import Column, headline_columns
from benchbuild.report.runs import RunSummary

DPI = 110


@dataclass(frozen=True)
class Figure:
    """A written figure: its PNG and PDF, a title and a caption saying what it shows."""

    title: str
    caption: str
    png: Path
    pdf: Path


class FigureFolder:
    """The folder the figures go to (`PREFIX_files/`), naming each file after its title, uniquely."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.used: set[str] = set()

    def save(self, figure, title: str, caption: str) -> Figure:
        stem = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "figure"
        name, number = stem, 2
        while name in self.used:
            name, number = f"{stem}-{number}", number + 1
        self.used.add(name)
        png, pdf = self.folder / f"{name}.png", self.folder / f"{name}.pdf"
        # The image grows to hold every artist: a legend wider than the panels (long paper names under a narrow
        # figure) is never cut at the image's edge.
        figure.savefig(png, dpi=DPI, bbox_inches="tight", pad_inches=0.05)
        figure.savefig(pdf, bbox_inches="tight", pad_inches=0.05)
        return Figure(title, caption, png, pdf)


def _figure(width: float, height: float):
    """A matplotlib Figure not registered with pyplot (no global state, no GUI backend)."""
    from matplotlib.figure import Figure as MatplotlibFigure

    return MatplotlibFigure(figsize=(width, height), layout="constrained")


def _colors(names: Sequence[str]) -> dict[str, str]:
    return {name: f"C{index % 10}" for index, name in enumerate(names)}


def _legend(axis, **options) -> None:
    """A legend where the axis has labelled artists (matplotlib warns on an empty one)."""
    if axis.get_legend_handles_labels()[1]:
        axis.legend(fontsize="small", **options)


def _runs(count: int) -> str:
    return f"{count} run{'s' if count != 1 else ''}"


def learning_curves(benchmark: str, runs: Sequence[RunSummary], out: FigureFolder) -> Figure:
    """Validation exact match against step and against training time: a line per run, each model's seeds as a
    band (lowest to highest seed, on the range all its seeds reached)."""
    timed = all(v.elapsed_s is not None for run in runs for v in run.validations)
    figure = _figure(11 if timed else 6, 4)
    axes = figure.subplots(1, 2 if timed else 1, squeeze=False)[0]
    models = list(dict.fromkeys(run.model for run in runs))
    colors = _colors(models)
    views = [("step", "training step", lambda v: v.step)]
    if timed:
        views.append(("elapsed", "training time (s)", lambda v: v.elapsed_s))
    for axis, (_, xlabel, x_of) in zip(axes, views):
        for model in models:
            of_model = [run for run in runs if run.model == model]
            curves = [([x_of(v) for v in run.validations], [v.exact_match for v in run.validations])
                      for run in of_model]
            for (x, y), run in zip(curves, of_model):
                axis.plot(x, y, marker="o", markersize=3, linewidth=1, color=colors[model], alpha=0.85,
                          label=f"{model} ({_runs(len(of_model))})" if run is of_model[0] else None)
            seeds = band(curves)
            if seeds is not None:
                axis.fill_between(seeds.x, seeds.low, seeds.high, color=colors[model], alpha=0.2, linewidth=0)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("validation exact match (%)")
        axis.set_ylim(-2, 102)
        axis.grid(alpha=0.3)
    _legend(axes[0])
    figure.suptitle(f"Learning curves on {benchmark}")
    caption = ("Validation exact match of each run against its training step"
               + (" and its training wall time (elapsed_s)" if timed else "")
               + "; a shaded band spans the seeds of one model.")
    return out.save(figure, f"learning curves {benchmark}", caption)


def results_bars(rows: Sequence[ReportRow], out: FigureFolder) -> Figure | None:
    """One panel per headline column: a bar per model at its mean with the standard error as error bar, each seed
    as a dot and the paper's number as a diamond, labelled with its source: filled red where the runs were made as
    it was, hollow grey where they were not (`ReportRow.comparable`)."""
    columns = headline_columns(rows)
    if not columns:
        return None
    per_column = {column: [row for row in rows if Column.of(row) == column] for column in columns}
    count = len(columns)
    across = min(count, 3)
    down = -(-count // across)
    width = max(3.0, 0.9 * max(len(found) for found in per_column.values()) + 1.5)
    figure = _figure(width * across, 3.6 * down)
    axes = figure.subplots(down, across, squeeze=False).ravel()
    models = sorted({row.model for row in rows})
    colors = _colors(models)
    for axis, column in zip(axes, columns):
        found = sorted(per_column[column], key=lambda row: row.model)
        x = np.arange(len(found))
        axis.bar(x, [row.mean for row in found], color=[colors[row.model] for row in found], alpha=0.8,
                 yerr=[row.standard_error or 0.0 for row in found], capsize=4)
        for position, row in zip(x, found):
            axis.scatter([position] * len(row.values), row.values, color="black", s=10, zorder=3)
            if row.paper is not None:
                label = row.source if row.comparable else f"{row.source}, other protocol"
                style = ({"color": "red"} if row.comparable else
                         {"facecolors": "none", "edgecolors": "grey", "linewidths": 1.5})
                axis.scatter([position], [row.paper], marker="D", s=40, zorder=4, label=label, **style)
        shown = [value for row in found for value in (*row.values, row.mean + (row.standard_error or 0.0))]
        shown += [row.paper for row in found if row.paper is not None]
        axis.set_ylim(min(0.0, *shown) * 1.1, max(1.0, *shown) * 1.1)
        axis.set_xticks(x, [row.model for row in found], rotation=30, ha="right")
        axis.set_title(f"{column.benchmark} ({column.split})", fontsize="medium")
        axis.set_ylabel(column.metric_name)
        axis.grid(axis="y", alpha=0.3)
    # One legend under the panels: the papers' names are too long for a legend inside a panel of a few bars.
    legend = {label: handle for axis in axes[:count] for handle, label in zip(*axis.get_legend_handles_labels())}
    if legend:
        figure.legend(legend.values(), legend.keys(), loc="outside lower center", fontsize="small",
                      ncols=min(len(legend), 2))
    for axis in axes[count:]:
        axis.set_visible(False)
    return out.save(figure, "results", "Mean over seeds (bars) with the standard error (error bars; none for one "
                    "seed), each seed (dots) and the paper's number where the catalogue has one: a red diamond where "
                    "our runs were made as it was, a hollow grey one (other protocol) where they were not, so the "
                    "two do not compare.")


def seed_spread(rows: Sequence[ReportRow], out: FigureFolder) -> Figure | None:
    """Per headline column where a model has several seeds: each seed's number as a dot (labelled with its seed), a
    box over the quartiles with the median, and the mean with its 95% t-interval over seeds, a model per position;
    a bimodal spread (002's add-jump runs) shows as two clusters that a mean ± s.e. hides. None without such a
    column."""
    from benchbuild.evaluation.uncertainty import SeedStatistics

    columns = [column for column in headline_columns(rows)
               if any(len(row.values) >= 2 for row in rows if Column.of(row) == column)]
    if not columns:
        return None
    per_column = {column: sorted((row for row in rows if Column.of(row) == column), key=lambda row: row.model)
                  for column in columns}
    across = min(len(columns), 3)
    down = -(-len(columns) // across)
    width = max(3.5, 1.2 * max(len(found) for found in per_column.values()) + 1.5)
    figure = _figure(width * across, 3.8 * down)
    axes = figure.subplots(down, across, squeeze=False).ravel()
    colors = _colors(sorted({row.model for row in rows}))
    for axis, column in zip(axes, columns):
        found = per_column[column]
        x = np.arange(len(found))
        spread = [(position, row.values) for position, row in zip(x, found) if len(row.values) >= 2]
        axis.boxplot([values for _, values in spread], positions=[position for position, _ in spread], widths=0.45,
                     showfliers=False, medianprops={"color": "black"}, boxprops={"color": "grey"},
                     whiskerprops={"color": "grey"}, capprops={"color": "grey"})
        for position, row in zip(x, found):
            offsets = np.linspace(-0.12, 0.12, len(row.values)) if len(row.values) > 1 else np.zeros(1)
            axis.scatter(position + offsets, row.values, color=colors[row.model], s=22, zorder=3, alpha=0.9)
            if len(row.values) <= 10:
                for offset, value, seed in zip(offsets, row.values, row.seeds):
                    axis.annotate(str(seed), (position + offset, value), xytext=(4, 0), textcoords="offset points",
                                  fontsize="x-small", va="center", color="dimgrey")
            interval = SeedStatistics.of(row.values).mean_interval
            if interval is not None:
                axis.errorbar([position + 0.32], [row.mean], yerr=[[row.mean - interval[0]], [interval[1] - row.mean]],
                              fmt="D", color="black", markersize=4, capsize=3,
                              label="mean, 95% t-interval" if not axis.get_legend_handles_labels()[1] else None)
        axis.set_xticks(x, [f"{row.model}\n({_runs(len(row.values))})" for row in found], rotation=30, ha="right")
        axis.set_xlim(-0.6, len(found) - 0.4)
        axis.set_title(f"{column.benchmark} ({column.split})", fontsize="medium")
        axis.set_ylabel(column.metric_name)
        axis.grid(axis="y", alpha=0.3)
        _legend(axis, loc="best")
    for axis in axes[len(columns):]:
        axis.set_visible(False)
    return out.save(figure, "per-seed results",
                    "Each seed's number (dots, labelled with the seed), the box spanning the lower to upper quartile "
                    "with the median as a line (whiskers: the farthest seeds within 1.5 IQR), and the mean with its "
                    "95% t-interval over seeds (black diamond), wherever a model has several seeds on a headline "
                    "metric.")


def bleu_by_degree(benchmark: str, buckets: Mapping[str, Sequence[Sequence[dict]]], out: FigureFolder) -> Figure:
    """BLEU per compositional-degree bucket, a line per model (mean over seeds, band from lowest to highest seed);
    with two models or more, a second panel shows each model minus the first, as 001 Figure 1a. Buckets stand at
    their rank, labelled with their degree range: equal-count buckets of a high-degree test set may share a degree."""
    models = list(buckets)
    colors = _colors(models)
    first = buckets[models[0]][0]
    labels = [f"{b['degree_min']:.2f}–{b['degree_max']:.2f}\n({b['rows']:,} rows)" for b in first]
    x = np.arange(len(first))
    figure = _figure(max(6.0, 1.1 * len(first) + 2) * (2 if len(models) > 1 else 1), 4.2)
    axes = figure.subplots(1, 2 if len(models) > 1 else 1, squeeze=False)[0]
    means = {}
    for model in models:
        scores = np.asarray([[b["bleu"] for b in seed] for seed in buckets[model] if len(seed) == len(first)])
        if not len(scores):
            continue
        means[model] = scores.mean(axis=0)
        axes[0].plot(x, means[model], marker="o", color=colors[model], label=f"{model} ({_runs(len(scores))})")
        if len(scores) > 1:
            axes[0].fill_between(x, scores.min(axis=0), scores.max(axis=0), color=colors[model], alpha=0.2)
    axes[0].set_ylabel("BLEU")
    if len(means) > 1:
        base_model, *others = means
        for model in others:
            axes[1].plot(x, means[model] - means[base_model], marker="o", color=colors[model],
                         label=f"{model} − {base_model}")
        axes[1].axhline(0, color="grey", linewidth=0.8)
        axes[1].set_ylabel("BLEU difference")
    for axis in axes:
        axis.set_xticks(x, labels, fontsize="small")
        axis.set_xlabel("compositional degree bucket")
        _legend(axis)
        axis.grid(alpha=0.3)
    figure.suptitle(f"BLEU by compositional degree on {benchmark}")
    return out.save(figure, f"bleu by degree {benchmark}",
                    "Test rows sorted by compositional degree and cut into equal-count buckets (as "
                    f"{PAPERS['001'].in_text}, Figure 1a); "
                    "BLEU of each bucket, labelled with its degree range.")


def noun_adjective_pairs(benchmark: str, scores: Mapping[str, Sequence[Sequence[PairScore]]],
                         out: FigureFolder) -> Figure:
    """COMP and order accuracy per noun–adjective pair, mean over seeds, one bar per model; forward pairs (the
    adjective expected before the noun) and backward pairs in separate rows of panels."""
    models = list(scores)
    colors = _colors(models)
    pairs = list(dict.fromkeys((s.order, s.adjective, s.noun) for seeds in scores.values() for seed in seeds
                               for s in seed))
    orders = [order for order in ("forward", "backward") if any(p[0] == order for p in pairs)]
    height = max(2.2, 0.35 * len(pairs) * len(models) / max(1, len(orders)) + 1.2)
    figure = _figure(10, height * len(orders))
    axes = figure.subplots(len(orders), 2, squeeze=False)
    bar = 0.8 / len(models)
    for row_axes, order in zip(axes, orders):
        of_order = [pair for pair in pairs if pair[0] == order]
        y = np.arange(len(of_order))
        for index, model in enumerate(models):
            comp, accuracy = [], []
            for pair in of_order:
                found = [s.counts for seed in scores[model] for s in seed if (s.order, s.adjective, s.noun) == pair]
                comp.append(np.mean([c.comp for c in found]) if found else np.nan)
                ordered = [c.order_accuracy for c in found if c.order_accuracy is not None]
                accuracy.append(np.mean(ordered) if ordered else np.nan)
            offset = y - 0.4 + bar * (index + 0.5)
            row_axes[0].barh(offset, comp, height=bar, color=colors[model], label=model)
            row_axes[1].barh(offset, accuracy, height=bar, color=colors[model], label=model)
        labels = [f"{adjective} {noun}" for _, adjective, noun in of_order]
        for axis, measure in zip(row_axes, ("COMP (%)", "order accuracy (%)")):
            axis.set_yticks(y, labels)
            axis.set_ylim(len(of_order) - 0.5, -0.5)
            axis.set_xlim(0, 100)
            axis.set_xlabel(measure)
            axis.set_title(f"{order} order expected", fontsize="medium")
            axis.grid(axis="x", alpha=0.3)
    _legend(axes[0][0], loc="lower right")
    figure.suptitle(f"Noun–adjective pairs on {benchmark}")
    return out.save(figure, f"noun adjective pairs {benchmark}",
                    "Per test pair (English adjective and noun), COMP: the share of translations holding both French "
                    "lemmas; order accuracy: among those, the share with the adjective on the side the row expects "
                    f"({PAPERS['000'].in_text}, §5). Mean over seeds; a missing bar means no translation held both "
                    "lemmas.")


def relative_position_biases(run: RunSummary, biases: Mapping[tuple[str, int], np.ndarray],
                             out: FigureFolder) -> Figure:
    """000 Figure 1: per stack and layer, each head's softmax over its learned relative-position biases."""
    stacks = [stack for stack in ("encoder", "decoder") if any(key[0] == stack for key in biases)]
    layers = max(layer for _, layer in biases) + 1
    figure = _figure(2.6 * layers + 1, 2.6 * len(stacks))
    axes = figure.subplots(len(stacks), layers, squeeze=False)
    preferences = {key: position_preferences(bias, causal=key[0] == "decoder") for key, bias in biases.items()}
    highest = max(float(preference.max()) for _, preference in preferences.values())
    image = None
    for row_axes, stack in zip(axes, stacks):
        for layer, axis in enumerate(row_axes):
            if (stack, layer) not in biases:
                axis.set_visible(False)
                continue
            offsets, preference = preferences[(stack, layer)]
            image = axis.imshow(preference, aspect="auto", cmap="viridis", vmin=0.0, vmax=highest,
                                extent=(offsets[0] - 0.5, offsets[-1] + 0.5, preference.shape[0] - 0.5, -0.5))
            axis.set_xticks(offsets)
            axis.set_yticks(range(preference.shape[0]))
            axis.set_title(f"{stack} layer {layer}", fontsize="medium")
            axis.set_xlabel("key offset j − i")
            if layer == 0:
                axis.set_ylabel("head")
    figure.colorbar(image, ax=axes, shrink=0.8, label="softmax of the bias")
    figure.suptitle(f"Relative-position biases of {run.label} ({run.trained_on})")
    return out.save(figure, f"relative position biases {run.model} {run.trained_on} seed {run.seed}",
                    "Each head's learned bias over the capped signed offset of the key from the query, after a "
                    f"softmax over offsets ({PAPERS['000'].in_text}, App. C, Figure 1; one colour scale for all "
                    "layers); the decoder shows "
                    "offsets ≤ 0 only, as it masks later positions. Offsets ±span also stand for every farther key.")


def degree_histogram(benchmark: str, degrees: Mapping[str, np.ndarray], out: FigureFolder) -> Figure:
    """The compositional degree of each split's rows, as step histograms on shared bins."""
    figure = _figure(6.5, 4)
    axis = figure.subplots()
    values = np.concatenate(list(degrees.values()))
    bins = np.linspace(float(values.min()), float(values.max()) if values.max() > values.min() else
                       float(values.min()) + 1.0, 31)
    for name, split in degrees.items():
        axis.hist(split, bins=bins, histtype="step", linewidth=1.5, weights=np.full(len(split), 100 / len(split)),
                  label=f"{name} ({len(split):,} rows)")
    axis.set_xlabel("compositional degree")
    axis.set_ylabel("rows of the split (%)")
    _legend(axis)
    axis.grid(alpha=0.3)
    figure.suptitle(f"Compositional degree by split of {benchmark}")
    return out.save(figure, f"degree histogram {benchmark}",
                    f"Distribution of the compositional degree ({PAPERS['001'].in_text}, §4: the fewest training "
                    "n-grams that compose a "
                    "sentence, over its length) of each split's rows, as a share of the split (30 bins).")


def length_histograms(benchmark: str, lengths: Mapping[str, tuple[np.ndarray, np.ndarray]],
                      out: FigureFolder) -> Figure:
    """Source and target lengths of each split's rows, as step histograms with one bin per length."""
    from matplotlib.ticker import MaxNLocator

    figure = _figure(11, 4)
    axes = figure.subplots(1, 2)
    for side, (axis, label) in enumerate(zip(axes, ("source length (words)", "target length (tokens)"))):
        longest = max(int(split[side].max()) for split in lengths.values())
        bins = np.arange(0.5, longest + 1.5)
        for name, split in lengths.items():
            axis.hist(split[side], bins=bins, histtype="step", linewidth=1.5, label=f"{name} ({len(split[side]):,})")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel(label)
        axis.set_ylabel("rows")
        axis.grid(alpha=0.3)
    _legend(axes[0])
    figure.suptitle(f"Example lengths by split of {benchmark}")
    return out.save(figure, f"length histograms {benchmark}",
                    "Rows per source length (SCAN: command words) and target length (SCAN: actions) in each split; "
                    "length splits put every longer target in test.")

