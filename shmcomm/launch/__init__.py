"""``python -m shmcomm.launch``: see :mod:`shmcomm.cli`."""

from ..cli import main as main
from ..runner import run as run
