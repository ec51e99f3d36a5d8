"""Pipe events: double buffering with ``set_flag`` / ``wait_flag`` (ping-pong tiles between
MTE2 and MTE3), a vector stage between load and store, and a pipelined remote copy."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.pipe import (
    EVENT_ID0,
    EVENT_ID1,
    EVENT_ID2,
    EVENT_ID3,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TLOAD,
    TSTORE,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import TADDS

from ._base import N, expect, gt, load, program, release, tile

CHUNKS = 6
LINE = 16


def _ping_pong(ctx, src, dst, chunks):
    """Copy ``chunks`` chunks src -> dst with two tiles: the load of chunk i + 1 overlaps the
    store of chunk i. EVENT_ID0/1: tile loaded (MTE2 -> MTE3); EVENT_ID2/3: tile stored, free
    again (MTE3 -> MTE2)."""
    tiles = (tile(ctx), tile(ctx))
    for i in range(chunks):
        j = i % 2
        if i >= 2:
            wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID2 + j)  # chunk i - 2's store read this tile
        TLOAD(tiles[j], gt(src + i * N))
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0 + j)
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0 + j)
        TSTORE(gt(dst + i * N), tiles[j])
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID2 + j)
    for i in range(max(chunks - 2, 0), chunks):
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID2 + i % 2)  # every set_flag is consumed


def _local_kernel(ctx, src, dst):
    if ctx.block_idx == 0:
        _ping_pong(ctx, src, dst, CHUNKS)
        pipe_barrier(PIPE_ALL)


@program(nranks=1, blocks=1)
def double_buffer_local_copy(rt):
    """A ping-pong copy within one rank, ordered only by events."""
    src = rt.alloc((CHUNKS * N,), np.float32)
    dst = rt.alloc((CHUNKS * N,), np.float32)
    src[:] = np.arange(CHUNKS * N, dtype=np.float32)
    rt.launch(_local_kernel, args=(src.ptr, dst.ptr))
    expect("copy", np.asarray(dst), np.arange(CHUNKS * N, dtype=np.float32))


def _remote_kernel(ctx, src, dst, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    _ping_pong(ctx, src, GetRemotePtr(ctx, dst, (me + 1) % n), CHUNKS)
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)


@program(nranks=2, blocks=1)
def double_buffer_remote_put(rt):
    """The ping-pong copy into the next rank's window, then drain + dsb + notify."""
    src = rt.alloc((CHUNKS * N,), np.float32)
    dst = rt.alloc((CHUNKS * N,), np.float32)
    sig = rt.signal_region("pp", LINE)
    src[:] = np.arange(CHUNKS * N, dtype=np.float32) + 1000 * rt.rank
    rt.barrier()
    rt.launch(_remote_kernel, args=(src.ptr, dst.ptr, sig))
    prv = (rt.rank - 1) % rt.nranks
    expect(f"rank {rt.rank}", np.asarray(dst), np.arange(CHUNKS * N, dtype=np.float32) + 1000 * prv)


def _vector_kernel(ctx, src, dst):
    """TLOAD -> (MTE2 -> V) -> TADDS -> (V -> MTE3) -> TSTORE, each edge an event."""
    if ctx.block_idx != 0:
        return
    a, b = tile(ctx), tile(ctx)
    for i in range(CHUNKS):
        TLOAD(a, gt(src + i * N))
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
        TADDS(b, a, 1.0)
        set_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
        wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
        TSTORE(gt(dst + i * N), b)
        pipe_barrier(PIPE_ALL)  # a and b are reused by the next chunk


@program(nranks=1, blocks=1)
def vector_stage_with_events(rt):
    """A load / vector add / store pipeline whose stages events order."""
    src = rt.alloc((CHUNKS * N,), np.float32)
    dst = rt.alloc((CHUNKS * N,), np.float32)
    src[:] = np.arange(CHUNKS * N, dtype=np.float32)
    rt.launch(_vector_kernel, args=(src.ptr, dst.ptr))
    expect("vector", np.asarray(dst), np.arange(CHUNKS * N, dtype=np.float32) + 1)


def _event_read_kernel(ctx, src, out):
    """Wait for the peer's data, then load it with an MTE2 -> S event before the scalar read."""
    if ctx.block_idx != 0:
        return
    t = tile(ctx)
    TLOAD(t, gt(src))
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID3)
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID3)
    TSTORE(gt(out), t)
    pipe_barrier(PIPE_MTE3)
    out_val = load(t, out)
    expect("event copy", out_val, np.arange(N, dtype=np.float32))


@program(nranks=1, blocks=2)
def event_ordered_copy_then_drain(rt):
    """One MTE2 -> MTE3 event orders a copy, a drain of MTE3 publishes it to the same block."""
    src = rt.alloc((N,), np.float32)
    out = rt.alloc((N,), np.float32)
    src[:] = np.arange(N, dtype=np.float32)
    rt.launch(_event_read_kernel, args=(src.ptr, out.ptr))
