"""Smoke test of benchmarks/barrier_latency.py --quick: every section runs and writes its files.

No timing is asserted (the box is shared); only that the rows, ratios and targets are there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(240)
SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "barrier_latency.py")


def test_quick_benchmark_writes_json_table_and_plot(tmp_path):
    out = tmp_path / "bl"
    proc = subprocess.run([sys.executable, SCRIPT, "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "bl.json").read_text())
    assert doc["schema"] == "shmcomm.bench.barrier_latency/1"
    assert doc["machine"]["cpus"] >= 1 and len(doc["loadavg_start"]) == 3
    rows = doc["rows"]
    got = {(r["kind"], r["impl"], r["nranks"], r["blocks"]) for r in rows}
    for impl in ("seed", "epoch", "central", "mp", "thread+mp"):
        assert ("barrier", impl, 8, 4) in got and ("barrier", impl, 2, 1) in got, impl
    assert {r["policy"] for r in rows if r["kind"] == "policy"} == {"spin", "yield", "futex", "adaptive"}
    assert any(r["kind"] == "scaling" and r["nranks"] == 32 for r in rows)
    for r in rows:
        assert len(r["us"]) >= 5 and 0 < r["stats"]["min"] <= r["stats"]["median"] <= r["stats"]["max"]
    key = ("barrier", "seed", 8, 4)
    seed84 = next(r for r in rows if (r["kind"], r["impl"], r["nranks"], r["blocks"]) == key)
    assert {"mp", "thread+mp"} <= set(seed84["ratios"])
    assert doc["launch"]["cli_wall_s"]["median"] > 0
    assert len(doc["targets"]) == 5
    md = (tmp_path / "bl.md").read_text()
    assert "| 8x4 | central |" in md and "## Targets" in md
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot skipped" in md
    else:
        assert (tmp_path / "bl.png").stat().st_size > 1000
    if any(r["impl"] == "mpi" for r in rows):
        assert doc["mpi_library"].startswith("MPICH") or doc["mpi_library"]
    else:
        assert "MPI_Barrier skipped" in md


def test_bad_arguments_exit_2():
    proc = subprocess.run([sys.executable, SCRIPT, "--policies", "busy"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "unknown policy 'busy'" in proc.stderr
