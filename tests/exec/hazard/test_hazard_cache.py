"""Hazard and schedule mode's scalar data cache (sub-model ``cache``): ``gm_load`` reads through a
per-block cache of 64-byte lines, as a2a3's scalar loads do. A load that forgets ``dcci`` reads the
line it filled before another rank's store (wrong data, on every seed); its twin with ``dcci``
before the load, a load after a ``TWAIT`` / ``TTEST`` of the same line (they ``dcci`` it), and a
block's load of its own store read the fresh value; a poll that forgets ``dcci`` still ends when
its line is evicted; eager mode keeps no cache."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TNOTIFY,
    TTEST,
    TWAIT,
    GetRemotePtr,
    NotifyOp,
    Signal,
    WaitCmp,
    gm_load,
    gm_store,
)
from shmcomm.pipe import PIPE_ALL, dcci, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(240)
SEEDS = range(6)
RUN = dict(timeout=60, wait_timeout=30)


def k_publish(ctx, data, sigs, out, twin):
    """Rank 0 stores 42 into rank 1's ``data`` once rank 1 is ready, then notifies; rank 1
    loads ``data`` (filling its line), says ready, waits, and loads it again (``twin``: the
    correct form, ``dcci`` before the second load; ``"ttest"``: a TTEST of the word's line)."""
    ready, flag = Signal(sigs), Signal(sigs + 16)  # two lines of the signal matrix
    if ctx.rank == 0:
        TWAIT(ready, 1, WaitCmp.GE)
        gm_store(GetRemotePtr(ctx, data, 1), 42)
        dcci(GetRemotePtr(ctx, data, 1))
        pipe_barrier(PIPE_ALL)
        dsb()
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs + 16, 1)), 1, NotifyOp.AtomicAdd)
    else:
        first = gm_load(data)
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs, 0)), 1, NotifyOp.AtomicAdd)
        TWAIT(flag, 1, WaitCmp.GE)
        if twin == "dcci":
            dcci(data)
        out.append((first, gm_load(data)))


def _publish(mode, seed, twin):
    def host(rt):
        data = rt.alloc((16,), np.int32)
        sigs = rt.signal_region("pub", 32)
        out: list = []
        rt.barrier()
        rt.launch(k_publish, blocks=1, args=(data.ptr, sigs, out, twin))
        return out[0] if out else None

    # (hazard mode's lines live EVICT_FACTOR due times of wall clock: long enough here for a
    # loaded box's round trip between the two loads; schedule mode counts steps)
    slow = dict(hazard_delay=0.05) if mode == "hazard" else {}
    return shmcomm.run(host, nranks=2, mode=mode, seed=seed, **slow, **RUN)[1]


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_load_without_dcci_reads_the_stale_line_on_every_seed(mode):
    assert [_publish(mode, s, "") for s in SEEDS] == [(0, 0)] * len(SEEDS)


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_dcci_before_the_load_reads_the_store_on_every_seed(mode):
    assert [_publish(mode, s, "dcci") for s in SEEDS] == [(0, 42)] * len(SEEDS)


def test_eager_mode_keeps_no_cache():
    assert _publish("eager", 0, "") == (0, 42)


def k_same_line(ctx, sigs, out):
    """gemm_ar's ready queue in small: a count and a slot on one line; the reader loads the slot
    early (filling the line), then TTESTs the count until it is set and loads the slot after a
    ``dcci`` of it; and it loads the count itself after a TWAIT of it (TWAIT ``dcci``-s it)."""
    count, slot = sigs, sigs + 1
    if ctx.rank == 0:
        TWAIT(Signal(sigs + 16), 1, WaitCmp.GE)
        gm_store(GetRemotePtr(ctx, slot, 1), 7)
        dcci(GetRemotePtr(ctx, slot, 1))
        gm_store(GetRemotePtr(ctx, count, 1), 1)
        dcci(GetRemotePtr(ctx, count, 1))
    else:
        early = gm_load(slot)
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs + 16, 0)), 1, NotifyOp.AtomicAdd)
        while not TTEST(Signal(count), 1, WaitCmp.GE):
            pass
        dcci(slot)
        got = gm_load(slot)
        TWAIT(Signal(count), 1, WaitCmp.GE)
        out.append((early, got, gm_load(count)))


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_loads_after_ttest_twait_and_dcci_read_fresh_lines(mode):
    def host(rt):
        sigs = rt.signal_region("q", 32)
        out: list = []
        rt.barrier()
        rt.launch(k_same_line, blocks=1, args=(sigs, out))
        return out[0] if out else None

    for seed in SEEDS:
        assert shmcomm.run(host, nranks=2, mode=mode, seed=seed, **RUN)[1] == (0, 7, 1)


def k_own_store_and_poll(ctx, data, sigs, out):
    """A block reads back its own store through its cached line; and a poll that forgets
    ``dcci`` ends once its line is evicted (a2a3 gives no such promise: the bug is slow here)."""
    if ctx.rank == 0:
        TWAIT(Signal(sigs), 1, WaitCmp.GE)
        gm_store(GetRemotePtr(ctx, data, 1), 5)
    else:
        before = gm_load(data + 1)
        gm_store(data + 1, 9)
        mine = gm_load(data + 1)
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs, 0)), 1, NotifyOp.AtomicAdd)
        while gm_load(data) != 5:  # no dcci: stale until the line is evicted
            pass
        out.append((before, mine))


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_own_stores_read_back_and_a_poll_without_dcci_still_ends(mode):
    def host(rt):
        data = rt.alloc((16,), np.int32)
        sigs = rt.signal_region("own", 16)
        out: list = []
        rt.barrier()
        rt.launch(k_own_store_and_poll, blocks=1, args=(data.ptr, sigs, out))
        return out[0] if out else None

    assert shmcomm.run(host, nranks=2, mode=mode, seed=3, **RUN)[1] == (0, 9)


def test_the_cache_is_a_sub_model_that_can_be_left_out():
    assert _publish("hazard", 1, "") == (0, 0)
    got = shmcomm.run(lambda rt: None, nranks=1, mode="hazard", hazards="pipes,visibility")
    assert got == [None]

    def host(rt):
        data = rt.alloc((16,), np.int32)
        sigs = rt.signal_region("pub", 32)
        out: list = []
        rt.barrier()
        rt.launch(k_publish, blocks=1, args=(data.ptr, sigs, out, ""))
        return out[0] if out else None

    assert shmcomm.run(host, nranks=2, mode="hazard", seed=1, hazards="pipes,visibility,lines",
                       **RUN)[1] == (0, 42)
