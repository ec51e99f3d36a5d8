"""Two streams: kernels launched on two streams of a rank run concurrently, and the host joins
them with ``synchronize`` before it reads what they wrote."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp

from ._base import N, chunk, expect, load, program, release, store, tile

LINE = 16


def _produce(ctx, buf, sig):
    """Compute stream: fill my buffer, then tell the comm kernel (of this rank) it is ready."""
    t = tile(ctx)
    store(t, buf + ctx.block_idx * N, chunk(ctx.rank, ctx.block_idx))
    release()
    TNOTIFY(Signal(sig + ctx.block_idx * LINE), 1, NotifyOp.AtomicAdd)


def _send(ctx, buf, recv, sig, done):
    """Comm stream: wait for the compute kernel's block, send its chunk to the next rank."""
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = tile(ctx)
    TWAIT(Signal(sig + b * LINE), 1, WaitCmp.GE)
    data = load(t, buf + b * N)
    store(t, GetRemotePtr(ctx, recv + b * N, (me + 1) % n), data)
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, done + b * LINE, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(done + b * LINE), 1, WaitCmp.GE)


@program(nranks=2, blocks=2)
def compute_and_comm_streams(rt):
    """A compute kernel and a comm kernel on two streams, handing data over a signal; the host
    synchronizes both streams, then reads the received chunks."""
    nb = rt.config.blocks
    buf = rt.alloc((nb, N), np.float32)
    recv = rt.alloc((nb, N), np.float32)
    sig = rt.signal_region("stream-ready", nb * LINE)
    done = rt.signal_region("stream-done", nb * LINE)
    comm, compute = rt.stream(), rt.stream()
    rt.launch(_send, args=(buf.ptr, recv.ptr, sig, done), stream=comm)
    rt.launch(_produce, args=(buf.ptr, sig), stream=compute)
    rt.synchronize()
    prv = (rt.rank - 1) % rt.nranks
    for b in range(nb):
        expect(f"rank {rt.rank} block {b}", recv[b], chunk(prv, b))


def _fill(ctx, out, base):
    t = tile(ctx)
    store(t, out + ctx.block_idx * N, chunk(ctx.rank, base + ctx.block_idx))
    release()


@program(nranks=2, blocks=2)
def independent_streams_joined(rt):
    """Two streams write disjoint buffers, each twice in stream order; the host joins each
    stream, then checks both buffers."""
    nb = rt.config.blocks
    a = rt.alloc((nb, N), np.float32)
    b = rt.alloc((nb, N), np.float32)
    s1, s2 = rt.stream(), rt.stream()
    rt.launch(_fill, args=(a.ptr, 0), stream=s1)
    rt.launch(_fill, args=(b.ptr, 10), stream=s2)
    rt.launch(_fill, args=(a.ptr, 20), stream=s1)  # after the first on s1: stream order
    s1.synchronize()
    s2.synchronize()
    for blk in range(nb):
        expect(f"rank {rt.rank} a[{blk}]", a[blk], chunk(rt.rank, 20 + blk))
        expect(f"rank {rt.rank} b[{blk}]", b[blk], chunk(rt.rank, 10 + blk))
