"""SYNCALL as on a2a3: ports of pto-isa's syncall suite (tests/npu/a2a3/src/st/testcase/syncall:
the soft barrier's two visibility rounds, partial participation, the hard form) and the internal
drain: a block that TSTOREs and then SYNCALLs without its own barrier is correct on a2a3 (the
hard form starts with pipe_barrier(PIPE_ALL); the soft form is barrier, dsb, arrive, poll, dsb,
barrier), so every block must see every other's data in hazard mode too."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import SYNCALL, GlobalTensor, SyncAllMode, gm_load
from shmcomm.pipe import PIPE_ALL, TSTORE, dcci, pipe_barrier

pytestmark = pytest.mark.timeout(180)
MODES = ["eager", "hazard"]
LINE = 8  # kInt32PerCacheLine: one flag per 32 bytes, as the upstream kernel spaces them
IDLE_MARK = 2  # kIdleCoreMark


def _store_line(ctx, dst, value, tile):
    """StoreInt32Line: a scalar write into UB, TSTORE, with the upstream kernel's barriers."""
    tile.array[0, 0] = value
    TSTORE(GlobalTensor(dst, (1, 1)), tile)
    pipe_barrier(PIPE_ALL)


def _visible(flags, n, want):
    """The upstream kernel's check: it reads the flags through a DMA copy (the soft form after
    InvalidateInt32Lines' dcci of each line), never through lines its scalar cache kept from
    the previous round: here, a dcci of each flag's line, then a scalar load."""
    for i in range(n):
        dcci(flags + i * LINE)
    return int(all(gm_load(flags + i * LINE) == want(i) for i in range(n)))


def _body(ctx, out, flags, ws, total, mode):
    idx = ctx.block_idx
    tile = ctx.tile((1, LINE), np.int32)
    sync = (lambda: SYNCALL()) if mode is SyncAllMode.Hard and ws is None else \
        (lambda: SYNCALL(GlobalTensor(ws, (1,)), total, mode))
    _store_line(ctx, flags + idx * LINE, idx + 1, tile)
    sync()
    first = _visible(flags, total, lambda i: i + 1)
    sync()
    _store_line(ctx, flags + idx * LINE, (idx + 1) * 2, tile)
    sync()
    second = _visible(flags, total, lambda i: (i + 1) * 2)
    _store_line(ctx, out + idx * LINE, first & second, tile)


def k_syncall(ctx, out, flags, ws, sync_blocks, mode):
    if ctx.block_idx >= sync_blocks:  # RunSoftSyncAllPartial: launched, never touches the barrier
        _store_line(ctx, out + ctx.block_idx * LINE, IDLE_MARK, ctx.tile((1, LINE), np.int32))
        return
    _body(ctx, out, flags, ws, sync_blocks, mode)


def _run(mode, blocks, sync_blocks, form, with_ws=True, seed=1, **kw):
    def host(rt):
        out = rt.alloc((blocks * LINE,), np.int32)
        flags = rt.alloc((blocks * LINE,), np.int32)
        ws = rt.alloc((16,), np.int32)  # SYNCALL_SOFT_WORKSPACE_INT32: one 64-byte line
        rt.launch(k_syncall, blocks=blocks,
                  args=(out.ptr, flags.ptr, ws.ptr if with_ws else None, sync_blocks, form))
        return np.array(out[::LINE])

    return shmcomm.run(host, nranks=1, mode=mode, seed=seed, timeout=150, **kw)[0].tolist()


@pytest.mark.parametrize("mode", MODES)
def test_soft_syncall_all_blocks(mode):
    assert _run(mode, 4, 4, SyncAllMode.Soft) == [1] * 4


@pytest.mark.parametrize("mode", MODES)
def test_soft_syncall_partial_participation(mode):
    assert _run(mode, 4, 2, SyncAllMode.Soft) == [1, 1, IDLE_MARK, IDLE_MARK]


@pytest.mark.parametrize("mode", MODES)
def test_hard_syncall_both_call_shapes(mode):
    assert _run(mode, 4, 4, SyncAllMode.Hard, with_ws=False) == [1] * 4
    assert _run(mode, 4, 4, SyncAllMode.Hard) == [1] * 4  # SYNCALL<Hard>(ws, n): ws ignored


# --- the internal drain: TSTORE, then SYNCALL with no barrier of the kernel's own ----------------

def k_store_then_syncall(ctx, flags, ws, out, form):
    idx, n = ctx.block_idx, ctx.block_num
    tile = ctx.tile((1, 1), np.int32)
    tile.array[0, 0] = idx + 1
    TSTORE(GlobalTensor(flags + idx * LINE, (1, 1)), tile)  # still queued on MTE3 in hazard mode
    if form is None:
        SYNCALL()
    else:
        SYNCALL(GlobalTensor(ws, (1,)), n, form)
    out[idx] = sum(gm_load(flags + i * LINE) == i + 1 for i in range(n))


@pytest.mark.parametrize("form", [None, SyncAllMode.Soft])
def test_syncall_drains_the_pipes_first(form):
    """a2a3's SYNCALL starts with pipe_barrier(PIPE_ALL): every block sees all four stores
    (before: the stores of the last blocks to arrive were still queued, 2-4 of 4 blocks stale)."""
    def host(rt):
        flags, ws = rt.alloc((4 * LINE,), np.int32), rt.alloc((16,), np.int32)
        out: list = [0] * 4
        rt.launch(k_store_then_syncall, blocks=4, args=(flags.ptr, ws.ptr, out, form))
        return out

    for seed in (1, 2):
        assert shmcomm.run(host, nranks=1, mode="hazard", seed=seed, timeout=150,
                           hazard_delay=1.0)[0] == [4] * 4


def k_bad(ctx, ws, log):
    for fn in (lambda: SYNCALL(None, 0, SyncAllMode.Soft), lambda: SYNCALL(ws, 0, 7),
               lambda: SYNCALL(ws, ctx.block_num + 1)):
        try:
            fn()
        except ArgumentError as exc:
            log.append(str(exc).split(":")[0] + ":" + str(exc).split(":")[1].split()[0])


def test_bad_syncall_arguments_are_named():
    def host(rt):
        ws = rt.alloc((16,), np.int32)
        log: list = []
        rt.launch(k_bad, blocks=1, args=(ws.ptr, log))
        return log

    assert shmcomm.run(host, nranks=1, timeout=60)[0] == [
        "SYNCALL:the", "SYNCALL:mode", "SYNCALL:used_cores"]


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
@pytest.mark.parametrize("form", [SyncAllMode.Soft, SyncAllMode.Hard], ids=["soft", "hard"])
def test_the_60_block_suite_runs_with_the_detector_and_no_blocks_setting(mode, form):
    """The upstream suite's widest launch (60 blocks) in a run of the default blocks=, the race
    detector on (its default in these modes): no setting to guess, no report, every flag seen."""
    assert _run(mode, 60, 60, form, with_ws=form is SyncAllMode.Soft) == [1] * 60
