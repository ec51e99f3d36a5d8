"""Smoke test of benchmarks/barrier_latency.py --quick: every section runs and writes its files.

No timing is asserted (the box is shared); only that the rows, ratios and plot are there, and
that no project-internal target lines reach the user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _helpers import ROOT

pytestmark = pytest.mark.timeout(240)
SCRIPT = os.path.join(str(ROOT), "benchmarks", "barrier_latency.py")


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
    assert "targets" not in doc
    md = (tmp_path / "bl.md").read_text()
    assert "| 8x4 | central |" in md
    assert "target" not in md.lower() and "target" not in proc.stdout.lower()
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


@pytest.mark.parametrize("argv, words", [
    (["--policies", "busy"], "--policies"), (["--sections", "bogus"], "--sections"),
    (["--nranks", "2,x"], "--nranks"), (["--policy-shapes", "8"], "--policy-shapes"),
    (["--policy-barriers", "mp"], "--policy-barriers"), (["--iters", "0"], "--iters"),
    (["--warmups", "-1"], "--warmups"),
])
def test_bad_arguments_exit_2(argv, words):
    proc = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


def _module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_barrier_latency", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_option_has_help_and_default():
    from test_launch_cli import assert_every_option_documented

    assert_every_option_documented(_module().build_parser())


def test_each_round_runs_its_warmup_repeats_first_and_drops_them():
    mod = _module()
    bench = mod.Bench(mod.parse(["--warmups", "2", "--repeats", "5", "--rounds", "2", "--no-mpi"]))
    asked = []

    def case(reps):  # a case's repeats in order: the warm-ups first, slow as a fresh start is
        asked.append(reps)
        return [1.0] * 2 + [1e-6 * (10 + i) for i in range(reps - 2)]

    bench.group([("barrier", "user", 8, 1, "adaptive", 200, case)])
    assert asked == [3 + 2, 2 + 2]  # 5 repeats in two rounds, each round with its 2 warm-ups
    assert [round(u, 6) for u in bench.rows[0].us] == [10, 11, 12, 10, 11]
