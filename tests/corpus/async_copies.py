"""Asynchronous copies (TPUT_ASYNC / TGET_ASYNC on the block's DMA engine): completed by the
event's ``Wait``, by a ``Test`` that returned True, or by a later event's ``Wait`` (a quiet),
before the data is signalled or read."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    TGET_ASYNC,
    TNOTIFY,
    TPUT_ASYNC,
    TWAIT,
    BuildAsyncSession,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    WaitCmp,
)
from shmcomm.pipe import DSB_DDR, dsb

from ._base import N, chunk, expect, load, program, release, store, tile

LINE = 16
PIECES = 3


def flat(ptr, n: int = N) -> GlobalTensor:
    return GlobalTensor(ptr, (n,))


def _put_async_kernel(ctx, src, recv, sig, how):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    s = BuildAsyncSession(ctx)
    dst = GetRemotePtr(ctx, recv, (me + 1) % n)
    if how == "quiet":  # several copies; waiting on the last lands every earlier one
        for i in range(PIECES):
            ev = TPUT_ASYNC(flat(dst + i * N), flat(src + i * N), s)
        ev.Wait(s)
    else:
        evs = [TPUT_ASYNC(flat(dst + i * N), flat(src + i * N), s) for i in range(PIECES)]
        for ev in evs:
            if how == "wait":
                ev.Wait(s)
            else:  # poll each copy with Test until it has landed
                while not ev.Test(s):
                    pass
    dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    t = tile(ctx)
    for i in range(PIECES):
        expect(f"rank {me} piece {i}", load(t, recv + i * N), chunk((me - 1) % n, i))


def _put_host(rt, how):
    src = rt.alloc((PIECES * N,), np.float32)
    recv = rt.alloc((PIECES * N,), np.float32)
    for i in range(PIECES):
        src[i * N:(i + 1) * N] = chunk(rt.rank, i)
    sig = rt.signal_region("async", LINE)  # collective: the fill is done everywhere after it
    rt.launch(_put_async_kernel, blocks=1, args=(src.ptr, recv.ptr, sig, how))


@program(blocks=1)
def tput_async_each_waited(rt):
    """TPUT_ASYNC pieces to the next rank, each event waited, then the notify."""
    _put_host(rt, "wait")


@program(blocks=1)
def tput_async_quiet_on_last(rt):
    """TPUT_ASYNC pieces, only the last event waited (a quiet lands every earlier copy)."""
    _put_host(rt, "quiet")


@program(blocks=1)
def tput_async_polled_with_test(rt):
    """TPUT_ASYNC pieces, each polled with Test until it landed, then the notify."""
    _put_host(rt, "test")


def _get_async_kernel(ctx, buf, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    store(t, buf, chunk(me, 7))
    release()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)  # the previous rank's buffer is ready
    s = BuildAsyncSession(ctx)
    ev = TGET_ASYNC(flat(out), flat(GetRemotePtr(ctx, buf, (me - 1) % n)), s)
    ev.Wait(s)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig + LINE, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig + LINE), 1, WaitCmp.GE)  # my buffer was pulled: it may change after this
    expect(f"rank {me}", load(t, out), chunk((me - 1) % n, 7))


@program(nranks=3, blocks=1)
def tget_async_pull_waited(rt):
    """A pull with TGET_ASYNC from a buffer the owner published (drain + dsb), waited."""
    buf = rt.alloc((N,), np.float32)
    out = rt.alloc((N,), np.float32)
    sig = rt.signal_region("aget", 2 * LINE)
    rt.launch(_get_async_kernel, args=(buf.ptr, out.ptr, sig))
