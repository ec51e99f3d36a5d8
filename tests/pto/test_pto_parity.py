"""The pieces of pto-isa's comm surface beyond the ported suites: strided 5-D tensors, valid
regions and TASSIGN, the intra-tile ping-pong's EVENT_ID1, scalar GM access through the model
seam, SYNCALL, async copies, event tokens, ParallelGroup accessors, bfloat16."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import shmcomm
from shmcomm import RunError
from shmcomm.comm import (
    SYNCALL,
    TGET_ASYNC,
    TNOTIFY,
    TPUT,
    TPUT_ASYNC,
    TTEST,
    TWAIT,
    BuildAsyncSession,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    ParallelGroup,
    Signal,
    WaitCmp,
    gm_atomic_add,
    gm_atomic_store,
    gm_load,
    gm_store,
)
from shmcomm.core.model import RankModel
from shmcomm.errors import ArgumentError
from shmcomm.exec.eager import EagerBlockModel
from shmcomm.launch.supervisor import Launcher
from shmcomm.pipe import (
    EVENT_ID1,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_S,
    RECORD,
    TASSIGN,
    TLOAD,
    TSTORE,
    Event,
    set_flag,
    wait_flag,
)

pytestmark = pytest.mark.timeout(300)


# --- GlobalTensor: 5-D shape and strides, immutable -----------------------------------------

def k_strided_put(ctx, src, dst):
    # a (2, 3, 4, 8) view with padded outer strides: every (i0, i1) slab starts 40 elements apart
    shape, strides = (2, 3, 4, 8), (3 * 40, 40, 8, 1)
    s = GlobalTensor(src, shape, strides)
    d = GlobalTensor(GetRemotePtr(ctx, dst, (ctx.rank + 1) % ctx.nranks), shape, strides)
    assert s.row_stride is None and s.GetShape(0) == 1 and s.GetStride(2) == 40
    TPUT(d, s, ctx.tile((2, 8), np.float32))


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_tput_of_a_strided_5d_tensor_moves_exactly_its_elements(mode):
    def host(rt):
        n = 2 * 3 * 40
        src, dst = rt.alloc((n,), np.float32), rt.alloc((n,), np.float32)
        src[:] = np.arange(n) + 1000 * rt.rank
        dst[:] = -1
        rt.barrier()
        rt.launch(k_strided_put, blocks=1, args=(src.ptr, dst.ptr))
        rt.barrier()
        prev = (rt.rank - 1) % rt.nranks
        want = np.full(n, -1.0, np.float32)
        view = np.lib.stride_tricks.as_strided(want, (2, 3, 4, 8), (480, 160, 32, 4))
        view[:] = np.lib.stride_tricks.as_strided(np.arange(n, dtype=np.float32) + 1000 * prev,
                                                  (2, 3, 4, 8), (480, 160, 32, 4))
        return bool(np.array_equal(dst, want))  # the gaps between the slabs stay -1

    assert shmcomm.run(host, nranks=2, mode=mode, seed=3, timeout=120) == [True, True]


def test_global_tensor_checks_and_is_immutable():
    def host(rt):
        x = rt.alloc((64,), np.float32)
        g = GlobalTensor(x.ptr, (2, 4, 8))
        out = [g.shape5, g.strides5, g.row_stride]
        for bad in (lambda: GlobalTensor(x.ptr, (2, 8), (8, 2)),
                    lambda: GlobalTensor(x.ptr, (2, 8), (0, 1)),
                    lambda: GlobalTensor(x.ptr, (2, 8), (8, 1, 1)),
                    lambda: setattr(g, "rows", 99)):
            try:
                bad()
                out.append("ok")
            except ArgumentError as exc:
                out.append(str(exc).split(":")[0])
        return out

    res = shmcomm.run(host, nranks=1, timeout=60)[0]
    assert res[:3] == [(1, 1, 2, 4, 8), (64, 64, 32, 8, 1), 8]
    assert res[3:6] == ["GlobalTensor"] * 3  # last stride 2, a stride 0, 3 strides for 2-D
    assert res[6].startswith("GlobalTensor is immutable")


# --- tiles: valid region, TASSIGN, and the intra-tile ping-pong's EVENT_ID1 ---------------------

def k_event1_clash(ctx, src, dst, rows):
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1)  # the kernel's own event, still pending
    TPUT(GlobalTensor(dst, (rows, 32)), GlobalTensor(src, (rows, 32)), ctx.tile((16, 32), np.float32))
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1)


@pytest.mark.parametrize("rows,clash", [(128, True), (64, False)])
def test_intra_tile_pingpong_uses_event_id1_as_on_the_npu(rows, clash):
    """8-16 whole-tile chunks: pto-isa splits the tile and ping-pongs on EVENT_ID1, so a pending
    EVENT_ID1 of the kernel's own clashes (event-twice); 4 chunks take the plain path."""
    def host(rt):
        src, dst = rt.alloc((rows * 32,), np.float32), rt.alloc((rows * 32,), np.float32)
        src[:] = np.arange(rows * 32)
        rt.launch(k_event1_clash, blocks=1, args=(src.ptr, dst.ptr, rows))
        return bool(np.array_equal(dst, src))

    if clash:
        with pytest.raises(RunError, match="event-twice"):
            shmcomm.run(host, nranks=1, mode="hazard", seed=1, timeout=60)
    else:
        assert shmcomm.run(host, nranks=1, mode="hazard", seed=1, timeout=60) == [True]


def k_valid_region(ctx, src, dst, log):
    t = ctx.tile((16, 32), np.float32, valid=(4, 32))  # chunks of 4 rows, not 16
    log.append((t.GetValidRow(), t.GetValidCol()))
    TPUT(GlobalTensor(dst, (16, 32)), GlobalTensor(src, (16, 32)), t)


def test_tput_chunks_by_the_valid_region():
    class Counting(RankModel):
        def block(self, agent):
            m = EagerBlockModel(agent)
            loads = self.rt.kernel_state.setdefault("loads", [])
            orig = m.load
            m.load = lambda tile, g: (loads.append(g.rows), orig(tile, g))[1]
            return m

    def host(rt):
        src, dst = rt.alloc((512,), np.float32), rt.alloc((512,), np.float32)
        src[:] = np.arange(512)
        log: list = []
        rt.launch(k_valid_region, blocks=1, args=(src.ptr, dst.ptr, log))
        return log, rt.kernel_state["loads"], bool(np.array_equal(dst, src))

    config = shmcomm.Config.from_kwargs(nranks=1, timeout=60)
    log, loads, ok = Launcher(config, host, (), model=Counting).run()[0]
    assert log == [(4, 32)] and loads == [4, 4, 4, 4] and ok


def k_tassign_overlap(ctx, src, out):
    a = ctx.tile((1, 8), np.float32)
    b = ctx.tile((2, 8), np.float32)
    TASSIGN(a, 0x20)
    TASSIGN(b, 0x0)  # b's second row is a's bytes
    TLOAD(b, GlobalTensor(src, (2, 8)))
    set_flag(PIPE_MTE2, PIPE_S, 0)
    wait_flag(PIPE_MTE2, PIPE_S, 0)
    out.append(a.array.tolist())
    for bad in (3, -32, 1 << 30):
        try:
            TASSIGN(a, bad)
        except ArgumentError as exc:
            out.append(str(exc)[:20])


def test_tassign_places_tiles_over_shared_ub_bytes():
    def host(rt):
        src = rt.alloc((16,), np.float32)
        src[:] = np.arange(16)
        out: list = []
        rt.launch(k_tassign_overlap, blocks=1, args=(src.ptr, out))
        return out

    for mode in ("eager", "hazard"):
        out = shmcomm.run(host, nranks=1, mode=mode, timeout=60)[0]
        assert out[0] == [list(map(float, range(8, 16)))]
        assert out[1:] == ["TASSIGN: addr must b"] * 3


# --- scalar GM access goes through the model seam --------------------------------------------

def k_scalar(ctx, x, log):
    gm_store(x, 5)
    log.append(gm_load(x))
    log.append(gm_atomic_add(GetRemotePtr(ctx, x + 1, 0), 2))
    gm_atomic_store(x + 2, 9)
    y = x.cast(np.float32) + 4
    gm_store(y, 1.5)
    log.append(gm_atomic_add(y, 1.0))
    log.append(gm_load(y))


def test_scalar_gm_access_reaches_the_gm_access_hook():
    class Recording(RankModel):
        def block(self, agent):
            m = EagerBlockModel(agent)
            seen = self.rt.kernel_state.setdefault("seen", [])
            m.gm_access = lambda op, ptr, nbytes, write, atomic: seen.append(
                (op, ptr.rank, nbytes, write, atomic))
            agent.hooks = m
            return m

    def host(rt):
        x = rt.alloc((8,), np.int32)
        log: list = []
        rt.launch(k_scalar, blocks=1, args=(x.ptr, log))
        rt.barrier()
        return log, rt.kernel_state["seen"], x[:3].tolist()

    config = shmcomm.Config.from_kwargs(nranks=2, timeout=60)
    res = Launcher(config, host, (), model=Recording).run()
    log, seen, words = res[0]
    # both ranks add 2 to rank 0's word, in either order: the old value is 0 or 2
    assert log[0] == 5 and log[1] in (0, 2) and log[2:] == [1.5, 2.5] and words == [5, 4, 9]
    assert seen == [("gm_store", 0, 4, True, False), ("gm_load", 0, 4, False, False),
                    ("gm_atomic_add", 0, 4, True, True), ("gm_atomic_store", 0, 4, True, True),
                    ("gm_store", 0, 4, True, False), ("gm_atomic_add", 0, 4, True, True),
                    ("gm_load", 0, 4, False, False)]


# --- SYNCALL, async copies, event tokens, ParallelGroup, bfloat16 --------------------------

def k_syncall(ctx, ws, counts, log):
    for r in range(3):
        gm_atomic_add(counts + r, 1)
        SYNCALL() if r != 1 else SYNCALL(GlobalTensor(ws, (1,)))
        log.append((r, gm_load(counts + r)))  # every block arrived before anyone goes on


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_syncall_is_a_barrier_of_the_launch(mode):
    def host(rt):
        ws, counts = rt.alloc((16,), np.int32), rt.alloc((16,), np.int32)
        log: list = []
        rt.launch(k_syncall, blocks=4, args=(ws.ptr, counts.ptr, log))
        return sorted(log)

    assert shmcomm.run(host, nranks=2, mode=mode, timeout=60) == [
        [(r, 4) for r in range(3) for _ in range(4)]] * 2


def test_syncall_with_a_missing_block_is_a_deadlock():
    def k(ctx):
        if ctx.block_idx:
            SYNCALL()

    with pytest.raises(shmcomm.DeadlockError, match="SYNCALL"):
        shmcomm.run(lambda rt: rt.launch(k, blocks=3), nranks=1, timeout=60, deadlock_grace=0.3)


def k_async(ctx, src, dst, back, flag, n):
    me, peer = ctx.rank, 1 - ctx.rank
    s = BuildAsyncSession(ctx)
    ev = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, dst, peer), (n,)), GlobalTensor(src, (n,)), s)
    assert ev.Wait(s) is True
    assert ev.Test(s)
    TNOTIFY(Signal(GetRemotePtr(ctx, flag, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(flag), 1, WaitCmp.GE)
    ev2 = TGET_ASYNC(GlobalTensor(back, (1, n)), GlobalTensor(GetRemotePtr(ctx, src, peer), (1, n)), s)
    done = Event(PIPE_MTE3, PIPE_S, record=RECORD)  # an event token, waited by the next TNOTIFY
    ev2.Wait(s)
    TNOTIFY(Signal(flag + 1), 1, NotifyOp.AtomicAdd, done)
    del me


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_async_put_and_get_land_after_wait(mode):
    def host(rt):
        n = 256
        src, dst, back = (rt.alloc((n,), np.float32) for _ in range(3))
        src[:] = np.arange(n) + 100 * rt.rank
        flag = rt.signal_region("f", 2)
        rt.barrier()
        rt.launch(k_async, blocks=1, args=(src.ptr, dst.ptr, back.ptr, flag, n))
        rt.barrier()
        peer = 1 - rt.rank
        want = np.arange(n) + 100 * peer
        return bool(np.array_equal(dst, want) and np.array_equal(back, want))

    assert shmcomm.run(host, nranks=2, mode=mode, seed=4, timeout=120) == [True, True]


def test_parallel_group_accessors_and_bfloat16():
    def k(ctx, x, out):
        pg = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, x, r), (1, 8)) for r in range(2)], 2, 1)
        out.append((pg.GetRootIdx(), pg.GetSize(), pg[0].ptr.rank, pg[1].ptr.rank, str(x.dtype)))
        try:
            pg[2]
        except ArgumentError as exc:
            out.append(str(exc))

    def host(rt):
        x = rt.alloc((8,), "bfloat16")
        x[:] = 1.5
        out: list = []
        rt.launch(k, blocks=1, args=(x.ptr, out))
        return out, x.dtype == ml_dtypes.bfloat16

    (out, is_bf16), _ = shmcomm.run(host, nranks=2, timeout=60)
    assert out[0] == (1, 2, 0, 1, "bfloat16") and "ParallelGroup[i]: i must be" in out[1]
    assert is_bf16


# --- signals are GlobalTensors; UB overlap shows in hazard mode ------------------------------

def k_signal_tensors(ctx, words, out):
    sig = Signal(words)
    TNOTIFY(GlobalTensor(words + 1, (1,)), 5, NotifyOp.Set)  # a 1-element int32 tensor
    block = GlobalTensor(words + 16, (2, 2, 3), (16, 4, 1))  # an N-D signal block, strided
    for i in range(2):
        for j in range(2):
            for k in range(3):
                TNOTIFY(Signal(words + 16 + 16 * i + 4 * j + k), 1, NotifyOp.AtomicAdd)
    TWAIT(block, 1, WaitCmp.EQ)  # every element of the block
    out.append(TTEST(GlobalTensor(words + 1, (1,)), 5, WaitCmp.EQ))
    t = ctx.tile((1, 8), np.int32)
    TLOAD(t, sig)  # TLOAD of a signal word, as in PTO
    set_flag(PIPE_MTE2, PIPE_S, 0)
    wait_flag(PIPE_MTE2, PIPE_S, 0)
    out.append(int(t.array[0, 0]))
    try:
        TWAIT(GlobalTensor(words.cast(np.float32), (1,)), 1, WaitCmp.EQ)
    except ArgumentError as exc:
        out.append(str(exc))


def test_signals_are_int32_global_tensors():
    def host(rt):
        words = rt.signal_region("s", 64)
        TNOTIFY(Signal(words), 42, NotifyOp.Set)
        out: list = []
        rt.launch(k_signal_tensors, blocks=1, args=(words, out))
        return out

    out = shmcomm.run(host, nranks=1, mode="hazard", timeout=60)[0]
    assert out[:2] == [True, 42] and "signal tensor must be int32" in out[2]


def k_ub_overlap(ctx, src, dst):
    a, b = ctx.tile((1, 16), np.float32), ctx.tile((1, 16), np.float32)
    TASSIGN(a, 0x0)
    TASSIGN(b, 0x0)  # the same UB bytes: a bug a kernel can write on the NPU
    TLOAD(a, GlobalTensor(src, (1, 16)))
    set_flag(PIPE_MTE2, PIPE_MTE3, 0)
    wait_flag(PIPE_MTE2, PIPE_MTE3, 0)
    TSTORE(GlobalTensor(dst, (1, 16)), a)
    TLOAD(b, GlobalTensor(src + 16, (1, 16)))  # no MTE3 -> MTE2 wait: overwrites a under the store


@pytest.mark.parametrize("mode,clobbered", [("eager", False), ("hazard", True)])
def test_overlapping_live_tiles_race_in_hazard_mode(mode, clobbered):
    def host(rt):
        src, dst = rt.alloc((32,), np.float32), rt.alloc((16,), np.float32)
        src[:] = np.arange(32)
        rt.launch(k_ub_overlap, blocks=1, args=(src.ptr, dst.ptr))
        return bool(np.array_equal(dst, np.arange(16, 32)))

    assert shmcomm.run(host, nranks=1, mode=mode, seed=2, timeout=60) == [clobbered]
