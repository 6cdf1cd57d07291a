"""Progress bars (rich, on stderr) for ReaCT's long stages; a no-op when progress is off (tests, libraries)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def progress_bar(enabled: bool, total: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """Yield `advance(steps)` for a bar of `total` steps labelled `label`."""
    if not enabled:
        yield lambda steps: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda steps: bar.advance(task, steps)
