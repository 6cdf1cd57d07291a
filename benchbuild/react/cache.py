"""ReaCT's stage cache: each finished stage's result stored under a key of its inputs and parameters.

A rerun after a crash, or with a changed later parameter (`--sample`), finds the earlier stages' results under the
same keys and resumes after the last finished one. Results are JSON (small) or folders (trained members).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable


def stage_key(stage: str, **parts: Any) -> str:
    """A short content address of a stage: its name and every input fingerprint and parameter that shapes it."""
    text = json.dumps({"stage": stage, **parts}, sort_keys=True, ensure_ascii=False, default=str)
    return f"{stage}-{hashlib.sha256(text.encode()).hexdigest()[:20]}"


class StageCache:
    """A folder of finished stages; `hits` and `misses` name the stages found and computed in this run."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)  # made when the first stage is stored: a build that fails its checks leaves none
        self.hits: list[str] = []
        self.misses: list[str] = []

    def path(self, key: str) -> Path:
        return self.folder / key

    def json(self, key: str, compute: Callable[[], Any]) -> Any:
        """The stored result of `key`, or `compute()` stored atomically (a crash leaves no partial file)."""
        path = self.folder / f"{key}.json"
        stage = key.rsplit("-", 1)[0]
        if path.is_file():
            self.hits.append(stage)
            return json.loads(path.read_text(encoding="utf-8-sig"))
        self.misses.append(stage)
        value = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
        os.replace(partial, path)
        return value
