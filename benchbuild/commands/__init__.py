"""The `benchbuild` commands, one module per group (`benchbuild.cli` registers them), and the two consoles they print
to: `out` for a command's result (stdout), `console` for progress, notes and warnings (stderr)."""

from rich.console import Console

console = Console(stderr=True)
out = Console()
