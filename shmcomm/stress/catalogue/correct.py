"""Correct host programs: the baselines on which the harness must never raise an alarm.

Each is ``host(rt, size)`` and raises ``AssertionError`` on a wrong result, like the bugs. They
use the safe patterns: epoch counters (or a collective reset before
every single-use barrier), release = drain + ``dsb`` before a notify, acquire before a read.
"""

from __future__ import annotations

import numpy as np

from ...comm import TNOTIFY, TWAIT, NotifyOp, Signal, WaitCmp
from ...kernels.barrier import DeviceBarrier, EpochBarrier
from ...kernels.collectives import (
    all_gather_kernel,
    all_reduce_kernel,
    max_share,
    reduce_scatter_kernel,
    share_bounds,
)
from ...types import ReduceOp
from ._common import FLAG_SLOT, expect, put, read, release, slot, staging

EPOCH_ROUNDS = 3
SEED_LAUNCHES = 2
COLL_ITERS = 2  # collectives per launch (back to back, no reset)
COLL_LAUNCHES = 2


def _epoch_kernel(ctx, src, recv, size, rounds):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    nxt, prev = (me + 1) % n, (me - 1) % n
    tile = staging(ctx, size)
    row = size * b
    for k in range(1, rounds + 1):
        mine = src + size * ((k - 1) * nb + b)
        put(ctx, (recv + row).on_rank(nxt), mine, size, tile)  # my block's row, to the next rank
        EpochBarrier(ctx)  # releases (drain + dsb) at entry
        want = 1000.0 * k + 10.0 * prev + b
        expect(f"rank {me} block {b} round {k}", read(recv + row, size, tile), want)
        EpochBarrier(ctx)  # nobody overwrites a row before its reader is done


def epoch_barrier(rt, size: int) -> None:
    """``EpochBarrier`` rounds in one launch: each block puts a row to the next rank, the
    barrier publishes it, the reader checks it; then a relaunch without any signal reset."""
    blocks = rt.config.blocks
    src = rt.alloc((EPOCH_ROUNDS, blocks, size), np.float32)
    recv = rt.alloc((blocks, size), np.float32)
    k = np.arange(1, EPOCH_ROUNDS + 1, dtype=np.float32)[:, None, None]
    src[:] = 1000.0 * k + 10.0 * rt.rank + np.arange(blocks, dtype=np.float32)[None, :, None]
    rt.launch(_epoch_kernel, args=(src.ptr, recv.ptr, size, EPOCH_ROUNDS))
    rt.launch(_epoch_kernel, args=(src.ptr, recv.ptr, size, 1))


def _seed_kernel(ctx, src, recv, size, launch):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    nxt, prev = (me + 1) % n, (me - 1) % n
    if b == 0:
        tile = staging(ctx, size)
        put(ctx, recv.on_rank(nxt), src, size, tile)
        release()  # the seed barrier has no release fence of its own (a documented hazard of it)
    DeviceBarrier(ctx, ctx.signal_base, 0, me, n, b, ctx.block_num)
    if b == 0:
        expect(f"rank {me} launch {launch}", read(recv, size, tile), 100.0 * launch + prev)


def device_barrier(rt, size: int) -> None:
    """The seed's ``DeviceBarrier`` used as its contract says: once per launch, with the
    collective ``rt.reset_signals()`` before every launch."""
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    for launch in range(1, SEED_LAUNCHES + 1):
        src[:] = 100.0 * launch + rt.rank
        rt.reset_signals()
        rt.launch(_seed_kernel, args=(src.ptr, recv.ptr, size, launch))


def _ring_put_kernel(ctx, src, recv, size):
    if ctx.block_idx != 0:
        return
    nxt, prev = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    tile = staging(ctx, size)
    put(ctx, recv.on_rank(nxt), src, size, tile)
    release()  # the fix of PTOAS #711 / #744: drain, DDR fence, then notify
    TNOTIFY(Signal(slot(ctx, FLAG_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.GE)
    expect(f"rank {ctx.rank} data from rank {prev}", read(recv, size, tile), prev + 1.0)


def ring_put(rt, size: int) -> None:
    """Put-with-signal around a ring, with the release fence the notify-before-drain and
    drain-without-dsb bugs leave out (the fixed form of both)."""
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1.0
    rt.reset_signals()
    rt.launch(_ring_put_kernel, args=(src.ptr, recv.ptr, size))


def _inputs(rt, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's input (small integers: float32 sums stay exact) and their sum."""
    base = np.arange(n, dtype=np.float32) % 7
    every = np.stack([base + r + 1 for r in range(rt.nranks)])
    return every[rt.rank], every.sum(axis=0)


def reduce_scatter(rt, size: int) -> None:
    """ReduceScatter (``shmcomm.kernels.collectives``), ``COLL_ITERS`` per launch, relaunched
    without a reset; my share of the sum must land in ``out``."""
    x = rt.alloc((size,), np.float32)
    out = rt.alloc((max_share(size, rt.nranks),), np.float32)
    mine, total = _inputs(rt, size)
    lo, hi = share_bounds(size, rt.nranks, rt.rank)
    for launch in range(COLL_LAUNCHES):
        x[:] = mine
        rt.barrier()
        rt.launch(reduce_scatter_kernel, args=(x.ptr, out.ptr, size, ReduceOp.Sum, COLL_ITERS))
        expect(f"rank {rt.rank} ReduceScatter launch {launch}", np.asarray(out[:hi - lo]), total[lo:hi])


def all_gather(rt, size: int) -> None:
    """AllGather, ``COLL_ITERS`` per launch, relaunched without a reset; every rank's share
    must land in every rank's ``out``."""
    out = rt.alloc((size,), np.float32)
    x = rt.alloc((max_share(size, rt.nranks),), np.float32)
    want = np.arange(size, dtype=np.float32)
    lo, hi = share_bounds(size, rt.nranks, rt.rank)
    for launch in range(COLL_LAUNCHES):
        x[:hi - lo] = want[lo:hi] + launch
        rt.barrier()
        rt.launch(all_gather_kernel, args=(x.ptr, out.ptr, size, COLL_ITERS))
        expect(f"rank {rt.rank} AllGather launch {launch}", np.asarray(out), want + launch)


def all_reduce(rt, size: int) -> None:
    """AllReduce (two-shot), ``COLL_ITERS`` back-to-back in place per launch, relaunched
    without a reset; the sum is checked against numpy."""
    x = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    mine, total = _inputs(rt, size)
    for launch in range(COLL_LAUNCHES):
        x[:] = mine
        rt.barrier()
        rt.launch(all_reduce_kernel, args=(x.ptr, out.ptr, size, ReduceOp.Sum, COLL_ITERS))
        expect(f"rank {rt.rank} AllReduce launch {launch}", np.asarray(out), total)
