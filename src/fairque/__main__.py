"""``python -m fairque``: the command-line interface."""

from fairque.cli import main

main()
