"""Hazard mode's Chrome trace: valid JSON, a track per rank and block and one per pipe with queued
work, the instructions and the checker reports on them; a file left by an earlier run is
replaced, not appended to."""

from __future__ import annotations

import pytest
from test_hazard_models import host_flags, host_put_notify

import shmcomm
from shmcomm.exec.trace import HOST_TID, load, pipe_tid

pytestmark = pytest.mark.timeout(120)


def test_trace_has_a_track_per_rank_and_block(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text("left by an earlier run")
    shmcomm.run(host_put_notify, nranks=2, blocks=1, mode="hazard", seed=3, trace=str(path),
                args=(True, True, 2))
    events = load(str(path))
    names = {e["name"] for e in events}
    assert {"TPUT", "TWAIT", "TNOTIFY", "TLOAD on PIPE_MTE2", "TSTORE on PIPE_MTE3"} <= names
    tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "i")}
    pipes = {(r, pipe_tid(0, p)) for r in (0, 1) for p in ("PIPE_MTE2", "PIPE_MTE3")}
    base = {(0, 0), (1, 0), (0, HOST_TID), (1, HOST_TID)}
    assert base <= tracks <= base | pipes and {(0, pipe_tid(0, "PIPE_MTE3"))} <= tracks
    thread_names = [(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"]
    assert {(0, "block 0"), (0, "host"), (1, "block 0"), (1, "host"), (0, "block 0 PIPE_MTE3")} \
        <= set(thread_names)
    assert len(thread_names) == len(tracks)
    queued = [e for e in events if e["name"] in ("TLOAD on PIPE_MTE2", "TSTORE on PIPE_MTE3")]
    assert all(e["tid"] == pipe_tid(0, e["name"].split(" on ")[1]) for e in queued)
    waits = [e for e in events if e["name"] == "TWAIT"]
    assert all(e["dur"] >= 0 and e["args"]["cmp"] == ">=" for e in waits)


def test_trace_records_checker_reports(tmp_path):
    path = tmp_path / "trace.json"
    with pytest.raises(shmcomm.RunError):
        shmcomm.run(host_flags, nranks=1, blocks=2, mode="hazard", seed=3, trace=str(path),
                    args=("twice",))
    events = load(str(path))
    reports = [e for e in events if e["name"] == "hazard [event-twice]"]
    assert reports and "seed 3" in reports[0]["args"]["message"]
