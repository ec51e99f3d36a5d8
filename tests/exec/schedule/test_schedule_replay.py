"""Schedule mode replays exactly: the same seed gives the same interleaving, outcome and trace
bytes; a recorded schedule file replays the run; every catalogue bug is caught."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import shmcomm
from shmcomm.errors import ArgumentError, RunError
from shmcomm.exec.schedule import load
from shmcomm.stress import catalogue

pytestmark = pytest.mark.timeout(300)

SETTINGS = dict(mode="schedule", timeout=60, wait_timeout=30)


def _fail(entry, nranks, blocks, size, tmp_path, name, **kw):
    """Run a catalogue entry in schedule mode; return (failure kind, first message line, trace)."""
    trace = tmp_path / f"{name}.json"
    kw.setdefault("detect_races", False)  # the schedule's own failure, replayed
    with pytest.raises(RunError) as info:
        shmcomm.run(entry.host, nranks=nranks, blocks=blocks, args=(size,), trace=str(trace),
                    **SETTINGS, **kw)
    first = info.value.failures[0]
    return first.kind, first.message.splitlines()[0], trace.read_bytes(), info.value


def test_failing_program_replays_ten_times_byte_for_byte(tmp_path):
    entry = catalogue.get("set_flag_reuse")
    runs = [_fail(entry, 2, 1, 64, tmp_path, f"r{i}", seed=5, strategy="pct:2")[:3]
            for i in range(10)]
    assert runs[0][0] == "exception" and "AssertionError" in runs[0][1]
    assert all(r == runs[0] for r in runs), "a replay differed"
    assert len(runs[0][2]) > 1000


def test_another_seed_gives_another_schedule(tmp_path):
    entry = catalogue.get("ring_put")
    traces = set()
    for seed in (1, 2):
        path = tmp_path / f"t{seed}.json"
        shmcomm.run(entry.host, nranks=2, blocks=2, args=(64,), seed=seed, trace=str(path),
                    **SETTINGS)
        traces.add(path.read_bytes())
    assert len(traces) == 2


def test_recorded_schedule_round_trips_through_replay(tmp_path):
    entry = catalogue.get("missing_intra_barrier")
    sched = tmp_path / "s.json"
    # seed 5: a schedule that exposes the bug
    kind, msg, trace, err = _fail(entry, 2, 4, 64, tmp_path, "orig", seed=5, record=str(sched))
    assert err.schedule is not None and "replay:" in str(err)
    doc = json.loads(sched.read_text())
    assert doc["format"] == "shmcomm-schedule" and doc["steps"] == len(load(str(sched)).choices)
    # another seed and strategy: the file alone decides
    kind2, msg2, trace2, _ = _fail(entry, 2, 4, 64, tmp_path, "replay", seed=99,
                                   strategy="pct", replay=str(sched))
    assert (kind2, msg2, trace2) == (kind, msg, trace)


def test_deadlock_is_reported_at_once_with_the_wait_for_table(tmp_path):
    entry = catalogue.get("arrival_count_mismatch")
    kind, msg, _, err = _fail(entry, 2, 1, 1, tmp_path, "d", seed=0, deadlock_grace=30.0,
                               hazards="pipes,visibility")
    assert kind == "deadlock" and isinstance(err, shmcomm.DeadlockError)
    text = str(err)
    assert "no agent can take a step" in text and "signal rank" in text and ">=" in text


@pytest.mark.parametrize("strategy", ["random", "pct", "pct:1", "pct:4:100"])
def test_correct_program_gives_the_right_result(strategy):
    res = shmcomm.run(catalogue.get("all_reduce").host, nranks=4, blocks=2, args=(100,), seed=5,
                      strategy=strategy, **SETTINGS)
    assert res == [None] * 4


def test_host_code_returns_values_in_schedule_mode():
    import numpy as np

    def host(rt):
        x = rt.alloc((4,), np.float32)
        x[:] = rt.rank
        rt.barrier()
        return float(x.sum())

    assert shmcomm.run(host, nranks=3, seed=1, **SETTINGS) == [0.0, 4.0, 8.0]


@pytest.mark.parametrize("entry", catalogue.BUGS, ids=lambda e: e.name)
def test_every_catalogue_bug_is_caught_in_schedule_mode(entry):
    # with the race detector on: advisory checkers (stale-at-launch) catch nothing by themselves
    for seed in range(8):
        try:
            shmcomm.run(entry.host, nranks=entry.nranks[0], blocks=entry.blocks[0],
                        args=(entry.sizes[0],), seed=seed, detect_races=True, **SETTINGS)
        except RunError as exc:
            assert exc.failures[0].kind in ("exception", "deadlock", "race"), str(exc)
            return
    pytest.fail(f"{entry.name} not caught in schedule mode in 8 seeds")


def test_unfenced_pipelined_all_gather_gives_wrong_data_with_checkers_off(tmp_path):
    entry = catalogue.get("ag_pipelined_unfenced")
    for seed in range(10):
        try:
            shmcomm.run(entry.host, nranks=4, blocks=2, args=(256,), seed=seed,
                        hazards="pipes,visibility,lines", detect_races=False, **SETTINGS)
        except RunError as exc:
            assert "AssertionError" in exc.failures[0].message, str(exc)
            return
    pytest.fail("no wrong data in 10 schedules")


def test_the_fenced_pipelined_all_gather_passes():
    entry = catalogue.get("ag_pipelined")
    for seed in range(4):
        shmcomm.run(entry.host, nranks=4, blocks=2, args=(256,), seed=seed, **SETTINGS)


@pytest.mark.parametrize("kw, what", [
    (dict(strategy="pct:0"), "depth D"),
    (dict(strategy="pct:2:x"), "depth D"),
    (dict(strategy="dfs"), "strategy"),
    (dict(strategy="replay"), "schedule file"),
    (dict(strategy="exhaustive:9"), "preemption bound"),
    (dict(strategy="exhaustive"), "many schedules"),
    (dict(replay="/nonexistent/s.json"), "cannot read"),
    (dict(mode="eager", replay="x.json"), "mode 'schedule'"),
    (dict(schedule_delay=0), "schedule_delay"),
])
def test_bad_schedule_settings_raise_a_clear_error(kw, what):
    settings = dict(SETTINGS, **kw)
    with pytest.raises(ArgumentError, match=what):
        shmcomm.run(lambda rt: None, nranks=2, **settings)


def test_replay_of_another_shape_is_refused(tmp_path):
    sched = tmp_path / "s.json"
    shmcomm.run(catalogue.get("ring_put").host, nranks=2, blocks=1, args=(64,), seed=0,
                record=str(sched), **SETTINGS)
    with pytest.raises(ArgumentError, match="nranks=2"):
        shmcomm.run(catalogue.get("ring_put").host, nranks=4, blocks=1, args=(64,),
                    replay=str(sched), **SETTINGS)


@pytest.mark.timeout(600)
def test_launch_cli_records_and_replays(tmp_path):
    sched, t1, t2 = tmp_path / "s.json", tmp_path / "t1.json", tmp_path / "t2.json"
    base = [sys.executable, "-m", "shmcomm.launch", "--nranks", "2", "--blocks", "2", "--iters",
            "3"]
    r1 = subprocess.run(base + ["--mode", "schedule", "--strategy", "pct:2", "--seed", "4",
                                "--record", str(sched), "--trace", str(t1)],
                        capture_output=True, text=True, timeout=280)
    assert r1.returncode == 0, r1.stderr
    r2 = subprocess.run(base + ["--replay", str(sched), "--trace", str(t2)],
                        capture_output=True, text=True, timeout=280)
    assert r2.returncode == 0, r2.stderr
    assert t1.read_bytes() == t2.read_bytes()


def host_signals(rt):
    """Host code that notifies its neighbour and waits for its own signal, no kernel."""
    from shmcomm.comm import TNOTIFY, TTEST, TWAIT, NotifyOp, Signal, WaitCmp

    base = rt.signal_region("host-signals", 16)
    TNOTIFY(Signal(base.on_rank((rt.rank + 1) % rt.nranks)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(base), 1, WaitCmp.GE)
    return TTEST(Signal(base), 1, WaitCmp.EQ)


def test_host_signal_instructions_take_turns_too():
    for seed in range(3):
        assert shmcomm.run(host_signals, nranks=3, seed=seed, **SETTINGS) == [True] * 3
