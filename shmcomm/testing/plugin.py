"""The pytest plugin (entry point ``pytest11``, name ``shmcomm``): the ``shmcomm_sweep`` fixture.

``shmcomm_sweep(host, nranks=..., blocks=..., modes=..., sizes=..., seeds=..., **host_kwargs)``
runs :func:`shmcomm.testing.check` and fails the test with shmcomm's report and the commands
that rerun the first failure. Failing runs keep their Chrome traces under the test's
``tmp_path`` (``shmcomm-traces/``). With ``-x`` the sweep stops at its first failing run. Every
run is bounded (``run_timeout``); a pytest-timeout that fires mid-run stops every rank process
of that run before the test fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..stress.harness import Report
from . import SweepFailed, check


@pytest.fixture
def shmcomm_sweep(request: pytest.FixtureRequest, tmp_path: Any) -> Callable[..., Report]:
    """A function that sweeps a host program and fails the test on any failing run."""
    exitfirst = request.config.getoption("maxfail", 0) == 1  # -x is --maxfail=1

    def run_sweep(host: Callable[..., Any], **options: Any) -> Report:
        options.setdefault("trace_dir", str(tmp_path / "shmcomm-traces"))
        options.setdefault("stop_at_first", exitfirst)
        try:
            return check(host, **options)
        except SweepFailed as exc:
            text = str(exc)
        pytest.fail(text, pytrace=False)  # outside the except: no chained traceback

    return run_sweep
