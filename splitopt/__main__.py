"""``python -m splitopt`` runs the command line."""

from splitopt.cli import main

main()
