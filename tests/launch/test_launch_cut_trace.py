"""A run cut short still writes the trace it was asked for: a hang's trace exists, is valid, is
marked incomplete, and shows what each agent was waiting for when the run was cut; under pytest
``--shmcomm-trace`` keeps it for the failing item."""

from __future__ import annotations

import json

import pytest
from test_testing_plugin import _plugin_args

import shmcomm
from shmcomm.comm import TTEST, Signal, WaitCmp
from shmcomm.errors import RunError
from shmcomm.exec.trace import flows, load

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(90)


def _spin(ctx):
    while not TTEST(Signal(ctx.signal_base + 0), 1, WaitCmp.GE):  # no one ever notifies
        pass


def host_spin(rt):
    rt.launch(_spin)


def test_a_timed_out_run_writes_its_trace_marked_incomplete(tmp_path):
    path = tmp_path / "spin.json"
    with pytest.raises(RunError) as err:
        shmcomm.run(host_spin, nranks=2, blocks=1, timeout=2, trace=str(path))
    assert err.value.failures[0].kind == "timeout"
    doc = json.loads(path.read_text())  # valid JSON
    meta = doc["otherData"]
    assert meta["result"] == "timeout" and meta["incomplete"].startswith("the run timed out"), meta
    polls = [e for e in load(str(path)) if e.get("name") == "TTEST poll"]
    assert sorted(e["pid"] for e in polls) == [0, 1], polls
    assert all(e["args"]["cut"] and e["dur"] >= 1e6 for e in polls), polls  # over 1 s, cut
    assert sum(e.get("name") == "run cut" for e in doc["traceEvents"]) == 2
    assert not flows(doc["traceEvents"])  # nothing released a cut wait
    assert not list(tmp_path.glob(".*.tmp"))  # nothing left aside


HANG_TEST = '''
import shmcomm.testing
from shmcomm.comm import TTEST, Signal, WaitCmp


def _spin(ctx):
    while not TTEST(Signal(ctx.signal_base + 0), 1, WaitCmp.GE):
        pass


def host(rt):
    rt.launch(_spin)


@shmcomm.testing.sweep(host, nranks=[2], blocks=[1], modes=["eager"], seeds=1)
def test_spin(shmcomm_sweep):
    shmcomm_sweep()
'''


def test_pytest_keeps_the_trace_of_a_timed_out_item(pytester):
    pytester.makepyfile(test_hang=HANG_TEST)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", *_plugin_args(),
                                        "--shmcomm-trace", "--shmcomm-timeout", "2")
    res.assert_outcomes(failed=1)
    assert any(x.startswith("FAILED timeout ") for x in res.outlines), res.outlines
    kept = list(pytester.path.rglob("shmcomm-traces/*.json"))
    assert len(kept) == 1, res.stdout.str()
    assert "incomplete" in json.loads(kept[0].read_text())["otherData"]
    picture = kept[0].with_suffix(".svg")  # the timeline, beside the trace
    assert picture.is_file() and "run cut" in picture.read_text()
    assert f"timeline of the first failing run: {picture}" in res.stdout.str()
    assert "trace kept: " in res.stdout.str()
