"""The exception a user can act on: the CLI prints its message as one line and exits non-zero."""


class BenchbuildError(Exception):
    """Bad input or a bad request: the message says what to fix."""


class Terminated(BaseException):
    """SIGTERM reached a benchbuild command (a scheduler or `kill` ended it): like Ctrl-C's KeyboardInterrupt, it
    unwinds every `finally` and context manager, so children are stopped and nothing half-written stays; the CLI exits
    with 143. Its message, if any, says what was stopped and how to go on."""


class Interrupted(BaseException):
    """Ctrl-C stopped a step of a pipeline (`benchbuild run`): no further step starts, the CLI exits with 130. Typer
    turns a KeyboardInterrupt inside a command into its exit code 130, so the pipeline raises this one, which no
    command layer catches. Its message says which step stopped and how to go on."""


def did_you_mean(name: str, choices) -> str:
    """"did you mean 'X'?" for the choice nearest `name` (difflib's ratio at least 0.6), or "" when none is near: a
    typo in a name gets the fix instead of the whole list."""
    import difflib

    nearest = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean {nearest[0]!r}? " if nearest else ""
