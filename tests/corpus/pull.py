"""Pull protocols: the owner fills its own window, drains and fences (``pipe_barrier`` +
``dsb``), then tells the puller, who TGETs the data; and the push baseline for comparison."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import TGET, TNOTIFY, TPUT, TWAIT, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp
from shmcomm.pipe import PIPE_ALL, pipe_barrier

from ._base import ROUNDS, N, chunk, expect, gt, load, program, release, store, tile

LINE = 16


def _pull_kernel(ctx, buf, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    nxt, prv = (me + 1) % n, (me - 1) % n
    ready, done = sig, sig + LINE
    t = tile(ctx)
    for k in range(1, ROUNDS + 1):
        if k > 1:  # the puller of my buffer is done with round k - 1
            TWAIT(Signal(done), k - 1, WaitCmp.GE)
        store(t, buf, chunk(me, k))
        release()  # the reader is another rank: drain, then the DDR fence
        TNOTIFY(Signal(GetRemotePtr(ctx, ready, nxt)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ready), k, WaitCmp.GE)
        TGET(gt(out + (k - 1) * N), gt(GetRemotePtr(ctx, buf, prv)), t)
        pipe_barrier(PIPE_ALL)
        TNOTIFY(Signal(GetRemotePtr(ctx, done, prv)), 1, NotifyOp.AtomicAdd)


@program()
def pull_with_drain_and_dsb(rt):
    """Each rank fills its own buffer, drains + fences, signals the next rank, which TGETs it
    and says when it is done (so the buffer can be refilled)."""
    buf = rt.alloc((N,), np.float32)
    out = rt.alloc((ROUNDS, N), np.float32)
    sig = rt.signal_region("pull", 2 * LINE)
    rt.launch(_pull_kernel, args=(buf.ptr, out.ptr, sig))
    prv = (rt.rank - 1) % rt.nranks
    for k in range(1, ROUNDS + 1):
        expect(f"rank {rt.rank} round {k}", out[k - 1], chunk(prv, k))


def _pull_all_kernel(ctx, buf, out, sig):
    """All-gather by pulling: every rank publishes its row, then pulls every other row."""
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    t = tile(ctx)
    if b == 0:
        store(t, buf, chunk(me, 0))
        release()
        for r in range(n):
            TNOTIFY(Signal(GetRemotePtr(ctx, sig + me, r)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal2D(sig, 1, n), 1, WaitCmp.GE)
    for r in range(b, n, nb):  # the blocks share the pulls
        TGET(gt(out + r * N), gt(GetRemotePtr(ctx, buf, r)), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=4, blocks=2)
def pull_all_gather(rt):
    """Every rank publishes its buffer (drain + dsb), then its blocks pull all the rows."""
    buf = rt.alloc((N,), np.float32)
    out = rt.alloc((rt.nranks, N), np.float32)
    sig = rt.signal_region("pull-all", LINE)
    rt.launch(_pull_all_kernel, args=(buf.ptr, out.ptr, sig))
    for r in range(rt.nranks):
        expect(f"rank {rt.rank} row {r}", out[r], chunk(r, 0))


def _push_kernel(ctx, src, recv, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    TPUT(gt(GetRemotePtr(ctx, recv, (me + 1) % n)), gt(src), t)
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    expect(f"rank {me}", load(t, recv), chunk((me - 1) % n, 0))


@program(nranks=3, blocks=1)
def push_tput_drain_dsb(rt):
    """The push baseline: TPUT, drain + dsb, then the notify; the reader loads after its wait."""
    src = rt.alloc((N,), np.float32)
    recv = rt.alloc((N,), np.float32)
    src[:] = chunk(rt.rank, 0)
    sig = rt.signal_region("push", LINE)  # collective: also orders the host's fill before it
    rt.launch(_push_kernel, args=(src.ptr, recv.ptr, sig))


def _big_pull_kernel(ctx, buf, out, sig, size):
    """A pull larger than the tile: TGET chunks it through the staging tile."""
    me, n = ctx.rank, ctx.nranks
    if ctx.block_idx != 0:
        return
    t = tile(ctx)
    TWAIT(Signal(sig), 1, WaitCmp.GE)  # the host filled the buffers before the launch barrier
    TGET(gt(out, size), gt(GetRemotePtr(ctx, buf, (me + 1) % n), size), t)
    pipe_barrier(PIPE_ALL)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig + LINE, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig + LINE), 1, WaitCmp.GE)  # my buffer was read: the launch may end


@program(nranks=2, blocks=1)
def pull_host_filled_chunked(rt):
    """The host fills the buffer, a host barrier and a host-side flag publish it; the kernel
    pulls it in tile-sized chunks."""
    size = 5 * N + 3
    buf = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    sig = rt.signal_region("bigpull", 2 * LINE)
    buf[:] = np.arange(size, dtype=np.float32) + 1000 * rt.rank
    rt.signals[sig.offset // 4] = 1
    rt.barrier()
    rt.launch(_big_pull_kernel, args=(buf.ptr, out.ptr, sig, size))
    expect(f"rank {rt.rank}", np.asarray(out),
           np.arange(size, dtype=np.float32) + 1000 * ((rt.rank + 1) % rt.nranks))
