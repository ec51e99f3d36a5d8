"""TNOTIFY / TWAIT / TTEST, TPUT / TGET and data AtomicAdd, at one rank and several."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError, RunError
from shmcomm.comm import (
    TGET,
    TNOTIFY,
    TPUT,
    TTEST,
    TWAIT,
    AtomicType,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.kernels import EpochBarrier

pytestmark = pytest.mark.timeout(90)


def test_enum_values_are_ptos():
    assert [NotifyOp.AtomicAdd, NotifyOp.Set] == [0, 1]
    assert [WaitCmp.EQ, WaitCmp.NE, WaitCmp.GT, WaitCmp.GE, WaitCmp.LT, WaitCmp.LE] == list(range(6))
    assert [AtomicType.AtomicNone, AtomicType.AtomicAdd] == [0, 1]


def _signal_semantics(ctx, out):
    s = Signal(ctx.signal_base + 2000)
    TNOTIFY(s, 5, NotifyOp.AtomicAdd)
    TNOTIFY(s, -2, NotifyOp.AtomicAdd)
    out["add"] = s.value
    TNOTIFY(s, 42, NotifyOp.Set)
    out["set"] = s.value
    out["tests"] = [TTEST(s, 42, WaitCmp.EQ), TTEST(s, 41, WaitCmp.NE), TTEST(s, 41, WaitCmp.GT),
                    TTEST(s, 42, WaitCmp.GE), TTEST(s, 43, WaitCmp.LT), TTEST(s, 42, WaitCmp.LE),
                    not TTEST(s, 42, WaitCmp.NE), not TTEST(s, 42, WaitCmp.GT)]
    for cmp, v in ((WaitCmp.EQ, 42), (WaitCmp.GE, 40), (WaitCmp.LE, 42), (WaitCmp.NE, 0)):
        TWAIT(s, v, cmp)
    grid = Signal2D(ctx.signal_base + 3000, 2, 3, row_stride=8)
    for r in range(2):
        for c in range(3):
            TNOTIFY(Signal(ctx.signal_base + 3000 + r * 8 + c), 1, NotifyOp.AtomicAdd)
    out["grid"] = TTEST(grid, 1, WaitCmp.EQ)
    TNOTIFY(Signal(ctx.signal_base + 3000 + 8 + 3), 7, NotifyOp.Set)  # outside the view
    out["grid_after"] = TTEST(grid, 1, WaitCmp.EQ)
    TNOTIFY(grid, 1, NotifyOp.AtomicAdd)  # element [0, 0] only
    out["grid_partial"] = (TTEST(grid, 1, WaitCmp.GE), TTEST(grid, 2, WaitCmp.GE))
    errors = []
    for fn in (lambda: TNOTIFY(s, 1, 7), lambda: TWAIT(s, 1, 9), lambda: TWAIT(s, 2**31, WaitCmp.EQ),
               lambda: TNOTIFY("s", 1, NotifyOp.Set), lambda: TTEST(s, 1.5, WaitCmp.EQ)):
        try:
            fn()
        except ArgumentError as exc:
            errors.append(str(exc).split(":")[0])
    out["errors"] = errors


def _host_signals(rt):
    out = {}
    rt.launch(_signal_semantics, blocks=1, args=(out,))
    return out


def test_signal_semantics_single_rank():
    (r,) = shmcomm.run(_host_signals, nranks=1)
    assert r["add"] == 3 and r["set"] == 42
    assert all(r["tests"])
    assert r["grid"] and r["grid_after"]
    assert r["grid_partial"] == (True, False)
    assert r["errors"] == ["TNOTIFY", "TWAIT", "TWAIT", "TNOTIFY", "TTEST"]


def _ring_kernel(ctx, rounds):
    me, n = ctx.rank, ctx.nranks
    slot = ctx.signal_base + 1024 + ctx.block_idx
    nxt = Signal(GetRemotePtr(ctx, slot, (me + 1) % n))
    mine = Signal(slot)
    for k in range(1, rounds + 1):
        TNOTIFY(nxt, 1, NotifyOp.AtomicAdd)
        TWAIT(mine, k, WaitCmp.GE)


@pytest.mark.parametrize("nranks,blocks", [(1, 1), (2, 4), (5, 3), (8, 4)])
def test_ring_notify_wait_many_ranks(nranks, blocks):
    def host(rt):
        rt.launch(_ring_kernel, blocks=blocks, args=(200,))
        rt.barrier()
        return [int(v) for v in rt.signals[1024:1024 + blocks]]

    res = shmcomm.run(host, nranks=nranks)
    assert res == [[200] * blocks] * nranks


def _timeout_kernel(ctx):
    TWAIT(Signal(ctx.signal_base + 7), 3, WaitCmp.GE)


def test_twait_timeout_raises_with_details():
    with pytest.raises(RunError) as info:
        shmcomm.run(lambda rt: rt.launch(_timeout_kernel, blocks=1), nranks=1, wait_timeout=0.3,
                    deadlock_grace=30)
    msg = str(info.value)
    for word in ("WaitTimeout", "rank 0 block 0", "offset 0x1c", ">= 3", "holds 0", "TWAIT"):
        assert word in msg, msg


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int16, np.int8])
def test_tput_atomic_add_from_all_ranks_loses_nothing(dtype):
    nranks, blocks, n, reps = 4, 4, 1000, 6

    def kernel(ctx, acc, src):
        tile = ctx.tile((1, 256), dtype)
        dst = GlobalTensor(GetRemotePtr(ctx, acc, 0), (1, n))
        for _ in range(reps):
            TPUT(dst, GlobalTensor(src, (1, n)), tile, AtomicType.AtomicAdd)
        EpochBarrier(ctx)

    def host(rt):
        acc = rt.alloc((n,), dtype)
        src = rt.alloc((n,), dtype)
        src[:] = 1
        rt.barrier()
        rt.launch(kernel, blocks=blocks, args=(acc.ptr, src.ptr))
        return acc.copy() if rt.rank == 0 else None

    res = shmcomm.run(host, nranks=nranks)
    total = nranks * blocks * reps  # 96: representable exactly in every dtype here
    assert (res[0] == total).all(), res[0][:8]


@pytest.mark.parametrize("nranks", [1, 3])
def test_tput_tget_chunked_with_sentinels(nranks):
    rows, cols = 37, 53  # not a multiple of the tile in either direction

    def kernel(ctx, src, dst, back):
        if ctx.block_idx:
            return
        me, n = ctx.rank, ctx.nranks
        tile = ctx.tile((8, 16), np.float32)
        peer = (me + 1) % n
        TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (rows, cols)), GlobalTensor(src, (rows, cols)), tile)
        ping, pong = ctx.tile((4, 32), np.float32), ctx.tile((4, 32), np.float32)
        TGET(GlobalTensor(back, (rows, cols)), GlobalTensor(GetRemotePtr(ctx, src, peer), (rows, cols)),
             ping, pong)

    def host(rt):
        src = rt.alloc((rows * cols + 1,), np.float32)
        dst = rt.alloc((rows * cols + 1,), np.float32)
        back = rt.alloc((rows * cols + 1,), np.float32)
        src[:-1] = np.arange(rows * cols) + 1000 * rt.rank
        for a in (src, dst, back):
            a[-1] = -1.0  # sentinel after the destination
        rt.barrier()
        rt.launch(kernel, blocks=2, args=(src.ptr, dst.ptr, back.ptr))
        rt.barrier()
        return dst.copy(), back.copy()

    res = shmcomm.run(host, nranks=nranks)
    base = np.arange(rows * cols)
    for rank, (dst, back) in enumerate(res):
        assert np.array_equal(dst[:-1], base + 1000 * ((rank - 1) % nranks))
        assert np.array_equal(back[:-1], base + 1000 * ((rank + 1) % nranks))
        assert dst[-1] == -1.0 and back[-1] == -1.0


def test_tput_shape_and_dtype_errors():
    def kernel(ctx, a, b):
        tile = ctx.tile((4, 4), np.float32)
        errors = []
        for fn in (lambda: TPUT(GlobalTensor(a, (4, 4)), GlobalTensor(b, (2, 8)), tile),
                   lambda: TPUT(GlobalTensor(a, (4, 4)), GlobalTensor(b.cast(np.int32), (4, 4)), tile),
                   lambda: TPUT(GlobalTensor(a, (4, 4)), GlobalTensor(b, (4, 4)), "tile"),
                   lambda: TPUT(GlobalTensor(a, (4, 4)), GlobalTensor(b, (4, 4)), tile, 5),
                   lambda: ctx.tile((1024, 1024), np.float32)):
            try:
                fn()
            except ArgumentError as exc:
                errors.append(str(exc).split(":")[0])
        return errors

    def host(rt):
        a, b = rt.alloc((16,), np.float32), rt.alloc((16,), np.float32)
        out = []
        rt.launch(lambda ctx: out.append(kernel(ctx, a.ptr, b.ptr)), blocks=1)
        return out[0]

    (errors,) = shmcomm.run(host, nranks=1)
    assert errors == ["TPUT", "TPUT", "TPUT", "TPUT", "ctx.tile"]
