"""The signal-matrix layout: every region the library's kernels use, declared once.

Words are int32 words from ``ctx.signal_base`` (word ``w`` is byte ``4 * w`` of every rank's
window); ``MAX_RANKS = 64``, ``MAX_BLOCKS = 64``; the default ``signal_bytes`` of 64 KiB holds
16384 words. Every region starts on a 64-byte line (16 words)::

    region           words           kernel                     holds
    seed_barrier     [0, 256)        DeviceBarrier              the seed's cross-rank counters [0, 64) (peer r
                                     (at ctx.signal_base)       adds 1 to word r), local flag 64 + phase,
                                                                intra-rank counter 65 + phase (phase <= 190)
    epoch_barrier    [256, 352)      EpochBarrier               cross-rank arrivals +0..+63, intra-rank
                                                                arrivals +64, release count +80 (own lines)
    native_atomic    [352, 368)      pto-isa's CPU AtomicAdd    rank 0's: the process-shared mutex behind
                                     (shadow pto/cpu/atomic.hpp) AtomicAddMutex() (state +0, mutex +2)
    (reserved)       [368, 512)
    central_barrier  [512, 544)      CentralBarrier             rank 0's arrival counter +0 and release
                                                                round +16 (own lines; other ranks' unused)
    (reserved)       [544, 1024)
    collectives      [1024, 9216)    reduce_scatter, all_gather, one row of 128 words per block b:
                                     all_reduce                 READY[b][q] at +q, DONE[b][q] at +64+q
    free             [9216, end)     yours                      USER_FREE_START .. signal_bytes // 4:
                                                                rt.signal_region(name, words)

The words a library kernel really uses in a run are **claimed** in each rank process when that
kernel first builds its signals (the whole region, except ``DeviceBarrier``: words
``[0, 66 + phase)`` from its ``signal_base``; ``EpochBarrier`` and ``CentralBarrier`` given a
``signal_base`` claim their region's size from there). A user's ``Signal`` / ``Signal2D`` on a
claimed word, a kernel claiming a word a user's signal was made on, and two kernels' claims that
overlap all raise :class:`~shmcomm.errors.SignalOverlapError` naming both (see
:mod:`shmcomm.core.regions`). Words no kernel of the run uses are free for anybody, so old
kernels with fixed low offsets keep working as long as no library kernel that claims those
words runs in the same program; new code takes its words from the **free range**, which no
library kernel ever uses, with ``rt.signal_region(name, words)`` (named, zeroed, 64-byte
aligned, the same offsets on every rank).

A region a kernel needs at its table place must fit the signal matrix: a run whose
``signal_bytes`` is too small for it raises ``ArgumentError`` naming the size it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..comm import GMPtr
from ..config import MAX_BLOCKS, MAX_RANKS
from ..core.regions import LINE_WORDS, NO_CLAIM, Claim, NoClaim
from ..errors import ArgumentError


@dataclass(frozen=True)
class Region:
    """One region of the table: ``words`` int32 words from word ``first`` of the signal matrix,
    used by ``kernel``; ``holds`` says what lives there."""

    name: str
    first: int
    words: int
    kernel: str
    holds: str

    @property
    def end(self) -> int:
        """The first word after the region."""
        return self.first + self.words


# --- inside the regions (word offsets from the region's first word) ---------------------------

# seed_barrier (DeviceBarrier, the seed's layout)
CROSS_RANK_OFFSET = 0  # [0, MAX_RANKS): peer r adds 1 to word r
LOCAL_FLAG_OFFSET = MAX_RANKS  # + phase: block 0 -> all blocks
INTRA_RANK_OFFSET = MAX_RANKS + 1  # + phase: arrivals of blocks 1..
SEED_BARRIER_WORDS = 256  # room for phases 0..190 (INTRA_RANK_OFFSET + 1 + 190 = 256)

# epoch_barrier
EPOCH_CROSS = 0  # [0, MAX_RANKS): word r counts rank r's arrivals
EPOCH_INTRA = MAX_RANKS  # own 64-byte line
EPOCH_RELEASE = MAX_RANKS + LINE_WORDS  # own 64-byte line
EPOCH_BARRIER_WORDS = MAX_RANKS + 2 * LINE_WORDS

# central_barrier (rank 0's words)
CENTRAL_ARRIVALS = 0
CENTRAL_RELEASE = LINE_WORDS  # own 64-byte line
CENTRAL_BARRIER_WORDS = 2 * LINE_WORDS

# collectives: one row per block
COLL_READY = 0  # [0, MAX_RANKS): READY[b][q]
COLL_DONE = MAX_RANKS  # [MAX_RANKS, 2 * MAX_RANKS): DONE[b][q]
COLL_BLOCK_WORDS = 2 * MAX_RANKS
COLL_WORDS = MAX_BLOCKS * COLL_BLOCK_WORDS

# --- the table ---------------------------------------------------------------------------------

SEED_BARRIER = Region(
    "seed_barrier", 0, SEED_BARRIER_WORDS, "DeviceBarrier",
    "the seed's cross-rank counters [0, 64), local flag 64 + phase, intra-rank counter 65 + phase")
EPOCH_BARRIER = Region(
    "epoch_barrier", 256, EPOCH_BARRIER_WORDS, "EpochBarrier",
    "cross-rank arrivals +0..+63, intra-rank arrivals +64, release count +80")
NATIVE_ATOMIC = Region(
    "native_atomic", 352, 16, "pto-isa's CPU AtomicAdd (native, shmcomm/native/shadow/pto/cpu/atomic.hpp)",
    "rank 0's process-shared mutex behind pto-isa's AtomicAddMutex(): state word +0, the mutex at +2")
CENTRAL_BARRIER = Region(
    "central_barrier", 512, CENTRAL_BARRIER_WORDS, "CentralBarrier",
    "rank 0's arrival counter +0 and release round +16")
COLLECTIVES = Region(
    "collectives", 1024, COLL_WORDS, "reduce_scatter / all_gather / all_reduce",
    "per block b a row of 128 words: READY[b][q] at +q, DONE[b][q] at +64+q")

REGIONS: tuple[Region, ...] = (SEED_BARRIER, EPOCH_BARRIER, NATIVE_ATOMIC, CENTRAL_BARRIER, COLLECTIVES)

# the users' free range: from the end of the last library region (64-byte aligned) to the end of
# the signal matrix, whatever signal_bytes is
USER_FREE_START = -(-max(r.end for r in REGIONS) // LINE_WORDS) * LINE_WORDS

# the names the kernels used before the table existed
EPOCH_BARRIER_OFFSET = EPOCH_BARRIER.first
CENTRAL_BARRIER_OFFSET = CENTRAL_BARRIER.first
COLL_OFFSET = COLLECTIVES.first
COLL_END = COLLECTIVES.end


def free_range(signal_bytes: int) -> tuple[int, int]:
    """Words ``[start, end)`` of the users' free range in a signal matrix of ``signal_bytes``
    (empty, ``start >= end``, when the matrix is too small to have one)."""
    return USER_FREE_START, signal_bytes // 4


def seed_barrier_words(phase: Any) -> int:
    """The words ``DeviceBarrier(..., phase, ...)`` uses from its ``signal_base``: the cross-rank
    counters and the local flag and intra counter of ``phase`` (and of every phase below)."""
    if type(phase) is int and phase > 0:
        return INTRA_RANK_OFFSET + 1 + phase
    return INTRA_RANK_OFFSET + 1


def claim(region: Region, base: Any, caller: str, words: int | None = None) -> Claim | NoClaim:
    """Claim ``words`` (default: the region's size) from ``base`` for ``region``'s kernel in this
    run, and return the claim: build the kernel's signals inside ``with claim(...):`` so that
    they are the kernel's own, never a user's (see :mod:`shmcomm.core.regions`).

    ``caller`` starts every error message. Raises ``SignalOverlapError`` when the words overlap
    another kernel's claim or a user's signal of this run, and ``ArgumentError`` when a region
    at its table place does not fit the signal matrix (or a region runs past its end). A ``base``
    the kernel will reject anyway (not an aligned int32 GM pointer) claims nothing.
    """
    if type(base) is not GMPtr or base.kind.lib_signals is None or base.offset & 3:
        return NO_CLAIM
    regions = base.kind.windows.regions
    start = base.offset >> 2
    end = start + (region.words if words is None else words)
    c = regions.made.get((region.name, start, end))  # the cheap path: claimed before
    if c is not None:
        return c
    return _first_claim(regions, region, start, end, caller)


def _first_claim(regions: Any, region: Region, start: int, end: int, caller: str) -> Claim:
    """The first claim of ``[start, end)`` for ``region`` in this run: check, then register."""
    custom = start != region.first
    sw = regions.signal_words
    if end > sw and not custom:
        raise ArgumentError(
            f"{caller}: needs signal_bytes >= {4 * end}: the signal region '{region.name}' of "
            f"{region.kernel} is words [{start}, {end}), the signal matrix has {sw} "
            f"(signal_bytes={4 * sw})")
    if start < sw < end:
        raise ArgumentError(
            f"{caller}: its signal region at signal_base, words [{start}, {end}), runs past the end "
            f"of the signal matrix ({sw} words, signal_bytes={4 * sw}); raise signal_bytes or "
            "choose another signal_base")
    regions.free_start = USER_FREE_START
    return regions.claim(region.name, region.kernel, start, end, caller, custom)


__all__ = [
    "Region", "REGIONS", "SEED_BARRIER", "EPOCH_BARRIER", "CENTRAL_BARRIER", "COLLECTIVES",
    "USER_FREE_START", "free_range", "seed_barrier_words", "claim",
    "CROSS_RANK_OFFSET", "LOCAL_FLAG_OFFSET", "INTRA_RANK_OFFSET", "SEED_BARRIER_WORDS",
    "EPOCH_CROSS", "EPOCH_INTRA", "EPOCH_RELEASE", "EPOCH_BARRIER_WORDS", "EPOCH_BARRIER_OFFSET",
    "CENTRAL_ARRIVALS", "CENTRAL_RELEASE", "CENTRAL_BARRIER_WORDS", "CENTRAL_BARRIER_OFFSET",
    "COLL_READY", "COLL_DONE", "COLL_BLOCK_WORDS", "COLL_WORDS", "COLL_OFFSET", "COLL_END",
]
