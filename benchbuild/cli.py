"""The `benchbuild` command line: the program, its commands in the order `--help` lists them (each defined in a
module of `benchbuild.commands`), and the console entry point, which turns an error or a signal into one line on
stderr and an exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer._click.exceptions import ClickException  # typer vendors click: its own exception classes
from typer.core import TyperGroup

from benchbuild import __version__
from benchbuild.commands import build, models, out, pipeline, releases, report
from benchbuild.commands.checks import check_no_empty_argument
from benchbuild.errors import BenchbuildError, Interrupted, Terminated


class _CommandList(TyperGroup):
    """The command group, whose `--help` lists each command with its docstring's first sentence, hard line breaks
    joined (click's default cuts the docstring at ~45 characters with "...", mid-sentence)."""

    def format_commands(self, ctx, formatter) -> None:
        import re

        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and command.short_help is None and command.help:
                text = " ".join(command.help.split())
                # A sentence ends at "; " or at ". " before a capital ("et al. 2021", "s.e. over" go on).
                command.short_help = re.split(r";\s|(?<=\.)\s(?=[A-Z])", text, maxsplit=1)[0].rstrip(".;")
        super().format_commands(ctx, formatter)


app = typer.Typer(
    cls=_CommandList,
    name="benchbuild",
    help="Build compositional-generalization benchmarks as Hugging Face datasets, and train and score models on them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain (click) help: option names in full at 80 columns, flags without a "<bool>" metavar, every line wrapped to
    # the terminal; the command list shows each command's first sentence (`_CommandList`).
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        out.print(f"benchbuild {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
) -> None:
    """benchbuild: SCAN, noun-adjective order and ReaCT benchmarks; a model zoo to train and score on them."""


# Every command, in the order `benchbuild --help` lists them.
app.command("build-scan")(build.build_scan_command)
app.command("run")(pipeline.run_command)
app.command("zoo")(models.zoo_command)
app.command("build-noun-adj")(build.build_noun_adj_command)
app.command("build-lake-baroni-fr")(build.build_lake_baroni_command)
app.command("train")(models.train_command)
app.command("eval")(models.eval_command)
app.command("reproduce")(models.reproduce_command)
app.command("score")(models.score_command)
app.command("report")(report.report_command)
app.command("degree")(build.degree_command)
app.command("build-react")(build.build_react_command)
app.command("stats")(build.stats_command)
app.command("sweep")(pipeline.sweep_command)
app.command("import")(releases.import_command)
app.command("publish")(releases.publish_command)
pipeline.program = app  # `run` parses a recipe's steps with these commands


# The signal that stopped the command, once one came: a KeyboardInterrupt raised where Python only prints it (in a
# finaliser: an fsspec file's `closed` while a dataset is saved) leaves the command to fail on what it interrupted
# ("I/O operation on closed file"); that failure is still reported as the stop it follows, with its exit code.
_signalled: list[str] = []


def _terminate(signum, frame) -> None:
    _signalled.append("terminated")
    raise Terminated()


def _interrupt(signum, frame) -> None:
    _signalled.append("interrupted")
    raise KeyboardInterrupt


def main() -> None:
    """Console entry point: one error line on stderr and a non-zero exit, or the traceback with --debug. Ctrl-C
    (SIGINT) exits with 130 and SIGTERM with 143, after every `finally` has stopped children and removed temporary
    files."""
    import signal

    try:
        os.getcwd()
    except FileNotFoundError:  # before torch loads: oneMKL aborts the process with a FATAL ERROR in a deleted folder
        print("benchbuild: error: the current folder no longer exists (it was deleted or moved): cd into an existing "
              "folder and run the command again", file=sys.stderr)
        sys.exit(1)
    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv = [sys.argv[0], *[a for a in sys.argv[1:] if a != "--debug"]]
    _signalled.clear()
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (nohup &)
        signal.signal(signal.SIGINT, _interrupt)
    try:
        check_no_empty_argument(sys.argv[1:])
        result = app(standalone_mode=False)
    except typer.Exit as stop:
        sys.exit(stop.exit_code)
    except ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _stopped("interrupted", "", 130)
    except Interrupted as stop:
        _stopped("interrupted", str(stop), 130)
    except Terminated as stop:
        _stopped("terminated", str(stop), 143)
    except Exception as error:  # noqa: BLE001 - the CLI's single place that turns errors into one line
        if _signalled and not debug:  # what a signal interrupted failed after it: the stop is what happened
            _stopped(_signalled[0], "", 130 if _signalled[0] == "interrupted" else 143)
        if debug:
            raise
        print(f"benchbuild: error: {_one_line(error)}", file=sys.stderr)
        sys.exit(1)
    if result == 130:  # typer's answer to Ctrl-C inside a command: its exit code, not an exception
        _stopped("interrupted", "", 130)
    sys.exit(result if isinstance(result, int) else 0)


# Commands whose rerun goes on from where a stopped one was (runs resume from their last checkpoint, build-react from
# its cache, sweeps and pipelines skip what finished); every other command starts its work again.
RESUMING_COMMANDS = ("train", "sweep", "run", "build-react")


def _stopped(what: str, where: str, code: int) -> None:
    """One line on stderr saying that a signal stopped the command (and where, for a pipeline) and what the same
    command does when run again, then exit `code`."""
    command = next((argument for argument in sys.argv[1:] if not argument.startswith("-")), "")
    again = ("(the same command again goes on from where it stopped)" if command in RESUMING_COMMANDS
             else "(the same command again starts it over)")
    # One line, under 80 columns: a progress display still live would wrap a longer one at the terminal's width.
    print(f"benchbuild: {what} {where or again}", file=sys.stderr, flush=True)
    sys.exit(code)


def _out_of_space(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, is a full disk: errno ENOSPC, or the message a library that
    wraps it keeps (safetensors, pyarrow)."""
    import errno

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if (isinstance(error, OSError) and error.errno == errno.ENOSPC) or "No space left on device" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _written_path() -> str:
    """What the command writes: its --out (or the run folder of --run), else the working directory."""
    arguments = sys.argv[1:]
    for option in ("--out", "--run"):
        for index, argument in enumerate(arguments):
            if argument == option and index + 1 < len(arguments):
                return arguments[index + 1]
            if argument.startswith(option + "="):
                return argument.split("=", 1)[1]
    return str(Path.cwd())


def _one_line(error: BaseException) -> str:
    message = str(error) or error.__class__.__name__
    if _out_of_space(error):
        where = getattr(error, "filename", None) or _written_path()
        message = f"no space left on the device holding {where}: free some space there and run the same command again"
    elif isinstance(error, MemoryError):
        message = ("out of memory: the process may not allocate what this command needs (a memory limit such as "
                   "`ulimit -v` or a container's, or too little free memory); raise the limit or give smaller inputs"
                   + (f" ({message})" if str(error) else ""))
    elif isinstance(error, OSError) and error.errno == 36:  # ENAMETOOLONG: a name longer than the filesystem takes
        message = (f"{error.filename or 'a path'}: file name too long (this filesystem takes names of at most 255 "
                   "bytes, and benchbuild writes temporary names beside each output: choose a shorter --out)")
    elif isinstance(error, OSError) and error.filename is not None and error.strerror:
        message = f"{error.filename}: {error.strerror}"  # an unwritable folder, a full disk: the path and why
    elif not isinstance(error, (BenchbuildError, FileNotFoundError, FileExistsError, ValueError)):
        message = f"{error.__class__.__name__}: {message}"
    return " ".join(message.split()) + " (rerun with --debug for the traceback)"
