"""Every wait policy: correct hand-offs, and timeouts, aborts and deadlocks still reported."""

from __future__ import annotations

import time

import pytest

import shmcomm
from shmcomm import DeadlockError, RunError
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp

pytestmark = pytest.mark.timeout(120)
POLICIES = ("adaptive", "spin", "yield", "futex")


def _ring(ctx, rounds, out):
    # every block of rank r passes a token to the same block of rank r+1, `rounds` times
    n, me, b = ctx.nranks, ctx.rank, ctx.block_idx
    mine = Signal(ctx.signal_base + 32 + b)
    nxt = Signal(GetRemotePtr(ctx, ctx.signal_base + 32 + b, (me + 1) % n))
    for k in range(1, rounds + 1):
        if me == 0:
            TNOTIFY(nxt, 1, NotifyOp.AtomicAdd)
            TWAIT(mine, k, WaitCmp.GE)
        else:
            TWAIT(mine, k, WaitCmp.EQ)
            TNOTIFY(nxt, 1, NotifyOp.AtomicAdd)
    out.append(mine.value)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("nranks,blocks", [(2, 1), (3, 2)])
def test_every_policy_passes_a_token_ring(policy, nranks, blocks):
    if policy == "spin" and nranks * blocks > 2:
        rounds = 3  # pure spinning, oversubscribed: milliseconds per hand-off, by design
    else:
        rounds = 30

    def host(rt):
        out: list = []
        rt.launch(_ring, blocks=blocks, args=(rounds, out))
        return sorted(out)

    for vals in shmcomm.run(host, nranks=nranks, wait_policy=policy):
        assert vals == [rounds] * blocks


def _sweep_wait(ctx):
    TWAIT(Signal2D(ctx.signal_base + 40, 2, 3), 1, WaitCmp.GE)


@pytest.mark.parametrize("policy", POLICIES)
def test_timeout_names_the_first_unsatisfied_element_under_every_policy(policy):
    def host(rt):
        rt.signals[40:43] = 1
        rt.signals[43] = 1  # element [1, 0] holds, [1, 1] is the first that does not
        rt.launch(_sweep_wait, blocks=1)

    with pytest.raises(RunError) as info:
        shmcomm.run(host, nranks=1, wait_policy=policy, wait_timeout=0.2, deadlock_grace=30)
    msg = str(info.value)
    for word in ("WaitTimeout", "rank 0 block 0", "element [1, 1] of 2x3", ">= 1", "holds 0"):
        assert word in msg, msg


def _fail_or_wait(ctx):
    if ctx.rank == 1:
        time.sleep(0.05)
        raise ValueError("boom in rank 1")
    TWAIT(Signal(ctx.signal_base + 5), 1, WaitCmp.GE)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_failure_stops_waiters_of_every_policy(policy):
    t0 = time.monotonic()
    with pytest.raises(RunError) as info:
        shmcomm.run(lambda rt: rt.launch(_fail_or_wait, blocks=1), nranks=2, wait_policy=policy,
                    wait_timeout=60, deadlock_grace=30)
    assert time.monotonic() - t0 < 10
    assert "boom in rank 1" in str(info.value).splitlines()[0]


def _both_wait(ctx):
    TWAIT(Signal(ctx.signal_base + 9), 1, WaitCmp.EQ)


@pytest.mark.parametrize("policy", POLICIES)
def test_deadlock_is_seen_under_every_policy(policy):
    t0 = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        shmcomm.run(lambda rt: rt.launch(_both_wait, blocks=1), nranks=2, wait_policy=policy,
                    wait_timeout=60, timeout=60, deadlock_grace=0.3)
    assert time.monotonic() - t0 < 15
    assert "signal rank 0 offset 0x24" in str(info.value)


def test_box_busy_compares_foreign_runnable_tasks_with_the_cores_and_caches():
    from shmcomm.core import control as C
    from shmcomm.core import waiting as W

    ctl = C.Control(2, ncores=10**6)  # a real control segment: _box_busy reads its rank lines
    saved = list(W._busy)
    try:
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is False  # no box runs a million tasks
        ctl.ncores = -4
        assert W._box_busy(ctl) is False  # sampled at most every BUSY_SAMPLE_S
        W._busy[0] = -1.0
        # at least this test runs: 1 task, minus the 2 ranks' host threads (the run's own,
        # whether or not they have launched yet), is more than -4 cores
        assert W._box_busy(ctl) is True
        ctl.set_rank(1, C.R_BLOCKS, 10**6)  # the run's own launched blocks are not foreign load
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is False
    finally:
        W._busy[:] = saved
        ctl.close()
    # a rank that has launched nothing yet still runs its host thread: the run's own too (64
    # ranks starting up on a box where fewer than 64 tasks run are no foreign load) ...
    ctl = C.Control(64, ncores=0)
    try:
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is False
        # ... and a job's ranks on other hosts are none of this box's load (their lines here
        # stay empty: each host keeps its own segment)
        ctl.local = frozenset({0})
        ctl.ncores = -1
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is True  # this test, less rank 0's host, is more than -1 cores
        ctl.local = frozenset(range(64))
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is False
        # ... and a host joining its blocks sleeps: 64 of them are no own load
        for r in range(64):
            ctl.words[ctl.agent_word(r, C.HOST_SLOT) + C.A_STATE] = C.JOINING
        W._busy[0] = -1.0
        assert W._box_busy(ctl) is True
    finally:
        W._busy[:] = saved
        ctl.close()
