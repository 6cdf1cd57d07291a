"""The installed `benchbuild` command run as a user runs it, and checks of what it said and what it left.

Imported as `commands` (pytest puts `tests/` on `sys.path` when it loads `tests/conftest.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

# The console script of the environment the tests run in (what `pip install` put on the user's PATH).
BENCHBUILD = str(Path(sys.executable).parent / "benchbuild")


def benchbuild(*arguments: str | Path, cwd: Path | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess:
    """`benchbuild ARGUMENTS…` run to its end in a process of its own, with no terminal input; its exit status and
    output (as text) as `subprocess.run` gives them.

    The process is forked from a server (tests/fork_server.py) that imported benchbuild's CLI and what its commands
    load (torch, transformers, datasets) once for the test process, instead of paying those ~3-5 s per command. It is
    still a process of its own (pid, working directory, environment, file descriptors, exit status, `sys.argv` as the
    console script sets it) running the console entry point `benchbuild.cli.main` and the interpreter's exit (atexit
    functions, flushed output). Tests of signals, locks, imports and the installed script start the script itself."""
    import socket
    import tempfile

    argv = [BENCHBUILD, *map(str, arguments)]
    with tempfile.TemporaryDirectory(prefix="benchbuild-command-") as folder:
        stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
        request = {"argv": argv, "cwd": str(cwd or os.getcwd()), "environment": dict(os.environ),
                   "stdout": str(stdout), "stderr": str(stderr)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(_fork_server())
            connection.sendall((json.dumps(request) + "\n").encode())
            answers = connection.makefile("r", encoding="utf-8")
            pid = int(answers.readline())
            connection.settimeout(timeout)
            try:
                code = int(answers.readline())
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(argv, timeout, _text(stdout), _text(stderr)) from None
        return subprocess.CompletedProcess(argv, code, _text(stdout), _text(stderr))


_server: list[tuple[subprocess.Popen, str]] = []


def _fork_server() -> str:
    """The socket address of this test process's fork server, started at the first command (its imports take a few
    seconds once); it ends when this process does (its stdin, a pipe from here, closes)."""
    import tempfile

    if not _server:
        address = str(Path(tempfile.mkdtemp(prefix="benchbuild-fork-server-")) / "socket")
        server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fork_server.py")), address],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline() == "ready\n", "the tests' fork server did not start"
        _server.append((server, address))
    return _server[0][1]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def benchbuild_in_process(*arguments: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`benchbuild ARGUMENTS…` through the same console entry point (`benchbuild.cli.main`) in this test process, its
    exit code and output as `benchbuild` returns them. A new process pays ~5 s of imports (torch, transformers,
    datasets) before its first check; here they are paid once per test process, so a suite of refusals costs
    milliseconds each. Only for commands that need no process of their own (no signal, lock or terminal)."""
    from benchbuild.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    argv, handler = ["benchbuild", *map(str, arguments)], signal.getsignal(signal.SIGTERM)
    saved_argv = sys.argv
    sys.argv = argv
    try:
        with contextlib.chdir(cwd or os.getcwd()), contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, handler)
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def refused(done: subprocess.CompletedProcess, *phrases: str) -> None:
    """`done` was refused the way every refusal must be: exit 1 (an error benchbuild names) or 2 (a usage error),
    no traceback, and exactly one `benchbuild: error:` line, the last thing printed (progress bars may precede it),
    holding each of `phrases`."""
    assert done.returncode in (1, 2), done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("benchbuild: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(errors[0]), done.stderr
    for phrase in phrases:
        assert phrase in errors[0], done.stderr


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (path relative to it) with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def log_without_times(run_dir: Path) -> list[dict]:
    """A run's `train_log.jsonl` without its wall-clock field (`elapsed_s`), which no two runs share."""
    lines = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    return [{key: value for key, value in line.items() if key != "elapsed_s"} for line in lines]


def file_hashes(*paths: Path) -> dict[str, str]:
    """Every file at or under each of `paths` with its sha256: equal results mean untouched bytes."""
    files = []
    for path in paths:
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
