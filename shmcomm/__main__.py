"""``python -m shmcomm {launch,stress,cleanup} ...``: one entry point for the command lines."""

import sys

from .cli import main

sys.exit(main())
