"""``python -m gpflow_augmented``: the command-line tool of :mod:`gpflow_augmented.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
