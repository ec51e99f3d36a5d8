"""Barriers over a subset of blocks, and SYNCALL-based kernels: EpochBarrier(num_blocks=k) with
the other blocks doing independent work, two groups of blocks each on its own CentralBarrier
region, soft SYNCALL over k blocks, and kernels whose phases the hardware SYNCALL separates."""

from __future__ import annotations

import numpy as np

from shmcomm.comm import SYNCALL, GetRemotePtr, GlobalTensor
from shmcomm.kernels import CentralBarrier, EpochBarrier
from shmcomm.kernels.layout import CENTRAL_BARRIER_WORDS

from ._base import ROUNDS, N, chunk, expect, load, program, store, tile

LINE = 16


def _subset_epoch_kernel(ctx, recv, solo, k):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = tile(ctx)
    if b >= k:  # not in the barrier: work of its own, on its own buffer
        store(t, solo + b * N, chunk(me, 50 + b))
        return
    for r in range(ROUNDS):
        store(t, GetRemotePtr(ctx, recv + b * N, (me + 1) % n), chunk(me, 10 * r + b))
        EpochBarrier(ctx, num_blocks=k)
        expect(f"rank {me} block {b} round {r}", load(t, recv + b * N),
               chunk((me - 1) % n, 10 * r + b))
        EpochBarrier(ctx, num_blocks=k)


@program(nranks=2, blocks=4)
def epoch_barrier_subset_of_blocks(rt):
    """EpochBarrier(num_blocks=2) among blocks 0-1 of a 4-block launch; blocks 2-3 do other
    work and never call it."""
    recv = rt.alloc((2, N), np.float32)
    solo = rt.alloc((4, N), np.float32)
    rt.launch(_subset_epoch_kernel, args=(recv.ptr, solo.ptr, 2))
    for b in (2, 3):
        expect(f"rank {rt.rank} solo block {b}", solo[b], chunk(rt.rank, 50 + b))


def _groups_kernel(ctx, recv, regions):
    """Blocks {0, 1} and {2, 3}: each group its own barrier region, both with num_blocks=2."""
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = tile(ctx)
    region = regions + (b // 2) * CENTRAL_BARRIER_WORDS
    for r in range(ROUNDS):
        store(t, GetRemotePtr(ctx, recv + b * N, (me + 1) % n), chunk(me, 10 * r + b))
        CentralBarrier(ctx, signal_base=region, num_blocks=2)
        expect(f"rank {me} block {b} round {r}", load(t, recv + b * N),
               chunk((me - 1) % n, 10 * r + b))
        CentralBarrier(ctx, signal_base=region, num_blocks=2)


@program(nranks=2, blocks=4)
def central_barrier_two_groups(rt):
    """Two groups of two blocks, each synchronizing on its own CentralBarrier region with the
    same num_blocks=2 (four blocks declare a count of two, correctly)."""
    recv = rt.alloc((4, N), np.float32)
    regions = rt.signal_region("groups", 2 * CENTRAL_BARRIER_WORDS)
    rt.launch(_groups_kernel, args=(recv.ptr, regions))


def _soft_syncall_kernel(ctx, part, ws, k, out):
    """Blocks 0..k-1 each write a part, meet at a soft SYNCALL over k blocks, then read all."""
    b = ctx.block_idx
    t = tile(ctx)
    if b >= k:
        return
    for r in range(ROUNDS):
        store(t, part + b * N, chunk(ctx.rank, 10 * r + b))
        SYNCALL(GlobalTensor(ws, (1, LINE)), k)
        total = sum(load(t, part + j * N) for j in range(k))
        out.append((r, b, total))
        SYNCALL(GlobalTensor(ws, (1, LINE)), k)  # the parts are read before the next round


@program(nranks=2, blocks=3)
def soft_syncall_subset(rt):
    """SYNCALL(ws, 2) (the soft form) among blocks 0-1 of a 3-block launch, twice a round."""
    k = 2
    part = rt.alloc((k, N), np.float32)
    ws = rt.signal_region("syncall", LINE)
    out: list = []
    rt.launch(_soft_syncall_kernel, args=(part.ptr, ws, k, out))
    for r, b, total in out:
        expect(f"rank {rt.rank} block {b} round {r}", total,
               sum(chunk(rt.rank, 10 * r + j) for j in range(k)))
    expect("rounds seen", np.asarray(len(out)), ROUNDS * k)


def _hard_syncall_kernel(ctx, part, out):
    """Phases separated by the hardware SYNCALL: every block writes a part, all meet, block 0
    sums them; a second SYNCALL before the parts are reused."""
    b, nb = ctx.block_idx, ctx.block_num
    t = tile(ctx)
    for r in range(ROUNDS):
        store(t, part + b * N, chunk(ctx.rank, 10 * r + b))
        SYNCALL()
        if b == 0:
            out.append(sum(load(t, part + j * N) for j in range(nb)))
        SYNCALL()


@program(nranks=2, blocks=2)
def hard_syncall_reduce(rt):
    """A block reduction whose phases the hardware SYNCALL() separates."""
    nb = rt.config.blocks
    part = rt.alloc((nb, N), np.float32)
    out: list = []
    rt.launch(_hard_syncall_kernel, args=(part.ptr, out))
    for r, total in enumerate(out):
        expect(f"rank {rt.rank} round {r}", total,
               sum(chunk(rt.rank, 10 * r + j) for j in range(nb)))


def _syncall_neighbour_kernel(ctx, buf, out):
    """Each block writes for its neighbour block; after SYNCALL the neighbour reads it."""
    b, nb = ctx.block_idx, ctx.block_num
    t = tile(ctx)
    for r in range(ROUNDS):
        store(t, buf + ((b + 1) % nb) * N, chunk(ctx.rank, 10 * r + b))
        SYNCALL()
        out.append((r, b, load(t, buf + b * N)))
        SYNCALL()


@program(nranks=1, blocks=3)
def hard_syncall_block_exchange(rt):
    """Blocks hand data to their neighbour block, each round fenced by two SYNCALLs."""
    nb = rt.config.blocks
    buf = rt.alloc((nb, N), np.float32)
    out: list = []
    rt.launch(_syncall_neighbour_kernel, args=(buf.ptr, out))
    for r, b, got in out:
        expect(f"round {r} block {b}", got, chunk(rt.rank, 10 * r + (b - 1) % nb))
