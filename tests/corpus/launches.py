"""Signals kept across launches: counters whose thresholds count launches, versioned flags that
carry the launch number, a "ready" flag an earlier launch set for good, and credits the host
grants before every launch."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.kernels import EpochBarrier
from shmcomm.pipe import PIPE_ALL, TSTORE, pipe_barrier

from ._base import N, chunk, expect, gt, load, program, release, store, tile

LINE = 16
LAUNCHES = 3


def _ring_kernel(ctx, recv, sig, launch):
    """Launch ``launch`` (1-based) of a put ring on one counter that is never reset: the data
    of this launch is there once the counter reaches ``launch``."""
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    flag, done = sig, sig + LINE
    if launch > 1:  # my previous data was read: the next rank said so in the last launch
        TWAIT(Signal(done), launch - 1, WaitCmp.GE)
    store(t, GetRemotePtr(ctx, recv, (me + 1) % n), chunk(me, launch))
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(flag), launch, WaitCmp.GE)  # the threshold counts launches
    got = load(t, recv)
    expect(f"rank {me} launch {launch}", got, chunk((me - 1) % n, launch))
    TNOTIFY(Signal(GetRemotePtr(ctx, done, (me - 1) % n)), 1, NotifyOp.AtomicAdd)


@program()
def counter_counts_launches(rt):
    """A notify counter kept across launches (no reset, no host barrier between them): each
    launch waits for ``>= launch``, and the previous launch's reader said it was done."""
    recv = rt.alloc((N,), np.float32)
    sig = rt.signal_region("ring", 2 * LINE)
    for launch in range(1, LAUNCHES + 1):
        rt.launch(_ring_kernel, args=(recv.ptr, sig, launch))


def _versioned_kernel(ctx, recv, sig, launch):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    flag, done = sig, sig + LINE
    if launch > 1:
        TWAIT(Signal(done), launch - 1, WaitCmp.GE)
    store(t, GetRemotePtr(ctx, recv, (me + 1) % n), chunk(me, launch))
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, flag, (me + 1) % n)), launch, NotifyOp.Set)  # a version
    TWAIT(Signal(flag), launch, WaitCmp.GE)
    expect(f"rank {me} launch {launch}", load(t, recv), chunk((me - 1) % n, launch))
    TNOTIFY(Signal(GetRemotePtr(ctx, done, (me - 1) % n)), launch, NotifyOp.Set)


@program()
def versioned_flag_across_launches(rt):
    """A Set flag that carries the launch number, kept across launches without a reset."""
    recv = rt.alloc((N,), np.float32)
    sig = rt.signal_region("ver", 2 * LINE)
    for launch in range(1, LAUNCHES + 1):
        rt.launch(_versioned_kernel, args=(recv.ptr, sig, launch))


def _table_kernel(ctx, table, sig, launch, out):
    """Launch 1 publishes a read-only table once; every launch reads it after waiting for the
    "ready" flag, which stays set for good."""
    if ctx.block_idx != 0:
        return
    me = ctx.rank
    t = tile(ctx)
    if launch == 1 and me == 0:
        store(t, table, chunk(0, 99))
        pipe_barrier(PIPE_ALL)
        for r in range(1, ctx.nranks):
            TSTORE(gt(GetRemotePtr(ctx, table, r)), t)
        release()
        for r in range(ctx.nranks):
            TNOTIFY(Signal(GetRemotePtr(ctx, sig, r)), 1, NotifyOp.Set)
    TWAIT(Signal(sig), 1, WaitCmp.EQ)  # from launch 2 on it already holds: on purpose
    out.append(load(t, table))


@program(nranks=3)
def ready_flag_set_for_good(rt):
    """A table published once, by launch 1, with a flag that later launches find already set
    (they are meant to: the table never changes)."""
    table = rt.alloc((N,), np.float32)
    sig = rt.signal_region("ready", LINE)
    out: list[np.ndarray] = []
    for launch in range(1, LAUNCHES + 1):
        rt.launch(_table_kernel, args=(table.ptr, sig, launch, out))
    for i, got in enumerate(out):
        expect(f"rank {rt.rank} launch {i + 1}", got, chunk(0, 99))


def _arrivals_kernel(ctx, sig, part, launch):
    """Every block adds its part, then block 0 of rank 0 waits for all arrivals of this launch
    on a counter kept across launches: the threshold is launches x arrivals."""
    me, nb = ctx.rank, ctx.block_num
    t = tile(ctx)
    store(t, GetRemotePtr(ctx, part + (me * nb + ctx.block_idx) * N, 0),
          chunk(me, 10 * launch + ctx.block_idx))
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, 0)), 1, NotifyOp.AtomicAdd)
    if me == 0 and ctx.block_idx == 0:
        TWAIT(Signal(sig), launch * ctx.nranks * nb, WaitCmp.GE)
        for r in range(ctx.nranks):
            for b in range(nb):
                expect(f"launch {launch} part of rank {r} block {b}",
                       load(t, part + (r * nb + b) * N), chunk(r, 10 * launch + b))
        for r in range(ctx.nranks):  # parts may be overwritten by the next launch
            TNOTIFY(Signal(GetRemotePtr(ctx, sig + LINE, r)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig + LINE), launch, WaitCmp.GE)


@program(nranks=3, blocks=2)
def arrivals_threshold_counts_launches(rt):
    """An arrival counter never reset: launch L waits for ``L x ranks x blocks`` arrivals, and
    a release word whose threshold is ``L``."""
    part = rt.alloc((rt.nranks * rt.config.blocks, N), np.float32)
    sig = rt.signal_region("arrivals", 2 * LINE)
    for launch in range(1, LAUNCHES + 1):
        rt.launch(_arrivals_kernel, args=(sig, part.ptr, launch))


def _epoch_kernel(ctx, recv, launch):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = tile(ctx)
    store(t, GetRemotePtr(ctx, recv + b * N, (me + 1) % n), chunk(me, 10 * launch + b))
    EpochBarrier(ctx)  # releases at entry; its counters carry over from launch to launch
    expect(f"rank {me} block {b} launch {launch}", load(t, recv + b * N),
           chunk((me - 1) % n, 10 * launch + b))
    EpochBarrier(ctx)  # nobody overwrites a row before its reader is done


@program(nranks=3, blocks=2)
def epoch_barrier_across_launches(rt):
    """EpochBarrier twice per launch, three launches, no reset: its epochs count on."""
    recv = rt.alloc((rt.config.blocks, N), np.float32)
    for launch in range(1, LAUNCHES + 1):
        rt.launch(_epoch_kernel, args=(recv.ptr, launch))


def _credit_kernel(ctx, credit, out):
    if ctx.block_idx == 0:
        TWAIT(Signal(credit), 3, WaitCmp.GE)  # satisfied by the credits the host granted
        out.append(ctx.rank)


@program(blocks=1)
def host_credits_every_launch(rt):
    """The host resets the signals collectively and grants credits before every launch; the
    kernel's wait is satisfied by them at once."""
    credit = rt.signal_region("credit", LINE)
    out: list[int] = []
    for _ in range(LAUNCHES):
        rt.reset_signals()
        rt.signals[credit.offset // 4] = 3
        rt.launch(_credit_kernel, args=(credit, out))
    expect(f"rank {rt.rank} launches", np.asarray(out), rt.rank)
