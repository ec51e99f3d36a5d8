"""``python -m shmcomm.launch``: see :mod:`shmcomm.cli`."""

from .cli import main as main
from .supervisor import run as run
