"""Schedule mode never hangs silently: SYNCALL and the other blocking instructions are
scheduling points (a waiter is a blocked agent), a poll loop that nothing can end is reported
as a livelock at once, an agent stuck outside the API is named with its stack, and the shrinker
gives up on a hanging schedule within its budget."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import test_pto_syncall as pto_syncall

import shmcomm
from shmcomm.comm import (
    SYNCALL,
    TNOTIFY,
    TTEST,
    TWAIT,
    GlobalTensor,
    NotifyOp,
    Signal,
    SyncAllMode,
    WaitCmp,
    gm_load,
    gm_store,
)

pytestmark = pytest.mark.timeout(180)

# the run's own bounds are generous: every hang here must end by the scheduler's own reports
# livelock_seconds: the livelocks below are reported after 1 s of unanswered polls, not 10
SETTINGS = dict(mode="schedule", timeout=120, wait_timeout=100, livelock_seconds=1.0)


# --- SYNCALL is a blocked agent of the schedule ----------------------------------------------

def k_rounds(ctx, out, ws, soft):
    """Three rounds: every block stores its round, SYNCALLs, checks every block's store."""
    for r in range(3):
        gm_store(out + ctx.block_idx, r + 1)
        SYNCALL(GlobalTensor(ws, (1,)), 0) if soft else SYNCALL()
        seen = [gm_load(out + i) for i in range(ctx.block_num)]
        assert seen == [r + 1] * ctx.block_num, (r, ctx.block_idx, seen)
        SYNCALL(GlobalTensor(ws, (1,)), 0, SyncAllMode.Soft) if soft else SYNCALL()


def _rounds_host(rt, blocks, soft):
    out = rt.alloc((16,), np.int32)
    ws = rt.alloc((16,), np.int32)
    rt.launch(k_rounds, blocks=blocks, args=(out.ptr, ws.ptr, soft))
    return out[:blocks].tolist()


@pytest.mark.parametrize("strategy", ["random", "pct"])
@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft"])
@pytest.mark.parametrize("nranks,blocks", [(1, 2), (2, 2)])
def test_syncall_runs_in_schedule_mode(nranks, blocks, soft, strategy):
    for seed in (1, 2):
        got = shmcomm.run(_rounds_host, nranks=nranks, args=(blocks, soft), seed=seed,
                          strategy=strategy, **SETTINGS)
        assert got == [[3] * blocks] * nranks


@pytest.mark.parametrize("form", [SyncAllMode.Hard, SyncAllMode.Soft])
def test_the_pto_syncall_suite_passes_in_schedule_mode(form):
    got = pto_syncall._run("schedule", 4, 4, form, seed=3, strategy="pct", wait_timeout=100)
    assert got == [1] * 4


def test_a_syncall_a_block_skips_is_a_deadlock_at_once():
    def k(ctx):
        if ctx.block_idx:
            SYNCALL()

    with pytest.raises(shmcomm.DeadlockError) as info:
        shmcomm.run(lambda rt: rt.launch(k, blocks=2), nranks=1, seed=0, **SETTINGS)
    text = str(info.value)
    assert "no agent can take a step" in text and "SYNCALL" in text


@pytest.mark.parametrize("mode", ["eager", "schedule"])
def test_syncall_from_host_code_is_a_clear_error(mode):
    def host(rt):
        SYNCALL()

    with pytest.raises(shmcomm.RunError, match="SYNCALL: a barrier of one launch's blocks, "
                                               "called from host code"):
        shmcomm.run(host, nranks=1, **{**SETTINGS, "mode": mode})


# --- livelocks ----------------------------------------------------------------------------------

def k_spin(ctx, base):
    while not TTEST(Signal(base), 1, WaitCmp.EQ):  # nobody ever notifies it
        pass


def k_spin_gm(ctx, flag):
    while gm_load(flag) == 0:  # nobody ever stores it
        pass


def _spin_host(rt):
    rt.launch(k_spin, blocks=2, args=(rt.signal_region("spin", 4),))


def _spin_gm_host(rt):
    flag = rt.alloc((16,), np.int32)
    rt.launch(k_spin_gm, blocks=2, args=(flag.ptr,))


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_a_ttest_loop_nothing_ends_is_reported_as_a_livelock(strategy):
    with pytest.raises(shmcomm.DeadlockError) as info:
        shmcomm.run(_spin_host, nranks=2, seed=1, strategy=strategy, **SETTINGS)
    text = str(info.value)
    assert "livelock" in text and "no rank reported the cause" not in text
    for r in range(2):
        for b in range(2):
            assert f"rank {r} block {b}   polls (TTEST) signal rank {r}" in text


def test_a_livelock_replays_to_the_same_report(tmp_path):
    path = tmp_path / "live.json"
    reports = []
    for kw in (dict(record=str(path)), dict(replay=str(path))):
        with pytest.raises(shmcomm.DeadlockError) as info:
            shmcomm.run(_spin_host, nranks=2, seed=3, strategy="pct", **SETTINGS, **kw)
        reports.append(info.value.failures[0].message)
    assert "livelock" in reports[0] and reports[0] == reports[1]


def test_a_never_ending_poll_is_reported_within_seconds_by_default():
    """The default ``livelock_seconds`` (10): the step bound is passed within a second, the
    seconds then end the run; the wall-clock bound is no escape hatch for a real livelock."""
    t0 = time.monotonic()
    with pytest.raises(shmcomm.DeadlockError, match="livelock"):
        shmcomm.run(_spin_host, nranks=2, seed=2, mode="schedule", timeout=120, wait_timeout=100)
    took = time.monotonic() - t0
    assert 10.0 <= took < 60.0, took


def test_a_bounded_poll_past_the_step_bound_passes_and_a_longer_one_is_a_livelock():
    """One program, two bounds: 40,000 stale polls (twice the step bound) end by themselves
    within ``livelock_seconds``; the same loop, unbounded, is reported once its stale polls
    outlast them."""
    def host(rt, polls):
        out = rt.alloc((1,), np.int32)
        rt.launch(k_bounded_poll, blocks=1, args=(rt.signal_region("p", 1), out.ptr, polls))
        return int(out[0])

    assert shmcomm.run(host, nranks=1, seed=1, args=(40_000,),
                       **{**SETTINGS, "livelock_seconds": 5.0}) == [40_000]
    with pytest.raises(shmcomm.DeadlockError, match="livelock"):
        shmcomm.run(host, nranks=1, seed=1, args=(10**9,), **{**SETTINGS, "livelock_seconds": 0.5})


def k_bounded_poll(ctx, sig, out, polls):
    n = 0
    while n < polls and not TTEST(Signal(sig), 1, WaitCmp.EQ):
        n += 1
    gm_store(out, n)


def test_a_gm_load_loop_nothing_ends_is_reported_as_a_livelock():
    with pytest.raises(shmcomm.DeadlockError, match="livelock") as info:
        shmcomm.run(_spin_gm_host, nranks=1, seed=1, **SETTINGS)
    assert "polls (gm_load) gm rank 0" in str(info.value)


def k_poll_then_give_up(ctx, base, out):
    """Block 0 polls a signal that block 1 sets only after block 0 gave up and told it so
    (through another signal): a correct bounded poll, hundreds of stale polls long."""
    me = ctx.block_idx
    if me == 0:
        got = False
        for _ in range(300):
            if TTEST(Signal(base), 1, WaitCmp.EQ):
                got = True
                break
        gm_store(out, 1 if got else 2)
        TNOTIFY(Signal(base + 16), 1, NotifyOp.Set)  # each signal on its own 64-byte line
    else:
        TWAIT(Signal(base + 16), 1, WaitCmp.EQ)
        TNOTIFY(Signal(base), 1, NotifyOp.Set)


def k_poll_until_served(ctx, base, out, work):
    """Block 1 polls until block 0, after ``work`` stores of its own, notifies it."""
    if ctx.block_idx == 0:
        for i in range(work):
            gm_store(out + 1 + i % 8, i)
        TNOTIFY(Signal(base), 1, NotifyOp.Set)
    else:
        n = 0
        while not TTEST(Signal(base), 1, WaitCmp.EQ):
            n += 1
        gm_store(out, 7)


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_correct_poll_loops_pass(strategy):
    def host(rt):
        base = rt.signal_region("poll", 48)
        out = rt.alloc((16,), np.int32)
        rt.launch(k_poll_then_give_up, blocks=2, args=(base, out.ptr))
        first = int(out[0])
        rt.launch(k_poll_until_served, blocks=2, args=(base + 32, out.ptr, 3000))
        return first, int(out[0])

    for seed in (1, 2):
        assert shmcomm.run(host, nranks=2, seed=seed, strategy=strategy, **SETTINGS) == \
            [(2, 7)] * 2


# --- an agent stuck outside the API -------------------------------------------------------------

def k_sleeps(ctx, base):
    TNOTIFY(Signal(base), 1, NotifyOp.AtomicAdd)
    if ctx.rank == 1 and ctx.block_idx == 1:
        time.sleep(600)


def _sleep_host(rt):
    rt.launch(k_sleeps, blocks=2, args=(rt.signal_region("sleep", 4),))


def k_spins_on_memory(ctx, flag):
    if ctx.block_idx == 1:
        while flag[0] == 0:  # a numpy read, no instruction: no scheduling point, ever
            pass


def _spin_memory_host(rt):
    flag = rt.alloc((16,), np.int32)
    rt.launch(k_spins_on_memory, blocks=2, args=(flag,))


def _lock_host(rt):
    rt.barrier()
    if rt.rank == 0:
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()  # never: it holds the turn, every other agent waits for it
    rt.barrier()


def test_a_block_sleeping_with_the_turn_is_named_with_its_stack():
    with pytest.raises(shmcomm.RunTimeout) as info:
        shmcomm.run(_sleep_host, nranks=2, seed=1, turn_timeout=1.0, **SETTINGS)
    err = info.value
    first = err.failures[0]
    assert (first.rank, first.block) == (1, 1)
    assert "rank 1 block 1 has held the turn" in first.message
    assert "time.sleep(600)" in first.message and "k_sleeps" in first.message
    assert not any(f.kind == "crash" for f in err.failures)


def test_a_block_spinning_outside_the_api_is_named():
    with pytest.raises(shmcomm.RunTimeout) as info:
        shmcomm.run(_spin_memory_host, nranks=1, seed=1, turn_timeout=0.5, **SETTINGS)
    first = info.value.failures[0]
    assert (first.rank, first.block) == (0, 1)
    assert "a loop or a computation" in first.message and "k_spins_on_memory" in first.message


def test_a_host_blocked_on_a_lock_with_the_turn_is_named():
    with pytest.raises(shmcomm.RunTimeout) as info:
        shmcomm.run(_lock_host, nranks=2, seed=1, turn_timeout=1.0, **SETTINGS)
    first = info.value.failures[0]
    assert (first.rank, first.block) == (0, None)
    assert "rank 0 host has held the turn" in first.message
    assert "lock.acquire()" in first.message


# --- the shrinker's budget ----------------------------------------------------------------------

def test_the_shrinker_gives_up_on_a_hanging_schedule_within_its_budget():
    from shmcomm.stress.harness import classify
    from shmcomm.stress.shrink import shrink, signature

    def run(**kw):
        return shmcomm.run(_sleep_host, nranks=2, seed=1, turn_timeout=1.0, **SETTINGS, **kw)

    t0 = time.monotonic()
    with pytest.raises(shmcomm.RunTimeout) as info:
        run()
    took = time.monotonic() - t0  # at least the 1 s turn_timeout and its 1 s exit grace
    runs: list[dict] = []

    def call(**kw):
        runs.append(kw)
        return run(**kw)

    notes: list[str] = []
    got = shrink(call, info.value.schedule, signature(*classify(info.value)), classify,
                 tries=10, budget_s=3.0, first_s=took, notes=notes)
    # a replay lasts over 2 s: after one (or none, if the original took over 3 s) the next
    # would end past the budget
    assert len(runs) <= 1 and (got is None or got.preemptions < info.value.schedule.preemptions)
    assert len(notes) == 1 and notes[0].startswith("shrink gave up after") and \
        "of its 3 s budget" in notes[0]


def sleepy(rt, size):
    _sleep_host(rt)


@pytest.mark.filterwarnings("ignore:SHMCOMM_TURN_TIMEOUT=1 has no effect")  # the pool's Config
def test_the_stress_report_says_the_shrink_gave_up_and_prints_the_original_replay(
        tmp_path, monkeypatch):
    from shmcomm.exec.schedule import load
    from shmcomm.stress.harness import Settings, sweep
    from shmcomm.stress.report import format_report

    monkeypatch.setenv("SHMCOMM_TURN_TIMEOUT", "1")
    settings = Settings(wait_timeout=100, run_timeout=120, trace_dir="",
                        schedule_dir=str(tmp_path), shrink_seconds=3.0)
    rep = sweep(sleepy, [(2, 2, 1, "schedule")], seed=1, runs=1, settings=settings,
                program="sleepy")
    out = rep.outcomes[0]
    assert out.kind == "deadlock" and "has held the turn" in out.message
    assert out.shrink_note.startswith("shrink gave up")  # after at most one replay
    text = format_report(rep, settings)
    assert out.shrink_note in text
    assert f"--replay {out.schedule}" in text and load(out.schedule).choices
