"""The publish patterns of pto-isa's a2a3 kernels, judged as a2a3 runs them (see docs/pto-parity.md,
"Upstream kernels this reports, and why"), in every mode with the race detector:

* gemm_ar's ready queue (``kernels/manual/a2a3/gemm_ar/ready_queue.hpp``): a compute block
  TSTOREs its tile, drains, stores the slot and the count as plain int32 words (each with its
  ``dcci``); a communication block of the same rank TTESTs the count, ``dcci``-s the slot, loads
  it and TLOADs the tile. Correct on a2a3: no report. Without the drain: reported.
* moe_dispatch's DataAsFlag exchange (``moe_dispatch_kernel.cpp``, ``MoeDispatchWithSync``): a
  row TSTOREd to a peer, whose reader TWAITs on the row's first word and reads the row. A TSTORE
  orders none of its bytes on a2a3: reported, with that reason; the drained, fenced and
  notified twin passes.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TNOTIFY,
    TTEST,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    WaitCmp,
    gm_load,
    gm_store,
)
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TLOAD,
    TSTORE,
    dcci,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import TADDS

pytestmark = pytest.mark.timeout(300)
MODES = ["eager", "hazard", "schedule"]
SEEDS = range(4)
N = 16
OFFSET = 0x800000  # DATA_AS_FLAG_OFFSET: every value of a row is non-zero


def k_ready_queue(ctx, out, queue, result, drained):
    """Block 0 computes tile 5 and enqueues it; block 1 polls the count and takes the tile."""
    count, slot = queue, queue + 8  # the count and the first slot (PerBlockQueue's layout)
    t = ctx.tile((1, N), np.float32)
    if ctx.block_idx == 0:
        t.array[:] = 5.0
        TSTORE(GlobalTensor(out, (1, N)), t)
        if drained:
            pipe_barrier(PIPE_ALL)
        gm_store(slot, 5)
        dcci(slot)
        gm_store(count, 1)
        dcci(count)
    else:
        while not TTEST(Signal(count), 1, WaitCmp.GE):
            pass
        dcci(slot)
        tile = gm_load(slot)
        TLOAD(t, GlobalTensor(out, (1, N)))
        pipe_barrier(PIPE_ALL)
        result.append((tile, float(t.array[0, 0])))


def _ready_queue(mode, seed, drained):
    def host(rt):
        out = rt.alloc((N,), np.float32)
        queue = rt.alloc((32,), np.int32)
        result: list = []
        rt.launch(k_ready_queue, blocks=2, args=(out.ptr, queue.ptr, result, drained))
        return result[0]

    return shmcomm.run(host, nranks=1, mode=mode, seed=seed, detect_races=True, timeout=60)[0]


@pytest.mark.parametrize("mode", MODES)
def test_gemm_ar_ready_queue_is_correct_on_every_seed(mode):
    assert [_ready_queue(mode, s, True) for s in SEEDS] == [(5, 5.0)] * len(SEEDS)


@pytest.mark.parametrize("mode", MODES)
def test_gemm_ar_ready_queue_without_the_drain_is_reported(mode):
    for seed in SEEDS:
        with pytest.raises(shmcomm.RaceReport) as info:
            _ready_queue(mode, seed, False)
        text = str(info.value)
        assert "TSTORE on MTE3" in text and "TLOAD on MTE2" in text, text


def k_data_as_flag(ctx, area, sigs, result, fixed):
    """Each rank TSTOREs its row (values + OFFSET) into row ``rank`` of the peer's area; the
    reader waits for the peer's row and reads it back."""
    me, peer = ctx.rank, 1 - ctx.rank
    t = ctx.tile((1, N), np.int32)
    t.array[:] = np.arange(N, dtype=np.int32) + 10 * me
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    TADDS(t, t, OFFSET)
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    TSTORE(GlobalTensor(GetRemotePtr(ctx, area + me * N, peer), (1, N)), t)
    set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    if fixed:
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs + me, peer)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(sigs + peer), 1, WaitCmp.GE)
    else:
        TWAIT(Signal(area + peer * N), 0, WaitCmp.NE)  # the row's first word as its flag
    pipe_barrier(PIPE_ALL)
    r = ctx.tile((1, N), np.int32)
    TLOAD(r, GlobalTensor(area + peer * N, (1, N)))
    pipe_barrier(PIPE_ALL)
    result.append((r.array[0] - OFFSET).tolist())


def _data_as_flag(mode, seed, fixed):
    def host(rt):
        area = rt.alloc((2 * N,), np.int32)
        sigs = rt.signal_region("daf", 16)
        result: list = []
        rt.barrier()
        rt.launch(k_data_as_flag, blocks=1, args=(area.ptr, sigs, result, fixed))
        return result[0]

    return shmcomm.run(host, nranks=2, mode=mode, seed=seed, detect_races=True, timeout=60)


@pytest.mark.parametrize("mode", MODES)
def test_data_as_flag_is_reported_with_the_a2a3_reason(mode):
    for seed in SEEDS:
        with pytest.raises(shmcomm.RaceReport) as info:
            _data_as_flag(mode, seed, False)
        text = str(info.value)
        assert "a TSTORE is one DMA burst whose bytes land in no promised order" in text, text
        assert "TWAIT at" in text and "TNOTIFY a flag" in text, text


@pytest.mark.parametrize("mode", MODES)
def test_data_as_flag_drained_fenced_and_notified_passes(mode):
    for seed in SEEDS:
        got = _data_as_flag(mode, seed, True)
        assert got == [list(range(10, 10 + N)), list(range(N))], got
