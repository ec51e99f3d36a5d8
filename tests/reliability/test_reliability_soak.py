"""Soak: consecutive default-job runs leak no segments, fds, threads, processes or memory.

The short form runs in CI; the full 500 runs are ``python scripts/soak.py`` (or
``python -m pytest -m slow tests/reliability/test_reliability_soak.py``).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from _helpers import ROOT

SCRIPT = ROOT / "scripts" / "soak.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("shmcomm_soak_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.mark.timeout(120)
def test_short_soak_leaks_nothing():
    soak = _soak_module()
    rep = soak.soak(runs=12, nranks=8, blocks=4, iters=20, progress=False)
    summary = soak.format_summary(rep)
    assert rep["runs_ok"] == 12, summary
    assert rep["leaks"] == {}, summary
    assert max(r["shm_names"] for r in rep["rows"]) == 0
    assert max(r["children"] for r in rep["rows"]) == 0


@pytest.mark.timeout(120)
def test_soak_detects_a_leak():
    """The detector itself can fail: a leaked fd between runs is reported."""
    import os

    soak = _soak_module()
    leaked: list[int] = []
    real = soak.shmcomm.run

    def leaky_run(*args, **kwargs):
        leaked.append(os.open(os.devnull, os.O_RDONLY))  # one fd more after every run
        return real(*args, **kwargs)

    soak.shmcomm = type("M", (), {"run": staticmethod(leaky_run), "ShmcommError": Exception,
                                  "__version__": "test"})
    try:
        rep = soak.soak(runs=3, nranks=2, blocks=1, iters=5, progress=False)
    finally:
        for fd in leaked:
            os.close(fd)
    assert rep["leaks"].get("fds") == 2 and "LEAKS: fds +2" in soak.format_summary(rep)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_full_soak_500_runs(tmp_path):
    out = tmp_path / "soak.json"
    code = _soak_module().main(["--runs", "500", "--json", str(out)])
    rep = json.loads(out.read_text())
    assert code == 0 and rep["leaks"] == {} and rep["runs_ok"] == 500
