"""The exception a user can act on: the CLI prints its message as one line and exits non-zero."""


class BenchbuildError(Exception):
    """Bad input or a bad request: the message says what to fix."""


class Terminated(BaseException):
    """SIGTERM reached a benchbuild command (a scheduler or `kill` ended it): like Ctrl-C's KeyboardInterrupt, it
    unwinds every `finally` and context manager, so children are stopped and nothing half-written stays; the CLI exits
    with 143."""
