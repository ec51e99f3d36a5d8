"""The race detector's happens-before edges, one pair per edge: the correct program gets no
report (in eager and hazard mode), the same program without the edge is reported.

Edges: SYNCALL (hard and soft form), the asynchronous DMA engine (``TPUT_ASYNC`` /
``TGET_ASYNC``: its copies' accesses, ``Wait`` and a true ``Test``), the scalar atomics
(``gm_atomic_store``, ``gm_atomic_add``, ``st_atomic``) observed by ``gm_load`` / ``TWAIT`` /
``TTEST``, and streams (a launch starts after its host's issue, and is joined only by
``synchronize()`` / ``Launch.wait()``).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    SYNCALL,
    TGET_ASYNC,
    TNOTIFY,
    TPUT_ASYNC,
    TTEST,
    TWAIT,
    AsyncSession,
    BuildAsyncSession,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    SyncAllMode,
    WaitCmp,
    gm_atomic_add,
    gm_atomic_store,
    gm_load,
    gm_store,
    st_atomic,
)
from shmcomm.pipe import DSB_DDR, PIPE_ALL, TLOAD, TSTORE, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(180)

N = 16
RUN = dict(timeout=60, deadlock_grace=0.3, wait_timeout=20, detect_races=True)
MODES = [("eager", 0), ("hazard", 1)]
FLAG = 1024  # a word of the signal matrix's free range (past the library's regions)


def _clean(host, mode="eager", seed=0, nranks=2, blocks=1, args=()):
    return shmcomm.run(host, nranks=nranks, blocks=blocks, args=args, mode=mode, seed=seed, **RUN)


def _race(host, mode="eager", seed=0, nranks=2, blocks=1, args=()) -> str:
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host, nranks=nranks, blocks=blocks, args=args, mode=mode, seed=seed, **RUN)
    text = str(info.value)
    assert "neither happens before the other" in text and "fix:" in text, text
    return text


def _spin(pred, what: str) -> None:
    """A bounded poll (the kernels below spin on gm_load as PTO kernels do)."""
    end = time.monotonic() + 20
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: gave up after 20 s")
        time.sleep(0)


# --- SYNCALL: every participant's work before it happens before every participant's after ----

def k_syncall(ctx, buf, ws, form, synced):
    """Each block writes its row of the rank's own buffer, SYNCALL, reads its neighbour's row,
    SYNCALL again (nobody rewrites a row still being read); three rounds."""
    b, nb = ctx.block_idx, ctx.block_num
    tile = ctx.tile((1, N), np.float32)

    def sync(i):
        if not synced[i]:
            return
        if form == "hard":
            SYNCALL()
        else:
            SYNCALL(GlobalTensor(ws, (1,)), nb, SyncAllMode.Soft)

    for rnd in range(3):
        tile.array[:] = rnd * 10 + b
        TSTORE(GlobalTensor(buf + b * N, (1, N)), tile)
        pipe_barrier(PIPE_ALL)
        sync(0)
        TLOAD(tile, GlobalTensor(buf + ((b + 1) % nb) * N, (1, N)))
        pipe_barrier(PIPE_ALL)
        sync(1)


def host_syncall(rt, form, synced):
    buf = rt.alloc((8 * N,), np.float32)
    ws = rt.alloc((16,), np.int32)
    rt.barrier()
    rt.launch(k_syncall, blocks=rt.config.blocks, args=(buf.ptr, ws.ptr, form, synced))


@pytest.mark.parametrize("form", ["hard", "soft"])
@pytest.mark.parametrize("mode,seed", MODES)
def test_syncall_orders_every_block(form, mode, seed):
    _clean(host_syncall, mode, seed, nranks=1, blocks=4, args=(form, (True, True)))


@pytest.mark.parametrize("form", ["hard", "soft"])
@pytest.mark.parametrize("synced", [(False, True), (True, False)])
def test_syncall_missing_is_reported(form, synced):
    text = _race(host_syncall, nranks=1, blocks=3, args=(form, synced))
    assert "UB tile" not in text.splitlines()[1]


# --- the DMA engine: a copy is done for the block only at Wait / a true Test --------------------

def k_async(ctx, data, out, ws, flag, case):
    sig = Signal(flag)
    if ctx.rank == 0:
        session = AsyncSession()
        assert BuildAsyncSession(ctx.tile((1, 8), np.int32), ws, session)
        dst = GlobalTensor(GetRemotePtr(ctx, out, 1), (N,))
        if case == "get":  # fetch rank 1's data into our own out, then reread it
            ev = TGET_ASYNC(GlobalTensor(out, (N,)), GlobalTensor(GetRemotePtr(ctx, data, 1), (N,)),
                            session)
            ev.Wait(session)
            tile = ctx.tile((1, N), np.float32)
            TLOAD(tile, GlobalTensor(out, (1, N)))
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, flag, 1)), 1, NotifyOp.AtomicAdd)
            return
        ev = TPUT_ASYNC(dst, GlobalTensor(data, (N,)), session)
        if case == "test":
            _spin(lambda: ev.Test(session), "Test")
        elif case == "src-overwrite":  # the source is rewritten while the copy may read it
            tile = ctx.tile((1, N), np.float32)
            tile.array[:] = -1
            TSTORE(GlobalTensor(data, (1, N)), tile)
            pipe_barrier(PIPE_ALL)
            ev.Wait(session)
        elif case != "no-wait":
            ev.Wait(session)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, 1)), 1, NotifyOp.AtomicAdd)
        if case == "no-wait":
            ev.Wait(session)
    else:
        TWAIT(sig, 1, WaitCmp.GE)
        if case == "get":  # rank 0 read our data: now we may rewrite it
            tile = ctx.tile((1, N), np.float32)
            tile.array[:] = 5
            TSTORE(GlobalTensor(data, (1, N)), tile)
            pipe_barrier(PIPE_ALL)
            return
        tile = ctx.tile((1, N), np.float32)
        TLOAD(tile, GlobalTensor(out, (1, N)))
        pipe_barrier(PIPE_ALL)


def host_async(rt, case):
    data, out = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    ws = rt.alloc((64,), np.int32)
    data[:] = np.arange(N) + rt.rank
    flag = rt.signal_region("edges-async", 1)
    rt.barrier()
    rt.launch(k_async, blocks=1, args=(data.ptr, out.ptr, ws.ptr, flag, case))


@pytest.mark.parametrize("case", ["wait", "test", "get"])
@pytest.mark.parametrize("mode,seed", MODES)
def test_async_copy_done_at_wait_or_test(case, mode, seed):
    _clean(host_async, mode, seed, args=(case,))


@pytest.mark.parametrize("case", ["no-wait", "src-overwrite"])
def test_async_copy_in_flight_is_reported(case):
    text = _race(host_async, args=(case,))
    assert "TPUT_ASYNC (the DMA copy)" in text, text


# --- scalar atomics: a release on the word; gm_load / TWAIT / TTEST that observe it acquire ----

def k_atomic_flag(ctx, data, flag, how, observe, fenced):
    word = GetRemotePtr(ctx, flag, 1)
    if ctx.rank == 0:
        tile = ctx.tile((1, N), np.float32)
        tile.array[:] = 7
        TSTORE(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, N)), tile)
        if fenced:
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)
        if how == "store":
            gm_atomic_store(word, 1)
        elif how == "plain":  # a2a3's Set notify is this store: it releases as one
            gm_store(word, 1)
        elif how == "add":
            gm_atomic_add(word, 1)
        else:
            st_atomic(1, word)
        return
    if observe == "gm_load":
        _spin(lambda: gm_load(flag) >= 1, "gm_load")
    elif observe == "ttest":
        _spin(lambda: TTEST(Signal(flag), 1, WaitCmp.GE), "TTEST")
    else:
        TWAIT(Signal(flag), 1, WaitCmp.GE)
    tile = ctx.tile((1, N), np.float32)
    TLOAD(tile, GlobalTensor(data, (1, N)))
    pipe_barrier(PIPE_ALL)
    assert tile.array[0, 0] == 7 or not fenced


def host_atomic_flag(rt, how, observe, fenced):
    data = rt.alloc((N,), np.float32)
    flag = rt.alloc((16,), np.int32)
    rt.barrier()
    rt.launch(k_atomic_flag, blocks=1, args=(data.ptr, flag.ptr, how, observe, fenced))


@pytest.mark.parametrize("how,observe", [("store", "gm_load"), ("store", "twait"),
                                         ("add", "ttest"), ("st_atomic", "gm_load"),
                                         ("plain", "gm_load"), ("plain", "ttest")])
@pytest.mark.parametrize("mode,seed", MODES)
def test_atomic_flag_after_drain_and_fence(how, observe, mode, seed):
    _clean(host_atomic_flag, mode, seed, args=(how, observe, True))


@pytest.mark.parametrize("how,observe", [("store", "gm_load"), ("add", "twait"),
                                         ("plain", "gm_load")])
def test_atomic_flag_without_drain_is_reported(how, observe):
    _race(host_atomic_flag, args=(how, observe, False))


def k_plain_flag(ctx, flag):
    if ctx.rank == 0:
        gm_store(GetRemotePtr(ctx, flag, 1), 1)  # a plain int32 store: one access on a2a3
    else:
        _spin(lambda: gm_load(flag) >= 1, "gm_load")


def host_plain_flag(rt):
    flag = rt.alloc((16,), np.int32)
    rt.barrier()
    rt.launch(k_plain_flag, blocks=1, args=(flag.ptr,))


@pytest.mark.parametrize("mode,seed", MODES)
def test_a_plain_int32_store_and_a_load_of_it_do_not_race(mode, seed):
    """a2a3's scalar store and load of an aligned int32 are single accesses (TNOTIFY's Set is
    that store), so a flag stored plainly and polled with gm_load is no data race."""
    _clean(host_plain_flag, mode, seed)


# --- streams: launches of two streams are unordered until the host joins one ------------------

def k_stream_write(ctx, buf, value):
    tile = ctx.tile((1, N), np.float32)
    tile.array[:] = value
    TSTORE(GlobalTensor(buf, (1, N)), tile)
    pipe_barrier(PIPE_ALL)


def k_stream_read(ctx, buf):
    tile = ctx.tile((1, N), np.float32)
    TLOAD(tile, GlobalTensor(buf, (1, N)))
    pipe_barrier(PIPE_ALL)


def host_streams(rt, join):
    buf = rt.alloc((N,), np.float32)
    s1, s2 = rt.stream(), rt.stream()
    first = rt.launch(k_stream_write, blocks=1, args=(buf.ptr, 1.0), stream=s1)
    if join == "synchronize":
        s1.synchronize()
    elif join == "wait":
        first.wait()
    else:
        time.sleep(0.2)  # it ends before the next starts, but nobody joins it
    rt.launch(k_stream_read, blocks=1, args=(buf.ptr,), stream=s2)
    rt.synchronize()


def host_stream_then_host_store(rt, join):
    buf = rt.alloc((N,), np.float32)
    s = rt.stream()
    rt.launch(k_stream_read, blocks=1, args=(buf.ptr,), stream=s)
    if join:
        s.synchronize()
    buf[:] = 3  # the host rewrites what the launch reads
    rt.synchronize()


@pytest.mark.parametrize("join", ["synchronize", "wait"])
@pytest.mark.parametrize("mode,seed", MODES)
def test_streams_joined_by_the_host_are_ordered(join, mode, seed):
    _clean(host_streams, mode, seed, nranks=1, args=(join,))
    _clean(host_stream_then_host_store, mode, seed, nranks=1, args=(True,))


def test_streams_not_joined_are_reported():
    text = _race(host_streams, nranks=1, args=("none",))
    assert "k_stream_write" in text or "TSTORE" in text, text
    _race(host_stream_then_host_store, nranks=1, args=(False,))


# --- reports carry their witness ----------------------------------------------------------------

def test_schedule_mode_report_carries_its_replay_command():
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host_atomic_flag, nranks=2, blocks=1, args=("store", "twait", False),
                    mode="schedule", seed=3, timeout=60, wait_timeout=20)  # on by default
    text = str(info.value)
    assert "replay: " in text and "schedule" in text and "fix:" in text, text
