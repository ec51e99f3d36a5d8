"""Traces in every mode: an eager run's and a failing hazard run's trace both load as Chrome
trace-event JSON (checked structurally) with flow arrows from each notify to the wait it released,
metadata once, launch markers; and the `trace` command summarizes them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.exec.trace import HOST_TID
from shmcomm.launch.tracecli import summarize
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(120)

PHASES = {"X", "i", "M", "s", "f"}


def ring_kernel(ctx, src, dst, n, fenced):
    """A ring exchange; without ``fenced`` its second round forgets the fence before notifying."""
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 256), np.float32)
    for r in range(1 if fenced else 2):
        TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
        if fenced or r == 0:
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ctx.signal_base + 0), r + 1, WaitCmp.GE)


def ring_host(rt, fenced=True):
    n = 500
    src, dst = rt.alloc((n,), np.float32), rt.alloc((n,), np.float32)
    src[:] = rt.rank
    rt.launch(ring_kernel, blocks=2, args=(src.ptr, dst.ptr, n, fenced))
    return float(dst[0])


def check_chrome_trace(doc) -> list[dict]:
    """The structure of Chrome's trace-event format (JSON object form), and shmcomm's promises:
    names and metadata once, every flow's start on a TNOTIFY and its end inside a TWAIT."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert isinstance(doc.get("otherData"), dict) and doc["otherData"]["tool"] == "shmcomm"
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in PHASES and isinstance(e["name"], str) and isinstance(e["pid"], int), e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["tid"], int), e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
        if e["ph"] == "i":
            assert e["s"] in ("t", "p", "g"), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index"), e
    meta = [(e["name"], e["pid"], e.get("tid")) for e in events if e["ph"] == "M"]
    assert len(meta) == len(set(meta)), "metadata repeated"
    tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "i")}
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    assert tracks <= named
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    for fid, s in starts.items():
        assert any(n["name"] == "TNOTIFY" and (n["pid"], n["tid"], n["ts"]) == (s["pid"], s["tid"], s["ts"])
                   for n in events), s
        f = ends[fid]
        assert f["bp"] == "e"
        assert any(w["name"] == "TWAIT" and (w["pid"], w["tid"]) == (f["pid"], f["tid"])
                   and w["ts"] <= f["ts"] <= w["ts"] + w["dur"] for w in events if w["ph"] == "X"), f
    return events


def test_eager_trace_is_chrome_json_with_flows_and_markers(tmp_path):
    path = tmp_path / "eager.json"
    assert shmcomm.run(ring_host, nranks=3, blocks=2, trace=str(path)) == [2.0, 0.0, 1.0]
    events = check_chrome_trace(json.loads(path.read_text()))
    names = {e["name"] for e in events}
    assert {"TNOTIFY", "TWAIT", "TPUT", "set_flag", "wait_flag", "launch ring_kernel",
            "kernel ring_kernel"} <= names
    launches = [e for e in events if e["name"] == "launch ring_kernel"]
    assert {e["pid"] for e in launches} == {0, 1, 2} and all(e["tid"] == HOST_TID for e in launches)
    put = next(e for e in events if e["name"] == "TPUT")
    assert put["args"]["bytes"] == 2000 and put["args"]["dst_rank"] == (put["pid"] + 1) % 3
    wait = next(e for e in events if e["name"] == "TWAIT")
    assert wait["args"]["seen"] == [1] and wait["args"]["released_by"]["rank"] == (wait["pid"] - 1) % 3
    flows = [e for e in events if e["ph"] == "s"]
    assert len(flows) == 3  # one per rank: each wait released by its left neighbour's notify


def test_failing_hazard_run_trace_is_chrome_json_with_flows(tmp_path):
    path = tmp_path / "hazard.json"
    with pytest.raises(shmcomm.RunError, match="notify-unfenced"):
        shmcomm.run(ring_host, nranks=2, blocks=1, mode="hazard", seed=1, trace=str(path),
                    args=(False,), hazards="pipes,visibility,checkers",
                    detect_races=False)  # the checker's report in the trace (no reader: no race)
    doc = json.loads(path.read_text())
    events = check_chrome_trace(doc)
    assert doc["otherData"]["result"] == "exception" and "notify-unfenced" in doc["otherData"]["failure"]
    assert any(e["name"] == "hazard [notify-unfenced]" for e in events)


def test_trace_command_summarizes_who_waited_on_whom(tmp_path):
    path = tmp_path / "t.json"
    shmcomm.run(ring_host, nranks=2, blocks=1, trace=str(path))
    p = subprocess.run([sys.executable, "-m", "shmcomm", "trace", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "who waited on whom" in p.stdout and "longest waits" in p.stdout
    assert "released by rank 1 block 0" in p.stdout and "released by rank 0 block 0" in p.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run([sys.executable, "-m", "shmcomm", "trace", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "cannot read" in p.stderr and "Traceback" not in p.stderr


GOLDEN_SUMMARY = """\
run: host m:h, nranks 2, mode eager, result ok
events: 4 on 2 rank(s): TNOTIFY 2, TWAIT 2
who waited on whom (waiting rank <- notifying rank):
  rank <- rank   waits   total ms  longest ms
     1 <- 0          1      2.000       2.000
     0 <- 1          1      0.500       0.500
longest waits (top 10):
      2.000 ms  rank 1 block 0: TWAIT(signal rank 1 offset 0x40 >= 1) saw [1]; \
released by rank 0 block 0 (notify value 1)
      0.500 ms  rank 0 block 0: TWAIT(signal rank 0 offset 0x40 >= 1) saw [1]; \
released by rank 1 block 0 (notify value 1)"""


def test_trace_summary_format_is_pinned():
    def ev(name, pid, ts, dur, **args):
        return {"ph": "X", "name": name, "pid": pid, "tid": 0, "ts": ts, "dur": dur, "args": args}

    events = [ev("TNOTIFY", 0, 10.0, 0.0, rank=1, offset=64, value=1, op="AtomicAdd"),
              ev("TNOTIFY", 1, 20.0, 0.0, rank=0, offset=64, value=1, op="AtomicAdd"),
              ev("TWAIT", 1, 0.0, 2000.0, rank=1, offset=64, value=1, cmp=">=", seen=[1]),
              ev("TWAIT", 0, 0.0, 500.0, rank=0, offset=64, value=1, cmp=">=", seen=[1])]
    meta = {"tool": "shmcomm", "host": "m:h", "nranks": 2, "mode": "eager", "hazards": None,
            "result": "ok", "failure": None}
    assert summarize(events, meta) == GOLDEN_SUMMARY
