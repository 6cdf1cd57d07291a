"""A fork server for the tests' `benchbuild` commands (tests/commands.py `benchbuild`): started once per test process,
it imports benchbuild's CLI and what its commands load (torch, transformers, datasets: ~3-5 s a process), then forks one
child per command, which runs the console entry point as the installed `benchbuild` script does, in the caller's
working directory and environment, and exits with its status. The server is single-threaded (nothing has started a
thread when it forks), so its children are as safe to run as a fresh interpreter.

It also runs `python -c CODE`, `python -m MODULE` and `python SCRIPT` for tests/python_shim.py, the `python` that
tests of shell commands put first on PATH (tests/test_gpu_queue.py's rehearsals): the child runs the code, module or
script as `__main__` with the interpreter's `sys.argv` and `sys.path[0]`, on the shim's own standard streams.

Protocol, one connection per command on the Unix socket named by argv[1]: the client sends one JSON line (argv, or
`python` and the interpreter's arguments; cwd, environment, stdin, stdout and stderr file paths, or `descriptors`: the
client's stdin, stdout and stderr sent with the line (SCM_RIGHTS); `session`: true for a process group of its own);
the server answers the child's pid, then its exit status (negative: the signal that ended it), one line each.
Commands run side by side. The server ends when its stdin (a pipe from the client) closes. Each child starts with
Ctrl-C's default handler, as a command started from a terminal does, whatever the test process inherited."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import tempfile

PRELOADED = ("benchbuild.cli", "torch", "transformers.modeling_utils", "datasets", "benchbuild.zoo",
             "benchbuild.training.loop", "benchbuild.evaluation.evaluate", "benchbuild.report.write")


def _command(request: dict, descriptors: list[int]) -> int:
    """In the forked child: what the `benchbuild` console script does with `request` (or, with `python` in it, what
    the interpreter does with those arguments); its exit status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["environment"])
    tempfile.tempdir = None  # a fresh process finds its temporary folder from TMPDIR at first use
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # torch took its thread count from the server's OMP_NUM_THREADS when the server imported it; a fresh process
    # takes the command's.
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))
    # What a fresh process decides from its environment when the CLI is imported: the two consoles' terminal and
    # interactive settings (rich reads TTY_COMPATIBLE, TTY_INTERACTIVE, NO_COLOR... as it builds a Console).
    import benchbuild.commands as commands

    commands.console.__init__(stderr=True)
    commands.out.__init__()
    if descriptors:
        for descriptor, received in enumerate(descriptors):
            os.dup2(received, descriptor)
            os.close(received)
    else:
        for descriptor, path, flags in ((0, request.get("stdin", os.devnull), os.O_RDONLY),
                                        (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                                        (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, descriptor)
            os.close(opened)
    if "python" in request:
        return _exit_status(lambda: _python(request["python"]))
    sys.argv = request["argv"]

    def console_script() -> None:
        from benchbuild.cli import main

        main()

    return _exit_status(console_script)


def _python(arguments: list[str]) -> None:
    """`python ARGUMENTS` for `-c CODE`, `-m MODULE` or `SCRIPT`, each with what follows as its arguments: `sys.argv`
    and `sys.path[0]` as the interpreter sets them ('' for -c, the working folder for -m, the script's folder)."""
    import runpy

    first = arguments[0]
    if first == "-c":
        import types

        sys.argv = ["-c", *arguments[2:]]
        sys.path.insert(0, "")
        main = sys.modules["__main__"] = types.ModuleType("__main__")
        exec(compile(arguments[1], "<string>", "exec"), main.__dict__)
    elif first == "-m":
        sys.argv = [arguments[1], *arguments[2:]]  # runpy puts the module's file in argv[0]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(arguments)
        sys.path.insert(0, os.path.dirname(os.path.abspath(first)))
        runpy.run_path(first, run_name="__main__")


def _exit_status(run) -> int:
    """Call `run` as the interpreter runs a program: its exit status (SystemExit's code; 1 and the traceback for an
    uncaught exception), after the atexit functions and with the output flushed."""
    import atexit
    import traceback

    code = 0
    try:
        run()
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
        for stream in (sys.stdout, sys.stderr):
            if not stream.closed:  # the program may have closed it (`json.tool` closes its output), as the
                stream.flush()  # interpreter's own exit allows
    return code


def serve(address: str) -> None:
    for name in PRELOADED:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    # A child's end wakes the loop: SIGCHLD writes a byte to this pipe (the handler itself does nothing), so commands
    # run side by side (a test may start one and, while it runs, run another) and each status goes out as it ends.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake)
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    selector.register(woken, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}
    while True:
        events = [key.fileobj for key, _ in selector.select()]
        if sys.stdin in events and not sys.stdin.readline():
            return  # the client is gone
        if woken in events:
            os.read(woken, 4096)
            _reap(running)
        if listener not in events:
            continue
        connection, _ = listener.accept()
        request, descriptors = _request(connection)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for descriptor in (woken, wake):
                    os.close(descriptor)
                selector.close()
                listener.close()
                connection.close()
                for other in running.values():
                    other.close()
                if request.get("session"):
                    os.setsid()  # as Popen(start_new_session=True): a process group of its own, to be signalled
                code = _command(request, descriptors)
            finally:
                os._exit(code)
        for descriptor in descriptors:
            os.close(descriptor)
        running[pid] = connection
        _send(connection, f"{pid}\n")
        _reap(running)  # it may have ended before its entry was made


def _request(connection: socket.socket) -> tuple[dict, list[int]]:
    """The client's JSON line and the descriptors sent with it (none from tests/commands.py)."""
    data, descriptors, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    while not data.endswith(b"\n"):
        more = connection.recv(1 << 20)
        if not more:
            break
        data += more
    return json.loads(data), list(descriptors)


def _reap(running: dict[int, socket.socket]) -> None:
    """Send the exit status of every child that has ended (negative: the signal that ended it) and close its
    connection; a client that gave up (its timeout killed the child and closed the connection) gets nothing."""
    for pid in list(running):
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            connection = running.pop(pid)
            _send(connection, f"{os.waitstatus_to_exitcode(status)}\n")
            connection.close()


def _send(connection: socket.socket, line: str) -> None:
    try:
        connection.sendall(line.encode())
    except OSError:
        pass


if __name__ == "__main__":
    sys.path.pop(0)  # this folder: a command sees the import path the console script gives it
    serve(sys.argv[1])
