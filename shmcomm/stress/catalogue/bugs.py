"""Buggy kernels and host programs, one per real-world bug (each docstring cites its report).

Each ``bug_*`` function is a host program ``host(rt, size)`` that runs in every rank, launches a
kernel with the bug and raises ``AssertionError`` when the data it reads back is wrong; a bug that
hangs shows up as a deadlock report or a ``WaitTimeout``, a bug a checker sees as that checker's
exception. The docstring's first line names the bug and its source. Apart from the bug, each
kernel follows the safe patterns (release = drain + ``dsb``, acquire before reading), so
a catch can only come from the bug itself.
"""

from __future__ import annotations

import numpy as np

from ...comm import TNOTIFY, TWAIT, GlobalTensor, NotifyOp, Signal, WaitCmp
from ...kernels.barrier import DeviceBarrier
from ...pipe import (
    DSB_DDR,
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    TLOAD,
    TSTORE,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from ._common import (
    ACK_SLOT,
    FLAG_SLOT,
    PACKED_SLOT,
    PHASE_SLOT,
    RING_SLOT,
    expect,
    put,
    read,
    release,
    slot,
    staging,
)

ROUNDS = 4  # rounds of the multi-round bugs (Set reuse, cumulative counter)
RMW_ITERS = 40  # read-modify-write iterations per block (non-atomic AtomicAdd)
COPY_TILE_COLS = 32  # the hand-written copy loop's tile (missing wait_flag)


def _ring(rt) -> tuple[int, int]:
    """(next, previous) rank on the ring."""
    return (rt.rank + 1) % rt.nranks, (rt.rank - 1) % rt.nranks


def _send_recv(rt, size: int):
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    return src, recv


# --- 1. notify before the MTE drain ---------------------------------------------------------

def _put_notify_kernel(ctx, src, recv, size, drain, fence):
    if ctx.block_idx != 0:
        return
    nxt, prev = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    tile = staging(ctx, size)
    put(ctx, recv.on_rank(nxt), src, size, tile)
    if drain:
        pipe_barrier(PIPE_MTE3)
    if fence:
        dsb(DSB_DDR)
    TNOTIFY(Signal(slot(ctx, FLAG_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.GE)
    expect(f"rank {ctx.rank} data from rank {prev}", read(recv, size, tile), prev + 1.0)


def bug_notify_before_drain(rt, size: int) -> None:
    """Notify before the MTE drain (PTOAS issue #711).

    ``TPUT`` ends with its last ``TSTORE`` still queued on MTE3; the kernel ``TNOTIFY``s the peer
    at once, with neither ``pipe_barrier`` nor ``dsb``, so the peer's ``TWAIT`` can return before
    the data lands and it reads stale values. PTOAS now emits ``pipe_barrier`` before TNOTIFY.
    """
    src, recv = _send_recv(rt, size)
    src[:] = rt.rank + 1.0
    rt.launch(_put_notify_kernel, args=(src.ptr, recv.ptr, size, False, False))


def bug_drain_without_dsb(rt, size: int) -> None:
    """A drain without the DDR fence (PTOAS #744, pypto #1826).

    ``pipe_barrier(PIPE_MTE3)`` only says the stores were issued; without ``dsb(DSB_DDR)`` they
    need not be visible on another rank when the signal is, so the receiver reads partial data
    (pypto's intermittent ring-allreduce corruption at P=2). The fix adds ``dsb(DSB_DDR)``.
    """
    src, recv = _send_recv(rt, size)
    src[:] = rt.rank + 1.0
    rt.launch(_put_notify_kernel, args=(src.ptr, recv.ptr, size, True, False))


# --- 2. reuse of a Set flag ------------------------------------------------------------------

def _set_reuse_kernel(ctx, src, recv, size, rounds):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    tile = staging(ctx, size)
    if me % 2 == 0 and me + 1 < n:  # producer
        peer = me + 1
        for k in range(1, rounds + 1):
            put(ctx, recv.on_rank(peer), src + (k - 1) * size, size, tile)
            release()
            TNOTIFY(Signal(slot(ctx, FLAG_SLOT, peer)), 1, NotifyOp.Set)  # bug: same value every round
            TWAIT(Signal(slot(ctx, ACK_SLOT)), k, WaitCmp.GE)
    elif me % 2 == 1:  # consumer
        for k in range(1, rounds + 1):
            TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.EQ)
            expect(f"rank {me} round {k}", read(recv, size, tile), float(k))
            TNOTIFY(Signal(slot(ctx, ACK_SLOT, me - 1)), 1, NotifyOp.AtomicAdd)


def bug_set_flag_reuse(rt, size: int) -> None:
    """Reuse of a ``Set`` flag across rounds (PTOAS #797, ABA; pypto PR #1829).

    The producer publishes every round with ``TNOTIFY(flag, 1, Set)`` and the consumer waits
    ``flag == 1``: from round 2 on the flag still holds round 1's value, so the wait passes at
    once and the consumer reads the previous round's data (PTOAS #797 saw the second Set never
    arrive; either way the second round is not synchronized). The advice: AtomicAdd and wait for
    the round number (an epoch).
    """
    src, recv = rt.alloc((ROUNDS, size), np.float32), rt.alloc((size,), np.float32)
    src[:] = np.arange(1, ROUNDS + 1, dtype=np.float32)[:, None]
    rt.launch(_set_reuse_kernel, args=(src.ptr, recv.ptr, size, ROUNDS))


# --- 3. packed Set slots on one 64-byte line ---------------------------------------------------

def _packed_kernel(ctx):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    cell = slot(ctx, PACKED_SLOT + me, 0)  # bug: every rank's slot on rank 0's one line
    TNOTIFY(Signal(cell), 1000 + me, NotifyOp.Set)  # its dcci writes the whole 64-byte line back
    if me == 0:
        for r in range(n):
            TWAIT(Signal(slot(ctx, PACKED_SLOT + r)), 1000 + r, WaitCmp.EQ)


def bug_packed_set_slots(rt, size: int) -> None:
    """Packed ``Set`` slots on one 64-byte line (pto-isa issue #322 / PR #323).

    Every rank publishes ``1000 + rank`` with ``TNOTIFY(Set)`` into its own word of rank 0's
    table, but the words share one 64-byte line; ``dcci`` writes back whole lines, so a
    neighbour's stale copy of the line overwrites a value that had already landed and rank 0
    waits forever on a 0. AtomicAdd is word-safe; so is one writer per line.
    """
    del size
    if rt.nranks > 16:
        raise ValueError("bug_packed_set_slots: at most 16 ranks fit one line")
    rt.launch(_packed_kernel)


# --- 4. the seed's phase-blind cross-rank slot used twice ------------------------------------

def _two_phase_kernel(ctx, src, recv, size):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    nxt, prev = (me + 1) % n, (me - 1) % n
    DeviceBarrier(ctx, ctx.signal_base, 0, me, n, b, nb)
    if b == 0:
        tile = staging(ctx, size)
        put(ctx, recv.on_rank(nxt), src, size, tile)
        release()
    DeviceBarrier(ctx, ctx.signal_base, 1, me, n, b, nb)  # bug: phase 1 reuses phase 0's slots
    if b == 0:
        expect(f"rank {me} data from rank {prev} after barrier 2", read(recv, size, tile), prev + 1.0)


def bug_phase_blind_slot(rt, size: int) -> None:
    """The phase-blind cross-rank slot, used by two barriers in one launch (a seed DeviceBarrier hazard).

    ``DeviceBarrier`` notifies ``signal_base + my_rank`` whatever ``phase`` is, and phase 1's
    local flag aliases phase 0's intra counter; so the second barrier of a launch is satisfied
    at once by the first one's counts and a rank reads its peer's data before the peer wrote it.
    """
    src, recv = _send_recv(rt, size)
    src[:] = rt.rank + 1.0
    rt.reset_signals()
    rt.launch(_two_phase_kernel, args=(src.ptr, recv.ptr, size))


# --- 5. no signal reset between launches ------------------------------------------------------

def _launch_kernel(ctx, src, recv, size, launch):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    nxt, prev = (me + 1) % n, (me - 1) % n
    if b == 0:
        tile = staging(ctx, size)
        put(ctx, recv.on_rank(nxt), src, size, tile)
        release()
    DeviceBarrier(ctx, ctx.signal_base, 0, me, n, b, nb)
    if b == 0:
        expect(f"rank {me} launch {launch} data from rank {prev}", read(recv, size, tile),
               100.0 * launch + prev)


def bug_no_reset_between_launches(rt, size: int) -> None:
    """No signal reset between two launches of the seed barrier (a seed DeviceBarrier hazard).

    The seed's counters and flag are never cleared; hosts must ``aclrtMemset`` the signal matrix
    before every launch. This host resets once, then launches twice: the second launch's barrier
    passes at once and ranks read data their peers have not written yet ("第二次运行异常").
    """
    src, recv = _send_recv(rt, size)
    rt.reset_signals()
    for launch in (1, 2, 3):
        src[:] = 100.0 * launch + rt.rank
        rt.barrier()  # the data is ready everywhere; the bug is the missing rt.reset_signals()
        rt.launch(_launch_kernel, args=(src.ptr, recv.ptr, size, launch))


# --- 6. arrival count not matching the block count ---------------------------------------------

def _miscount_kernel(ctx):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    DeviceBarrier(ctx, ctx.signal_base, 0, me, n, b, ctx.block_num + 1)  # bug: one block too many


def bug_arrival_count_mismatch(rt, size: int) -> None:
    """The arrival count does not match the launch's block count (seed DeviceBarrier, "Block 数不匹配").

    The kernel passes ``num_comm_blocks = block_num + 1`` (as with pto-isa's CPU sim, whose
    ``get_block_num()`` returns ``PTO_CPU_SIM_NUM_CORES``): block 0 waits for one arrival too
    many and the barrier hangs.
    """
    del size
    rt.reset_signals()
    rt.launch(_miscount_kernel)


# --- 7. non-atomic AtomicAdd --------------------------------------------------------------------

def _rmw_kernel(ctx, acc, size, iters):
    tile = staging(ctx, size)
    target = GlobalTensor(acc.on_rank(0), (1, size))
    for _ in range(iters):
        TLOAD(tile, target)  # bug: read-modify-write instead of TSTORE(..., AtomicAdd)
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
        tile.array[0, :size] += 1
        TSTORE(target, tile)
        pipe_barrier(PIPE_ALL)


def bug_nonatomic_atomicadd(rt, size: int) -> None:
    """A non-atomic "AtomicAdd" from several ranks (SIMPLER PR #1271 review, pto-isa PR #177).

    Every block of every rank adds 1 to rank 0's accumulator by ``TLOAD``, add, ``TSTORE`` — the
    plain ``dst += src`` of pto-isa's CPU-sim comm copy. Concurrent read-modify-writes lose
    updates, so the total falls short. ``TSTORE(..., AtomicType.AtomicAdd)`` is the fix.
    """
    size = min(size, 256)
    acc = rt.alloc((size,), np.float32)
    blocks = rt.config.blocks
    rt.launch(_rmw_kernel, blocks=blocks, args=(acc.ptr, size, RMW_ITERS))
    rt.barrier()
    if rt.rank == 0:
        expect("accumulator", np.asarray(acc), float(rt.nranks * blocks * RMW_ITERS))
    rt.barrier()


# --- 8. cumulative counter with out-of-order completion -----------------------------------------

def _chunks_kernel(ctx, src, recv, size, nchunks):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    tile = staging(ctx, size)
    if me % 2 == 0 and me + 1 < n:  # producer: every block puts its share of the chunks
        peer = me + 1
        for k in range(b, nchunks, nb):
            put(ctx, (recv + k * size).on_rank(peer), src + k * size, size, tile)
            release()
            TNOTIFY(Signal(slot(ctx, FLAG_SLOT, peer)), 1, NotifyOp.AtomicAdd)  # bug: one counter
    elif me % 2 == 1 and b == 0:  # consumer: chunk k is "ready" once the counter reaches k + 1
        for k in range(nchunks):
            TWAIT(Signal(slot(ctx, FLAG_SLOT)), k + 1, WaitCmp.GE)
            expect(f"rank {me} chunk {k}", read(recv + k * size, size, tile), k + 1.0)


def bug_cumulative_counter(rt, size: int) -> None:
    """A cumulative counter shared by out-of-order completions (NVIDIA/nvshmem #84).

    The producer's blocks put chunks concurrently, each followed by ``AtomicAdd(+1)`` on one
    counter; the consumer takes "counter >= k + 1" to mean chunk k has landed. A later chunk's
    completion satisfies an earlier chunk's wait, and the consumer reads a chunk still missing.
    One flag per chunk (or per-chunk epochs) is the fix.
    """
    nchunks = ROUNDS * rt.config.blocks
    src = rt.alloc((nchunks, size), np.float32)
    recv = rt.alloc((nchunks, size), np.float32)
    src[:] = np.arange(1, nchunks + 1, dtype=np.float32)[:, None]
    rt.launch(_chunks_kernel, args=(src.ptr, recv.ptr, size, nchunks))


# --- 9. host-side reset racing a peer's first signal ---------------------------------------------

def _ring_kernel(ctx):
    if ctx.block_idx != 0:
        return
    nxt = (ctx.rank + 1) % ctx.nranks
    TNOTIFY(Signal(slot(ctx, RING_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, RING_SLOT)), 1, WaitCmp.GE)


def bug_host_reset_race(rt, size: int) -> None:
    """A host-side reset racing a peer's first signal (NVIDIA/nvshmem PR #98).

    Between launches each host zeroes its own signal matrix with a plain numpy write and no
    barrier, instead of the collective ``rt.reset_signals()``; a peer that is already in the next
    launch may have signalled before the zeroing, the signal is wiped and the launch hangs.
    """
    del size
    rt.reset_signals()
    for _ in range(6):
        rt.launch(_ring_kernel)
        rt.signals[:] = 0  # bug: not collective; a peer's next signal may already be here


# --- 10. EQ wait missing a transient value ---------------------------------------------------------

def _phases_kernel(ctx, phases):
    if ctx.block_idx != 0:
        return
    nxt = (ctx.rank + 1) % ctx.nranks
    peer_phase = Signal(slot(ctx, PHASE_SLOT, nxt))
    for p in range(1, phases + 1):
        TNOTIFY(peer_phase, p, NotifyOp.Set)
    mine = Signal(slot(ctx, PHASE_SLOT))
    for p in range(1, phases + 1):
        TWAIT(mine, p, WaitCmp.EQ)  # bug: EQ on a value the writer may already have left


def bug_eq_transient(rt, size: int) -> None:
    """An EQ wait missing a transient value (ABA; pto-isa ``TWait.MultiPhase``).

    The writer steps a phase word 1, 2, 3 with ``Set``; the reader waits ``== 1``, ``== 2``,
    ``== 3``. If the writer has moved on before a poll sees 1, the wait can never hold (the
    in-tree test dodges it only with 50 ms sleeps). GE on a monotonic count is the fix.
    """
    del size
    rt.reset_signals()
    rt.launch(_phases_kernel, args=(3,))


# --- 11. event-id clash between TPUT and the user's flags ------------------------------------------

def _clash_kernel(ctx, src, recv, size):
    if ctx.block_idx != 0:
        return
    nxt, prev = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    tile = staging(ctx, size)
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)  # the user's pipeline pre-sets its flag ...
    put(ctx, recv.on_rank(nxt), src, size, tile)  # ... TPUT uses EVENT_ID0 too and consumes it
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)  # ... so this wait has nothing left to consume
    release()
    TNOTIFY(Signal(slot(ctx, FLAG_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.GE)
    expect(f"rank {ctx.rank} data from rank {prev}", read(recv, size, tile), prev + 1.0)


def bug_event_id_clash(rt, size: int) -> None:
    """An event-id clash between ``TPUT`` and the user's own flags (TPUT's own event id).

    TPUT synchronizes MTE2 -> MTE3 on ``EVENT_ID0`` (``a2a3/TPut.hpp``), the id that
    ``BuildAsyncSession`` and hand-written pipelines default to as well. A pending user
    ``set_flag(MTE2, MTE3, EVENT_ID0)`` is consumed by TPUT's ``wait_flag``; the user's own wait
    then stalls the pipe forever (or consumes someone else's event).
    """
    src, recv = _send_recv(rt, size)
    src[:] = rt.rank + 1.0
    rt.launch(_clash_kernel, args=(src.ptr, recv.ptr, size))


# --- 12. missing wait_flag between TLOAD and TSTORE ------------------------------------------------

def _manual_copy_kernel(ctx, src, recv, size):
    if ctx.block_idx != 0:
        return
    nxt, prev = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    tile = ctx.tile((1, min(size, COPY_TILE_COLS)), np.float32)  # many chunks: many chances
    dst = recv.on_rank(nxt)
    for c0 in range(0, size, tile.cols):
        c1 = min(c0 + tile.cols, size)
        TLOAD(tile, GlobalTensor(src + c0, (1, c1 - c0)))
        # bug: no set_flag/wait_flag(PIPE_MTE2, PIPE_MTE3) (nor pipe_barrier) before the store
        TSTORE(GlobalTensor(dst + c0, (1, c1 - c0)), tile)
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    release()
    TNOTIFY(Signal(slot(ctx, FLAG_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.GE)
    want = 10000.0 * (prev + 1) + np.arange(size, dtype=np.float32)  # a stale tile shows too
    expect(f"rank {ctx.rank} data from rank {prev}", read(recv, size, tile), want)


def bug_missing_wait_flag(rt, size: int) -> None:
    """A missing MTE2 -> MTE3 wait between ``TLOAD`` and ``TSTORE`` (pto-isa ``a2d8dd86``).

    A hand-written copy loop loads a chunk on MTE2 and stores the tile on MTE3 with no event
    between them, so the store may read the tile before the load has filled it and the peer
    gets the previous chunk or zeros (pypto's intermittent TGET failure; the fix added
    ``pipe_barrier(PIPE_ALL)`` between the two).
    """
    src, recv = _send_recv(rt, size)
    src[:] = 10000.0 * (rt.rank + 1) + np.arange(size, dtype=np.float32)
    rt.launch(_manual_copy_kernel, args=(src.ptr, recv.ptr, size))


# --- 13. missing intra-rank barrier before the cross-rank one ----------------------------------------

def _no_intra_kernel(ctx, src, recv, size):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    nxt, prev = (me + 1) % n, (me - 1) % n
    part = -(-size // nb)
    lo, hi = min(b * part, size), min((b + 1) * part, size)
    tile = staging(ctx, max(hi - lo, 1))
    if hi > lo:  # every block sends its part of the vector
        put(ctx, (recv + lo).on_rank(nxt), src + lo, hi - lo, tile)
    release()
    if b != 0:
        return
    # bug: block 0 signals the peer without waiting for the other blocks' arrival
    TNOTIFY(Signal(slot(ctx, FLAG_SLOT, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.GE)
    whole = staging(ctx, size)
    expect(f"rank {me} vector from rank {prev}", read(recv, size, whole), prev + 1.0)


def bug_missing_intra_barrier(rt, size: int) -> None:
    """A missing intra-rank barrier before the cross-rank one (the seed DeviceBarrier's step 1 skipped).

    Every block puts its part of the vector, but block 0 alone signals the peer without first
    collecting the other blocks' arrivals (the seed's intra-rank counter, or ``SYNCALL``): the
    peer reads parts that are still in flight from the slower blocks.
    """
    src, recv = _send_recv(rt, size)
    src[:] = rt.rank + 1.0
    rt.launch(_no_intra_kernel, args=(src.ptr, recv.ptr, size))


