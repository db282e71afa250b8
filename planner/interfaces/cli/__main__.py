"""``python -m toolpath.planner.interfaces.cli``: the ``toolpath`` command."""

import sys

from toolpath.planner.interfaces.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
