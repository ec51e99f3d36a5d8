"""Scalar atomics as flags: ``gm_atomic_store`` of a flag after the data, read with ``gm_load``
after a wait, and ``gm_atomic_add`` arrival counters whose last arriver releases the others; and
plain int32 stores as flags, as pto-isa's a2a3 kernels publish (a ``Set`` notify is that store)."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    TTEST,
    TWAIT,
    GetRemotePtr,
    Signal,
    WaitCmp,
    gm_atomic_add,
    gm_atomic_store,
    gm_load,
    gm_store,
)
from shmcomm.pipe import PIPE_ALL, dcci, pipe_barrier

from ._base import N, chunk, expect, load, program, release, store, tile

LINE = 16


def _flag_kernel(ctx, recv, flags, out):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    store(t, GetRemotePtr(ctx, recv, (me + 1) % n), chunk(me, 3))
    release()
    gm_atomic_store(GetRemotePtr(ctx, flags + 1, (me + 1) % n), 1000 + me)  # a scalar payload
    gm_atomic_store(GetRemotePtr(ctx, flags, (me + 1) % n), 1)  # then the flag
    TWAIT(Signal(flags), 1, WaitCmp.EQ)
    out.append((gm_load(flags + 1), load(t, recv)))


@program(nranks=3, blocks=1)
def atomic_store_flag_then_load(rt):
    """Data, release, an atomic scalar payload, then an atomic flag; the reader waits for the
    flag and reads the payload with gm_load and the data with TLOAD."""
    recv = rt.alloc((N,), np.float32)
    flags = rt.signal_region("aflag", LINE)
    out: list = []
    rt.launch(_flag_kernel, args=(recv.ptr, flags, out))
    prv = (rt.rank - 1) % rt.nranks
    (payload, data), = out
    expect(f"rank {rt.rank} payload", np.asarray(payload), 1000 + prv)
    expect(f"rank {rt.rank} data", data, chunk(prv, 3))


def _last_arriver_kernel(ctx, part, words, out):
    """Every block of every rank adds its part to rank 0's table and arrives with an atomic
    add; the one that sees the count complete releases everybody with an atomic store."""
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    t = tile(ctx)
    store(t, GetRemotePtr(ctx, part + (me * nb + b) * N, 0), chunk(me, b))
    release()
    counter, go = GetRemotePtr(ctx, words, 0), GetRemotePtr(ctx, words + LINE, 0)
    if gm_atomic_add(counter, 1) == n * nb - 1:  # the last arrival
        gm_atomic_store(go, 1)
    TWAIT(Signal(go), 1, WaitCmp.EQ)
    if me == 0 and b == 0:
        out.append([load(t, part + i * N) for i in range(n * nb)])


@program(nranks=2, blocks=2)
def atomic_add_last_arriver_releases(rt):
    """An arrival counter of gm_atomic_add; the last arriver releases all with gm_atomic_store."""
    nb = rt.config.blocks
    part = rt.alloc((rt.nranks * nb, N), np.float32)
    words = rt.signal_region("arrive", 2 * LINE)
    out: list = []
    rt.launch(_last_arriver_kernel, args=(part.ptr, words, out))
    if rt.rank == 0:
        for i, got in enumerate(out[0]):
            expect(f"part {i}", got, chunk(i // nb, i % nb))


def _scalar_counter_kernel(ctx, words, out):
    """Each block counts to ``N`` on a shared scalar counter; rank 0 block 0 waits for all and
    reads the total with gm_load."""
    me, n, nb = ctx.rank, ctx.nranks, ctx.block_num
    counter = GetRemotePtr(ctx, words, 0)
    for _ in range(8):
        gm_atomic_add(counter, 1)
    if me == 0 and ctx.block_idx == 0:
        TWAIT(Signal(counter), 8 * n * nb, WaitCmp.GE)
        out.append(gm_load(counter))


@program(nranks=2, blocks=2)
def atomic_add_counter_waited(rt):
    """A counter of scalar atomic adds from every block, waited for with TWAIT, read by gm_load."""
    words = rt.signal_region("count", LINE)
    out: list = []
    rt.launch(_scalar_counter_kernel, args=(words, out))
    if rt.rank == 0:
        expect("total", np.asarray(out), 8 * rt.nranks * rt.config.blocks)


# --- plain int32 stores as flags (a2a3's Set notify is that store) -------------------------------

def _ready_queue_kernel(ctx, data, queue, out):
    """gemm_ar's ready queue: block 0 stores each tile, drains, stores the slot and then the
    count as plain words (each followed by its dcci); block 1 TTESTs the count, dcci-s the slot,
    loads it and TLOADs the tile it names."""
    t = tile(ctx)
    count, slots = queue, queue + LINE
    if ctx.block_idx == 0:
        for k in range(3):
            store(t, data + k * N, chunk(ctx.rank, k))
            pipe_barrier(PIPE_ALL)  # the tile is in GM (this rank's reader: no dsb needed)
            gm_store(slots + k, k)
            dcci(slots + k)
            gm_store(count, k + 1)
            dcci(count)
    elif ctx.block_idx == 1:
        got = []
        for head in range(3):
            while not TTEST(Signal(count), head + 1, WaitCmp.GE):
                pass
            dcci(slots + head)
            k = gm_load(slots + head)
            got.append((k, load(t, data + k * N)))
        out.append(got)


@program(nranks=1, blocks=2)
def plain_store_ready_queue(rt):
    """gemm_ar's per-block ready queue (kernels/manual/a2a3/gemm_ar/ready_queue.hpp): plain int32
    stores of a slot and a count after the tile's drain, polled with TTEST, the slot read after
    its dcci."""
    data = rt.alloc((3 * N,), np.float32)
    queue = rt.alloc((2 * LINE,), np.int32)
    out: list = []
    rt.launch(_ready_queue_kernel, args=(data.ptr, queue.ptr, out))
    for k, got in out[0]:
        expect(f"tile {k}", got, chunk(0, k))


def _plain_flag_kernel(ctx, recv, flags, out, poll):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    store(t, GetRemotePtr(ctx, recv, (me + 1) % n), chunk(me, 5))
    release()  # drain + dsb: the data reaches the next rank before the flag can
    gm_store(GetRemotePtr(ctx, flags, (me + 1) % n), 1)  # a plain store of the flag word
    dcci(GetRemotePtr(ctx, flags, (me + 1) % n))
    if poll:
        dcci(flags)
        while gm_load(flags) != 1:  # a plain poll: dcci before every load
            dcci(flags)
    else:
        TWAIT(Signal(flags), 1, WaitCmp.EQ)
    out.append(load(t, recv))


@program(nranks=3, blocks=1)
def plain_store_flag_after_fence_waited(rt):
    """Data into the next rank, drain + dsb, then a plain int32 store of its flag (dcci after);
    the reader TWAITs on the flag and reads the data."""
    recv = rt.alloc((N,), np.float32)
    flags = rt.signal_region("pflag", LINE)
    out: list = []
    rt.launch(_plain_flag_kernel, args=(recv.ptr, flags, out, False))
    expect(f"rank {rt.rank} data", out[0], chunk((rt.rank - 1) % rt.nranks, 5))


@program(nranks=2, blocks=1)
def plain_store_flag_polled_with_dcci(rt):
    """As plain_store_flag_after_fence_waited, the flag in a data array, polled with dcci and
    gm_load (the troubleshooting guide's stale-data fix)."""
    recv = rt.alloc((N,), np.float32)
    flags = rt.alloc((LINE,), np.int32)
    out: list = []
    rt.barrier()
    rt.launch(_plain_flag_kernel, args=(recv.ptr, flags.ptr, out, True))
    expect(f"rank {rt.rank} data", out[0], chunk((rt.rank - 1) % rt.nranks, 5))
