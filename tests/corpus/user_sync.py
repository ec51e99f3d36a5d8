"""Programs a new user writes from the README alone, part 2: launches and host code, barriers and
SYNCALL, pulls, pipe events and vector stages, async copies, streams, scalar atomics, and the
collectives built by hand (see :mod:`.user_rings` for the rules they follow)."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    SYNCALL,
    TGET,
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
    Signal,
    Signal2D,
    WaitCmp,
    gm_atomic_add,
    gm_atomic_store,
    gm_load,
    gm_store,
)
from shmcomm.kernels import CentralBarrier, EpochBarrier
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    EVENT_ID1,
    EVENT_ID2,
    EVENT_ID3,
    EVENT_ID5,
    EVENT_ID6,
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
from shmcomm.vector import TADD, TADDS, TEXPANDS, TMULS, TSUBS

from ._base import expect, program

COLS = 32
WPL = 16  # int32 words per 64-byte line


def _row(ptr, n: int = COLS) -> GlobalTensor:
    return GlobalTensor(ptr, (1, n))


def _vals(rank: int, step: int, lane: int = 0, n: int = COLS) -> np.ndarray:
    return (np.arange(n, dtype=np.float32) % 11 + 50.0 * rank + 3.0 * step
            + 500.0 * lane).astype(np.float32)


def _fence() -> None:
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


# --- 1. host code between launches: reads after a barrier, writes before the next launch -------

LAUNCHES = 3


def _exchange_kernel(ctx, x, inbox, sig, launch):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, COLS), np.float32)
    TPUT(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), _row(x), t)
    _fence()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), launch, WaitCmp.GE)  # one more per launch: the threshold counts them


@program(nranks=4, blocks=2)
def host_updates_between_launches(rt):
    """Three launches of a put ring on one counter never reset; between them the host reads
    what arrived, then (after a host barrier: every rank read its inbox) updates its vector
    for the next launch."""
    x = rt.alloc((COLS,), np.float32)
    inbox = rt.alloc((COLS,), np.float32)
    sig = rt.signal_region("exchange", WPL)
    prv = (rt.rank - 1) % rt.nranks
    for launch in range(1, LAUNCHES + 1):
        x[:] = _vals(rt.rank, launch)
        rt.barrier()  # nobody's inbox is being read any more (and my x is written)
        rt.launch(_exchange_kernel, args=(x.ptr, inbox.ptr, sig, launch))
        got = inbox[:]
        expect(f"rank {rt.rank} launch {launch}", got, _vals(prv, launch))
        assert float(inbox[0]) == float(_vals(prv, launch)[0])


# --- 2. EpochBarrier among three of four blocks --------------------------------------------------

ROUNDS = 3


def _epoch3_kernel(ctx, recv, local, sig):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    if b == 3:  # outside the barrier: a local hand-off from itself to itself, by a counter
        for r in range(ROUNDS):
            pipe_barrier(PIPE_ALL)
            t.array[0, :] = _vals(me, r, 9)
            TSTORE(_row(local + r * COLS), t)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(sig), 1, NotifyOp.AtomicAdd)
        while not TTEST(Signal(sig), ROUNDS, WaitCmp.GE):
            pass
        return
    for r in range(ROUNDS):
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(me, r, b)
        TSTORE(_row(GetRemotePtr(ctx, recv + b * COLS, (me + 1) % n)), t)
        EpochBarrier(ctx, num_blocks=3)
        TLOAD(t, _row(recv + b * COLS))
        pipe_barrier(PIPE_ALL)
        expect(f"rank {me} block {b} round {r}", t.array[0], _vals((me - 1) % n, r, b))
        EpochBarrier(ctx, num_blocks=3)


@program(nranks=3, blocks=4)
def epoch_barrier_three_of_four(rt):
    """Blocks 0-2 of a 4-block launch exchange rows through EpochBarrier(num_blocks=3); block 3
    never calls it and counts its own rounds on a local word."""
    recv = rt.alloc((3, COLS), np.float32)
    local = rt.alloc((ROUNDS, COLS), np.float32)
    sig = rt.signal_region("epoch3", WPL)
    rt.launch(_epoch3_kernel, args=(recv.ptr, local.ptr, sig))
    for r in range(ROUNDS):
        expect(f"rank {rt.rank} local {r}", local[r], _vals(rt.rank, r, 9))


# --- 3. soft SYNCALL over every block, its counter kept across launches --------------------------

def _soft_all_kernel(ctx, part, ws, out, launch):
    b, nb = ctx.block_idx, ctx.block_num
    t = ctx.tile((1, COLS), np.float32)
    acc = np.zeros(COLS, np.float32)
    for r in range(2):
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(ctx.rank, 10 * launch + r, b)
        TSTORE(_row(part + b * COLS), t)
        pipe_barrier(PIPE_ALL)
        SYNCALL(GlobalTensor(ws, (1, WPL)), nb)
        acc[:] = 0
        for j in range(nb):
            TLOAD(t, _row(part + ((b + j) % nb) * COLS))
            pipe_barrier(PIPE_ALL)
            acc += t.array[0]
        SYNCALL(GlobalTensor(ws, (1, WPL)), nb)  # every block read the parts: next round
        out.append((launch, r, b, acc.copy()))


@program(nranks=2, blocks=3)
def soft_syncall_counter_across_launches(rt):
    """Soft SYNCALL(ws, 3) over all three blocks, twice a round, two rounds a launch, two
    launches; the workspace counter is never reset (its targets keep counting)."""
    nb = rt.config.blocks
    part = rt.alloc((nb, COLS), np.float32)
    ws = rt.signal_region("soft-all", WPL)
    out: list = []
    for launch in range(2):
        rt.launch(_soft_all_kernel, args=(part.ptr, ws, out, launch))
    assert len(out) == 2 * 2 * nb
    for launch, r, b, acc in out:
        want = sum(_vals(rt.rank, 10 * launch + r, j) for j in range(nb))
        expect(f"rank {rt.rank} launch {launch} round {r} block {b}", acc, want)


def _soft_groups_kernel(ctx, part, ws, out):
    b = ctx.block_idx
    g = b // 2
    t = ctx.tile((1, COLS), np.float32)
    mine = GlobalTensor(ws + g * WPL, (1, WPL))
    for r in range(ROUNDS):
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(ctx.rank, r, b)
        TSTORE(_row(part + b * COLS), t)
        pipe_barrier(PIPE_ALL)
        SYNCALL(mine, 2)
        TLOAD(t, _row(part + (b ^ 1) * COLS))  # my partner in the group
        pipe_barrier(PIPE_ALL)
        out.append((r, b, t.array[0].copy()))
        SYNCALL(mine, 2)


@program(nranks=1, blocks=4)
def soft_syncall_two_pairs(rt):
    """Blocks {0,1} and {2,3} each meet at their own soft SYNCALL(ws_g, 2) and swap rows."""
    part = rt.alloc((4, COLS), np.float32)
    ws = rt.signal_region("soft-pairs", 2 * WPL)
    out: list = []
    rt.launch(_soft_groups_kernel, args=(part.ptr, ws, out))
    assert len(out) == ROUNDS * 4
    for r, b, got in out:
        expect(f"round {r} block {b}", got, _vals(rt.rank, r, b ^ 1))


# --- 4. hard SYNCALL: a block transpose ---------------------------------------------------------

def _transpose_kernel(ctx, mat, out):
    b, nb = ctx.block_idx, ctx.block_num
    t = ctx.tile((1, nb * 8), np.float32)
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = np.arange(nb * 8, dtype=np.float32) + 100 * b + 1000 * ctx.rank
    TSTORE(_row(mat + b * nb * 8, nb * 8), t)  # my row
    SYNCALL()
    for j in range(nb):  # column block b of row j is the block j of my output row
        c = ctx.tile((1, 8), np.float32)
        TLOAD(c, _row(mat + j * nb * 8 + b * 8, 8))
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID2)
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID2)
        TSTORE(_row(out + b * nb * 8 + j * 8, 8), c)
        pipe_barrier(PIPE_ALL)
    SYNCALL()


@program(nranks=2, blocks=4)
def hard_syncall_block_transpose(rt):
    """Each block stores one row of a block matrix, SYNCALL(), then gathers a block column into
    its output row; the host checks the transpose."""
    nb = rt.config.blocks
    mat = rt.alloc((nb, nb * 8), np.float32)
    out = rt.alloc((nb, nb * 8), np.float32)
    rt.launch(_transpose_kernel, args=(mat.ptr, out.ptr))
    m = np.stack([np.arange(nb * 8, dtype=np.float32) + 100 * b + 1000 * rt.rank
                  for b in range(nb)]).reshape(nb, nb, 8)
    want = m.transpose(1, 0, 2).reshape(nb, nb * 8)
    expect(f"rank {rt.rank} transpose", out[:], want)


# --- 5. CentralBarrier all-gather ----------------------------------------------------------------

def _central_kernel(ctx, table, out):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    for r in range(2):
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(me, r, b)
        for peer in range(n):
            TSTORE(_row(GetRemotePtr(ctx, table + (me * ctx.block_num + b) * COLS, peer)), t)
        CentralBarrier(ctx)  # drains and fences at entry
        for i in range(n * ctx.block_num):
            TLOAD(t, _row(table + i * COLS))
            pipe_barrier(PIPE_ALL)
            out.append((r, i, t.array[0].copy()))
        CentralBarrier(ctx)  # every reader is done before the next round overwrites


@program(nranks=4, blocks=1)
def central_barrier_all_gather(rt):
    """Four ranks store a row into every rank's table, meet at CentralBarrier, read the table."""
    nb = rt.config.blocks
    table = rt.alloc((rt.nranks * nb, COLS), np.float32)
    out: list = []
    rt.launch(_central_kernel, args=(table.ptr, out))
    for r, i, got in out:
        expect(f"rank {rt.rank} round {r} row {i}", got, _vals(i // nb, r, i % nb))


# --- 6. a chunked pull with credits ---------------------------------------------------------------

BIG = 5 * COLS + 7


def _pull_kernel(ctx, buf, out, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    ready, done = sigs, sigs + WPL
    whole = ctx.tile((1, BIG), np.float32)
    t = ctx.tile((1, COLS), np.float32)  # smaller than the data: TGET chunks it
    for k in range(1, 3):
        if k > 1:  # the puller is done with my buffer
            TWAIT(Signal(done), k - 1, WaitCmp.GE)
        pipe_barrier(PIPE_ALL)
        whole.array[0, :] = _vals(me, k, n=BIG)
        TSTORE(_row(buf, BIG), whole)
        _fence()  # the reader is another rank: drain, then the DDR fence
        TNOTIFY(Signal(GetRemotePtr(ctx, ready, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ready), k, WaitCmp.GE)
        TGET(_row(out + (k - 1) * BIG, BIG), _row(GetRemotePtr(ctx, buf, (me - 1) % n), BIG), t)
        pipe_barrier(PIPE_ALL)
        TNOTIFY(Signal(GetRemotePtr(ctx, done, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(done), 2, WaitCmp.GE)  # my buffer's last reader is done before I return


@program(nranks=3, blocks=2)
def chunked_pull_with_done_credit(rt):
    """Each rank refills its own buffer twice (drain + dsb, then ready to the next rank), the
    next rank pulls it with a TGET through a tile five times smaller and says done."""
    buf = rt.alloc((BIG,), np.float32)
    out = rt.alloc((2, BIG), np.float32)
    sigs = rt.signal_region("chunk-pull", 2 * WPL)
    rt.launch(_pull_kernel, args=(buf.ptr, out.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for k in range(1, 3):
        expect(f"rank {rt.rank} pull {k}", out[k - 1], _vals(prv, k, n=BIG))


# --- 7. a ping-pong pull from the previous rank, ordered by events ---------------------------------

CHUNKS = 5


def _pingpong_pull_kernel(ctx, buf, out, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    ready, done = sigs, sigs + WPL
    src = GetRemotePtr(ctx, buf, (me - 1) % n)
    TWAIT(Signal(ready), 1, WaitCmp.GE)  # the host of the previous rank filled it: barrier
    ping, pong = ctx.tile((1, COLS), np.float32), ctx.tile((1, COLS), np.float32)
    tiles = (ping, pong)
    loaded = (EVENT_ID0, EVENT_ID1)
    free = (EVENT_ID2, EVENT_ID3)
    for i in range(CHUNKS):
        j = i & 1
        if i >= 2:
            wait_flag(PIPE_MTE3, PIPE_MTE2, free[j])
        TLOAD(tiles[j], _row(src + i * COLS))
        set_flag(PIPE_MTE2, PIPE_MTE3, loaded[j])
        wait_flag(PIPE_MTE2, PIPE_MTE3, loaded[j])
        TSTORE(_row(out + i * COLS), tiles[j])
        set_flag(PIPE_MTE3, PIPE_MTE2, free[j])
    wait_flag(PIPE_MTE3, PIPE_MTE2, free[(CHUNKS - 2) & 1])
    wait_flag(PIPE_MTE3, PIPE_MTE2, free[(CHUNKS - 1) & 1])
    pipe_barrier(PIPE_ALL)
    TNOTIFY(Signal(GetRemotePtr(ctx, done, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(done), 1, WaitCmp.GE)


@program(nranks=2, blocks=1)
def pingpong_pull_events(rt):
    """The host fills its buffer and grants a 'ready' word itself, a host barrier publishes
    both; the kernel pulls the previous rank's buffer with two tiles whose reuse events order
    (MTE2 -> MTE3 loaded, MTE3 -> MTE2 free), then tells the owner it is done."""
    buf = rt.alloc((CHUNKS * COLS,), np.float32)
    out = rt.alloc((CHUNKS * COLS,), np.float32)
    sigs = rt.signal_region("pp-pull", 2 * WPL)
    buf[:] = _vals(rt.rank, 0, n=CHUNKS * COLS)
    rt.signals[sigs.offset // 4] = 1
    rt.barrier()
    rt.launch(_pingpong_pull_kernel, args=(buf.ptr, out.ptr, sigs))
    expect(f"rank {rt.rank}", out[:], _vals((rt.rank - 1) % rt.nranks, 0, n=CHUNKS * COLS))


# --- 8. a hand-made ReduceScatter + AllGather with vector adds ------------------------------------

def _allreduce_kernel(ctx, x, share, full, sigs):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    if b != 0:
        return
    acc = ctx.tile((1, COLS), np.float32)
    inp = ctx.tile((1, COLS), np.float32)
    TEXPANDS(acc, 0.0)
    for p in range(n):  # reduce-scatter: pull my share of every rank's x and add it up
        if p:
            wait_flag(PIPE_V, PIPE_MTE2, EVENT_ID5)  # the last TADD read inp
        TLOAD(inp, _row(GetRemotePtr(ctx, x + me * COLS, (me + p) % n)))
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID5)
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID5)
        TADD(acc, acc, inp)
        if p < n - 1:
            set_flag(PIPE_V, PIPE_MTE2, EVENT_ID5)
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID6)
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID6)
    TSTORE(_row(share), acc)
    for p in range(n):  # all-gather: my reduced share into everybody's full vector
        TSTORE(_row(GetRemotePtr(ctx, full + me * COLS, p)), acc)
    _fence()
    for p in range(n):
        TNOTIFY(Signal(GetRemotePtr(ctx, sigs, p)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sigs), n, WaitCmp.GE)


@program(nranks=4, blocks=2)
def handmade_allreduce_vector(rt):
    """The host fills x and a host barrier publishes it; each rank pulls its share of every x
    (TLOAD from the peers' windows), adds them on PIPE_V with MTE2 -> V, V -> MTE2 and V ->
    MTE3 events, stores the sum locally and into every rank's full vector, then waits for all."""
    n = rt.nranks
    x = rt.alloc((n * COLS,), np.float32)
    share = rt.alloc((COLS,), np.float32)
    full = rt.alloc((n * COLS,), np.float32)
    sigs = rt.signal_region("handmade-ar", WPL)
    x[:] = np.concatenate([_vals(rt.rank, s) for s in range(n)])
    rt.barrier()
    rt.launch(_allreduce_kernel, args=(x.ptr, share.ptr, full.ptr, sigs))
    total = [sum(_vals(r, s) for r in range(n)) for s in range(n)]
    expect(f"rank {rt.rank} share", share[:], total[rt.rank])
    expect(f"rank {rt.rank} full", full[:], np.concatenate(total))


def _scale_ring_kernel(ctx, src, inbox, out, sig):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    a, b = ctx.tile((1, COLS), np.float32), ctx.tile((1, COLS), np.float32)
    TLOAD(a, _row(src))
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    TMULS(b, a, 2.0)
    TADDS(b, b, 1.0)
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
    TSTORE(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), b)
    _fence()
    TNOTIFY(Signal(GetRemotePtr(ctx, sig, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(sig), 1, WaitCmp.GE)
    set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID2)  # tile a is free again once b's store is out
    wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID2)
    TLOAD(a, _row(inbox))
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    set_flag(PIPE_MTE3, PIPE_V, EVENT_ID3)  # b's earlier store has read b
    wait_flag(PIPE_MTE3, PIPE_V, EVENT_ID3)
    TSUBS(b, a, 1.0)
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID1)
    TSTORE(_row(out), b)
    pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=1)
def vector_scale_put_and_unscale(rt):
    """TLOAD -> TMULS/TADDS -> TSTORE into the next rank (drain + dsb + notify); the receiver
    TLOADs it, TSUBS, TSTOREs its result; every tile reuse is ordered by an event."""
    src = rt.alloc((COLS,), np.float32)
    inbox = rt.alloc((COLS,), np.float32)
    out = rt.alloc((COLS,), np.float32)
    sig = rt.signal_region("vscale", WPL)
    src[:] = _vals(rt.rank, 1)
    rt.barrier()
    rt.launch(_scale_ring_kernel, args=(src.ptr, inbox.ptr, out.ptr, sig))
    expect(f"rank {rt.rank}", out[:], _vals((rt.rank - 1) % rt.nranks, 1) * 2)


# --- 9. async copies: a credit ring of TPUT_ASYNC polled with Test, TGET_ASYNC quiet ----------------

def _flat(ptr, n: int = COLS) -> GlobalTensor:
    return GlobalTensor(ptr, (n,))


def _async_ring_kernel(ctx, src, slots, out, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    full, credit = sigs, sigs + WPL
    s = BuildAsyncSession(ctx)
    for k in range(4):
        slot = k % 2
        if k >= 2:
            TWAIT(Signal(credit), k - 1, WaitCmp.GE)
        ev = TPUT_ASYNC(_flat(GetRemotePtr(ctx, slots + slot * COLS, (me + 1) % n)),
                        _flat(src + k * COLS), s)
        while not ev.Test(s):
            pass
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(full), k + 1, WaitCmp.GE)
        got = TGET_ASYNC(_flat(out + k * COLS), _flat(slots + slot * COLS), s)
        got.Wait(s)
        TNOTIFY(Signal(GetRemotePtr(ctx, credit, (me - 1) % n)), 1, NotifyOp.AtomicAdd)


@program(nranks=3, blocks=2)
def async_credit_ring_test_then_wait(rt):
    """A two-slot credit ring of async copies: TPUT_ASYNC polled with Test until it landed,
    dsb, notify; the receiver copies the slot out with TGET_ASYNC, Waits, then credits."""
    src = rt.alloc((4 * COLS,), np.float32)
    slots = rt.alloc((2 * COLS,), np.float32)
    out = rt.alloc((4 * COLS,), np.float32)
    for k in range(4):
        src[k * COLS:(k + 1) * COLS] = _vals(rt.rank, k)
    sigs = rt.signal_region("async-ring", 2 * WPL)
    rt.launch(_async_ring_kernel, args=(src.ptr, slots.ptr, out.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for k in range(4):
        expect(f"rank {rt.rank} step {k}", out[k * COLS:(k + 1) * COLS], _vals(prv, k))


def _async_gather_kernel(ctx, buf, out):
    _, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    s = BuildAsyncSession(ctx)
    ev = None
    for r in range(b, n, nb):
        ev = TGET_ASYNC(_flat(out + r * COLS), _flat(GetRemotePtr(ctx, buf, r)), s)
    if ev is not None:
        ev.Wait(s)  # a quiet: every copy of the session landed


@program(nranks=4, blocks=2)
def tget_async_gather_quiet(rt):
    """The host fills its buffer, a host barrier publishes it; the blocks share the pulls of
    every rank's buffer with TGET_ASYNC and wait only on their last one; a second host barrier
    before anyone changes a buffer."""
    n = rt.nranks
    buf = rt.alloc((COLS,), np.float32)
    out = rt.alloc((n * COLS,), np.float32)
    for it in range(2):
        buf[:] = _vals(rt.rank, it)
        rt.barrier()
        rt.launch(_async_gather_kernel, args=(buf.ptr, out.ptr))
        rt.barrier()  # every rank pulled my buffer before I refill it
        expect(f"rank {rt.rank} it {it}", out[:], np.concatenate([_vals(r, it) for r in range(n)]))


# --- 10. streams -----------------------------------------------------------------------------------

def _producer(ctx, buf, sig, it):
    t = ctx.tile((1, COLS), np.float32)
    b = ctx.block_idx
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _vals(ctx.rank, it, b)
    TSTORE(_row(buf + b * COLS), t)
    pipe_barrier(PIPE_ALL)  # the reader is this rank's other kernel: the drain is the release
    TNOTIFY(Signal(sig + b * WPL), 1, NotifyOp.AtomicAdd)


def _consumer(ctx, buf, out, sig, it):
    b = ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    TWAIT(Signal(sig + b * WPL), it + 1, WaitCmp.GE)
    TLOAD(t, _row(buf + b * COLS))
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    TSTORE(_row(out + (it * ctx.block_num + b) * COLS), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=2, blocks=2)
def streams_joined_by_launch_wait(rt):
    """A consumer kernel on one stream waits for a producer kernel on another (a signal per
    block, a threshold per iteration); the host joins both with Launch.wait() before it
    refills the buffer for the next iteration and before it reads the output."""
    nb = rt.config.blocks
    buf = rt.alloc((nb, COLS), np.float32)
    out = rt.alloc((2, nb, COLS), np.float32)
    sig = rt.signal_region("streams-lw", nb * WPL)
    s1, s2 = rt.stream(), rt.stream()
    for it in range(2):
        cons = rt.launch(_consumer, args=(buf.ptr, out.ptr, sig, it), stream=s2)
        prod = rt.launch(_producer, args=(buf.ptr, sig, it), stream=s1)
        prod.wait()
        cons.wait()
    for it in range(2):
        for b in range(nb):
            expect(f"rank {rt.rank} it {it} block {b}", out[it, b], _vals(rt.rank, it, b))


def _fill_kernel(ctx, buf, base):
    t = ctx.tile((1, COLS), np.float32)
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _vals(ctx.rank, base, ctx.block_idx)
    TSTORE(_row(buf + ctx.block_idx * COLS), t)


def _sum_kernel(ctx, a, b, out):
    t, u = ctx.tile((1, COLS), np.float32), ctx.tile((1, COLS), np.float32)
    k = ctx.block_idx
    TLOAD(t, _row(a + k * COLS))
    TLOAD(u, _row(b + k * COLS))
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    TADD(t, t, u)
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    TSTORE(_row(out + k * COLS), t)


@program(nranks=2, blocks=2)
def streams_then_plain_launch(rt):
    """Two streams fill two buffers; the host synchronizes them, then a plain launch adds
    them (its start follows the synchronize), and the host reads the sum."""
    nb = rt.config.blocks
    a, b, out = (rt.alloc((nb, COLS), np.float32) for _ in range(3))
    s1, s2 = rt.stream(), rt.stream()
    rt.launch(_fill_kernel, args=(a.ptr, 1), stream=s1)
    rt.launch(_fill_kernel, args=(b.ptr, 2), stream=s2)
    rt.synchronize()
    rt.launch(_sum_kernel, args=(a.ptr, b.ptr, out.ptr))
    for k in range(nb):
        expect(f"rank {rt.rank} block {k}", out[k], _vals(rt.rank, 1, k) + _vals(rt.rank, 2, k))


# --- 11. scalar atomics ----------------------------------------------------------------------------

def _atomic_flag_kernel(ctx, inbox, words, out):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, COLS), np.float32)
    for k in range(1, 3):
        if k > 1:  # the next rank took my previous row
            while gm_load(words + WPL) < k - 1:
                pass
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(me, k)
        TSTORE(_row(GetRemotePtr(ctx, inbox, (me + 1) % n)), t)
        _fence()
        gm_atomic_store(GetRemotePtr(ctx, words, (me + 1) % n), k)  # a versioned flag
        while gm_load(words) < k:  # poll my own flag with plain atomic reads
            pass
        TLOAD(t, _row(inbox))
        pipe_barrier(PIPE_ALL)
        out.append(t.array[0].copy())
        gm_atomic_add(GetRemotePtr(ctx, words + WPL, (me - 1) % n), 1)


@program(nranks=3, blocks=1)
def atomic_store_flag_polled_with_gm_load(rt):
    """Data, drain + dsb, then gm_atomic_store of a versioned flag into the next rank; the
    reader polls its flag with gm_load, reads the row, and ACKs with gm_atomic_add (polled
    with gm_load by the sender before it refills)."""
    inbox = rt.alloc((COLS,), np.float32)
    words = rt.signal_region("atomic-poll", 2 * WPL)
    out: list = []
    rt.launch(_atomic_flag_kernel, args=(inbox.ptr, words, out))
    prv = (rt.rank - 1) % rt.nranks
    assert len(out) == 2
    for k in range(1, 3):
        expect(f"rank {rt.rank} step {k}", out[k - 1], _vals(prv, k))


def _ticket_kernel(ctx, table, ids, words, out):
    me, b, nb, n = ctx.rank, ctx.block_idx, ctx.block_num, ctx.nranks
    ticket = gm_atomic_add(GetRemotePtr(ctx, words, 0), 1)  # my slot in rank 0's table
    t = ctx.tile((1, COLS), np.float32)
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _vals(me, 0, b)
    TSTORE(_row(GetRemotePtr(ctx, table + ticket * COLS, 0)), t)
    gm_store(GetRemotePtr(ctx, ids + ticket, 0), np.int32(me * nb + b))
    _fence()
    TNOTIFY(Signal(GetRemotePtr(ctx, words + WPL, 0)), 1, NotifyOp.AtomicAdd)
    if me == 0 and b == 0:
        TWAIT(Signal(words + WPL), n * nb, WaitCmp.GE)
        for i in range(n * nb):
            who = int(gm_load(ids + i))
            TLOAD(t, _row(table + i * COLS))
            pipe_barrier(PIPE_ALL)
            out.append((who, t.array[0].copy()))


@program(nranks=3, blocks=2)
def atomic_add_tickets(rt):
    """Every block takes a ticket with gm_atomic_add on rank 0's counter, writes its row and its
    id (gm_store) at the ticket's place, drains + fences, arrives; rank 0 reads the table."""
    nb = rt.config.blocks
    n = rt.nranks
    table = rt.alloc((n * nb, COLS), np.float32)
    ids = rt.alloc((n * nb,), np.int32)
    words = rt.signal_region("tickets", 2 * WPL)
    out: list = []
    rt.launch(_ticket_kernel, args=(table.ptr, ids.ptr, words, out))
    if rt.rank == 0:
        assert sorted(w for w, _ in out) == list(range(n * nb))
        for who, row in out:
            expect(f"row of {who}", row, _vals(who // nb, 0, who % nb))


# --- 12. a hand-made ring AllGather ----------------------------------------------------------------

def _ring_ag_kernel(ctx, gather, sig):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    lane = sig + b * WPL
    t = ctx.tile((1, COLS), np.float32)
    row = lambda r: gather + (r * nb + b) * COLS  # noqa: E731
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = _vals(me, 0, b)
    TSTORE(_row(row(me)), t)
    pipe_barrier(PIPE_ALL)
    for step in range(n - 1):
        r = (me - step) % n  # the row I forward at this step (mine, then the ones I received)
        if step:
            TWAIT(Signal(lane), step, WaitCmp.GE)
        TPUT(_row(GetRemotePtr(ctx, row(r), (me + 1) % n)), _row(row(r)), t)
        _fence()
        TNOTIFY(Signal(GetRemotePtr(ctx, lane, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(lane), n - 1, WaitCmp.GE)


@program(nranks=5, blocks=2)
def handmade_ring_all_gather(rt):
    """A ring AllGather by hand on five ranks: at step s each rank forwards the row it received
    at step s - 1 to the next rank (drain + dsb + notify); every row is written once."""
    nb = rt.config.blocks
    n = rt.nranks
    gather = rt.alloc((n * nb, COLS), np.float32)
    sig = rt.signal_region("ring-ag", nb * WPL)
    rt.launch(_ring_ag_kernel, args=(gather.ptr, sig))
    for r in range(n):
        for b in range(nb):
            expect(f"rank {rt.rank} row {r}/{b}", gather[r * nb + b], _vals(r, 0, b))


# --- 13. the host polls Launch.done instead of waiting -------------------------------------------

def _square_kernel(ctx, src, dst):
    k = ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    TLOAD(t, _row(src + k * COLS))
    pipe_barrier(PIPE_ALL)
    t.array[0, :] = t.array[0] * t.array[0]
    TSTORE(_row(dst + k * COLS), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=2, blocks=2)
def host_polls_launch_done(rt):
    """Two stream launches; the host polls their ``done`` (sleeping a little between polls)
    instead of waiting, then reads the results and refills the inputs for a second round."""
    import time

    nb = rt.config.blocks
    a, b, qa, qb = (rt.alloc((nb, COLS), np.float32) for _ in range(4))
    s1, s2 = rt.stream(), rt.stream()
    for it in range(2):
        for k in range(nb):
            a[k] = _vals(rt.rank, it, k) % 7
            b[k] = _vals(rt.rank, it + 5, k) % 5
        la = rt.launch(_square_kernel, args=(a.ptr, qa.ptr), stream=s1)
        lb = rt.launch(_square_kernel, args=(b.ptr, qb.ptr), stream=s2)
        while not (la.done and lb.done):
            time.sleep(0.0005)
        for k in range(nb):
            expect(f"rank {rt.rank} it {it} a{k}", qa[k], (_vals(rt.rank, it, k) % 7) ** 2)
            expect(f"rank {rt.rank} it {it} b{k}", qb[k], (_vals(rt.rank, it + 5, k) % 5) ** 2)
    rt.synchronize()


# --- 14. host code that signals a running kernel, and waits for one -------------------------------

def _fed_kernel(ctx, buf, out, sig):
    b = ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    for k in range(2):
        TWAIT(Signal(sig + b * WPL), k + 1, WaitCmp.GE)  # the host filled my row and said so
        TLOAD(t, _row(buf + (k * ctx.block_num + b) * COLS))
        pipe_barrier(PIPE_ALL)
        TSTORE(_row(out + (k * ctx.block_num + b) * COLS), t)
        pipe_barrier(PIPE_ALL)


@program(nranks=2, blocks=2)
def host_feeds_running_stream_kernel(rt):
    """A stream kernel waits on signal words; meanwhile the host fills each block's row and
    then raises its word with a plain store into rt.signals (round 1) or a TNOTIFY from host
    code (round 2); the host synchronizes and checks the copies."""
    nb = rt.config.blocks
    buf = rt.alloc((2, nb, COLS), np.float32)
    out = rt.alloc((2, nb, COLS), np.float32)
    sig = rt.signal_region("host-feeds", nb * WPL)
    s = rt.stream()
    rt.launch(_fed_kernel, args=(buf.ptr, out.ptr, sig), stream=s)
    for b in range(nb):
        buf[0, b] = _vals(rt.rank, 0, b)
        rt.signals[sig.offset // 4 + b * WPL] = 1
    for b in range(nb):
        buf[1, b] = _vals(rt.rank, 1, b)
        TNOTIFY(Signal(sig + b * WPL), 1, NotifyOp.AtomicAdd)
    s.synchronize()
    for k in range(2):
        for b in range(nb):
            expect(f"rank {rt.rank} round {k} block {b}", out[k, b], _vals(rt.rank, k, b))


def _progress_kernel(ctx, buf, sig):
    b = ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    for k in range(2):
        pipe_barrier(PIPE_ALL)
        t.array[0, :] = _vals(ctx.rank, k, b)
        TSTORE(_row(buf + (k * ctx.block_num + b) * COLS), t)
        pipe_barrier(PIPE_ALL)  # the host of this rank reads it: the drain is the release
        TNOTIFY(Signal(sig + b * WPL), 1, NotifyOp.AtomicAdd)


@program(nranks=2, blocks=2)
def host_waits_on_running_kernel(rt):
    """The host of a rank follows a running stream kernel's progress: a TWAIT in host code for
    the first round of every block, a TTEST poll for the second, reading each round's rows as
    soon as they are signalled (before synchronize)."""
    nb = rt.config.blocks
    buf = rt.alloc((2, nb, COLS), np.float32)
    sig = rt.signal_region("host-waits", nb * WPL)
    s = rt.stream()
    rt.launch(_progress_kernel, args=(buf.ptr, sig), stream=s)
    every = Signal2D(sig, nb, 1, row_stride=WPL)  # one word per block, a line apart
    TWAIT(every, 1, WaitCmp.GE)
    for b in range(nb):
        expect(f"rank {rt.rank} round 0 block {b}", buf[0, b], _vals(rt.rank, 0, b))
    while not TTEST(every, 2, WaitCmp.GE):
        pass
    for b in range(nb):
        expect(f"rank {rt.rank} round 1 block {b}", buf[1, b], _vals(rt.rank, 1, b))
    s.synchronize()
