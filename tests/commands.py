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


def benchbuild(*arguments: str | Path, cwd: Path | None = None, environment: dict[str, str] | None = None,
               timeout: float | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """`benchbuild ARGUMENTS…` run to its end in a process of its own, with no terminal input; its exit status and
    output (as text) as `subprocess.run` gives them.

    The process is forked from a server (tests/fork_server.py) that imported benchbuild's CLI and what its commands
    load (torch, transformers, datasets) once for the test process, instead of paying those ~3-5 s per command. It is
    still a process of its own (pid, working directory, environment, file descriptors, exit status, `sys.argv` as the
    console script sets it) running the console entry point `benchbuild.cli.main` and the interpreter's exit (atexit
    functions, flushed output). Its stdin holds `input` (else nothing). Tests of imports and of the installed script
    itself start the script."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="benchbuild-command-") as folder:
        stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
        stdin = None
        if input is not None:
            stdin = Path(folder, "stdin")
            stdin.write_text(input, encoding="utf-8")
        process = started(*arguments, cwd=cwd, environment=environment, stdout=stdout, stderr=stderr, session=False,
                          stdin=stdin)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise subprocess.TimeoutExpired(process.args, timeout, _text(stdout), _text(stderr)) from None
        return subprocess.CompletedProcess(process.args, code, _text(stdout), _text(stderr))


class Started:
    """A `benchbuild` command started by `started`, running in its own process: the part of `subprocess.Popen` the
    tests use (pid, args, poll, wait, communicate, kill, returncode). Its parent is the fork server, which sends the
    exit status once the process has ended, so waiting for it is waiting for that event."""

    def __init__(self, args: list[str], connection, stdout: Path | None, stderr: Path | None):
        self.args, self._connection, self._stdout, self._stderr = args, connection, stdout, stderr
        self._answers = connection.makefile("r", encoding="utf-8")
        self.pid = int(self._answers.readline())
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            import select

            if not select.select([self._connection], [], [], timeout)[0]:  # the status line, sent in one piece
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(self._answers.readline())
            self._answers.close()
            self._connection.close()
        return self.returncode

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.wait(0)
        return None

    def communicate(self) -> tuple[str, str]:
        """Wait for the end; what the process wrote to its stdout and stderr files, as text."""
        self.wait()
        return tuple(_text(path) if path else "" for path in (self._stdout, self._stderr))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def started(*arguments: str | Path, cwd: Path | None = None, environment: dict[str, str] | None = None,
            stdout: Path | None = None, stderr: Path | None = None, session: bool = True,
            stdin: Path | None = None) -> Started:
    """`benchbuild ARGUMENTS…` started and left running (forked from the fork server, as `benchbuild` does it), with
    no terminal input (its stdin the file `stdin`, else empty), its output into the files `stdout` and `stderr` (or
    nowhere), in a process group of its own unless `session` is false (as `subprocess.Popen(start_new_session=True)`:
    a terminal's foreground job, which a test can signal as Ctrl-C signals one)."""
    import socket

    argv = [BENCHBUILD, *map(str, arguments)]
    request = {"argv": argv, "cwd": str(cwd or os.getcwd()), "environment": dict(environment or os.environ),
               "stdin": str(stdin or os.devnull), "stdout": str(stdout or os.devnull),
               "stderr": str(stderr or os.devnull), "session": session}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(_fork_server())
        connection.sendall((json.dumps(request) + "\n").encode())
        return Started(argv, connection, stdout, stderr)
    except BaseException:
        connection.close()
        raise


def python_on_path(folder: Path) -> dict[str, str]:
    """Environment variables that make `python` in a shell command the project's interpreter forked from this test
    process's fork server (tests/python_shim.py: `-c`, `-m` and scripts run with torch, transformers and benchbuild
    already imported), through a `python` written into `folder`, put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python"
    shim = Path(__file__).with_name("python_shim.py")
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S -I "{shim}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "BENCHBUILD_TEST_FORK_SERVER": _fork_server(), "BENCHBUILD_TEST_PYTHON": sys.executable}


_server: list[tuple[subprocess.Popen, str]] = []


def _fork_server() -> str:
    """The socket address of this test process's fork server, started at the first command (its imports take a few
    seconds once); it ends when this process does (its stdin, a pipe from here, closes)."""
    import tempfile

    if not _server:
        import atexit
        import shutil

        folder = tempfile.mkdtemp(prefix="benchbuild-fork-server-")
        atexit.register(shutil.rmtree, folder, True)  # the socket's folder goes with this process
        address = str(Path(folder) / "socket")
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
