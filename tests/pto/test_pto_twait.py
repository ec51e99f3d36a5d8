"""TWAIT on an N-D signal tensor as on a2a3: it re-sweeps the whole tensor until one sweep sees
every element hold, whatever the tensor's strides (``a2a3/TWait.hpp``), so it never returns
while an element it checked earlier has changed back (a word reading 2 under ``EQ 1``)."""

from __future__ import annotations

import time

import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TTEST, TWAIT, GlobalTensor, NotifyOp, Signal, WaitCmp, gm_load
from shmcomm.core import agent as agent_mod
from shmcomm.core import control as C

pytestmark = pytest.mark.timeout(120)
# two 2x2 slabs 16 words apart, rows 4 words apart: not one evenly strided run of rows
SHAPE, STRIDES = (2, 1, 1, 2, 2), (16, 16, 16, 4, 1)
SLAB0, SLAB1 = (0, 1, 4, 5), (16, 17, 20, 21)


def _tensor(base):
    t = GlobalTensor(base, SHAPE, strides=STRIDES)
    assert t.row_stride is None  # the N-D path
    return t


def _line_of(block):
    """Block ``block``'s control line (same rank): its state and the offset it waits on."""
    me = agent_mod.current()
    other = next(a for a in me.rt.agents if a.block_idx == block)
    line = me.ctl.agents_of(me.rank)[other.slot]
    return int(line[C.A_STATE]), me.ctl.offset_of(line)


def _until(cond, what):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > 60:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def k_resweep(ctx, base, seen):
    if ctx.block_idx == 0:
        TWAIT(_tensor(base), 1, WaitCmp.EQ)
        seen.extend(gm_load(base + w) for w in SLAB0 + SLAB1)
        return
    off = base.offset
    # block 0 passed slab 0 (all 1) and waits on slab 1
    _until(lambda: _line_of(0) == (C.WAITING, off + 4 * SLAB1[0]), "block 0 to wait on slab 1")
    TNOTIFY(Signal(base + SLAB0[0]), 2, NotifyOp.Set)  # slab 0 changes back ...
    for w in SLAB1:
        TNOTIFY(Signal(base + w), 1, NotifyOp.Set)  # ... and then slab 1 holds
    # a full sweep sees word 0 read 2: block 0 must wait again, on slab 0 (it must not return)
    _until(lambda: seen or _line_of(0) == (C.WAITING, off), "block 0 to return or re-wait")
    TNOTIFY(Signal(base + SLAB0[0]), 1, NotifyOp.Set)


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_nd_twait_resweeps_until_one_sweep_sees_all_hold(mode):
    def host(rt):
        base = rt.signal_region("nd", 32)
        for w in SLAB0:
            TNOTIFY(Signal(base + w), 1, NotifyOp.Set)
        seen: list = []
        rt.launch(k_resweep, blocks=2, args=(base, seen))
        return seen

    assert shmcomm.run(host, nranks=1, mode=mode, seed=1, timeout=90)[0] == [1] * 8


def k_nd_simple(ctx, base, out):
    t = _tensor(base)
    if ctx.block_idx == 1:
        for w in SLAB1 + SLAB0:
            TNOTIFY(Signal(base + w), 1, NotifyOp.Set)
        return
    out.append(TTEST(t, 1, WaitCmp.EQ) in (True, False))
    TWAIT(t, 1, WaitCmp.EQ)
    out.append(TTEST(t, 1, WaitCmp.EQ))
    out.append(TTEST(t, 1, WaitCmp.NE))


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_nd_twait_and_ttest(mode):
    def host(rt):
        base = rt.signal_region("nd", 32)
        out: list = []
        rt.launch(k_nd_simple, blocks=2, args=(base, out))
        return out

    assert shmcomm.run(host, nranks=1, mode=mode, seed=2, timeout=90)[0] == [True, True, False]
