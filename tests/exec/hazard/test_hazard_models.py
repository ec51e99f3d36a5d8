"""Hazard mode, one minimal kernel pair per sub-model: the synchronized kernel passes in hazard
mode, the same kernel with the synchronization removed passes in eager mode and fails in hazard
mode (wrong data or a checker report) for fixed seeds.

``hazard_delay=5`` keeps unsynchronized work pending for seconds, so the failing runs fail by
construction (no timing luck), while the synchronized kernels never wait for it.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.config import Config
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TLOAD,
    TSTORE,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)

pytestmark = pytest.mark.timeout(120)
N = 64
SLOW = dict(hazard_delay=5.0)
FIXED_SEEDS = (1, 2, 3)


def _run(host, nranks=1, mode="hazard", seed=1, hazards="all", blocks=1, **kw):
    kw.setdefault("detect_races", False)  # these judge the hazard models and checkers alone
    return shmcomm.run(host, nranks=nranks, blocks=blocks, mode=mode, seed=seed, hazards=hazards,
                       timeout=60, wait_timeout=20, **kw)


def _fails(host, checker=None, **kw):
    """The run fails: with ``checker``, by that checker's report."""
    with pytest.raises(shmcomm.RunError) as ei:
        _run(host, **kw)
    text = str(ei.value)
    assert f"seed: {kw.get('seed', 1)}" in text
    if checker:
        assert f"hazard [{checker}]" in text, text
    return text


# --- pipes: TLOAD completes only at wait_flag / pipe_barrier ----------------------------------

def k_load_scale(ctx, src, out, synced):
    tile = ctx.tile((1, N), np.float32)
    TLOAD(tile, GlobalTensor(src, (1, N)))
    if synced:
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    tile.array *= 2  # vector work on the loaded tile
    TSTORE(GlobalTensor(out, (1, N)), tile)
    pipe_barrier(PIPE_ALL)


def host_load_scale(rt, synced, launches=1):
    src, out = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    src[:] = np.arange(N)
    bad = 0
    for _ in range(launches):
        out[:] = 0
        rt.launch(k_load_scale, blocks=1, args=(src.ptr, out.ptr, synced))
        bad += not np.array_equal(out, 2 * np.arange(N))
    return bad


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_pipes_vector_reads_tile_before_load_retires(seed):
    assert _run(host_load_scale, mode="eager", args=(False,)) == [0]
    assert _run(host_load_scale, seed=seed, hazards="pipes", args=(True, 20)) == [0]
    assert _run(host_load_scale, seed=seed, hazards="pipes", args=(False,), **SLOW) == [1]


# --- pipes + visibility: TPUT then TNOTIFY, with and without drain and fence ------------------

def k_put_notify(ctx, data, src, drain, fence):
    """Rank 0 puts ``src`` into rank 1's ``data``, signals word 0; rank 1 copies what it sees."""
    sig = ctx.signal_base
    if ctx.rank == 0:
        TPUT(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, N)), GlobalTensor(src, (1, N)),
             ctx.tile((1, 16), np.float32))
        if drain:
            pipe_barrier(PIPE_ALL)
        if fence:
            dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, 1)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(sig + 1), 1, WaitCmp.GE)  # rank 1 has looked
    else:
        TWAIT(Signal(sig), 1, WaitCmp.GE)
        seen = GlobalTensor(data, (1, N)).view().copy()
        GlobalTensor(src, (1, N)).view()[:] = seen  # rank 1's src: what it saw
        TNOTIFY(Signal(GetRemotePtr(ctx, sig + 1, 0)), 1, NotifyOp.AtomicAdd)


def host_put_notify(rt, drain, fence, launches=1):
    data, src = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    bad = 0
    for i in range(launches):
        rt.reset_signals()
        data[:] = 0
        src[:] = np.arange(N) + i if rt.rank == 0 else -1
        rt.barrier()
        rt.launch(k_put_notify, blocks=1, args=(data.ptr, src.ptr, drain, fence))
        rt.barrier()
        bad += rt.rank == 1 and not np.array_equal(src, np.arange(N) + i)
    return bad


def host_put_notify_checked(rt, drain, fence, launches=1):
    """``host_put_notify`` that fails on stale data (the advisory checker explains the failure)."""
    assert not host_put_notify(rt, drain, fence, launches), "rank 1 saw stale data"


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_pipes_tput_does_not_drain_before_tnotify(seed):
    assert _run(host_put_notify, nranks=2, mode="eager", args=(False, False)) == [0, 0]
    assert _run(host_put_notify, nranks=2, seed=seed, hazards="pipes", args=(False, False),
                **SLOW) == [0, 1]
    _fails(host_put_notify_checked, "notify-unfenced", nranks=2, seed=seed, args=(False, False),
           **SLOW)


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_visibility_needs_dsb_after_drain(seed):
    assert _run(host_put_notify, nranks=2, mode="eager", args=(True, False)) == [0, 0]
    assert _run(host_put_notify, nranks=2, seed=seed, args=(True, True, 10)) == [0, 0]
    assert _run(host_put_notify, nranks=2, seed=seed, hazards="pipes,visibility",
                args=(True, False), **SLOW) == [0, 1]
    _fails(host_put_notify_checked, "notify-unfenced", nranks=2, seed=seed, args=(True, False),
           **SLOW)


# --- lines: Set slots of two writers on one 64-byte line (pto-isa #322) -----------------------

SLOTS_OFF = 1024  # words; past the barrier regions
GO, DONE = 0, 1


def k_set_slots(ctx, stride):
    """Ranks 1 and 2 Set their slot in rank 0's matrix, in turn: rank 1 first, then rank 2."""
    base = ctx.signal_base + SLOTS_OFF
    slot = Signal(GetRemotePtr(ctx, base + stride * ctx.rank, 0))
    if ctx.rank == 1:
        TNOTIFY(slot, 1, NotifyOp.Set)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + GO, 2)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ctx.signal_base + DONE), 1, WaitCmp.GE)
        dsb(DSB_DDR)
    elif ctx.rank == 2:
        TWAIT(Signal(ctx.signal_base + GO), 1, WaitCmp.GE)
        TNOTIFY(slot, 1, NotifyOp.Set)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + DONE, 1)), 1, NotifyOp.AtomicAdd)


def host_set_slots(rt, stride, launches=1):
    bad = 0
    for _ in range(launches):
        rt.reset_signals()
        rt.launch(k_set_slots, blocks=1, args=(stride,))
        rt.barrier()
        if rt.rank == 0:
            slots = rt.signals[SLOTS_OFF:SLOTS_OFF + 3 * stride:stride]
            bad += slots.tolist() != [0, 1, 1]
        rt.barrier()
    return bad


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_lines_packed_set_slots_clobber(seed):
    assert _run(host_set_slots, nranks=3, mode="eager", args=(1,)) == [0, 0, 0]
    assert _run(host_set_slots, nranks=3, seed=seed, args=(16, 10)) == [0, 0, 0]
    assert _run(host_set_slots, nranks=3, seed=seed, hazards="lines", args=(1,), **SLOW)[0] == 1
    _fails(host_set_slots, "line-shared", nranks=3, seed=seed, args=(1,), **SLOW)


# --- jitter: a read-modify-write that only the GIL's coarse switching kept atomic -------------

def k_rmw(ctx, counter, iters, atomic):
    sig, gate = Signal(counter), Signal(counter + 1)
    view = GlobalTensor(counter, (1,)).view()
    TNOTIFY(gate, 1, NotifyOp.AtomicAdd)  # every block is running before the loops start
    TWAIT(gate, ctx.block_num, WaitCmp.GE)
    for _ in range(iters):
        if atomic:
            TNOTIFY(sig, 1, NotifyOp.AtomicAdd)
            pipe_barrier(PIPE_ALL)
        else:
            v = int(view[0])
            pipe_barrier(PIPE_ALL)
            view[0] = v + 1


def host_rmw(rt, atomic, launches=1, iters=30, blocks=4):
    counter = rt.alloc((2,), np.int32)  # [count, start gate]
    bad = 0
    for _ in range(launches):
        counter[:] = 0
        rt.launch(k_rmw, blocks=blocks, args=(counter.ptr, iters, atomic))
        bad += int(counter[0]) != iters * blocks
    return bad


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_jitter_interleaves_blocks_of_a_rank(seed):
    # a coarse switch interval in eager mode: the blocks run their loops one after another
    assert _run(host_rmw, mode="eager", args=(False,), switch_interval=0.05) == [0]
    assert _run(host_rmw, seed=seed, hazards="jitter", args=(True, 5)) == [0]
    assert _run(host_rmw, seed=seed, hazards="jitter", args=(False,), switch_interval=0.05) == [1]


# --- checkers on pipe events ------------------------------------------------------------------

def k_flags(ctx, pattern):
    if pattern == "balanced":
        for _ in range(2):
            set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
            wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    elif pattern == "unbalanced":
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    elif pattern == "twice":
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)


def host_flags(rt, pattern, launches=1):
    for _ in range(launches):
        rt.launch(k_flags, blocks=2, args=(pattern,))
    return 0


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_checker_set_flag_without_wait_flag(seed):
    assert _run(host_flags, mode="eager", args=("unbalanced",)) == [0]
    assert _run(host_flags, seed=seed, args=("balanced", 10)) == [0]
    text = _fails(host_flags, "flag-unbalanced", seed=seed, args=("unbalanced",))
    assert "test_hazard_models.py" in text  # the set_flag's line


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_checker_event_id_set_twice(seed):
    assert _run(host_flags, mode="eager", args=("twice",)) == [0]
    _fails(host_flags, "event-twice", seed=seed, args=("twice",))


# --- configuration ----------------------------------------------------------------------------

def test_hazards_setting_is_strict():
    assert Config(hazards="pipes, lines").hazards == "pipes, lines"
    for bad in ("", "pipe", "pipes,,lines", "all,pipes"):
        with pytest.raises(ArgumentError, match="hazards must be 'all' or a comma list"):
            Config(hazards=bad)
    with pytest.raises(ArgumentError, match="hazard_delay"):
        Config(hazard_delay=-1.0)
    with pytest.raises(ArgumentError, match="SHMCOMM_HAZARDS"):
        Config.from_kwargs(env={"SHMCOMM_HAZARDS": "visibilty"})


# --- the deadlock watch waits for pending work; a real deadlock is still reported -------------

def k_store_flag(ctx):
    """Rank 0 TSTOREs a flag word into rank 1's signal matrix (data as a flag, no drain)."""
    sig = ctx.signal_base
    if ctx.rank == 0:
        tile = ctx.tile((1, 1), np.int32)
        tile.array[0, 0] = 1
        TSTORE(GlobalTensor(GetRemotePtr(ctx, sig + 8, 1), (1, 1)), tile)
        TWAIT(Signal(sig + 9), 1, WaitCmp.GE)  # rank 1's ack
    else:
        TWAIT(Signal(sig + 8), 1, WaitCmp.GE)
        TNOTIFY(Signal(GetRemotePtr(ctx, sig + 9, 0)), 1, NotifyOp.AtomicAdd)


def host_store_flag(rt):
    rt.reset_signals()
    rt.launch(k_store_flag, blocks=1)
    return 0


def test_pending_pipe_work_is_not_a_deadlock():
    # the store stays queued for ~2 s > deadlock_grace while both ranks wait: not a deadlock
    assert _run(host_store_flag, nranks=2, hazards="pipes", hazard_delay=2.0,
                deadlock_grace=0.3) == [0, 0]


def k_wait_forever(ctx):
    TWAIT(Signal(ctx.signal_base + 3), 1, WaitCmp.GE)


def test_real_deadlock_is_still_reported():
    with pytest.raises(shmcomm.DeadlockError, match="seed: 4"):
        _run(lambda rt: rt.launch(k_wait_forever, blocks=2), nranks=2, seed=4, deadlock_grace=0.3)


@pytest.mark.parametrize("hazards", ("checkers", "all"))
def test_checker_notify_after_tput_without_drain(hazards):
    # TPUT's own MTE3 -> MTE2 event drains nothing for TNOTIFY, whether or not the pipes are
    # queued; the checker is advisory: alone it fails nothing (without queued pipes the data is
    # right), beside the stale data it lets through it is the likely cause
    if hazards == "checkers":
        assert _run(host_put_notify, nranks=2, hazards=hazards, args=(False, True)) == [0, 0]
    else:
        _fails(host_put_notify_checked, "notify-unfenced", nranks=2, hazards=hazards,
               args=(False, True), **SLOW)
