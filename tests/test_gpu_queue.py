"""benchmarks/gpu/QUEUE.md, the prepared work for a machine with a CUDA GPU, and `run.sh queue`, which runs it: every
queued item is one command of at most 2,000 characters on one line, with a limit of at most 8 minutes, writing what it
keeps under $OUT; its CPU rehearsal runs here, so a GPU minute is never lost to a typo; `run.sh queue --dry-run` plans
the items that fit in a budget of minutes, and a real run records the items that passed and skips them later."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from commands import python_on_path

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


def test_the_queue_holds_at_least_six_items_each_one_short_command_within_eight_minutes():
    assert len(ITEMS) >= 6
    for item in ITEMS:
        kinds = [kind for kind, _ in item["blocks"]]
        assert kinds == ["device", "rehearse"], item["title"]
        command = item["blocks"][0][1]
        assert "\n" not in command.strip() and len(command) <= 2000, item["title"]
        assert item["timeout_s"] is not None and item["timeout_s"] <= 480, item["title"]  # 8 minutes at most
        # Whatever the command writes for us goes under $OUT, the folder `run.sh queue` (or whoever runs it) keeps.
        assert "$OUT/" in command, item["title"]
        # Every stage or pipeline the command names exists.
        for stage in re.findall(r"run\.sh (?:--log \S+ )?(\w+)", command):
            assert stage in ("setup", "tests", "scan", "ensemble", "react"), (item["title"], stage)
        for path in re.findall(r"(?:pipelines|benchmarks)/[\w/.-]+\.(?:toml|py|sh)", command):
            assert (ROOT / path).is_file(), (item["title"], path)


@pytest.mark.shared
@pytest.mark.parametrize("item", ITEMS, ids=[f"item{number}" for number in range(1, len(ITEMS) + 1)])
def test_each_queued_item_is_rehearsed_on_the_cpu(item, shared_data, tmp_path):
    """The item's `rehearse` block, as a new shell runs it: `python` the project's interpreter (forked from the
    tests' fork server with torch and benchbuild imported: tests/python_shim.py), `OUT` a scratch folder, the shared
    data where the tests read it."""
    rehearsal = item["blocks"][1][1]
    environment = {**os.environ, "OUT": str(tmp_path), "BENCHBUILD_SHARED": str(shared_data.parent),
                   **python_on_path(tmp_path / ".bin"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "-c", rehearsal], cwd=ROOT, env=environment, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, f"{item['title']}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_rehearsals_python_does_what_the_interpreter_does(tmp_path):
    """The forked `python` of the rehearsals (tests/python_shim.py) fails as the interpreter fails: a rehearsal with a
    typo or a failing check cannot pass. Its exit status, output, input, `sys.argv` and `sys.path[0]` are a new
    interpreter's for `-c`, `-m` and a script; other uses run the interpreter itself."""
    script = tmp_path / "folder" / "script.py"
    script.parent.mkdir()
    script.write_text("import sys\nprint(__name__, sys.argv[1:], sys.path[0])\nsys.exit(sys.stdin.read().strip())\n",
                      encoding="utf-8")
    environment = {**os.environ, **python_on_path(tmp_path / ".bin")}

    def shell(command: str, given: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=tmp_path, env=environment, input=given, capture_output=True,
                              text=True, check=False)

    done = shell(f"python {script} a b", "went wrong")
    assert (done.returncode, done.stdout, done.stderr) == (1, f"__main__ ['a', 'b'] {script.parent}\n", "went wrong\n")
    done = shell('python -c "import sys; print(sys.argv, repr(sys.path[0])); raise SystemExit(3)" x')
    assert (done.returncode, done.stdout) == (3, "['-c', 'x'] ''\n")
    done = shell('python -c "from benchbuild.sweep.spec import load_sweep; load_sweep(\'pipelines/none.toml\')"')
    assert done.returncode == 1 and done.stderr.rstrip().splitlines()[-1].startswith("benchbuild.errors."), done.stderr
    done = shell('python -c "syntax error"; echo "exit $?"')
    assert done.stdout == "exit 1\n" and "SyntaxError" in done.stderr
    done = shell("python -m json.tool", '{"b": 1}')
    assert (done.returncode, done.stdout) == (0, '{\n    "b": 1\n}\n')
    done = shell('python -c "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"; echo "exit $?"')
    assert done.stdout == "exit 143\n"
    assert shell("python -V").stdout.startswith(f"Python {sys.version.split()[0]}")
    done = shell("python no_such_script.py")
    assert done.returncode == 2 and "can't open file" in done.stderr


# --- `run.sh queue` ---------------------------------------------------------------------------------------------------

RUN = ROOT / "benchmarks" / "gpu" / "run.sh"
LINE = re.compile(r"^(run|skip) +(\d+)\. (.*)$")
PLANNED = re.compile(r"^planned: [\d.]+ of (\d+) minutes \((\d+) s\)")


def run_queue(*arguments: str, out: Path | str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`bash benchmarks/gpu/run.sh queue ARGUMENTS` from cwd with OUT set, as a machine without a GPU runs it."""
    return subprocess.run(["bash", str(RUN), "queue", *arguments], cwd=cwd, env={**os.environ, "OUT": str(out)},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)


def slug(title: str) -> str:
    """The done record's name after "N-": the title after "N. ", lower-cased, other runs than a-z0-9 as "-"."""
    return re.sub(r"[^a-z0-9]+", "-", title.split(". ", 1)[1].lower()).strip("-")[:60].rstrip("-")


def plan(minutes: int, done: set[int] = frozenset()) -> list[int]:
    """The item numbers a budget of minutes takes, in order: each not done whose timeout fits in what is left."""
    left, chosen = minutes * 60, []
    for number, item in enumerate(ITEMS, start=1):
        if number not in done and item["timeout_s"] <= left:
            chosen.append(number)
            left -= item["timeout_s"]
    return chosen


def decisions(stdout: str) -> tuple[list[tuple[str, int, str]], int, int]:
    """The dry run's (run or skip, number, rest of line) in printed order, and its planned budget and seconds."""
    lines = stdout.splitlines()
    listed = [(m.group(1), int(m.group(2)), m.group(3)) for m in map(LINE.match, lines) if m]
    planned = [m for m in map(PLANNED.match, lines) if m]
    assert len(planned) == 1, stdout
    return listed, int(planned[0].group(1)), int(planned[0].group(2))


def test_a_dry_run_of_14_minutes_lists_every_item_in_order_and_plans_those_that_fit(tmp_path):
    out = tmp_path / "queue"
    done = run_queue("--minutes", "14", "--dry-run", out=out)
    assert done.returncode == 0, done.stderr
    listed, budget, seconds = decisions(done.stdout)
    assert [number for _, number, _ in listed] == list(range(1, len(ITEMS) + 1))  # every item, in queue order
    to_run = [number for verdict, number, _ in listed if verdict == "run"]
    assert to_run == plan(14) and to_run  # the first item fits in 14 minutes
    assert budget == 14 and seconds == sum(ITEMS[n - 1]["timeout_s"] for n in to_run) <= 14 * 60
    for verdict, number, rest in listed:
        assert rest.startswith(ITEMS[number - 1]["title"].split(". ", 1)[1]), rest
        if verdict == "skip":
            assert "does not fit in the minutes left" in rest, rest
    assert not out.exists()  # a dry run writes nothing


def test_a_dry_run_skips_an_item_recorded_as_done_and_plans_the_next(tmp_path):
    out = tmp_path / "queue"
    (out / "done").mkdir(parents=True)
    (out / "done" / f"1-{slug(ITEMS[0]['title'])}").write_text("done\n")
    done = run_queue("--minutes", "14", "--dry-run", out=out)
    assert done.returncode == 0, done.stderr
    listed, _, seconds = decisions(done.stdout)
    assert listed[0][:2] == ("skip", 1) and ": done (" in listed[0][2], listed[0]
    to_run = [number for verdict, number, _ in listed if verdict == "run"]
    assert to_run == plan(14, done={1}) and 1 not in to_run and to_run
    assert seconds == sum(ITEMS[n - 1]["timeout_s"] for n in to_run) <= 14 * 60


@pytest.mark.parametrize("arguments", [["--minutes", "0"], [], ["--dry-run"], ["--minutes"], ["--minutes", "-3"],
                                       ["--minutes", "ten", "--dry-run"]])
def test_a_missing_or_non_positive_budget_is_refused_in_one_line(arguments, tmp_path):
    done = run_queue(*arguments, out=tmp_path / "queue")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--minutes" in done.stderr, done.stderr
    assert done.stdout == "" and not (tmp_path / "queue").exists()


def test_a_run_logs_each_item_records_only_those_that_passed_and_skips_them_next_time(tmp_path):
    """A queue of four: one passes, one fails, one does not fit in 3 minutes, one outlives its timeout_s."""
    queue = tmp_path / "q.md"
    queue.write_text("""# A queue\n\n## Queue\n
### 1. Passes: writes under $OUT\n\ntimeout_s: 60\n\n```device\necho one; echo kept > $OUT/one.txt\n```\n
### 2. Fails\n\ntimeout_s: 60\n\n```device\necho two; exit 3\n```\n
### 3. Too long\n\ntimeout_s: 600\n\n```device\necho three > $OUT/three.txt\n```\n
### 4. Outlives its limit\n\ntimeout_s: 1\n\n```device\nsleep 20; echo four\n```\n
## Done\n""", encoding="utf-8")
    # OUT relative to where run.sh is called (the items run from the repository's root, with OUT made absolute).
    out, relative = tmp_path / "queue-out-of-this-test", "queue-out-of-this-test"
    first = run_queue("--minutes", "3", "--queue", "q.md", out=relative, cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr  # an item failed
    assert (out / "one.txt").read_text() == "kept\n" and (out / "item-1.log").read_text() == "one\n"
    assert (out / "item-2.log").read_text() == "two\n"
    assert not (out / "three.txt").exists() and not (out / "item-3.log").exists()
    assert (out / "item-4.log").read_text() == ""  # killed by its timeout_s before it printed
    assert sorted(path.name for path in (out / "done").iterdir()) == ["1-passes-writes-under-out"]
    assert not (ROOT / relative).exists()
    second = run_queue("--minutes", "3", "--queue", "q.md", out=relative, cwd=tmp_path)
    verdicts = {int(m.group(2)): (m.group(1), m.group(3)) for m in map(LINE.match, second.stdout.splitlines()) if m}
    assert verdicts[1][0] == "skip" and ": done (" in verdicts[1][1]
    assert verdicts[2][0] == "run" and verdicts[3][0] == "skip" and verdicts[4][0] == "run", second.stdout
    assert (out / "item-1.log").read_text() == "one\n"  # not run again


def test_the_queue_speaks_of_a_machine_with_a_cuda_gpu_only():
    text = QUEUE.read_text(encoding="utf-8")
    for word in ("session", "sessions", "lent", "give_back", "can_start_another", "device tool"):
        assert not re.search(rf"\b{re.escape(word)}\b", text, re.I), word
