"""The exception a user can act on: the CLI prints its message as one line and exits non-zero."""


class BenchbuildError(Exception):
    """Bad input or a bad request: the message says what to fix."""
