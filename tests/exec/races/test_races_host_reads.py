"""The race detector sees the host's reads of symmetric arrays: a host reading what a peer's
kernel put without a dsb before its notify is a race on every seed and in every mode, and the
correct ways to read (a fence, the host's own blocks, a barrier, a local copy) are not."""

from __future__ import annotations

import time

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.core.heap import SymmetricArray
from shmcomm.pipe import DSB_DDR, PIPE_ALL, TLOAD, TSTORE, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(180)

RUN = dict(timeout=60, deadlock_grace=0.3, wait_timeout=20)
N = 64


def k_ring(ctx, src, dst, n, fence):
    """Every rank puts its vector into the next rank's dst, then signals it."""
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, n), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    pipe_barrier(PIPE_ALL)
    if fence:
        dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def host_ring(rt, fence, how):
    src, dst = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    src[:] = rt.rank + 1
    rt.launch(k_ring, args=(src.ptr, dst.ptr, N, fence))
    want = (rt.rank - 1) % rt.nranks + 1
    if how == "element":
        got = float(dst[0])
    elif how == "sum":
        got = float(dst.sum()) / N
    else:
        got = want if np.all(dst == want) else -1.0
    return got == want


def _race(**kw) -> str:
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host_ring, nranks=2, args=(False, kw.pop("how", "all")), **RUN, **kw)
    assert info.value.failures[0].kind == "race"
    return str(info.value)


@pytest.mark.parametrize("seed", range(5))
def test_ring_without_dsb_is_a_race_in_hazard_mode_on_every_seed(seed):
    text = _race(mode="hazard", seed=seed, blocks=1 + seed % 2)  # the detector on by default
    assert "host read it" in text and "test_races_host_reads.py:" in text, text
    assert "(TPUT (its TSTORE) on MTE3)" in text and "dsb(DSB_DDR)" in text and "fix:" in text, text


@pytest.mark.parametrize("strategy", ["random", "pct:2"])
def test_ring_without_dsb_is_a_race_in_schedule_mode(strategy):
    _race(mode="schedule", strategy=strategy, seed=1)


@pytest.mark.parametrize("how", ["element", "sum", "all"])
def test_ring_without_dsb_is_a_race_in_eager_mode_with_the_detector(how):
    text = _race(mode="eager", detect_races=True, how=how)
    assert "host read it" in text, text


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_ring_with_dsb_is_not_reported(mode):
    res = shmcomm.run(host_ring, nranks=2, blocks=2, args=(True, "all"), mode=mode, seed=2,
                      detect_races=True, **RUN)
    assert all(res), res


def k_own(ctx, buf, n):
    tile = ctx.tile((1, n), np.float32)
    g = GlobalTensor(buf + ctx.block_idx * n, (1, n))
    TLOAD(tile, g)
    pipe_barrier(PIPE_ALL)
    tile.array[:] += 1
    TSTORE(g, tile)


def host_own(rt):
    buf = rt.alloc((2 * N,), np.float32)
    buf[:] = rt.rank
    rt.launch(k_own, args=(buf.ptr, N))
    return bool(np.all(buf == rt.rank + 1)) and float(buf[N]) == rt.rank + 1


def k_put_only(ctx, dst, src, n):
    if ctx.block_idx != 0:
        return
    tile = ctx.tile((1, n), np.float32)
    peer = (ctx.rank + 1) % ctx.nranks
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)


def host_barrier(rt):
    src, dst = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    src[:] = rt.rank + 1
    rt.barrier()
    rt.launch(k_put_only, args=(dst.ptr, src.ptr, N))
    rt.barrier()  # the peer's launch ended (fenced) before this rank's host reads
    return float(dst[0]) == (rt.rank - 1) % rt.nranks + 1 and bool(np.all(dst == dst[0]))


def k_credit_copy(ctx, buf, local, n):
    """The peer signals a credit; this rank copies its own buffer locally (no dsb needed: the
    host reads only what its own blocks stored)."""
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)
    tile = ctx.tile((1, n), np.float32)
    TLOAD(tile, GlobalTensor(buf, (1, n)))
    pipe_barrier(PIPE_ALL)
    TSTORE(GlobalTensor(local, (1, n)), tile)
    pipe_barrier(PIPE_ALL)


def host_credit(rt):
    buf, local = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    buf[:] = rt.rank + 5
    rt.launch(k_credit_copy, args=(buf.ptr, local.ptr, N))
    return bool(np.all(local == rt.rank + 5)) and float(local.sum()) == N * (rt.rank + 5)


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("host", [host_own, host_barrier, host_credit])
def test_correct_host_reads_are_not_reported(mode, host):
    res = shmcomm.run(host, nranks=2, blocks=2, mode=mode, seed=3, detect_races=True, **RUN)
    assert all(res), res


def test_reads_are_seen_through_elements_ufuncs_and_array_equal():
    arr = np.arange(8, dtype=np.float32).view(SymmetricArray)
    seen: list = []
    SymmetricArray.read_observers.append(lambda a, k: seen.append(k))
    try:
        view = arr[2:4]
        assert seen == []  # a view is not a read
        arr[1]
        assert seen == [1]
        del seen[:]
        for expr in (lambda: arr == 1, lambda: arr + 1, lambda: arr.sum(),
                     lambda: np.add.reduce(arr), lambda: np.array_equal(arr, arr),
                     lambda: np.allclose(arr, 0)):
            expr()
            assert seen and seen[0] is Ellipsis
            del seen[:]
        assert isinstance(arr + 1, SymmetricArray) and isinstance(view, SymmetricArray)
    finally:
        SymmetricArray.read_observers.pop()



def k_put_notify(ctx, dst, src, n, fence):
    if ctx.block_idx != 0 or ctx.rank != 0:
        return
    tile = ctx.tile((1, n), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, 1), (1, n)), GlobalTensor(src, (1, n)), tile)
    pipe_barrier(PIPE_ALL)
    if fence:
        dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, 1)), 1, NotifyOp.AtomicAdd)


def host_poll(rt, fence):
    """Rank 1's host polls its signal word (a read of an int32 element acquires the word),
    then reads what rank 0's kernel put."""
    src, dst = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    src[:] = 7
    rt.barrier()
    ok = True
    if rt.rank == 0:
        rt.launch(k_put_notify, args=(dst.ptr, src.ptr, N, fence))
    else:
        end = time.monotonic() + 20
        while rt.signals[0] < 1 and time.monotonic() < end:
            time.sleep(0.001)
        ok = bool(np.all(dst == 7))
    rt.barrier()
    return ok


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_a_host_polling_its_signal_word_acquires_it(mode):
    res = shmcomm.run(host_poll, nranks=2, blocks=1, args=(True,), mode=mode, seed=1,
                      detect_races=True, **RUN)
    assert all(res), res
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host_poll, nranks=2, blocks=1, args=(False,), mode=mode, seed=1,
                    detect_races=True, **RUN)
    assert "no dsb(DSB_DDR)" in str(info.value), str(info.value)
