"""The exception a user can act on: the CLI prints its message as one line and exits non-zero."""

import contextlib
import contextvars

# How the user starts the run being prepared again from its beginning, where the command in use says it otherwise
# than `train` does (a stacked sweep's member: `starting_again_by`).
_START_AGAIN: contextvars.ContextVar[str] = contextvars.ContextVar("start_again", default="")


def start_again(default: str) -> str:
    """The way out a message gives for a run that must start again: `default` (the `train` command's), or what the
    caller set with `starting_again_by`."""
    return _START_AGAIN.get() or default


@contextlib.contextmanager
def starting_again_by(way: str):
    """Within the block, messages about a damaged run give `way` as the way to start it again."""
    token = _START_AGAIN.set(way)
    try:
        yield
    finally:
        _START_AGAIN.reset(token)


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
