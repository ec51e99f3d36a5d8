"""Hazard-mode checkers without false alarms: each correct pattern that used to raise one runs
1,000 rounds (a persistent loop over a few seeds) with every hazard sub-model and checker on,
and the race detector too; each buggy twin, and each pattern the checkers used to miss, is
reported. An advisory checker's finding never fails a run by itself: it rides along a failure
that something else proved, as its likely cause."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TGET,
    TNOTIFY,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    WaitCmp,
)
from shmcomm.kernels import EpochBarrier
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID3,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    TLOAD,
    TSTORE,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)

pytestmark = pytest.mark.timeout(300)

SEEDS = (11, 12, 13, 14)
ROUNDS = 250  # x len(SEEDS) = 1,000 rounds per pattern
HAZARD = dict(mode="hazard", hazards="all", hazard_delay=2e-4, detect_races=True, timeout=120,
              deadlock_grace=0.5, wait_timeout=60)
W = 9216  # the users' free range of the signal matrix (words)
FLAG, ACK, CREDIT = W, W + 16, W + 32  # each on its own 64-byte line


def _run(host, seed, nranks=2, blocks=1, args=()):
    return shmcomm.run(host, nranks=nranks, blocks=blocks, seed=seed, args=args, **HAZARD)


def _reported(host, checker, seed=1, nranks=2, blocks=1, args=(), **kw):
    cfg = {**HAZARD, **kw}
    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(host, nranks=nranks, blocks=blocks, seed=seed, args=args, **cfg)
    assert checker in str(info.value), str(info.value)
    return info.value


# --- a flag re-armed with Set(0), then acknowledged -----------------------------------------

def _rearm_kernel(ctx, data, rounds):
    base = ctx.signal_base
    tile = ctx.tile((1, 8), np.float32)
    if ctx.rank == 0:  # producer: data, release, flag += 1, wait for the ack
        for k in range(1, rounds + 1):
            tile.array[:] = k
            TSTORE(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, 8)), tile)
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)
            TNOTIFY(Signal(GetRemotePtr(ctx, base + FLAG, 1)), 1, NotifyOp.AtomicAdd)
            TWAIT(Signal(base + ACK), k, WaitCmp.GE)
    else:  # consumer: wait for the flag, read, re-arm it with Set(0), acknowledge
        for k in range(1, rounds + 1):
            TWAIT(Signal(base + FLAG), 1, WaitCmp.EQ)
            TLOAD(tile, GlobalTensor(data, (1, 8)))
            pipe_barrier(PIPE_ALL)
            assert tile.array[0, 0] == k, (tile.array[0, 0], k)
            TNOTIFY(Signal(base + FLAG), 0, NotifyOp.Set)
            TNOTIFY(Signal(GetRemotePtr(ctx, base + ACK, 0)), 1, NotifyOp.AtomicAdd)


def _rearm_host(rt, rounds):
    data = rt.alloc((8,), np.float32)
    rt.launch(_rearm_kernel, blocks=1, args=(data.ptr, rounds))


@pytest.mark.parametrize("seed", SEEDS)
def test_set0_rearm_then_ack_passes(seed):
    _run(_rearm_host, seed, args=(ROUNDS,))


# --- a second, redundant wait on a condition that already holds -------------------------------

def _redundant_kernel(ctx, rounds):
    base = ctx.signal_base
    if ctx.rank == 0:
        for k in range(1, rounds + 1):
            TNOTIFY(Signal(GetRemotePtr(ctx, base + FLAG, 1)), 1, NotifyOp.AtomicAdd)
            TWAIT(Signal(base + ACK), k, WaitCmp.GE)
    else:
        for k in range(1, rounds + 1):
            TWAIT(Signal(base + FLAG), k, WaitCmp.GE)
            TWAIT(Signal(base + FLAG), k, WaitCmp.GE)  # redundant: it already holds
            TNOTIFY(Signal(GetRemotePtr(ctx, base + ACK, 0)), 1, NotifyOp.AtomicAdd)


@pytest.mark.parametrize("seed", SEEDS)
def test_redundant_second_wait_passes(seed):
    _run(lambda rt, n: rt.launch(_redundant_kernel, blocks=1, args=(n,)), seed, args=(ROUNDS,))


# --- credits the host sets before a launch ----------------------------------------------------

def _credit_kernel(ctx, rounds, credit_ptr):
    if ctx.block_idx == 0:
        for _ in range(rounds):
            TWAIT(Signal(credit_ptr), 3, WaitCmp.GE)  # satisfied by the host's credits


def _credit_host(rt, rounds, launches, in_heap):
    words = rt.alloc((16,), np.int32) if in_heap else None
    for _ in range(launches):
        rt.reset_signals()
        if in_heap:
            words[0] = 3  # credits in an rt.alloc array
        else:
            rt.signals[CREDIT] = 3  # credits in the signal matrix
        rt.barrier()
        ptr = words.ptr if in_heap else rt.signal_base + CREDIT
        rt.launch(_credit_kernel, blocks=2, args=(rounds, ptr))


@pytest.mark.parametrize("seed", SEEDS)
def test_host_credits_before_each_launch_pass(seed):
    _run(_credit_host, seed, args=(ROUNDS // 5, 5, seed % 2 == 0))


def _relaunch_kernel(ctx, sig_ptr, launch):
    if ctx.block_idx == 0:
        if launch == 1:
            TNOTIFY(Signal(sig_ptr), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(sig_ptr), 1, WaitCmp.GE)  # launch 2: satisfied by launch 1's leftover


def _stale_host(rt, fail):
    words = rt.alloc((16,), np.int32)
    for launch in (1, 2):  # no reset of the words between the launches
        rt.barrier()
        rt.launch(_relaunch_kernel, blocks=1, args=(words.ptr, launch))
    assert not fail, "the host's own check failed"  # a failure that something else proved


def _advised(host, checker, nranks=2, blocks=1, args=(), **kw):
    """``host`` passes (an advisory finding alone fails nothing); with ``fail`` it fails on its
    own check, and the failure names ``checker``'s finding as a likely cause."""
    cfg = {**HAZARD, **kw}
    shmcomm.run(host, nranks=nranks, blocks=blocks, seed=1, args=(*args, False), **cfg)
    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(host, nranks=nranks, blocks=blocks, seed=1, args=(*args, True), **cfg)
    text = str(info.value)
    assert "AssertionError: the host's own check failed" in text, text
    assert f"likely cause: hazard [{checker}]" in text, text
    assert any(f"hazard [{checker}]" in a for a in info.value.advice), info.value.advice
    return info.value


def test_stale_signal_in_an_alloc_array_is_a_likely_cause():
    _advised(_stale_host, "stale-at-launch", nranks=1, detect_races=False)


# --- a notify after MTE3 work that in fact retired, or that it does not publish ----------------

def _fenced_chain_kernel(ctx, data, scratch, rounds):
    """Stores retired through an MTE3 -> MTE2 event and a drain of MTE2; a scratch store of the
    block's own that the notify does not publish (nobody reads it)."""
    base = ctx.signal_base
    tile = ctx.tile((1, 8), np.float32)
    if ctx.rank == 0:
        for k in range(1, rounds + 1):
            tile.array[:] = k
            TSTORE(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, 8)), tile)
            set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID3)
            wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID3)
            pipe_barrier(PIPE_MTE2)  # MTE2 waited for MTE3: the stores are done
            dsb(DSB_DDR)
            TSTORE(GlobalTensor(scratch, (1, 8)), tile)  # local, never read by anyone
            TNOTIFY(Signal(GetRemotePtr(ctx, base + FLAG, 1)), 1, NotifyOp.AtomicAdd)
            TWAIT(Signal(base + ACK), k, WaitCmp.GE)
            pipe_barrier(PIPE_ALL)  # the tile is reused: the scratch store has read it
    else:
        for k in range(1, rounds + 1):
            TWAIT(Signal(base + FLAG), k, WaitCmp.GE)
            TGET(GlobalTensor(scratch, (1, 8)), GlobalTensor(data, (1, 8)), tile)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, base + ACK, 0)), 1, NotifyOp.AtomicAdd)


def _fenced_chain_host(rt, rounds):
    data, scratch = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
    rt.launch(_fenced_chain_kernel, blocks=1, args=(data.ptr, scratch.ptr, rounds))


@pytest.mark.parametrize("seed", SEEDS)
def test_notify_after_retired_or_unpublished_stores_passes(seed):
    _run(_fenced_chain_host, seed, args=(ROUNDS,))


def _pull_kernel(ctx, buf, out, fence):
    if ctx.block_idx != 0:
        return
    tile = ctx.tile((1, 8), np.float32)
    if ctx.rank == 1:  # the owner fills its own window, drains, signals the puller
        tile.array[:] = 7
        TSTORE(GlobalTensor(buf, (1, 8)), tile)
        pipe_barrier(PIPE_ALL)
        if fence:
            dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + FLAG, 0)), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(ctx.signal_base + FLAG), 1, WaitCmp.GE)
        TGET(GlobalTensor(out, (1, 8)), GlobalTensor(GetRemotePtr(ctx, buf, 1), (1, 8)), tile)
        pipe_barrier(PIPE_ALL)


def _pull_host(rt, fence):
    buf, out = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
    rt.launch(_pull_kernel, blocks=1, args=(buf.ptr, out.ptr, fence))


def test_pull_without_dsb_is_reported_by_the_detector_alone():
    # no pattern rule guesses at a pull any more: without the detector the run passes ...
    shmcomm.run(_pull_host, nranks=2, blocks=1, seed=1, args=(False,),
                **{**HAZARD, "detect_races": False})
    # ... and the detector, which sees the puller read the stores, reports the missing fence
    _reported(_pull_host, "no dsb(DSB_DDR) came between the drain and that notify", args=(False,))
    _run(_pull_host, 1, args=(True,))


# --- arrival counts against the blocks that take part -----------------------------------------

def _part_kernel(ctx, rounds, takers):
    if ctx.block_idx < takers:
        for _ in range(rounds):
            EpochBarrier(ctx, num_blocks=3)


@pytest.mark.parametrize("seed", SEEDS)
def test_arrival_count_of_the_blocks_taking_part_passes(seed):
    _run(lambda rt, n: rt.launch(_part_kernel, blocks=4, args=(n, 3)), seed, args=(ROUNDS // 5,))


def _declare_kernel(ctx, takers):
    if ctx.block_idx < takers:  # the declaration alone: no barrier that could hang
        ctx.expect_blocks(3, "GroupBarrier", "num_blocks")


def _overcount_host(rt, fail):
    rt.launch(_declare_kernel, blocks=4, args=(3,))  # three takers of a count of three: right
    rt.launch(_declare_kernel, blocks=4, args=(4,))  # four: two groups, or one too many
    assert not fail, "the host's own check failed"


def test_arrival_count_below_the_blocks_taking_part_is_a_likely_cause():
    _advised(_overcount_host, "arrival-takers", nranks=1, detect_races=False)


def test_arrival_count_above_the_launch_is_reported():
    _reported(lambda rt: rt.launch(_part_kernel, blocks=2, args=(1, 2)), "arrival-count",
              nranks=1, detect_races=False)


# --- the other advisory checkers: findings ride along a failure, never make one ----------------

def _unfenced_kernel(ctx, data):
    tile = ctx.tile((1, 8), np.float32)
    if ctx.rank == 0:  # TSTORE, then the notify with the store still queued on MTE3
        tile.array[:] = 1
        TSTORE(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, 8)), tile)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + FLAG, 1)), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(ctx.signal_base + FLAG), 1, WaitCmp.GE)  # and nothing read: no failure


def _unfenced_host(rt, fail):
    data = rt.alloc((8,), np.float32)
    rt.launch(_unfenced_kernel, blocks=1, args=(data.ptr,))
    assert not fail, "the host's own check failed"


def _new_round_kernel(ctx):
    base = ctx.signal_base
    if ctx.rank == 0:
        TNOTIFY(Signal(GetRemotePtr(ctx, base + FLAG, 1)), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(base + FLAG), 1, WaitCmp.GE)
        TNOTIFY(Signal(GetRemotePtr(ctx, base + ACK, 0)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(base + FLAG), 1, WaitCmp.GE)  # a "second round" that waits for nothing


def _new_round_host(rt, fail):
    rt.launch(_new_round_kernel, blocks=1)
    assert not fail, "the host's own check failed"


@pytest.mark.parametrize(("host", "checker"), [(_unfenced_host, "notify-unfenced"),
                                               (_new_round_host, "phase-reuse")],
                         ids=["notify-unfenced", "phase-reuse"])
def test_advisory_finding_is_a_likely_cause_only(host, checker):
    _advised(host, checker, detect_races=False)


def test_advisory_and_exact_checkers_are_declared():
    from shmcomm.exec.hazard import ADVISORY, CHECKERS, EXACT

    assert set(EXACT) == {"line-shared", "flag-unbalanced", "event-twice", "arrival-count"}
    assert set(ADVISORY) == {"notify-unfenced", "phase-reuse", "stale-at-launch",
                             "arrival-takers"}
    assert set(CHECKERS) == set(EXACT) | set(ADVISORY)


def test_a_blocks_checkers_are_made_at_their_first_event_and_shared_by_its_events():
    """A block's event table makes each checker once, at the first event that can change what
    it finds: the checker that watches stores and notifies is made at the first store (a
    notify before it finds nothing), then sees both through one state; the tables made
    before it are made again with it."""
    from shmcomm.exec.hazard.checkers import CHECKER_CLASSES, EVENTS, Observers
    from shmcomm.exec.hazard.checkers.flag_unbalanced import FlagUnbalanced
    from shmcomm.exec.hazard.checkers.notify_unfenced import NotifyUnfenced

    class Block:
        agent = None

    on = Observers(Block())
    assert on.made == {}
    assert on["clobber"] and len(on.made) == 1  # only the line checker so far
    before = on["notify"]
    assert NotifyUnfenced not in on.made and not any(
        isinstance(getattr(f, "__self__", None), NotifyUnfenced) for f in before)
    assert on["finish"] == () and FlagUnbalanced not in on.made  # no flag set: none left over
    stored = on["stored"]
    unfenced = on.made[NotifyUnfenced]
    notify = on["notify"]
    assert notify is not before  # made again, with the store checker
    assert any(getattr(f, "__self__", None) is unfenced for f in stored)
    assert any(getattr(f, "__self__", None) is unfenced for f in notify)
    on["set_flag"]
    assert any(isinstance(getattr(f, "__self__", None), FlagUnbalanced) for f in on["finish"])
    for e in EVENTS:
        on[e]
    assert set(on.made) == set(CHECKER_CLASSES)  # every checker is made at some event
    assert on["notify"] is notify  # an event's table is made once
