"""Smoke test of benchmarks/hot_path.py: it runs, writes its versioned JSON, every ratio is a
positive number. No timing is asserted (the box is shared: the test must never be flaky)."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest
from _helpers import ROOT

pytestmark = pytest.mark.timeout(120)
SCRIPT = os.path.join(str(ROOT), "benchmarks", "hot_path.py")


def _module():
    spec = importlib.util.spec_from_file_location("bench_hot_path", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_quick_run_writes_schema_rows_and_ratios(tmp_path, capsys):
    mod = _module()
    out = tmp_path / "hp.json"
    assert mod.main(["--quick", "--samples", "2", "--number", "200", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "shmcomm.bench.hot_path/1"
    m = doc["machine"]
    assert m["cpus"] >= 1 and m["python"] and m["platform"] and m["date"] and m["loadavg_1min"] >= 0
    keys = [r["key"] for r in doc["rows"]]
    for k in ("bare", "tnotify_add", "tnotify_set", "twait", "ttest", "signal_seen", "ptr_add",
              "remote_ptr", "seed_remote", "twait_2d"):
        assert k in keys, k
    for r in doc["rows"]:
        assert len(r["samples_us"]) == 2
        assert _positive(r["ratio"]["min"]) and _positive(r["ratio"]["median"]), r["key"]
        assert 0 < r["per_call_us"]["min"] <= r["per_call_us"]["median"] <= r["per_call_us"]["max"]
    bare = next(r for r in doc["rows"] if r["key"] == "bare")
    assert bare["ratio"]["median"] == 1.0
    assert [f["key"] for f in doc["facts"]] == ["tnotify_add", "twait", "seed_remote"]
    assert all(_positive(f["ratio"]) and f["limit"] > 0 for f in doc["facts"])
    text = capsys.readouterr().out
    assert "TNOTIFY " in text and "x a bare ctypes call (limit 3x)" in text


@pytest.mark.parametrize("args, msg", [(["--samples", "0"], "--samples: must be an int >= 1"),
                                       (["--number", "many"], "--number: must be an int >= 1")])
def test_bad_values_exit_2_with_a_clear_message(args, msg, capsys):
    with pytest.raises(SystemExit) as exc:
        _module().parse(args)
    assert exc.value.code == 2 and msg in capsys.readouterr().err
