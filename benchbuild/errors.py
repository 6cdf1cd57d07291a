"""The exception a user can act on: the CLI prints its message as one line and exits non-zero."""


class BenchbuildError(Exception):
    """Bad input or a bad request: the message says what to fix."""


class Terminated(BaseException):
    """SIGTERM reached a benchbuild command (a scheduler or `kill` ended it): like Ctrl-C's KeyboardInterrupt, it
    unwinds every `finally` and context manager, so children are stopped and nothing half-written stays; the CLI exits
    with 143."""


def did_you_mean(name: str, choices) -> str:
    """"did you mean 'X'?" for the choice nearest `name` (difflib's ratio at least 0.6), or "" when none is near: a
    typo in a name gets the fix instead of the whole list."""
    import difflib

    nearest = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean {nearest[0]!r}? " if nearest else ""
