"""``python -m gpflow_augmented``: the command-line tool
(:mod:`gpflow_augmented.comparison.cli`)."""

import sys

from .comparison.cli import main

if __name__ == "__main__":
    sys.exit(main())
