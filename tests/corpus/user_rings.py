"""Programs a new user writes from the README alone, part 1: credit / ACK rings and flags.

Written against README.md and docs/ only, in their own style (own helpers, 2-D tiles, slot
layouts other than the rest of the corpus: several slots per ring, packed AtomicAdd words,
Signal2D rows one line apart, N-D int32 signal tensors), 2-8 ranks and 1-4 blocks. Every
program checks its own results. All are correct on a2a3:

* data a peer reads is published with ``pipe_barrier(PIPE_ALL)`` + ``dsb(DSB_DDR)`` before the
  ``TNOTIFY`` the reader waits for;
* a credit / ACK publishes no data (the consumer copied the slot into its own buffer and drained),
  so it is a bare ``TNOTIFY`` after ``pipe_barrier``;
* counters only grow (thresholds count rounds and launches) or are Set to a version by one writer.
"""

from __future__ import annotations

import numpy as np

from shmcomm.comm import (
    TGET,
    TNOTIFY,
    TPUT,
    TTEST,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID4,
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

from ._base import expect, program

ROWS, COLS = 2, 32  # a slot: one (2, 32) float32 tile, 256 bytes
WORDS_PER_LINE = 16


def _payload(rank: int, step: int, lane: int = 0) -> np.ndarray:
    return (np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) * 0.5
            + 100.0 * rank + 7.0 * step + 1000.0 * lane)


def _view(ptr, rows: int = ROWS, cols: int = COLS) -> GlobalTensor:
    return GlobalTensor(ptr, (rows, cols))


def _publish() -> None:
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


# --- 1. an 8-rank credit ring, three slots, TGET copy-out --------------------------------------

SLOTS3, STEPS5 = 3, 5


def _ring8_kernel(ctx, src, slots, out, sigs):
    me, n = ctx.rank, ctx.nranks
    nxt, prv = (me + 1) % n, (me - 1) % n
    full, credit = sigs, sigs + WORDS_PER_LINE
    stage = ctx.tile((ROWS, COLS), np.float32)
    cp = ctx.tile((ROWS, COLS), np.float32)
    slot_elems = ROWS * COLS
    for step in range(STEPS5):
        s = step % SLOTS3
        if step >= SLOTS3:
            TWAIT(Signal(credit), step - SLOTS3 + 1, WaitCmp.GE)
        TPUT(_view(GetRemotePtr(ctx, slots + s * slot_elems, nxt)),
             _view(src + step * slot_elems), stage)
        _publish()
        TNOTIFY(Signal(GetRemotePtr(ctx, full, nxt)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(full), step + 1, WaitCmp.GE)
        TGET(_view(out + step * slot_elems), _view(slots + s * slot_elems), cp)
        pipe_barrier(PIPE_ALL)
        TNOTIFY(Signal(GetRemotePtr(ctx, credit, prv)), 1, NotifyOp.AtomicAdd)


@program(nranks=8, blocks=1)
def ring8_three_slot_credits(rt):
    """Eight ranks in a ring, one block each: TPUT into one of three slots of the next rank,
    drain + dsb + notify; the receiver TGETs the slot into its own buffer and credits the
    sender (no dsb) so the slot can be refilled two steps later."""
    src = rt.alloc((STEPS5, ROWS, COLS), np.float32)
    slots = rt.alloc((SLOTS3, ROWS, COLS), np.float32)
    out = rt.alloc((STEPS5, ROWS, COLS), np.float32)
    for step in range(STEPS5):
        src[step] = _payload(rt.rank, step)
    sigs = rt.signal_region("ring8", 2 * WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_ring8_kernel, args=(src.ptr, slots.ptr, out.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for step in range(STEPS5):
        expect(f"rank {rt.rank} step {step}", out[step], _payload(prv, step))


# --- 2. credits the host grants, on a word it resets itself between launches -----------------

K2, STEPS4, LAUNCHES2 = 2, 4, 2


def _granted_kernel(ctx, src, slots, out, sigs, launch):
    me, n = ctx.rank, ctx.nranks
    full, credit = sigs, sigs + WORDS_PER_LINE
    t = ctx.tile((ROWS, COLS), np.float32)
    se = ROWS * COLS
    base = launch * STEPS4  # the full counter is never reset: it counts every launch's steps
    for step in range(STEPS4):
        s = step % K2
        if ctx.block_idx == 0:
            TWAIT(Signal(credit), step + 1, WaitCmp.GE)  # K2 granted by the host, +1 per copy
            TLOAD(t, _view(src + step * se))
            set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID4)
            wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID4)
            TSTORE(_view(GetRemotePtr(ctx, slots + s * se, (me + 1) % n)), t)
            _publish()
            TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        elif ctx.block_idx == 1:
            TWAIT(Signal(full), base + step + 1, WaitCmp.GE)
            TLOAD(t, _view(slots + s * se))
            set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID4)
            wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID4)  # the store waits for the load ...
            TSTORE(_view(out + step * se), t)
            pipe_barrier(PIPE_MTE3)  # ... so the drained store means the slot was read
            TNOTIFY(Signal(GetRemotePtr(ctx, credit, (me - 1) % n)), 1, NotifyOp.AtomicAdd)


@program(nranks=3, blocks=2)
def host_grants_credits_own_word(rt):
    """Before each launch the host sets its own credit word to K (a host barrier after the
    previous launch orders the peers' last credits before that store, another one orders the
    store before their new credits); the data counter is never reset and its thresholds count
    the launches. The consumer copies with TLOAD -> event -> TSTORE and credits after draining
    MTE3 only."""
    src = rt.alloc((STEPS4, ROWS, COLS), np.float32)
    slots = rt.alloc((K2, ROWS, COLS), np.float32)
    out = rt.alloc((STEPS4, ROWS, COLS), np.float32)
    sigs = rt.signal_region("granted", 2 * WORDS_PER_LINE)
    credit_word = (sigs.offset // 4) + WORDS_PER_LINE
    prv = (rt.rank - 1) % rt.nranks
    for launch in range(LAUNCHES2):
        for step in range(STEPS4):
            src[step] = _payload(rt.rank, 10 * launch + step)
        rt.barrier()  # every peer's previous launch (and its credits) is over
        rt.signals[credit_word] = K2
        rt.barrier()  # every rank granted before anyone's launch returns a credit
        rt.launch(_granted_kernel, args=(src.ptr, slots.ptr, out.ptr, sigs, launch))
        for step in range(STEPS4):
            expect(f"rank {rt.rank} launch {launch} step {step}", out[step],
                   _payload(prv, 10 * launch + step))


# --- 3. versioned Set flags and credits, one lane per block -------------------------------------

STEPS3 = 3


def _lanes_set_kernel(ctx, src, slots, out, sigs):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    nxt, prv = (me + 1) % n, (me - 1) % n
    full = sigs + b * 2 * WORDS_PER_LINE
    credit = full + WORDS_PER_LINE
    tp = ctx.tile((ROWS, COLS), np.float32)
    tc = ctx.tile((ROWS, COLS), np.float32)
    se = ROWS * COLS
    for step in range(STEPS3):
        s = step % 2
        if step >= 2:  # the credit word holds how many steps the consumer copied
            TWAIT(Signal(credit), step - 1, WaitCmp.GE)
        TPUT(_view(GetRemotePtr(ctx, slots + (b * 2 + s) * se, nxt)),
             _view(src + (b * STEPS3 + step) * se), tp)
        _publish()
        TNOTIFY(Signal(GetRemotePtr(ctx, full, nxt)), step + 1, NotifyOp.Set)
        TWAIT(Signal(full), step + 1, WaitCmp.GE)
        TGET(_view(out + (b * STEPS3 + step) * se), _view(slots + (b * 2 + s) * se), tc)
        pipe_barrier(PIPE_ALL)
        TNOTIFY(Signal(GetRemotePtr(ctx, credit, prv)), step + 1, NotifyOp.Set)


@program(nranks=3, blocks=2)
def versioned_set_lanes(rt):
    """Each block runs its own two-slot lane to the next rank; the data flag and the credit are
    Set to the step number (one writer each, on its own line) and waited with GE."""
    nb = rt.config.blocks
    src = rt.alloc((nb, STEPS3, ROWS, COLS), np.float32)
    slots = rt.alloc((nb, 2, ROWS, COLS), np.float32)
    out = rt.alloc((nb, STEPS3, ROWS, COLS), np.float32)
    for b in range(nb):
        for step in range(STEPS3):
            src[b, step] = _payload(rt.rank, step, b)
    sigs = rt.signal_region("lanes", nb * 2 * WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_lanes_set_kernel, args=(src.ptr, slots.ptr, out.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for b in range(nb):
        for step in range(STEPS3):
            expect(f"rank {rt.rank} lane {b} step {step}", out[b, step], _payload(prv, step, b))


# --- 4. packed AtomicAdd words: every lane's counters on one line --------------------------------

def _packed_kernel(ctx, src, slot, out, sigs):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    nb = ctx.block_num
    full, ack = sigs + b, sigs + nb + b  # adjacent words of one line: AtomicAdd is word-safe
    t = ctx.tile((1, COLS), np.float32)
    for step in range(STEPS3):
        TLOAD(t, _view(src + (b * STEPS3 + step) * COLS, 1))
        pipe_barrier(PIPE_ALL)
        TSTORE(_view(GetRemotePtr(ctx, slot + b * COLS, (me + 1) % n), 1), t)
        _publish()
        TNOTIFY(Signal(GetRemotePtr(ctx, full, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(full), step + 1, WaitCmp.GE)
        TLOAD(t, _view(slot + b * COLS, 1))
        pipe_barrier(PIPE_ALL)
        TSTORE(_view(out + (b * STEPS3 + step) * COLS, 1), t)
        pipe_barrier(PIPE_ALL)
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, (me - 1) % n)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ack), step + 1, WaitCmp.GE)  # stop-and-wait: my slot at the next rank


@program(nranks=2, blocks=3)
def packed_atomic_words_stop_and_wait(rt):
    """Three blocks, each a one-slot stop-and-wait lane to the other rank; all six counters
    are adjacent words of one line, all AtomicAdd (word-granular, so packing is safe)."""
    nb = rt.config.blocks
    src = rt.alloc((nb, STEPS3, COLS), np.float32)
    slot = rt.alloc((nb, COLS), np.float32)
    out = rt.alloc((nb, STEPS3, COLS), np.float32)
    for b in range(nb):
        for step in range(STEPS3):
            src[b, step] = _payload(rt.rank, step, b)[0]
    sigs = rt.signal_region("packed", WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_packed_kernel, args=(src.ptr, slot.ptr, out.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for b in range(nb):
        for step in range(STEPS3):
            expect(f"rank {rt.rank} lane {b} step {step}", out[b, step], _payload(prv, step, b)[0])


# --- 5. a versioned Set broadcast with an EQ wait ------------------------------------------------

def _bcast_kernel(ctx, src, inbox, out, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    flag, acks = sigs, sigs + WORDS_PER_LINE
    t = ctx.tile((ROWS, COLS), np.float32)
    se = ROWS * COLS
    for step in range(1, STEPS3 + 1):
        if me == 0:
            TLOAD(t, _view(src + (step - 1) * se))
            pipe_barrier(PIPE_ALL)
            for r in range(1, n):
                TSTORE(_view(GetRemotePtr(ctx, inbox, r)), t)
            _publish()
            for r in range(1, n):
                TNOTIFY(Signal(GetRemotePtr(ctx, flag, r)), step, NotifyOp.Set)
            TWAIT(Signal(acks), (n - 1) * step, WaitCmp.GE)  # everybody copied this step
        else:
            TWAIT(Signal(flag), step, WaitCmp.EQ)  # rank 0 cannot move on before my ACK
            TLOAD(t, _view(inbox))
            pipe_barrier(PIPE_ALL)
            TSTORE(_view(out + (step - 1) * se), t)
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, acks, 0)), 1, NotifyOp.AtomicAdd)


@program(nranks=4, blocks=2)
def broadcast_versioned_set_eq(rt):
    """Rank 0 broadcasts three steps through one inbox per rank; each step's flag is Set to the
    step number and waited with EQ (safe: rank 0 waits for every ACK before the next Set)."""
    src = rt.alloc((STEPS3, ROWS, COLS), np.float32)
    inbox = rt.alloc((ROWS, COLS), np.float32)
    out = rt.alloc((STEPS3, ROWS, COLS), np.float32)
    if rt.rank == 0:
        for step in range(STEPS3):
            src[step] = _payload(0, step)
    sigs = rt.signal_region("bcast-eq", 2 * WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_bcast_kernel, args=(src.ptr, inbox.ptr, out.ptr, sigs))
    if rt.rank:
        for step in range(STEPS3):
            expect(f"rank {rt.rank} step {step}", out[step], _payload(0, step))


# --- 6. a wait on an N-D int32 signal tensor ------------------------------------------------------

def _nd_gather_kernel(ctx, table, flags, out):
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    t = ctx.tile((1, COLS), np.float32)
    row = me * nb + b
    t.array[0, :] = _payload(me, 0, b)[0]
    for r in range(n):
        TSTORE(_view(GetRemotePtr(ctx, table + row * COLS, r), 1), t)
    _publish()
    for r in range(n):  # my flag: word [me][b] of every rank's flag block (rows a line apart)
        TNOTIFY(Signal(GetRemotePtr(ctx, flags + me * WORDS_PER_LINE + b, r)), 1,
                NotifyOp.AtomicAdd)
    # every (rank, block)'s flag at once: a 3-D int32 tensor (ranks x blocks x 1)
    TWAIT(GlobalTensor(flags, (n, nb, 1), (WORDS_PER_LINE, 1, 1)), 1, WaitCmp.GE)
    r_in = ctx.tile((1, COLS), np.float32)
    for i in range(n * nb):
        TLOAD(r_in, _view(table + i * COLS, 1))
        pipe_barrier(PIPE_ALL)
        TSTORE(_view(out + (b * n * nb + i) * COLS, 1), r_in)
        pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=2)
def nd_tensor_signal_gather(rt):
    """Every block of every rank writes its row into every rank's table, then waits for all of
    them with one TWAIT on a 3-D int32 GlobalTensor of flags (one word per rank and block,
    ranks a line apart) and copies the whole table out."""
    nb = rt.config.blocks
    n = rt.nranks
    table = rt.alloc((n * nb, COLS), np.float32)
    out = rt.alloc((nb, n * nb, COLS), np.float32)
    flags = rt.signal_region("nd-flags", n * WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_nd_gather_kernel, args=(table.ptr, flags, out.ptr))
    for b in range(nb):
        for r in range(n):
            for j in range(nb):
                expect(f"rank {rt.rank} block {b} row {r}/{j}", out[b, r * nb + j],
                       _payload(r, 0, j)[0])


# --- 7. a TTEST poll over a strided Signal2D --------------------------------------------------------

def _poll2d_kernel(ctx, table, flags, out, polls):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((ROWS, COLS), np.float32)
    se = ROWS * COLS
    t.array[:] = _payload(me, 3)
    for r in range(n):
        TSTORE(_view(GetRemotePtr(ctx, table + me * se, r)), t)
    _publish()
    for r in range(n):
        TNOTIFY(Signal(GetRemotePtr(ctx, flags + me * WORDS_PER_LINE, r)), 1, NotifyOp.AtomicAdd)
    all_flags = Signal2D(flags, n, 1, row_stride=WORDS_PER_LINE)
    tries = 0
    while not TTEST(all_flags, 1, WaitCmp.GE):
        tries += 1
    polls.append(tries)
    c = ctx.tile((ROWS, COLS), np.float32)
    for r in range(n):
        TGET(_view(out + r * se), _view(table + r * se), c)
    pipe_barrier(PIPE_ALL)


@program(nranks=4, blocks=1)
def ttest_poll_strided_signal2d(rt):
    """An all-gather whose readers poll TTEST on a Signal2D with one word per rank, a line
    apart (row_stride=16), until every rank's word is set, then TGET the table rows out."""
    n = rt.nranks
    table = rt.alloc((n, ROWS, COLS), np.float32)
    out = rt.alloc((n, ROWS, COLS), np.float32)
    flags = rt.signal_region("poll2d", n * WORDS_PER_LINE)
    rt.barrier()
    polls: list[int] = []
    rt.launch(_poll2d_kernel, args=(table.ptr, flags, out.ptr, polls))
    for r in range(n):
        expect(f"rank {rt.rank} row {r}", out[r], _payload(r, 3))
    assert len(polls) == 1


# --- 8. a bounded poll that may give up; the host retries after a barrier ------------------------

def _try_kernel(ctx, inbox, out, sigs, status, budget):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, COLS), np.float32)
    t.array[0, :] = _payload(me, 5)[0]
    TSTORE(_view(GetRemotePtr(ctx, inbox, (me + 1) % n), 1), t)
    _publish()
    TNOTIFY(Signal(GetRemotePtr(ctx, sigs, (me + 1) % n)), 1, NotifyOp.AtomicAdd)
    for _ in range(budget):
        if TTEST(Signal(sigs), 1, WaitCmp.GE):
            TLOAD(t, _view(inbox, 1))
            pipe_barrier(PIPE_ALL)
            TSTORE(_view(out, 1), t)
            pipe_barrier(PIPE_ALL)
            status.append(1)
            return
    status.append(0)  # gave up: the host will finish the job after a barrier


def _finish_kernel(ctx, inbox, out, sigs):
    if ctx.block_idx != 0:
        return
    t = ctx.tile((1, COLS), np.float32)
    TWAIT(Signal(sigs), 1, WaitCmp.GE)  # holds already: the host barrier came after the notify
    TLOAD(t, _view(inbox, 1))
    pipe_barrier(PIPE_ALL)
    TSTORE(_view(out, 1), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=3, blocks=2)
def bounded_poll_then_host_retry(rt):
    """A kernel sends its row, then polls for its own row a few times only; when it gave up,
    the host finishes after a host barrier (every peer's launch, and its notify, is over) with
    a second launch whose wait already holds."""
    inbox = rt.alloc((COLS,), np.float32)
    out = rt.alloc((COLS,), np.float32)
    sigs = rt.signal_region("retry", WORDS_PER_LINE)
    rt.barrier()
    status: list[int] = []
    rt.launch(_try_kernel, args=(inbox.ptr, out.ptr, sigs, status, 3))
    rt.barrier()
    if status == [0]:
        rt.launch(_finish_kernel, args=(inbox.ptr, out.ptr, sigs))
    expect(f"rank {rt.rank}", out[:], _payload((rt.rank - 1) % rt.nranks, 5)[0])


# --- 9. a re-wait, in a later launch, on a signal an earlier launch satisfied ------------------

def _send_once_kernel(ctx, inbox, sigs):
    if ctx.block_idx != 0:
        return
    me, n = ctx.rank, ctx.nranks
    t = ctx.tile((1, COLS), np.float32)
    t.array[0, :] = _payload(me, 8)[0]
    TSTORE(_view(GetRemotePtr(ctx, inbox, (me + 1) % n), 1), t)
    _publish()
    TNOTIFY(Signal(GetRemotePtr(ctx, sigs, (me + 1) % n)), 1, NotifyOp.AtomicAdd)


def _use_kernel(ctx, inbox, out, sigs, scale):
    b = ctx.block_idx
    t = ctx.tile((1, COLS), np.float32)
    TWAIT(Signal(sigs), 1, WaitCmp.GE)  # each launch checks again; from launch 2 on it holds
    TLOAD(t, _view(inbox, 1))
    pipe_barrier(PIPE_ALL)
    t.array[0, :] *= scale
    TSTORE(_view(out + b * COLS, 1), t)
    pipe_barrier(PIPE_ALL)


@program(nranks=2, blocks=2)
def rewait_in_later_launches(rt):
    """The first launch sends each rank's row and does not wait; three later launches each
    wait for that same signal (satisfied, one of them by the wait itself, the others already
    before they start) and use the row."""
    nb = rt.config.blocks
    inbox = rt.alloc((COLS,), np.float32)
    out = rt.alloc((nb, COLS), np.float32)
    sigs = rt.signal_region("rewait-launch", WORDS_PER_LINE)
    rt.barrier()
    rt.launch(_send_once_kernel, args=(inbox.ptr, sigs))
    prv = (rt.rank - 1) % rt.nranks
    for scale in (1.0, 2.0, 3.0):
        rt.launch(_use_kernel, args=(inbox.ptr, out.ptr, sigs, scale))
        for b in range(nb):
            expect(f"rank {rt.rank} scale {scale} block {b}", out[b], _payload(prv, 8)[0] * scale)
