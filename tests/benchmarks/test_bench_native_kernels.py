"""Smoke test of benchmarks/native_kernels.py: it runs and writes its versioned JSON with a
positive figure in every row. No timing is asserted (the box is shared)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil

import pytest
from _helpers import ROOT

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]
SCRIPT = os.path.join(str(ROOT), "benchmarks", "native_kernels.py")


def test_a_tiny_run_writes_every_row(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_native_kernels", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "nk.json"
    assert mod.main(["--shapes", "2x1", "--iters", "20", "--repeats", "1", "--calls", "200",
                     "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "shmcomm.bench.native_kernels/1"
    kinds = [r["kind"] for r in data["rows"]]
    assert kinds.count("barrier_us") == 1 and kinds.count("instruction_ns") == 6
    for row in data["rows"]:
        for key in ("spin", "native", "python", "mp"):
            if key in row:
                assert math.isfinite(row[key]) and row[key] > 0, row
    assert "C spin floor" in capsys.readouterr().out
