"""Credit / ACK rings: a producer fills a ring of K slots in its consumer's window (or its own,
for a pull), the consumer copies each slot into its own buffer and returns a credit.

The credit publishes no data: the consumer copied the slot into its own buffer (TGET, or
TLOAD + TSTORE) and drained with ``pipe_barrier(PIPE_ALL)``, so its loads of the slot are done
and the producer may overwrite it; the copy itself is read by nobody else. So the credit's
TNOTIFY needs no ``dsb``, on hardware as here.
"""

from __future__ import annotations

import numpy as np

from shmcomm.comm import TGET, TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.pipe import PIPE_ALL, TLOAD, TSTORE, pipe_barrier

from ._base import ROUNDS, N, chunk, copy_local, expect, gt, program, release, tile

K = 2  # slots per ring: fewer than the rounds, so the credits are what keeps the data safe
LINE = 16  # words per 64-byte line: one counter per line


def _ring_buffers(rt, rounds=ROUNDS, lanes=None):
    lanes = rt.config.blocks if lanes is None else lanes
    src = rt.alloc((lanes, rounds, N), np.float32)
    slots = rt.alloc((lanes, K, N), np.float32)
    out = rt.alloc((lanes, rounds, N), np.float32)
    for b in range(lanes):
        for k in range(rounds):
            src[b, k] = chunk(rt.rank, 10 * b + k)
    full = rt.signal_region("full", LINE * lanes)
    credit = rt.signal_region("credit", LINE * lanes)
    rt.barrier()
    return src, slots, out, full, credit


def _check_ring(rt, out, lanes, rounds=ROUNDS, frm=None):
    prv = (rt.rank - 1) % rt.nranks if frm is None else frm
    for b in range(lanes):
        for k in range(rounds):
            expect(f"rank {rt.rank} lane {b} round {k}", out[b, k], chunk(prv, 10 * b + k))


def _produce(ctx, t, src, slots, full, credit, lane, k, to):
    """Round ``k`` of a push producer: wait for the slot's credit, fill it, release, signal."""
    s = k % K
    if k >= K:  # the slot still holds round k - K until its consumer returns the credit
        TWAIT(Signal(credit + LINE * lane), k - K + 1, WaitCmp.GE)
    TLOAD(t, gt(src + (lane * ROUNDS + k) * N))
    pipe_barrier(PIPE_ALL)
    TSTORE(gt(GetRemotePtr(ctx, slots + (lane * K + s) * N, to)), t)
    release()  # the slot's data is what the signal publishes: drain + dsb
    TNOTIFY(Signal(GetRemotePtr(ctx, full + LINE * lane, to)), 1, NotifyOp.AtomicAdd)


def _consume_tload(ctx, t, slots, out, full, credit, lane, k, frm):
    """Round ``k`` of a consumer: wait, copy the slot out with TLOAD + TSTORE, credit (no dsb)."""
    TWAIT(Signal(full + LINE * lane), k + 1, WaitCmp.GE)
    copy_local(t, out + (lane * ROUNDS + k) * N, slots + (lane * K + k % K) * N)
    TNOTIFY(Signal(GetRemotePtr(ctx, credit + LINE * lane, frm)), 1, NotifyOp.AtomicAdd)


def _consume_tget(ctx, t, slots, out, full, credit, lane, k, frm):
    """Round ``k`` of a consumer: wait, TGET the slot into the own buffer, drain, credit."""
    TWAIT(Signal(full + LINE * lane), k + 1, WaitCmp.GE)
    TGET(gt(out + (lane * ROUNDS + k) * N), gt(slots + (lane * K + k % K) * N), t)
    pipe_barrier(PIPE_ALL)  # the slot has been read: the producer may overwrite it
    TNOTIFY(Signal(GetRemotePtr(ctx, credit + LINE * lane, frm)), 1, NotifyOp.AtomicAdd)


# --- block 0 produces, block 1 consumes ----------------------------------------------------------

def _split_kernel(ctx, src, slots, out, full, credit, tget):
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    for k in range(ROUNDS):
        if ctx.block_idx == 0:
            _produce(ctx, t, src, slots, full, credit, 0, k, (me + 1) % n)
        elif tget:
            _consume_tget(ctx, t, slots, out, full, credit, 0, k, (me - 1) % n)
        else:
            _consume_tload(ctx, t, slots, out, full, credit, 0, k, (me - 1) % n)


@program()
def push_ring_tload_tstore_credit(rt):
    """Push ring; the consumer copies each slot with TLOAD + TSTORE and credits with no dsb."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_split_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit, False))
    _check_ring(rt, out, 1)


@program()
def push_ring_tget_credit(rt):
    """Push ring; the consumer copies each slot with a local TGET and credits with no dsb."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_split_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit, True))
    _check_ring(rt, out, 1)


# --- every block both produces (to the next rank) and consumes (from the previous) --------------

def _lanes_kernel(ctx, src, slots, out, full, credit, tget):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    tp, tc = tile(ctx), tile(ctx)
    consume = _consume_tget if tget else _consume_tload
    for k in range(ROUNDS):
        _produce(ctx, tp, src, slots, full, credit, b, k, (me + 1) % n)
        consume(ctx, tc, slots, out, full, credit, b, k, (me - 1) % n)


@program(nranks=4, blocks=2)
def four_rank_lanes_tget(rt):
    """Four ranks in a ring, one credit ring per block lane, TGET copies, credits with no dsb."""
    src, slots, out, full, credit = _ring_buffers(rt)
    rt.launch(_lanes_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit, True))
    _check_ring(rt, out, rt.config.blocks)


@program(nranks=3, blocks=2)
def three_rank_lanes_tload(rt):
    """Three ranks, every block a producer and a consumer, TLOAD + TSTORE copies."""
    src, slots, out, full, credit = _ring_buffers(rt)
    rt.launch(_lanes_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit, False))
    _check_ring(rt, out, rt.config.blocks)


# --- pull ring: the producer fills its own slot, the consumer TGETs it ----------------------------

def _pull_kernel(ctx, src, slots, out, full, credit):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    t = tile(ctx)
    nxt, prv = (me + 1) % n, (me - 1) % n
    for k in range(ROUNDS):
        s = k % K
        if b == 0:  # producer: my own slot, read remotely by the next rank
            if k >= K:
                TWAIT(Signal(credit), k - K + 1, WaitCmp.GE)
            TLOAD(t, gt(src + k * N))
            pipe_barrier(PIPE_ALL)
            TSTORE(gt(slots + s * N), t)
            release()  # a pull: the reader is another rank, so the fence is needed
            TNOTIFY(Signal(GetRemotePtr(ctx, full, nxt)), 1, NotifyOp.AtomicAdd)
        else:  # consumer: pull the previous rank's slot into my buffer, then credit
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            TGET(gt(out + k * N), gt(GetRemotePtr(ctx, slots + s * N, prv)), t)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, credit, prv)), 1, NotifyOp.AtomicAdd)


@program()
def pull_ring_tget_credit(rt):
    """Pull ring: the producer fills its own slot (drain + dsb), the consumer TGETs it and
    credits the producer with no dsb."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_pull_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit))
    _check_ring(rt, out, 1)


# --- credits the host grants before the launch --------------------------------------------------

def _granted_kernel(ctx, src, slots, out, full, credit, rounds):
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    for k in range(rounds):
        s = k % K
        if ctx.block_idx == 0:
            TWAIT(Signal(credit), k + 1, WaitCmp.GE)  # the host granted K, each copy returns one
            TLOAD(t, gt(src + k * N))
            pipe_barrier(PIPE_ALL)
            TSTORE(gt(GetRemotePtr(ctx, slots + s * N, (me + 1) % n)), t)
            release()
            TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        else:
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            copy_local(t, out + k * N, slots + s * N)
            TNOTIFY(Signal(GetRemotePtr(ctx, credit, (me - 1) % n)), 1, NotifyOp.AtomicAdd)


@program()
def host_granted_credits(rt):
    """The host grants K credits in the signal words before each of two launches (after the
    collective reset); the consumer returns one per copied slot, with no dsb."""
    launches = 2
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    for launch in range(launches):
        rt.barrier()
        src[0] = np.stack([chunk(rt.rank, 10 * launch + k) for k in range(ROUNDS)])
        rt.reset_signals()
        rt.signals[credit.offset // 4] = K
        rt.barrier()  # every rank's credits are granted before any peer's launch notifies
        rt.launch(_granted_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit, ROUNDS))
        prv = (rt.rank - 1) % rt.nranks
        for k in range(ROUNDS):
            expect(f"rank {rt.rank} launch {launch} round {k}", out[0, k],
                   chunk(prv, 10 * launch + k))


# --- credits as versioned Set words, and stop-and-wait ACKs -------------------------------------

def _versioned_credit_kernel(ctx, src, slots, out, full, credit):
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    for k in range(ROUNDS):
        s = k % K
        if ctx.block_idx == 0:
            if k >= K:  # the consumer Sets the credit word to the count of rounds it copied
                TWAIT(Signal(credit), k - K + 1, WaitCmp.GE)
            TLOAD(t, gt(src + k * N))
            pipe_barrier(PIPE_ALL)
            TSTORE(gt(GetRemotePtr(ctx, slots + s * N, (me + 1) % n)), t)
            release()
            TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), k + 1, NotifyOp.Set)
        else:
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            TGET(gt(out + k * N), gt(slots + s * N), t)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, credit, (me - 1) % n)), k + 1, NotifyOp.Set)


@program()
def versioned_set_credits(rt):
    """Data flags and credits both as Set of the round number (a version), waited with GE; the
    credit Set follows a drained TGET, with no dsb."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_versioned_credit_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit))
    _check_ring(rt, out, 1)


def _ack_kernel(ctx, src, slot, out, full, ack):
    me, n = ctx.rank, ctx.nranks
    t = tile(ctx)
    for k in range(ROUNDS):
        if ctx.block_idx == 0:  # send round k, then wait for its ACK before reusing the slot
            TLOAD(t, gt(src + k * N))
            pipe_barrier(PIPE_ALL)
            TSTORE(gt(GetRemotePtr(ctx, slot, (me + 1) % n)), t)
            release()
            TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
            TWAIT(Signal(ack), k + 1, WaitCmp.GE)
        else:
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            copy_local(t, out + k * N, slot)
            TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), 1, NotifyOp.AtomicAdd)


@program()
def stop_and_wait_ack(rt):
    """One slot, stop-and-wait: the producer waits for each round's ACK, which the consumer
    sends after copying the slot out (no dsb)."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_ack_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit))
    _check_ring(rt, out, 1)


# --- a credit between two blocks of one rank ------------------------------------------------------

def _intra_kernel(ctx, src, slots, out, full, credit):
    t = tile(ctx)
    for k in range(ROUNDS):
        s = k % K
        if ctx.block_idx == 0:
            if k >= K:
                TWAIT(Signal(credit), k - K + 1, WaitCmp.GE)
            TLOAD(t, gt(src + k * N))
            pipe_barrier(PIPE_ALL)
            TSTORE(gt(slots + s * N), t)
            pipe_barrier(PIPE_ALL)  # a reader on this rank: the drain is the release
            TNOTIFY(Signal(full), 1, NotifyOp.AtomicAdd)
        else:
            TWAIT(Signal(full), k + 1, WaitCmp.GE)
            copy_local(t, out + k * N, slots + s * N)
            TNOTIFY(Signal(credit), 1, NotifyOp.AtomicAdd)


@program(nranks=2)
def intra_rank_credit_ring(rt):
    """A credit ring between two blocks of one rank: drains, no dsb anywhere (no other rank
    reads anything)."""
    src, slots, out, full, credit = _ring_buffers(rt, lanes=1)
    rt.launch(_intra_kernel, args=(src.ptr, slots.ptr, out.ptr, full, credit))
    _check_ring(rt, out, 1, frm=rt.rank)
