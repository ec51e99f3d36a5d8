"""Bug variants of the kind a new user writes: each is one missing synchronization (or a wrong
count) away from a correct corpus program, and some mode of shmcomm must catch it (a race
report, a checker report, wrong data, or a deadlock); ``tests/stress/test_verdict_bugs.py`` checks
that each is caught in the modes listed with it (``BUGS``)."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    SYNCALL,
    TGET,
    TNOTIFY,
    TPUT,
    TPUT_ASYNC,
    TTEST,
    TWAIT,
    BuildAsyncSession,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    WaitCmp,
    gm_atomic_store,
)
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_V,
    TLOAD,
    TSTORE,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import TADDS

from ._base import expect

C = 32
WPL = 16
ALL_MODES = ("eager", "hazard", "schedule-random", "schedule-pct")
BUGS: dict[str, tuple] = {}  # name -> (host, nranks, blocks, modes it must be caught in)


def bug(nranks: int = 2, blocks: int = 1, modes: tuple[str, ...] = ALL_MODES):
    def deco(host):
        BUGS[host.__name__] = (host, nranks, blocks, modes)
        return host
    return deco


def _row(ptr, n: int = C) -> GlobalTensor:
    return GlobalTensor(ptr, (1, n))


def _v(rank: int, k: int) -> np.ndarray:
    return np.arange(C, dtype=np.float32) + 100.0 * rank + k


# --- a credit ring without its credit ----------------------------------------------------------

def _nocredit_kernel(ctx, src, slots, out, full):
    me, n = ctx.rank, ctx.nranks
    t, c = ctx.tile((1, C), np.float32), ctx.tile((1, C), np.float32)
    for k in range(4):
        if ctx.block_idx == 0:  # BUG: no wait for the credit before refilling slot k % 2
            TPUT(_row(GetRemotePtr(ctx, slots + (k % 2) * C, (me + 1) % n)), _row(src + k * C), t)
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)
            TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        else:
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            TGET(_row(out + k * C), _row(slots + (k % 2) * C), c)
            pipe_barrier(PIPE_ALL)


@bug(blocks=2)
def missing_credit(rt):
    """A two-slot ring whose producer never waits for the consumer's credit."""
    src, slots, out = rt.alloc((4, C), np.float32), rt.alloc((2, C), np.float32), rt.alloc((4, C), np.float32)
    for k in range(4):
        src[k] = _v(rt.rank, k)
    full = rt.signal_region("bug-credit", WPL)
    rt.barrier()
    rt.launch(_nocredit_kernel, args=(src.ptr, slots.ptr, out.ptr, full))
    for k in range(4):
        expect(f"rank {rt.rank} step {k}", out[k], _v((rt.rank - 1) % rt.nranks, k))


# --- drained but not fenced before the notify the reader acquires -------------------------------

def _nodsb_kernel(ctx, src, inbox, out, sig):
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, C), np.float32)
    TPUT(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), _row(src), t)
    pipe_barrier(PIPE_ALL)  # BUG: no dsb(DSB_DDR) before the notify
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    TLOAD(t, _row(inbox))
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out), t)


@bug()
def missing_dsb_reader_reads(rt):
    """A put ring drained but not fenced before the notify its reader waits for."""
    src, inbox, out = (rt.alloc((C,), np.float32) for _ in range(3))
    src[:] = _v(rt.rank, 0)
    sig = rt.signal_region("bug-dsb", WPL)
    rt.barrier()
    rt.launch(_nodsb_kernel, args=(src.ptr, inbox.ptr, out.ptr, sig))
    expect(f"rank {rt.rank}", out[:], _v((rt.rank - 1) % rt.nranks, 0))


# --- no drain at all before the notify ---------------------------------------------------------

def _nodrain_kernel(ctx, inbox, out, sig):
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, C), np.float32)
    t.array[0, :] = _v(me, 1)
    TSTORE(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), t)
    dsb(DSB_DDR)  # BUG: the store was never drained (no pipe_barrier)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    u = ctx.tile((1, C), np.float32)
    TLOAD(u, _row(inbox))
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out), u)


@bug()
def missing_drain_before_notify(rt):
    """A TSTORE fenced with dsb but never drained before its notify."""
    inbox, out = rt.alloc((C,), np.float32), rt.alloc((C,), np.float32)
    sig = rt.signal_region("bug-drain", WPL)
    rt.launch(_nodrain_kernel, args=(inbox.ptr, out.ptr, sig))
    expect(f"rank {rt.rank}", out[:], _v((rt.rank - 1) % rt.nranks, 1))


# --- a Set flag reused without a version ---------------------------------------------------------

def _setreuse_kernel(ctx, src, inbox, out, sig):
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, C), np.float32)
    for k in range(3):
        TPUT(_row(GetRemotePtr(ctx, inbox + k * C, (me + 1) % n)), _row(src + k * C), t)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.Set)  # BUG: always 1
        TWAIT(Signal(sig), 1, WaitCmp.EQ)  # from round 2 on it holds before the data came
        TLOAD(t, _row(inbox + k * C))
        pipe_barrier(PIPE_ALL)
        TSTORE(_row(out + k * C), t)
        pipe_barrier(PIPE_ALL)


@bug()
def set_flag_reused_without_version(rt):
    """Each round Sets the same flag to 1 and waits for == 1: later rounds pass at once."""
    src, inbox, out = (rt.alloc((3, C), np.float32) for _ in range(3))
    for k in range(3):
        src[k] = _v(rt.rank, k)
    sig = rt.signal_region("bug-setreuse", WPL)
    rt.barrier()
    rt.launch(_setreuse_kernel, args=(src.ptr, inbox.ptr, out.ptr, sig))
    for k in range(3):
        expect(f"rank {rt.rank} round {k}", out[k], _v((rt.rank - 1) % rt.nranks, k))


# --- a threshold that does not count launches ----------------------------------------------------

def _relaunch_kernel(ctx, inbox, out, sig, launch):
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, C), np.float32)
    t.array[0, :] = _v(me, 10 * launch)
    TSTORE(_row(GetRemotePtr(ctx, inbox + launch * C, (me + 1) % n)), t)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)  # BUG: launch 2 needs >= 2 (the counter is never reset)
    u = ctx.tile((1, C), np.float32)
    TLOAD(u, _row(inbox + launch * C))
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out + launch * C), u)


@bug()
def threshold_ignores_launches(rt):
    """A counter kept across launches whose second launch still waits for >= 1."""
    inbox, out = rt.alloc((2, C), np.float32), rt.alloc((2, C), np.float32)
    sig = rt.signal_region("bug-relaunch", WPL)
    for launch in range(2):
        rt.launch(_relaunch_kernel, args=(inbox.ptr, out.ptr, sig, launch))
        expect(f"rank {rt.rank} launch {launch}", out[launch], _v((rt.rank - 1) % rt.nranks, 10 * launch))


# --- a stream launch read without synchronize -----------------------------------------------------

def _fill(ctx, buf):
    t = ctx.tile((1, C), np.float32)
    t.array[0, :] = _v(ctx.rank, 3)
    TSTORE(_row(buf), t)
    pipe_barrier(PIPE_ALL)


@bug()
def stream_read_without_sync(rt):
    """The host reads what a stream launch writes before synchronizing the stream."""
    buf = rt.alloc((C,), np.float32)
    s = rt.stream()
    rt.launch(_fill, args=(buf.ptr,), stream=s)
    got = float(buf[0])  # BUG: s.synchronize() must come first
    s.synchronize()
    assert got == float(_v(rt.rank, 3)[0]), f"rank {rt.rank}: read {got} before the launch ended"


# --- a tile rewritten while its TSTORE is in flight ------------------------------------------------

def _tile_rewrite_kernel(ctx, src, dst):
    a, b = ctx.tile((1, C), np.float32), ctx.tile((1, C), np.float32)
    TLOAD(a, _row(src))
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    TADDS(b, a, 1.0)
    pipe_barrier(PIPE_V)
    TSTORE(_row(dst), b)
    TADDS(b, a, 5.0)  # BUG: b is rewritten while its TSTORE may still read it (no MTE3 -> V)
    pipe_barrier(PIPE_ALL)


@bug(nranks=1)
def tile_rewritten_during_tstore(rt):
    """A vector op rewrites a tile whose TSTORE is still in flight."""
    src, dst = rt.alloc((C,), np.float32), rt.alloc((C,), np.float32)
    src[:] = _v(0, 0)
    rt.launch(_tile_rewrite_kernel, args=(src.ptr, dst.ptr))
    expect("dst", dst[:], _v(0, 0) + 1)


# --- a soft SYNCALL over the wrong block count -----------------------------------------------------

def _syncall_kernel(ctx, part, ws, out):
    b, nb = ctx.block_idx, ctx.block_num
    t = ctx.tile((1, C), np.float32)
    t.array[0, :] = _v(ctx.rank, b)
    TSTORE(_row(part + b * C), t)
    SYNCALL(GlobalTensor(ws, (1, WPL)), 2)  # BUG: three blocks take part, the count says 2
    acc = np.zeros(C, np.float32)
    for j in range(nb):
        TLOAD(t, _row(part + j * C))
        pipe_barrier(PIPE_ALL)
        acc += t.array[0]
    out.append(acc)


@bug(nranks=1, blocks=3)
def syncall_wrong_block_count(rt):
    """Three blocks meet at a soft SYNCALL declared for two, then read every block's part."""
    part = rt.alloc((3, C), np.float32)
    ws = rt.signal_region("bug-syncall", WPL)
    out: list = []
    rt.launch(_syncall_kernel, args=(part.ptr, ws, out))
    for acc in out:
        expect("sum", acc, sum(_v(rt.rank, j) for j in range(3)))


# --- an async copy signalled before its Wait --------------------------------------------------------

def _async_kernel(ctx, src, inbox, out, sig):
    me, n = ctx.rank, ctx.nranks
    s = BuildAsyncSession(ctx)
    TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, inbox, (me + 1) % n), (C,)), GlobalTensor(src, (C,)), s)
    dsb(DSB_DDR)  # BUG: the copy's event was never waited (Wait / Test)
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    t = ctx.tile((1, C), np.float32)
    TLOAD(t, _row(inbox))
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out), t)


@bug()
def async_copy_not_waited(rt):
    """TPUT_ASYNC, then dsb and the notify, without waiting for the copy."""
    src, inbox, out = (rt.alloc((C,), np.float32) for _ in range(3))
    src[:] = _v(rt.rank, 4)
    sig = rt.signal_region("bug-async", WPL)
    rt.barrier()
    rt.launch(_async_kernel, args=(src.ptr, inbox.ptr, out.ptr, sig))
    expect(f"rank {rt.rank}", out[:], _v((rt.rank - 1) % rt.nranks, 4))


# --- a bounded poll that gives up and reads anyway --------------------------------------------------

def _giveup_kernel(ctx, inbox, out, sig):
    me = ctx.rank
    t = ctx.tile((1, C), np.float32)
    if me == 0:
        t.array[0, :] = _v(0, 6)
        TSTORE(_row(GetRemotePtr(ctx, inbox, 1)), t)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, 1)), 1, NotifyOp.AtomicAdd)
        return
    for _ in range(2):
        if TTEST(Signal(sig), 1, WaitCmp.GE):
            break
    TLOAD(t, _row(inbox))  # BUG: read whether or not the poll saw the flag
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out), t)
    TWAIT(Signal(sig), 1, WaitCmp.GE)


@bug(modes=("eager", "hazard", "schedule-random"))  # PCT runs rank 0 first: the poll sees it
def poll_gives_up_then_reads(rt):
    """A bounded TTEST poll that gives up, and the data read anyway."""
    inbox, out = rt.alloc((C,), np.float32), rt.alloc((C,), np.float32)
    sig = rt.signal_region("bug-giveup", WPL)
    rt.launch(_giveup_kernel, args=(inbox.ptr, out.ptr, sig))
    if rt.rank == 1:
        expect("rank 1", out[:], _v(0, 6))


# --- a scalar atomic flag after undrained data ---------------------------------------------------------

def _atomic_flag_kernel(ctx, inbox, out, words):
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, C), np.float32)
    t.array[0, :] = _v(me, 7)
    TSTORE(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), t)
    gm_atomic_store(GetRemotePtr(ctx, words, (me + 1) % n), 1)  # BUG: no drain, no dsb first
    TWAIT(Signal(words), 1, WaitCmp.GE)
    u = ctx.tile((1, C), np.float32)
    TLOAD(u, _row(inbox))
    pipe_barrier(PIPE_ALL)
    TSTORE(_row(out), u)


@bug()
def atomic_flag_before_drain(rt):
    """gm_atomic_store of the flag right after the data's TSTORE, with no drain or fence."""
    inbox, out = rt.alloc((C,), np.float32), rt.alloc((C,), np.float32)
    words = rt.signal_region("bug-atomic", WPL)
    rt.launch(_atomic_flag_kernel, args=(inbox.ptr, out.ptr, words))
    expect(f"rank {rt.rank}", out[:], _v((rt.rank - 1) % rt.nranks, 7))


# --- Launch.done read once, not waited for ----------------------------------------------------------

@bug()
def launch_done_checked_once(rt):
    """The host checks Launch.done once and reads the result whatever it said."""
    buf = rt.alloc((C,), np.float32)
    s = rt.stream()
    h = rt.launch(_fill, args=(buf.ptr,), stream=s)
    h.done  # BUG: one look, not a loop until it says True  # noqa: B018
    got = float(buf[0])
    s.synchronize()
    assert got == float(_v(rt.rank, 3)[0]), f"rank {rt.rank}: read {got} before the launch ended"
