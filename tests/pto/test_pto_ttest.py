"""Ports of pto-isa's TTEST suite (tests/npu/a2a3/comm/st/testcase/ttest): true / false / the
comparisons / NE / a sub-region, and the polling pattern, which may give up
(``PollingTimeoutMiss``). TTEST is a pure test: a bounded poll loop ends by itself in every
mode, and one that outlasts ``deadlock_grace`` is no deadlock."""

from __future__ import annotations

import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TTEST, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp

pytestmark = pytest.mark.timeout(180)
MODES = ["eager", "hazard", "schedule"]


def k_ttest(ctx, sig, result, phase, value, cmp_value, cmp):
    if phase == 0 and ctx.rank == 0:
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, 1)), value, NotifyOp.Set)
    if phase == 1 and ctx.rank == 1:
        result.append(TTEST(Signal(sig), cmp_value, cmp))


CASES = [  # (signal value, compare value, cmp, expected): TTestTrue, False, Compare<...>, NE
    (42, 42, WaitCmp.EQ, True), (42, 100, WaitCmp.EQ, False), (10, 5, WaitCmp.GE, True),
    (5, 5, WaitCmp.GE, True), (4, 5, WaitCmp.GE, False), (10, 5, WaitCmp.GT, True),
    (5, 5, WaitCmp.GT, False), (3, 5, WaitCmp.LE, True), (5, 5, WaitCmp.LT, False),
    (3, 5, WaitCmp.LT, True), (50, 0, WaitCmp.NE, True),
]


@pytest.mark.parametrize("mode", MODES)
def test_ttest_cases(mode):
    def host(rt):
        sig = rt.signal_region("s", 1)
        out = []
        for value, cmp_value, cmp, _ in CASES:
            rt.reset_signals()
            rt.barrier()
            result: list = []
            for phase in (0, 1):
                rt.launch(k_ttest, blocks=1, args=(sig, result, phase, value, cmp_value, cmp))
                rt.barrier()
            out.append(result[0] if result else None)
        return out

    got = shmcomm.run(host, nranks=2, mode=mode, seed=1, timeout=150)
    assert got[1] == [want for *_, want in CASES]


def k_subregion(ctx, grid, result, phase):
    full_cols, start_row, start_col = 16, 2, 4
    if phase == 0 and ctx.rank == 0:
        for r in range(4):
            for c in range(8):
                off = (start_row + r) * full_cols + start_col + c
                TNOTIFY(Signal(GetRemotePtr(ctx, grid + off, 1)), 1, NotifyOp.Set)
    if phase == 1 and ctx.rank == 1:
        sub = Signal2D(grid + start_row * full_cols + start_col, 4, 8, full_cols)
        result.append(TTEST(sub, 1, WaitCmp.EQ))
        result.append(TTEST(Signal2D(grid, 8, 16), 1, WaitCmp.EQ))  # the whole grid: not all set


@pytest.mark.parametrize("mode", MODES)
def test_ttest_sub_region(mode):
    def host(rt):
        grid = rt.signal_region("grid", 8 * 16)
        result: list = []
        for phase in (0, 1):
            rt.launch(k_subregion, blocks=1, args=(grid, result, phase))
            rt.barrier()
        return result

    assert shmcomm.run(host, nranks=2, mode=mode, seed=1, timeout=150)[1] == [True, False]


# --- TTestPollingTimeout / TTestPollingTimeoutMiss -------------------------------------------

def k_polling(ctx, sig, out, max_polls, send):
    if ctx.rank == 0 and send:
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, 1)), 999, NotifyOp.Set)
    if ctx.rank == 1:
        count, found = 0, False
        s = Signal(sig)
        while count < max_polls:
            if TTEST(s, 999, WaitCmp.EQ):
                found = True
                break
            count += 1
        out[:] = [count, found]


def _polling(mode, max_polls, send, **kw):
    def host(rt):
        sig = rt.signal_region("poll", 1)
        out: list = []
        rt.barrier()
        rt.launch(k_polling, blocks=1, args=(sig, out, max_polls, send))
        return out

    return shmcomm.run(host, nranks=2, mode=mode, seed=1, timeout=150, **kw)[1]


@pytest.mark.parametrize("mode", MODES)
def test_polling_finds_the_signal(mode):
    count, found = _polling(mode, 200_000, True)
    assert found and 0 <= count < 200_000


@pytest.mark.parametrize("mode", MODES)
def test_polling_timeout_miss_gives_up_by_itself(mode):
    """pto-isa's PollingTimeoutMiss: 50,000 failed tests, then the loop gives up. In schedule
    mode that is more stale polls in a row than the livelock rule's step bound (20,000), but
    they last far less than ``livelock_seconds``: a bounded poll, not a livelock."""
    assert _polling(mode, 50_000, False) == [50_000, False]


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_a_bounded_poll_outlasting_deadlock_grace_is_no_deadlock(mode):
    """200,000 failed tests take far longer than a 0.05 s grace: the loop still ends by itself
    (before, the deadlock watch took the poller for a waiter and stopped the run)."""
    assert _polling(mode, 200_000, False, deadlock_grace=0.05) == [200_000, False]
