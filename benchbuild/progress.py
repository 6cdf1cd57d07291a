"""Progress bars for long work (rich), one helper so every command shows them the same way; `datasets`' own bars
silenced around its internal steps."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def clock(seconds: float) -> str:
    """A duration as H:MM:SS, the hours unbounded (a 50-hour run reads 50:00:00): how training's progress lines, the
    sweep's table and the report's runs table all write one."""
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}"


@contextmanager
def progress_bar(description: str, total: float | None, enabled: bool = True) -> Iterator[Callable[..., None]]:
    """Yield `advance(label="", amount=1)`; draws a bar on stderr when enabled and stderr is a terminal."""
    if not enabled:
        yield lambda label="", amount=1: None
        return
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[label]}")]
    from rich.console import Console

    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total, label="")

        def advance(label: str = "", amount: float = 1) -> None:
            bar.update(task, advance=amount, label=label)

        yield advance


@contextmanager
def quiet_datasets() -> Iterator[None]:
    """No `datasets` progress bars for its internal steps (flattening, saving, loading); the caller's setting returns."""
    import datasets

    disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not disabled:
            datasets.enable_progress_bars()
