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
from shmcomm.exec.trace import HOST_TID, pipe_tid
from shmcomm.launch.tracecli import summarize
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(120)

# the Chrome trace event format's phases (Trace Event Format, "Event Descriptions")
PHASES = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M",
          "V", "v", "R", "c"}
META_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name",
              "thread_sort_index"}
EPS = 1e-3  # microseconds (or steps): float rounding of ts + dur


def check_trace_event_format(doc) -> list[dict]:
    """The rules of Chrome's trace event format (JSON object form) that Perfetto relies on:
    required keys and types per phase, known phases, metadata names, ``B`` / ``E`` pairs and
    ``X`` slices properly nested on each track (no partial overlap), flow ids paired ``s`` ->
    ``f`` with one category, every track named. Returns the events."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list), "object form"
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    events = doc["traceEvents"]
    slices: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    open_b: dict[tuple[int, int], list[dict]] = {}
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["name"], str) and isinstance(e["pid"], int), e
        assert isinstance(e.get("args", {}), dict), e
        if e["ph"] == "M":
            assert e["name"] in META_NAMES and isinstance(e["args"], dict), e
            if e["name"].startswith("thread"):
                assert isinstance(e["tid"], int), e
            continue
        assert isinstance(e["ts"], (int, float)) and isinstance(e["tid"], int), e
        track = (e["pid"], e["tid"])
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            slices.setdefault(track, []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif e["ph"] in ("i", "I"):
            assert e.get("s", "t") in ("t", "p", "g"), e
        elif e["ph"] == "B":
            open_b.setdefault(track, []).append(e)
        elif e["ph"] == "E":
            assert open_b.get(track), f"E without B on {track}: {e}"
            b = open_b[track].pop()
            assert e["ts"] >= b["ts"] and e.get("name", b["name"]) in (b["name"], ""), (b, e)
            slices.setdefault(track, []).append((b["ts"], e["ts"], b["name"]))
        elif e["ph"] in ("s", "t", "f"):
            assert "id" in e and isinstance(e.get("cat"), str), e
    assert not any(open_b.values()), f"B without E: {open_b}"
    for track, lst in slices.items():  # a stack of open slices: each ends inside its parent
        stack: list[tuple[float, float, str]] = []
        for start, end, name in sorted(lst, key=lambda x: (x[0], -x[1])):
            while stack and start >= stack[-1][1] - EPS:
                stack.pop()
            assert not stack or end <= stack[-1][1] + EPS, \
                f"track {track}: {name} [{start}, {end}] partly overlaps {stack[-1]}"
            stack.append((start, end, name))
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len({e["id"] for e in starts}) == len(starts), "flow id reused"
    assert {(e["id"], e["cat"]) for e in starts} == {(e["id"], e["cat"]) for e in ends}, "unpaired flow"
    by_id = {e["id"]: e for e in starts}
    assert all(f["ts"] >= by_id[f["id"]]["ts"] for f in ends), "a flow ends before it starts"
    tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] not in ("M",)}
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    assert tracks <= named, f"unnamed tracks: {tracks - named}"
    assert {p for p, _ in tracks} <= {e["pid"] for e in events if e["name"] == "process_name"}
    return events


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
    """The trace event format (above), and shmcomm's promises: names and metadata once, every
    flow's start on a TNOTIFY and its end inside a TWAIT."""
    events = check_trace_event_format(doc)
    assert isinstance(doc.get("otherData"), dict) and doc["otherData"]["tool"] == "shmcomm"
    meta = [(e["name"], e["pid"], e.get("tid")) for e in events if e["ph"] == "M"]
    assert len(meta) == len(set(meta)), "metadata repeated"
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


def failing_ring_host(rt, fenced=True):
    """``ring_host`` whose own check fails (the advisory notify-unfenced is its likely cause)."""
    ring_host(rt, fenced)
    raise AssertionError("the host's data check failed")


def test_failing_hazard_run_trace_is_chrome_json_with_flows(tmp_path):
    path = tmp_path / "hazard.json"
    with pytest.raises(shmcomm.RunError, match="likely cause: hazard \\[notify-unfenced\\]"):
        shmcomm.run(failing_ring_host, nranks=2, blocks=1, mode="hazard", seed=1,
                    trace=str(path), args=(False,), hazards="pipes,visibility,checkers",
                    detect_races=False)  # the checker's finding in the trace (no reader: no race)
    doc = json.loads(path.read_text())
    events = check_chrome_trace(doc)
    assert doc["otherData"]["result"] == "exception" and "AssertionError" in doc["otherData"]["failure"]
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


@pytest.mark.parametrize("mode, kw", [
    ("eager", {}), ("hazard", {"seed": 2}), ("schedule", {"seed": 2}),
    ("eager", {"detect_races": True}), ("schedule", {"seed": 3, "strategy": "pct:3"}),
])
def test_every_mode_writes_a_valid_chrome_trace_that_the_trace_command_reads(tmp_path, mode, kw):
    path = tmp_path / f"{mode}.json"
    assert shmcomm.run(ring_host, nranks=2, blocks=2, mode=mode, trace=str(path), **kw) == [1.0, 0.0]
    doc = json.loads(path.read_text())
    events = check_chrome_trace(doc)
    assert doc["otherData"]["mode"] == mode
    names = {e["name"] for e in events}
    assert {"TNOTIFY", "TWAIT", "TPUT", "kernel ring_kernel"} <= names
    assert len([e for e in events if e["ph"] == "s"]) == 2  # each wait released by its neighbour
    if mode != "eager":  # queued pipe work lives on its pipe's track, not the block's
        pipe = [e for e in events if e["name"].endswith(" on PIPE_MTE3")]
        assert pipe and all(e["tid"] == pipe_tid(0, "PIPE_MTE3") for e in pipe if e["pid"] == 0)
        assert any(e["args"]["name"] == "block 0 PIPE_MTE3" for e in events if e["name"] == "thread_name")
    text = summarize(events, doc["otherData"])
    assert "released by rank 1 block 0" in text and "released by rank 0 block 0" in text
    if mode == "schedule":
        assert doc["otherData"]["clock"] == "steps" and " steps  rank " in text
        steps = [e for e in events if e["ph"] == "i" and "step" in e["args"]]
        assert [e["ts"] for e in steps] == sorted(e["ts"] for e in steps) and steps[0]["ts"] <= 1
        again = tmp_path / "again.json"
        shmcomm.run(ring_host, nranks=2, blocks=2, mode=mode, trace=str(again), **kw)
        assert again.read_bytes() == path.read_bytes()  # steps, not wall time: the same bytes


def test_the_validator_catches_what_perfetto_cannot_draw():
    def doc(*events):
        meta = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}},
                {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "block 0"}}]
        return {"traceEvents": meta + list(events)}

    def x(ts, dur, name="w"):
        return {"ph": "X", "name": name, "pid": 0, "tid": 0, "ts": ts, "dur": dur}

    check_trace_event_format(doc(x(0, 10), x(2, 3), x(5, 5), x(10, 1)))  # nested, then touching
    for bad in (doc(x(0, 10), x(5, 10)),  # partial overlap on one track
                doc({"ph": "B", "name": "a", "pid": 0, "tid": 0, "ts": 0}),  # B without E
                doc({"ph": "s", "id": 1, "cat": "c", "name": "f", "pid": 0, "tid": 0, "ts": 0}),
                doc({"ph": "Q", "name": "a", "pid": 0, "tid": 0, "ts": 0}),
                doc({"ph": "i", "name": "a", "pid": 0, "tid": 7, "ts": 0})):  # unnamed track
        with pytest.raises(AssertionError):
            check_trace_event_format(bad)
