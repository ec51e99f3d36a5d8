"""Flags: versioned Set flags, re-waits on a condition that already holds, re-armed flags,
TTEST polls that terminate (and bounded ones that give up), and 2-D waits over every peer."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    TNOTIFY,
    TTEST,
    TWAIT,
    GetRemotePtr,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.pipe import PIPE_ALL, TLOAD, TSTORE, pipe_barrier

from ._base import ROUNDS, N, chunk, expect, gt, load, program, release, store, tile

LINE = 16
POLLS = 50  # a bounded poll's budget


def _buffers(rt, rounds=ROUNDS):
    src = rt.alloc((rounds, N), np.float32)
    recv = rt.alloc((N,), np.float32)
    out = rt.alloc((rounds, N), np.float32)
    for k in range(rounds):
        src[k] = chunk(rt.rank, k)
    sig = rt.signal_region("flags", 4 * LINE)
    rt.barrier()
    return src, recv, out, sig


def _check(rt, out, rounds=ROUNDS):
    prv = (rt.rank - 1) % rt.nranks
    for k in range(rounds):
        expect(f"rank {rt.rank} round {k}", out[k], chunk(prv, k))


def _send(ctx, t, src, recv, k, to):
    TLOAD(t, gt(src + k * N))
    pipe_barrier(PIPE_ALL)
    TSTORE(gt(GetRemotePtr(ctx, recv, to)), t)
    release()


def _take(t, recv, out, k):
    """Copy the received chunk into the own result buffer (drained)."""
    TLOAD(t, gt(recv))
    pipe_barrier(PIPE_ALL)
    TSTORE(gt(out + k * N), t)
    pipe_barrier(PIPE_ALL)


# --- versioned Set flags: the flag carries the round ------------------------------------------

def _versioned_kernel(ctx, src, recv, out, sig, wait_cmp):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    flag, ack = sig, sig + LINE
    t = tile(ctx)
    for k in range(1, ROUNDS + 1):
        _send(ctx, t, src, recv, k - 1, (me + 1) % n)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), k, NotifyOp.Set)
        TWAIT(Signal(flag), k, wait_cmp)  # my own round-k data from the previous rank
        _take(t, recv, out, k - 1)
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), k, NotifyOp.Set)
        TWAIT(Signal(ack), k, WaitCmp.GE)  # the next rank copied round k: recv is free again


@program()
def versioned_set_flag_ge(rt):
    """The producer Sets the flag to the round number; the consumer waits ``>= k``; the ACK is
    versioned the same way."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_versioned_kernel, args=(src.ptr, recv.ptr, out.ptr, sig, WaitCmp.GE))
    _check(rt, out)


@program()
def versioned_set_flag_eq(rt):
    """A versioned Set flag waited with ``== k``: safe because the producer cannot move on to
    ``k + 1`` before the consumer's ACK of round ``k``."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_versioned_kernel, args=(src.ptr, recv.ptr, out.ptr, sig, WaitCmp.EQ))
    _check(rt, out)


# --- re-waits ------------------------------------------------------------------------------------

def _rewait_kernel(ctx, src, recv, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    flag, ack = sig, sig + LINE
    t = tile(ctx)
    for k in range(1, ROUNDS + 1):
        _send(ctx, t, src, recv, k - 1, (me + 1) % n)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(flag), k, WaitCmp.GE)
        _take(t, recv, out, k - 1)
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(flag), k, WaitCmp.GE)  # a re-wait: harmless, it already holds
        TWAIT(Signal(ack), k, WaitCmp.GE)


@program()
def rewait_after_own_notify(rt):
    """A block re-waits on its data counter after its own ACK went out: the condition holds,
    the second wait is redundant, not a new round."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_rewait_kernel, args=(src.ptr, recv.ptr, out.ptr, sig))
    _check(rt, out)


def _ready(sig, k):
    """A helper that every phase calls before touching the shared buffer."""
    TWAIT(Signal(sig), k, WaitCmp.GE)


def _helper_rewait_kernel(ctx, data, sig, got):
    me, n, nb = ctx.rank, ctx.nranks, ctx.block_num
    t = tile(ctx)
    if me == 0 and ctx.block_idx == 0:
        store(t, data, chunk(0, 0))
        pipe_barrier(PIPE_ALL)
        for r in range(1, n):
            TSTORE(gt(GetRemotePtr(ctx, data, r)), t)
        release()
        for r in range(1, n):
            TNOTIFY(Signal(GetRemotePtr(ctx, sig, r)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(sig + LINE), (n - 1) * nb, WaitCmp.GE)  # every reader is done
    elif me != 0:
        _ready(sig, 1)  # phase 1: read the data
        value = load(t, data)
        _ready(sig, 1)  # phase 2 calls the same helper: it holds already, nothing new to wait for
        got.append(float(value[0]))
        TNOTIFY(Signal(GetRemotePtr(ctx, sig + LINE, 0)), 1, NotifyOp.AtomicAdd)


@program(nranks=3)
def helper_rewait_broadcast(rt):
    """Rank 0 broadcasts a chunk; every reader block calls the same ``ready`` helper twice (the
    second time it already holds)."""
    data = rt.alloc((N,), np.float32)
    sig = rt.signal_region("bcast", 2 * LINE)
    rt.barrier()
    got: list[float] = []
    rt.launch(_helper_rewait_kernel, args=(data.ptr, sig, got))
    if rt.rank:
        expect(f"rank {rt.rank} broadcast", np.asarray(got), chunk(0, 0)[0])
        expect(f"rank {rt.rank} readers", np.asarray(len(got)), rt.config.blocks)


# --- a flag re-armed with Set(0) by its consumer ------------------------------------------------

def _rearm_kernel(ctx, src, recv, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    flag, ack = sig, sig + LINE
    t = tile(ctx)
    for k in range(1, ROUNDS + 1):
        _send(ctx, t, src, recv, k - 1, (me + 1) % n)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), 1, NotifyOp.Set)
        TWAIT(Signal(flag), 1, WaitCmp.EQ)
        _take(t, recv, out, k - 1)
        TNOTIFY(Signal(flag), 0, NotifyOp.Set)  # re-arm before the ACK lets the producer go on
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ack), k, WaitCmp.GE)


@program()
def set_flag_rearmed_then_ack(rt):
    """A 0/1 Set flag that the consumer re-arms with Set(0) before it ACKs: each round the
    same value 1, safely."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_rearm_kernel, args=(src.ptr, recv.ptr, out.ptr, sig))
    _check(rt, out)


# --- TTEST polls ----------------------------------------------------------------------------------

def _poll(sig, k, bounded):
    """Wait for ``sig >= k`` by polling: until it holds, or (bounded) for a budget of polls
    after which the block gives up polling and blocks in TWAIT."""
    if not bounded:
        while not TTEST(Signal(sig), k, WaitCmp.GE):
            pass
        return
    for _ in range(POLLS):
        if TTEST(Signal(sig), k, WaitCmp.GE):
            return
    TWAIT(Signal(sig), k, WaitCmp.GE)


def _poll_kernel(ctx, src, recv, out, sig, bounded):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    flag, ack = sig, sig + LINE
    t = tile(ctx)
    for k in range(1, ROUNDS + 1):
        _send(ctx, t, src, recv, k - 1, (me + 1) % n)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        _poll(flag, k, bounded)
        _take(t, recv, out, k - 1)
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
        _poll(ack, k, bounded)


@program()
def ttest_poll_until_set(rt):
    """Every wait is a TTEST poll loop that ends when the peer's notify lands."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_poll_kernel, args=(src.ptr, recv.ptr, out.ptr, sig, False))
    _check(rt, out)


@program()
def ttest_bounded_poll_then_wait(rt):
    """A bounded TTEST poll that gives up after a budget and falls back to a blocking TWAIT."""
    src, recv, out, sig = _buffers(rt)
    rt.launch(_poll_kernel, args=(src.ptr, recv.ptr, out.ptr, sig, True))
    _check(rt, out)


def _optional_kernel(ctx, sig, out):
    """Poll a cancel flag nobody sets, a bounded number of times, then do the work anyway."""
    cancelled = False
    for _ in range(POLLS):
        if TTEST(Signal(sig), 1, WaitCmp.GE):
            cancelled = True
            break
    t = tile(ctx)
    t.array[0, :] = 0 if cancelled else ctx.rank + 1
    TSTORE(gt(out + ctx.block_idx * N), t)
    pipe_barrier(PIPE_ALL)


@program()
def ttest_bounded_poll_gives_up(rt):
    """A bounded poll of a flag that never comes: it gives up and the kernel goes on."""
    out = rt.alloc((rt.config.blocks, N), np.float32)
    sig = rt.signal_region("cancel", LINE)
    rt.launch(_optional_kernel, args=(sig, out.ptr))
    expect(f"rank {rt.rank} work", np.asarray(out), rt.rank + 1)


# --- a 2-D wait over one word per peer ------------------------------------------------------------

def _gather_kernel(ctx, data, sig, out):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    store(t, data + me * N, chunk(me, 0))  # my chunk, at my row of every rank's table
    pipe_barrier(PIPE_ALL)
    for r in range(n):
        if r != me:
            TSTORE(gt(GetRemotePtr(ctx, data + me * N, r)), t)
    release()
    for r in range(n):
        TNOTIFY(Signal(GetRemotePtr(ctx, sig + me, r)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal2D(sig, 1, n), 1, WaitCmp.GE)  # every rank's word, one sweep
    for r in range(n):
        out.append(load(t, data + r * N))


@program(nranks=4, blocks=1)
def signal2d_all_peers_gather(rt):
    """An all-gather where each rank waits on one Signal2D over a word per peer."""
    data = rt.alloc((rt.nranks, N), np.float32)
    sig = rt.signal_region("gather", LINE)
    rt.barrier()
    out: list[np.ndarray] = []
    rt.launch(_gather_kernel, args=(data.ptr, sig, out))
    for r in range(rt.nranks):
        expect(f"rank {rt.rank} row {r} (kernel)", out[r], chunk(r, 0))
        expect(f"rank {rt.rank} row {r} (host)", np.asarray(data[r]), chunk(r, 0))
