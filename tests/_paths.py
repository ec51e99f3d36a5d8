"""The test folders on ``sys.path``: test modules share hosts and kernels by module name
(``from test_hazard_models import host_flags``) across the area folders, as pytest's prepend
import mode puts each test's own folder there; ``mpi_cases.py``, run by ``mpiexec`` outside
pytest, needs the same."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def add_test_dirs() -> None:
    """Put ``tests/`` and each of its area folders on ``sys.path`` (once)."""
    for d in [TESTS, *sorted(p.parent for p in TESTS.glob("**/test_*.py"))]:
        if str(d) not in sys.path:
            sys.path.append(str(d))
