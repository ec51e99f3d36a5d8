"""Programs a new user writes from the README alone, part 3: the parts of the API the rest of
the corpus leaves out: the root collectives (TBROADCAST, TREDUCE, TGATHER, TSCATTER), TPUT's
AtomicAdd and ping-pong forms, event tokens (``Event``), a drain to the scalar unit by an event
(``wait_flag(PIPE_MTE3, PIPE_S)``), ``dsb(DSB_ALL)``, int32 GlobalTensors as signals, strided
tensors, the library collectives next to the user's own kernels, DeviceBarrier with a reset
between launches, and data handed from one launch to the next by the launch end and a host
barrier alone (see :mod:`.user_rings` for the rules they follow)."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    SYNCALL,
    TBROADCAST,
    TGATHER,
    TGET,
    TNOTIFY,
    TPUT,
    TREDUCE,
    TSCATTER,
    TWAIT,
    AtomicType,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    ParallelGroup,
    ReduceOp,
    Signal,
    WaitCmp,
)
from shmcomm.kernels import DeviceBarrier, all_reduce
from shmcomm.pipe import (
    DSB_ALL,
    DSB_DDR,
    EVENT_ID0,
    EVENT_ID2,
    EVENT_ID3,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_S,
    PIPE_V,
    TLOAD,
    TSTORE,
    Event,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import TADDS

from ._base import expect, program

C = 16
WPL = 16


def _v(rank: int, step: int, n: int = C) -> np.ndarray:
    return (np.arange(n, dtype=np.float32) + 20.0 * rank + 0.25 * step).astype(np.float32)


def _g(ptr, rows: int, cols: int = C) -> GlobalTensor:
    return GlobalTensor(ptr, (rows, cols))


def _release() -> None:
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


# --- 1. TBROADCAST from the root, two rounds with ACKs ------------------------------------------

def _bcast_kernel(ctx, src, dst, out, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    ready, acks = sigs, sigs + WPL
    t = ctx.tile((2, C), np.float32)
    group = ParallelGroup([_g(GetRemotePtr(ctx, dst, r), 2) for r in range(n)], n, 0)
    for k in range(1, 3):
        if me == 0:
            if k > 1:
                TWAIT(Signal(acks), (n - 1) * (k - 1), WaitCmp.GE)  # everyone copied round k-1
            TBROADCAST(group, _g(src + (k - 1) * 2 * C, 2), t)
            _release()
            for r in range(1, n):
                TNOTIFY(Signal(GetRemotePtr(ctx, ready, r)), 1, NotifyOp.AtomicAdd)
        else:
            TWAIT(Signal(ready), k, WaitCmp.GE)
            TGET(_g(out + (k - 1) * 2 * C, 2), _g(dst, 2), t)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, acks, 0)), 1, NotifyOp.AtomicAdd)


@program(nranks=4, blocks=1)
def tbroadcast_rounds_with_acks(rt):
    """Rank 0 broadcasts two (2, C) tensors with TBROADCAST into every rank's dst (drain + dsb,
    then a notify each); each member copies dst out and ACKs before the root overwrites it."""
    src = rt.alloc((2, 2, C), np.float32)
    dst = rt.alloc((2, C), np.float32)
    out = rt.alloc((2, 2, C), np.float32)
    if rt.rank == 0:
        for k in range(2):
            src[k] = np.stack([_v(0, k), _v(0, k) + 100])
    sigs = rt.signal_region("tbcast", 2 * WPL)
    rt.barrier()
    rt.launch(_bcast_kernel, args=(src.ptr, dst.ptr, out.ptr, sigs))
    if rt.rank:
        for k in range(2):
            expect(f"rank {rt.rank} round {k}", out[k], np.stack([_v(0, k), _v(0, k) + 100]))


# --- 2. TREDUCE, TGATHER and TSCATTER at the root, readiness by notifies ------------------------

def _root_kernel(ctx, x, red, gat, sca, back, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    ready, done = sigs, sigs + WPL
    t = ctx.tile((1, C), np.float32)
    acc, recv = ctx.tile((1, C), np.float32), ctx.tile((1, C), np.float32)
    # every member's x: the host wrote it before a host barrier; members also say "ready"
    TNOTIFY(Signal(GetRemotePtr(ctx, ready, 0)), 1, NotifyOp.AtomicAdd)
    if me == 0:
        TWAIT(Signal(ready), n, WaitCmp.GE)
        xs = ParallelGroup([_g(GetRemotePtr(ctx, x, r), 1) for r in range(n)], n, 0)
        TREDUCE(xs, _g(red, 1), acc, recv, ReduceOp.Sum)
        TGATHER(xs, _g(gat, n), t)
        pipe_barrier(PIPE_ALL)  # gat and red are read below by this block's own TSCATTER
        backs = ParallelGroup([_g(GetRemotePtr(ctx, back, r), 1) for r in range(n)], n, 0)
        TSCATTER(backs, _g(gat, n), t)  # every rank gets its own row back
        _release()
        for r in range(n):
            TNOTIFY(Signal(GetRemotePtr(ctx, done, r)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(done), 1, WaitCmp.GE)
    TLOAD(t, _g(back, 1))
    pipe_barrier(PIPE_ALL)
    TSTORE(_g(sca, 1), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=2)
def root_reduce_gather_scatter(rt):
    """The root reduces every rank's x (TREDUCE Sum), gathers them (TGATHER), scatters the
    gathered rows back (TSCATTER); members wait for the root's notify, after its drain + dsb."""
    n = rt.nranks
    x = rt.alloc((C,), np.float32)
    red = rt.alloc((C,), np.float32)
    gat = rt.alloc((n, C), np.float32)
    back = rt.alloc((C,), np.float32)
    sca = rt.alloc((C,), np.float32)
    sigs = rt.signal_region("roots", 2 * WPL)
    x[:] = _v(rt.rank, 1)
    rt.barrier()
    rt.launch(_root_kernel, args=(x.ptr, red.ptr, gat.ptr, sca.ptr, back.ptr, sigs))
    expect(f"rank {rt.rank} scatter", sca[:], _v(rt.rank, 1))
    if rt.rank == 0:
        expect("reduce", red[:], sum(_v(r, 1) for r in range(n)))
        expect("gather", gat[:], np.stack([_v(r, 1) for r in range(n)]))


# --- 3. TPUT with AtomicAdd into one accumulator, two rounds -------------------------------------

def _atomic_kernel(ctx, src, acc, out, sigs):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    arrived, go = sigs, sigs + WPL
    t = ctx.tile((1, C), np.float32)
    for k in range(1, 3):
        if k > 1:  # rank 0 read and re-zeroed the accumulator
            TWAIT(Signal(go), k - 1, WaitCmp.GE)
        TPUT(_g(GetRemotePtr(ctx, acc, 0), 1), _g(src + b * C, 1), t, AtomicType.AtomicAdd)
        _release()
        TNOTIFY(Signal(GetRemotePtr(ctx, arrived, 0)), 1, NotifyOp.AtomicAdd)
        if me == 0 and b == 0:
            TWAIT(Signal(arrived), k * n * nb, WaitCmp.GE)
            TLOAD(t, _g(acc, 1))
            pipe_barrier(PIPE_ALL)
            TSTORE(_g(out + (k - 1) * C, 1), t)
            pipe_barrier(PIPE_ALL)
            t.array[:] = 0
            TSTORE(_g(acc, 1), t)  # zero it for the next round
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)  # the next round's adders are other ranks
            for r in range(n):
                TNOTIFY(Signal(GetRemotePtr(ctx, go, r)), k, NotifyOp.Set)
    TWAIT(Signal(go), 2, WaitCmp.GE)


@program(nranks=3, blocks=2)
def tput_atomic_add_accumulator(rt):
    """Every block of every rank TPUTs with AtomicAdd into rank 0's accumulator (atomic against
    each other), then arrives; rank 0 reads the sum, re-zeroes it and lets the next round go
    with a versioned Set."""
    nb = rt.config.blocks
    src = rt.alloc((nb, C), np.float32)
    acc = rt.alloc((C,), np.float32)
    out = rt.alloc((2, C), np.float32)
    for b in range(nb):
        src[b] = _v(rt.rank, b)
    sigs = rt.signal_region("atomic-acc", 2 * WPL)
    rt.barrier()
    rt.launch(_atomic_kernel, args=(src.ptr, acc.ptr, out.ptr, sigs))
    if rt.rank == 0:
        want = sum(_v(r, b) for r in range(rt.nranks) for b in range(nb))
        for k in range(2):
            np.testing.assert_allclose(out[k], want, rtol=1e-6)


# --- 4. TPUT's ping-pong form, strided tensors, DSB_ALL -------------------------------------------

def _pp_kernel(ctx, src, dst, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    ping, pong = ctx.tile((1, C), np.float32), ctx.tile((1, C), np.float32)
    # the even rows of a (6, 2C) source, into the odd rows of the next rank's (6, 2C) buffer
    s = GlobalTensor(src, (3, 2 * C), (4 * C, 1))
    d = GlobalTensor(GetRemotePtr(ctx, dst + 2 * C, (me + 1) % n), (3, 2 * C), (4 * C, 1))
    TPUT(d, s, ping, pong)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_ALL)
    TNOTIFY(GlobalTensor(GetRemotePtr(ctx, sig, (me + 1) % n), (1, 1)), 1, NotifyOp.AtomicAdd)
    TWAIT(GlobalTensor(sig, (1, 1)), 1, WaitCmp.GE)


@program(nranks=2, blocks=2)
def tput_pingpong_strided_dsb_all(rt):
    """A strided TPUT (every other row) with two staging tiles, drained, fenced with
    dsb(DSB_ALL), signalled through 1x1 int32 GlobalTensors; the host checks the rows."""
    src = rt.alloc((6, 2 * C), np.float32)
    dst = rt.alloc((6, 2 * C), np.float32)
    for r in range(6):
        src[r] = _v(rt.rank, r, 2 * C)
    sig = rt.signal_region("pp-strided", WPL)
    rt.barrier()
    rt.launch(_pp_kernel, args=(src.ptr, dst.ptr, sig))
    prv = (rt.rank - 1) % rt.nranks
    for r in range(6):
        want = _v(prv, r - 1, 2 * C) if r % 2 else np.zeros(2 * C, np.float32)
        expect(f"rank {rt.rank} row {r}", dst[r], want)


# --- 5. event tokens, and a drain to the scalar unit by an event ---------------------------------

def _token_kernel(ctx, src, inbox, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    a, b = ctx.tile((1, C), np.float32), ctx.tile((1, C), np.float32)
    TLOAD(a, _g(src, 1))
    TADDS(b, a, 3.0, Event(PIPE_MTE2, PIPE_V, EVENT_ID0).record())  # waits for the load
    Event(PIPE_V, PIPE_MTE3, EVENT_ID0).record().wait()
    TSTORE(_g(GetRemotePtr(ctx, inbox, (me + 1) % n), 1), b)
    set_flag(PIPE_MTE3, PIPE_S, EVENT_ID2)  # the scalar unit waits for the store ...
    wait_flag(PIPE_MTE3, PIPE_S, EVENT_ID2)
    dsb(DSB_DDR)  # ... and the fence makes it visible to the next rank
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    TLOAD(a, _g(inbox, 1))  # a is free: the vector read of it came before b's store, waited
    Event(PIPE_MTE2, PIPE_MTE3, EVENT_ID3).record().wait()
    TSTORE(_g(out, 1), a)
    pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=1)
def event_tokens_and_scalar_drain(rt):
    """Event tokens as trailing arguments (a vector op waits for the load's event), a drain of
    MTE3 to the scalar unit by set_flag / wait_flag(PIPE_MTE3, PIPE_S), dsb, notify."""
    src = rt.alloc((C,), np.float32)
    inbox = rt.alloc((C,), np.float32)
    out = rt.alloc((C,), np.float32)
    sig = rt.signal_region("tokens", WPL)
    src[:] = _v(rt.rank, 2)
    rt.barrier()
    rt.launch(_token_kernel, args=(src.ptr, inbox.ptr, out.ptr, sig))
    expect(f"rank {rt.rank}", out[:], _v((rt.rank - 1) % rt.nranks, 2) + 3)


# --- 6. the library's all_reduce inside a user kernel, then the user's own ring ----------------

def _mixed_kernel(ctx, x, y, inbox, sig):
    me, n = ctx.rank, ctx.nranks
    all_reduce(ctx, x, y, C)  # every block of every rank calls it, each on its own slice
    SYNCALL()  # so block 0 reads the slices the other blocks of this rank waited for
    if ctx.block_idx != 0:
        return
    t = ctx.tile((1, C), np.float32)
    TPUT(_g(GetRemotePtr(ctx, inbox, (me + 1) % n), 1), _g(y, 1), t)
    _release()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)


@program(nranks=3, blocks=2)
def library_all_reduce_then_own_ring(rt):
    """all_reduce() inside the user's kernel (each block synchronizes only its own slice, so a
    SYNCALL() before one block reads all of it), then the user's own put ring forwards the sum;
    between launches the host also calls rt.all_gather on its own arrays."""
    n = rt.nranks
    x = rt.alloc((C,), np.float32)
    y = rt.alloc((C,), np.float32)
    inbox = rt.alloc((C,), np.float32)
    sig = rt.signal_region("mixed", WPL)
    x[:] = _v(rt.rank, 0)
    rt.barrier()
    rt.launch(_mixed_kernel, args=(x.ptr, y.ptr, inbox.ptr, sig))
    total = sum(_v(r, 0) for r in range(n))
    np.testing.assert_allclose(y[:], total, rtol=1e-6)
    np.testing.assert_allclose(inbox[:], total, rtol=1e-6)
    share = rt.alloc((4,), np.float32)
    whole = rt.alloc((4 * n,), np.float32)
    share[:] = np.float32(rt.rank) + np.arange(4, dtype=np.float32)
    rt.all_gather(share, whole)
    expect(f"rank {rt.rank} all_gather", whole[:],
           np.concatenate([np.float32(r) + np.arange(4, dtype=np.float32) for r in range(n)]))


# --- 7. DeviceBarrier once per launch, the signals reset between launches -------------------------

def _device_barrier_kernel(ctx, recv, out, launch):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = ctx.tile((1, C), np.float32)
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _v(me, 10 * launch + b)
    TSTORE(_g(GetRemotePtr(ctx, recv + b * C, (me + 1) % n), 1), t)
    _release()  # DeviceBarrier has no release fence of its own
    DeviceBarrier(ctx, ctx.signal_base, 0, me, n, b, ctx.block_num)
    TLOAD(t, _g(recv + b * C, 1))
    pipe_barrier(PIPE_ALL)
    TSTORE(_g(out + b * C, 1), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=2)
def device_barrier_reset_each_launch(rt):
    """The seed's DeviceBarrier used as documented: once per launch, rt.reset_signals() before
    every launch, a release fence before it; the host reads the result after each launch and
    a host barrier keeps the next launch's puts after every rank's read."""
    nb = rt.config.blocks
    recv = rt.alloc((nb, C), np.float32)
    out = rt.alloc((nb, C), np.float32)
    prv = (rt.rank - 1) % rt.nranks
    for launch in range(2):
        rt.reset_signals()
        rt.launch(_device_barrier_kernel, args=(recv.ptr, out.ptr, launch))
        for b in range(nb):
            expect(f"rank {rt.rank} launch {launch} block {b}", out[b], _v(prv, 10 * launch + b))
        rt.barrier()


# --- 8. one launch writes, the next reads: ordered by the launch end and a host barrier ---------

def _write_kernel(ctx, inbox, it):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = ctx.tile((1, C), np.float32)
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _v(me, 10 * it + b)
    TSTORE(_g(GetRemotePtr(ctx, inbox + b * C, (me + 1) % n), 1), t)  # the kernel's end fences


def _read_kernel(ctx, inbox, out):
    b = ctx.block_idx
    t = ctx.tile((1, C), np.float32)
    TLOAD(t, _g(inbox + b * C, 1))
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    TSTORE(_g(out + b * C, 1), t)


@program(nranks=4, blocks=2)
def launch_end_and_host_barrier_order(rt):
    """No signal at all: a launch stores into the next rank's inbox, the host barrier after it
    publishes that (a kernel's end drains and fences), and the next launch reads; twice, with a
    barrier before the rewrite."""
    nb = rt.config.blocks
    inbox = rt.alloc((nb, C), np.float32)
    out = rt.alloc((nb, C), np.float32)
    prv = (rt.rank - 1) % rt.nranks
    for it in range(2):
        rt.launch(_write_kernel, args=(inbox.ptr, it))
        rt.barrier()
        rt.launch(_read_kernel, args=(inbox.ptr, out.ptr))
        for b in range(nb):
            expect(f"rank {rt.rank} it {it} block {b}", out[b], _v(prv, 10 * it + b))
        rt.barrier()  # every rank read its inbox before anyone writes the next one
