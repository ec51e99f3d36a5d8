"""Device barriers: the seed's ``DeviceBarrier``, verbatim, and an epoch-safe barrier.

Where each barrier's words live by default, and which words a run claims for it, is the table in
:mod:`shmcomm.kernels.layout` (every offset below comes from there). Each barrier claims its
words the first time it builds its signals in a run, so a user's signal on one of them raises
``SignalOverlapError`` instead of silently breaking the barrier.

Seed signal-matrix layout (one per rank, int32 words from ``signal_base``)::

    [0 .. MAX_RANKS-1]   cross-rank counters: peer r adds 1 to word r      (CROSS_RANK_OFFSET)
    [MAX_RANKS]          local broadcast flag: block 0 -> all blocks       (LOCAL_FLAG_OFFSET)
    [MAX_RANKS+1]        intra-rank arrival counter                         (INTRA_RANK_OFFSET)

Epoch barrier layout (from ``EPOCH_BARRIER_OFFSET``, each group on its own 64-byte line)::

    +0  .. +63           cross-rank arrivals: peer r adds 1 to word r at every barrier
    +64                  intra-rank arrivals: every block adds 1 at every barrier
    +80                  release count: block 0 adds 1 when the rank may go on

Protocol of ``EpochBarrier`` (all AtomicAdd, all GE waits on monotonic counts):

1. every block drains and fences (``pipe_barrier(PIPE_ALL)`` + ``dsb(DSB_DDR)``) and derives its
   round ``k = release + 1`` from the release count, which counts this rank's finished barriers
   (nobody can enter round k+1 before round k is released, nor see round k released before it
   arrived), then adds 1 to the intra counter;
2. block 0 waits for ``intra >= num_blocks``, takes the arrivals back (``AtomicAdd(-num_blocks)``,
   a self-clearing counter as in pypto PR #2279, so launches may change the block count), adds 1
   to word ``my_rank`` of every rank's cross-rank group (its own too) and waits for all
   ``nranks`` words of its own group to reach ``k`` (one ``Signal2D`` sweep);
3. block 0 adds 1 to the release count; the other blocks wait for it to reach ``k``.

So it stays correct for any number of calls in a launch and any number of launches without a
signal reset, as long as every rank calls it the same number of times.

Central barrier layout (from ``CENTRAL_BARRIER_OFFSET``; only rank 0's words are used)::

    +0                   arrivals of every block of every rank (monotonic)
    +16                  release: the number of the last completed round (own 64-byte line)

Protocol of ``CentralBarrier`` (a one-level combining tree: every block is a leaf of rank 0):
every block drains and fences, derives its round ``k = release + 1`` (nobody enters round k+1
before round k is released), adds 1 to the arrivals and tests ``arrivals >= k * N`` with
``N = nranks * num_blocks``. A block that sees it true is the last arrival (or came after it)
and stores ``release = k`` (a ``Set``: idempotent, and no later round can complete while a
round-k setter is still on its way, so it never moves release back); the others wait for
``release >= k``. One add, one test and one single-word wait per block, and the last arrival
releases everybody directly, with no hop through a block 0; waiters sleep on the release word,
so the arrivals before the last one wake nobody. The price: every launch that uses a region
must have the same ``N`` (use another ``signal_base``, or ``rt.reset_signals()``, when the block
count changes), and the int32 count allows ``2**31 // N`` rounds per region. A dissemination
barrier needs ``log2(nranks)`` dependent waits per barrier, each one a scheduling hop on an
oversubscribed box, so the flat counter wins here.
"""

from __future__ import annotations

from ..comm import TNOTIFY, TTEST, TWAIT, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp
from ..errors import ShmcommError
from ..pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier
from .layout import (
    CENTRAL_ARRIVALS,
    CENTRAL_BARRIER,
    CENTRAL_BARRIER_OFFSET,
    CENTRAL_BARRIER_WORDS,
    CENTRAL_RELEASE,
    CROSS_RANK_OFFSET,
    EPOCH_BARRIER,
    EPOCH_BARRIER_OFFSET,
    EPOCH_BARRIER_WORDS,
    EPOCH_CROSS,
    EPOCH_INTRA,
    EPOCH_RELEASE,
    INTRA_RANK_OFFSET,
    LOCAL_FLAG_OFFSET,
    SEED_BARRIER,
    claim,
    seed_barrier_words,
)

_INT32_MAX = 2**31 - 1


def DeviceBarrier(ctx, signal_base, phase, my_rank, nranks, block_idx, num_comm_blocks):
    """The seed's cross-rank barrier, line for line (``signal-design.md``).

    Known hazards, kept on purpose (the seed's own, reproduced as written):

    * the cross-rank slot ``signal_base + my_rank`` ignores ``phase``: a second call in the same
      launch is satisfied at once by the first call's counts;
    * nothing is reset: a relaunch without ``rt.reset_signals()`` passes at once;
    * the arrival count assumes ``num_comm_blocks`` equals the real launch count (more: hang;
      fewer: passes early);
    * no release fence at entry: data stored just before the barrier may not be visible yet;
    * ``LOCAL_FLAG_OFFSET + phase`` aliases ``INTRA_RANK_OFFSET + phase - 1``.

    Use :func:`EpochBarrier` for anything called more than once.
    """
    ctx.expect_blocks(num_comm_blocks, "DeviceBarrier", "num_comm_blocks")
    # its words are claimed for this run; the Signals made inside are the barrier's own
    with claim(SEED_BARRIER, signal_base, "DeviceBarrier", seed_barrier_words(phase)):
        # Step 1: intra-rank barrier (every block must arrive)
        intra_counter = signal_base + INTRA_RANK_OFFSET + phase
        if block_idx != 0:
            TNOTIFY(Signal(intra_counter), 1, NotifyOp.AtomicAdd)
        elif num_comm_blocks > 1:
            TWAIT(Signal(intra_counter), num_comm_blocks - 1, WaitCmp.GE)
        pipe_barrier(PIPE_ALL)

        # Step 2: cross-rank barrier (block 0 only)
        if block_idx == 0:
            for r in range(nranks):
                if r == my_rank:
                    continue
                remote_sig = GetRemotePtr(ctx, signal_base + my_rank, r)
                TNOTIFY(Signal(remote_sig), 1, NotifyOp.AtomicAdd)
            for r in range(nranks):
                if r == my_rank:
                    continue
                TWAIT(Signal(signal_base + r), 1, WaitCmp.GE)
            local_flag = signal_base + LOCAL_FLAG_OFFSET + phase
            TNOTIFY(Signal(local_flag), 1, NotifyOp.Set)
        else:
            local_flag = signal_base + LOCAL_FLAG_OFFSET + phase
            TWAIT(Signal(local_flag), 1, WaitCmp.GE)
        pipe_barrier(PIPE_ALL)


# enum attribute access costs ~0.2 us on CPython 3.11: the barriers below bind the members once
_ADD, _SET, _GE = NotifyOp.AtomicAdd, NotifyOp.Set, WaitCmp.GE


class _EpochSignals:
    """The precomputed signals of one rank's epoch barrier (hot path: no per-call objects)."""

    __slots__ = ("intra", "release", "peers", "cross_all")

    def __init__(self, ctx, base):
        me, n = ctx.rank, ctx.nranks
        with claim(EPOCH_BARRIER, base, "EpochBarrier"):
            self.intra = Signal(base + EPOCH_INTRA)
            self.release = Signal(base + EPOCH_RELEASE)
            # my word in every rank's cross-rank group, my own included, so that the wait is one
            # Signal2D sweep over words 0..nranks-1 instead of nranks-1 separate TWAITs
            self.peers = [Signal(GetRemotePtr(ctx, base + EPOCH_CROSS + me, r)) for r in range(n)]
            self.cross_all = Signal2D(base + EPOCH_CROSS, 1, n)


def _epoch_signals(ctx, base):
    state = ctx.rt.kernel_state
    cache = state.get("EpochBarrier")  # not setdefault: that builds a dict at every call
    if cache is None:
        cache = state["EpochBarrier"] = {}
    key = base.offset
    sigs = cache.get(key)
    if sigs is None:
        sigs = cache[key] = _EpochSignals(ctx, base)
    return sigs


def EpochBarrier(ctx, signal_base=None, num_blocks=None):
    """Barrier of every block of every rank; reusable without any reset (see module docstring).

    ``signal_base`` is the start of the barrier's region (default
    ``ctx.signal_base + EPOCH_BARRIER_OFFSET``); ``num_blocks`` defaults to the launch's real
    block count. Returns the round number ``k`` (1 for the first barrier on a fresh region).
    """
    base = ctx.signal_base + EPOCH_BARRIER_OFFSET if signal_base is None else signal_base
    if num_blocks is None:
        nblocks = ctx.block_num
    else:
        nblocks = num_blocks
        ctx.expect_blocks(num_blocks, "EpochBarrier", "num_blocks")
    s = _epoch_signals(ctx, base)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)  # release: what this block stored before the barrier is visible to all
    k = s.release.value + 1
    TNOTIFY(s.intra, 1, _ADD)
    if ctx.block_idx == 0:
        TWAIT(s.intra, nblocks, _GE)
        TNOTIFY(s.intra, -nblocks, _ADD)
        for sig in s.peers:
            TNOTIFY(sig, 1, _ADD)
        TWAIT(s.cross_all, k, _GE)
        TNOTIFY(s.release, 1, _ADD)
    else:
        TWAIT(s.release, k, _GE)
    pipe_barrier(PIPE_ALL)
    return k


def _central_signals(ctx, signal_base):
    """``(arrivals, release, release word's acquire-read cell)`` of the region, made once a run."""
    state = ctx.rt.kernel_state
    cache = state.get("CentralBarrier")  # not setdefault: that builds a dict at every call
    if cache is None:
        cache = state["CentralBarrier"] = {}
    key = None if signal_base is None else signal_base.offset
    sigs = cache.get(key)
    if sigs is None:
        base = ctx.signal_base + CENTRAL_BARRIER_OFFSET if signal_base is None else signal_base
        with claim(CENTRAL_BARRIER, base, "CentralBarrier"):
            release = Signal(GetRemotePtr(ctx, base + CENTRAL_RELEASE, 0))
            sigs = cache[key] = (Signal(GetRemotePtr(ctx, base + CENTRAL_ARRIVALS, 0)), release,
                                 release.cell)
    return sigs


def CentralBarrier(ctx, signal_base=None, num_blocks=None):
    """Barrier of every block of every rank on one arrival counter (see module docstring).

    ``signal_base`` is the start of the barrier's region (default
    ``ctx.signal_base + CENTRAL_BARRIER_OFFSET``; the words live in rank 0's window);
    ``num_blocks`` defaults to the launch's real block count and must be the same on every rank
    and in every launch that uses the region. Returns the round number ``k``.

    No ``pipe_barrier`` after the wait: ``TWAIT`` holds the scalar unit, which issues every
    later instruction, so no later pipe work can start before the barrier is passed.
    """
    arrivals, release, released = _central_signals(ctx, signal_base)
    if num_blocks is None:
        n = ctx.nranks * ctx.block_num
    else:
        ctx.expect_blocks(num_blocks, "CentralBarrier", "num_blocks")
        n = ctx.nranks * num_blocks
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)  # release: what this block stored before the barrier is visible to all
    k = released.value + 1  # the release word's acquire read (Signal.value, without the property)
    if k * n > _INT32_MAX:
        raise ShmcommError(f"CentralBarrier: the arrival counter is exhausted after {k - 1} rounds "
                           f"of {n} arrivals; call rt.reset_signals() or use another signal_base")
    TNOTIFY(arrivals, 1, _ADD)
    if TTEST(arrivals, k * n, _GE):
        TNOTIFY(release, k, _SET)
    else:
        TWAIT(release, k, _GE)
    return k


__all__ = ["DeviceBarrier", "EpochBarrier", "CentralBarrier", "CROSS_RANK_OFFSET", "LOCAL_FLAG_OFFSET",
           "INTRA_RANK_OFFSET", "EPOCH_BARRIER_OFFSET", "EPOCH_BARRIER_WORDS",
           "CENTRAL_BARRIER_OFFSET", "CENTRAL_BARRIER_WORDS"]
