"""A fork server for the tests' `benchbuild` commands (tests/commands.py `benchbuild`): started once per test process,
it imports benchbuild's CLI and what its commands load (torch, transformers, datasets: ~3-5 s a process), then forks one
child per command, which runs the console entry point as the installed `benchbuild` script does, in the caller's
working directory and environment, and exits with its status. The server is single-threaded (nothing has started a
thread when it forks), so its children are as safe to run as a fresh interpreter.

Protocol, one connection per command on the Unix socket named by argv[1]: the client sends one JSON line (argv, cwd,
environment, stdout and stderr file paths); the server answers the child's pid, then its exit status (negative: the
signal that ended it), one line each. The server ends when its stdin (a pipe from the client) closes."""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys

PRELOADED = ("benchbuild.cli", "torch", "transformers.modeling_utils", "datasets", "benchbuild.zoo",
             "benchbuild.training.loop", "benchbuild.evaluation.evaluate", "benchbuild.report.write")


def _command(request: dict) -> int:
    """In the forked child: what the `benchbuild` console script does with `request`; its exit status."""
    import atexit
    import traceback

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["environment"])
    for descriptor, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                                    (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, descriptor)
        os.close(opened)
    sys.argv = request["argv"]
    code = 0
    try:
        from benchbuild.cli import main

        main()
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def serve(address: str) -> None:
    for name in PRELOADED:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    while True:
        events = [key.fileobj for key, _ in selector.select()]
        if sys.stdin in events and not sys.stdin.readline():
            return  # the client is gone
        if listener not in events:
            continue
        connection, _ = listener.accept()
        with connection:
            request = json.loads(connection.makefile("r", encoding="utf-8").readline())
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    selector.close()
                    listener.close()
                    connection.close()
                    code = _command(request)
                finally:
                    os._exit(code)
            _answer(connection, pid)


def _answer(connection: socket.socket, pid: int) -> tuple[int, int]:
    """Send the child's pid, wait for it, send its exit status; a client that gave up (its timeout killed the child
    and closed the connection) gets nothing, and the server goes on serving."""
    try:
        connection.sendall(f"{pid}\n".encode())
    except OSError:
        pass
    ended = os.waitpid(pid, 0)
    try:
        connection.sendall(f"{os.waitstatus_to_exitcode(ended[1])}\n".encode())
    except OSError:
        pass
    return ended


if __name__ == "__main__":
    sys.path.pop(0)  # this folder: a command sees the import path the console script gives it
    serve(sys.argv[1])
