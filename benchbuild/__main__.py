"""`python -m benchbuild` runs the command line."""

from benchbuild.cli import main

main()
