"""`python` for tests of shell commands (tests/test_gpu_queue.py's rehearsals): `python -c CODE`, `python -m MODULE`
and `python SCRIPT` run forked from the test process's fork server (tests/fork_server.py), where torch, transformers
and benchbuild are already imported, instead of paying ~5 s of imports in a new interpreter each; any other use of the
interpreter (options, no arguments, a script that is not a file) runs the real one. The child uses this process's
stdin, stdout and stderr, and this process exits with its status (128 + N for a child ended by signal N, as a shell
reports it).

Started as `python -S -I tests/python_shim.py ARGUMENTS` (the wrapper `python_on_path` writes): nothing but the
standard library is imported here. The fork server's socket is named by BENCHBUILD_TEST_FORK_SERVER."""

import json
import os
import socket
import sys


def main() -> int:
    arguments = sys.argv[1:]
    address = os.environ.get("BENCHBUILD_TEST_FORK_SERVER")
    forms = arguments and (arguments[0] in ("-c", "-m") and len(arguments) > 1 or os.path.isfile(arguments[0]))
    if not address or not forms:
        interpreter = os.environ["BENCHBUILD_TEST_PYTHON"]
        os.execv(interpreter, [interpreter, *arguments])
    request = {"python": arguments, "cwd": os.getcwd(), "environment": dict(os.environ), "descriptors": True,
               "session": False}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(address)
        socket.send_fds(connection, [(json.dumps(request) + "\n").encode()], [0, 1, 2])
        answers = connection.makefile("r", encoding="utf-8")
        answers.readline()  # the child's pid
        code = int(answers.readline())
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
