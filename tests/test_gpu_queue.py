"""benchmarks/gpu/QUEUE.md, the prepared device calls a session lent a GPU runs first: every queued item is a call
the device tool accepts (a command of at most 2,000 characters, a limit inside the 8 minutes an item may take, the
`.gpu` folder it reads prepared by prepare.sh), and its CPU rehearsal runs here, so a lent minute is never lost to a
typo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUEUE = ROOT / "benchmarks" / "gpu" / "QUEUE.md"
BLOCK = re.compile(r"```(device|rehearse)\n(.*?)\n```", re.S)


def queued_items() -> list[dict]:
    """The items under "## Queue": title, timeout_s, the device command and the rehearsal."""
    text = QUEUE.read_text(encoding="utf-8")
    queue = text.split("\n## Queue\n", 1)[1].split("\n## ", 1)[0]
    items = []
    for chunk in re.split(r"\n(?=### )", queue)[1:]:
        blocks = BLOCK.findall(chunk)
        timeout = re.search(r"^timeout_s: (\d+)$", chunk, re.M)
        items.append({"title": chunk.splitlines()[0][4:], "blocks": blocks,
                      "timeout_s": int(timeout.group(1)) if timeout else None})
    return items


ITEMS = queued_items()


def test_the_queue_holds_at_least_six_calls_each_a_command_the_device_tool_accepts_within_eight_minutes():
    assert len(ITEMS) >= 6
    for item in ITEMS:
        kinds = [kind for kind, _ in item["blocks"]]
        assert kinds == ["device", "rehearse"], item["title"]
        command = item["blocks"][0][1]
        assert "\n" not in command.strip() and len(command) <= 2000, item["title"]
        assert item["timeout_s"] is not None and item["timeout_s"] <= 480, item["title"]  # 8 minutes at most
        # Whatever the call writes for us goes under $OUT, the folder the device tool brings back.
        assert "$OUT/" in command, item["title"]
        # Every stage or pipeline the call names exists.
        for stage in re.findall(r"run\.sh (?:--log \S+ )?(\w+)", command):
            assert stage in ("setup", "tests", "scan", "ensemble", "react"), (item["title"], stage)
        for path in re.findall(r"(?:pipelines|benchmarks)/[\w/.-]+\.(?:toml|py|sh)", command):
            assert (ROOT / path).is_file(), (item["title"], path)


@pytest.mark.shared
@pytest.mark.parametrize("item", ITEMS, ids=[f"item{number}" for number in range(1, len(ITEMS) + 1)])
def test_each_queued_call_is_rehearsed_on_the_cpu(item, shared_data, tmp_path):
    """The item's `rehearse` block, as a new shell runs it: `python` the project's interpreter, `OUT` a scratch
    folder, the shared data where the tests read it."""
    rehearsal = item["blocks"][1][1]
    environment = {**os.environ, "OUT": str(tmp_path), "BENCHBUILD_SHARED": str(shared_data.parent),
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                   "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "-c", rehearsal], cwd=ROOT, env=environment, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, f"{item['title']}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
