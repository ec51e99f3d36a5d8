"""Vector clocks of the race detector, and the clocks that travel with signal words.

Components. Every rank has one component for its host code and six per block slot: the
block's scalar unit ``S`` and its pipes ``MTE2`` and ``MTE3``, ``G3``, the part of MTE3's
work that a ``dsb(DSB_DDR)`` has made visible to other ranks, ``V`` (the tile vector
instructions) and ``D``, the DMA engine of ``TPUT_ASYNC`` / ``TGET_ASYNC``. A store on MTE3 with epoch ``e``
happens before an access by the same rank to that rank's own window once the accessor's clock
holds ``MTE3 >= e`` (drained), and before any other access once it holds ``G3 >= e`` (drained
and fenced): that is how visibility is per reader. Block slots are reused by the next launch,
whose blocks start after their host's clock.

Word clocks. A signal word's clock lives in an anonymous shared mapping made by the launcher
before it forks the ranks, so it travels across processes without a name in ``/dev/shm``. A
``TNOTIFY`` releases into it under the word's lock (``AtomicAdd`` joins, ``Set`` replaces, as
ThreadSanitizer's sync clocks do) before its atomic lands; a ``TWAIT`` / ``TTEST`` joins the
word's clock into the waiter's. The host barrier gets its own clocks, one per round of three.

A pool's table outlives its runs: a word keeps its slot from run to run (each process keeps its
own map of words to slots), and a slot counts as made in a run only once that run's generation
is written beside it, so a run looks a word up in the shared table once, not at every run.
"""

from __future__ import annotations

import mmap
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import MAX_BLOCK_THREADS, MAX_BLOCKS
from ...errors import ShmcommError

CLOCK = np.uint32
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value (Python < 3.13 lacks it)
SLOTS = 8192  # signal words with a clock per run
# a pool's table has twice that: it keeps up to SLOTS words of earlier runs (their slots stay
# put, so the ranks' maps of them stay true) and still takes SLOTS new ones in a run
POOL_SLOTS = 2 * SLOTS
_STRIPES = 16  # locks guarding the word clocks (each costs a named semaphore at every run)
_LOCK_S = 30.0  # a lock held longer than this means a rank died inside it
_BARRIER_SLOTS = 3
_META = 4  # int64 fields of the table's own (three used)
S, MTE2, MTE3, G3, V, D = 0, 1, 2, 3, 4, 5  # a block slot's components, in this order
PER_BLOCK = 6
# clocks keep this many block slots per rank: as many as the widest launch the run may make
# (MAX_BLOCKS, or fewer when nranks x MAX_BLOCKS block threads would pass MAX_BLOCK_THREADS),
# and twice blocks= (a stream launch beside another), at least MIN_BLOCK_SLOTS
MIN_BLOCK_SLOTS = 8


def block_slots(blocks: int, nranks: int = 1) -> int:
    """The block slots of the clocks of a run of ``nranks`` ranks with ``blocks=``: no launch
    the run may make is too wide for them, so ``blocks=`` is never needed to detect races (a
    clock of 8 ranks then has 3,080 components; of 64 ranks, 6,208)."""
    widest = min(MAX_BLOCKS, max(1, MAX_BLOCK_THREADS // max(nranks, 1)))
    return min(MAX_BLOCKS, max(2 * blocks, MIN_BLOCK_SLOTS, widest))


@dataclass(frozen=True)
class Layout:
    """Where each agent's component is in a clock of ``size`` entries."""

    nranks: int
    blocks: int  # block slots per rank

    @property
    def per_rank(self) -> int:
        return 1 + PER_BLOCK * self.blocks

    @property
    def size(self) -> int:
        return self.nranks * self.per_rank

    def host(self, rank: int) -> int:
        return rank * self.per_rank

    def block(self, rank: int, block: int) -> int:
        """The block's ``S`` component (``+ MTE2`` / ``+ MTE3`` / ``+ G3`` for the others)."""
        return rank * self.per_rank + 1 + PER_BLOCK * block

    def agent(self, comp: int) -> tuple[int, int | None]:
        """``(rank, block)`` of component ``comp`` (``block`` None: the host)."""
        rank, k = divmod(comp, self.per_rank)
        return rank, None if k == 0 else (k - 1) // PER_BLOCK


class SlotMap:
    """One process's map of signal words to slots of a pool's table, kept across its runs while
    the table's keys stay (``epoch``: the table's, when the map was last true)."""

    __slots__ = ("index", "epoch", "keyed", "added")

    def __init__(self) -> None:
        self.index: dict[int, int] = {}  # word key -> slot
        self.epoch = 0
        # (the launcher's) the slots with a key, when ``added`` keys had been added
        self.keyed = np.zeros(0, np.intp)
        self.added = 0


def new_locks() -> list[Any]:
    """The table's locks (``_STRIPES`` for the clocks, then the table's): inherited over fork."""
    return [multiprocessing.Lock() for _ in range(_STRIPES + 1)]


class WordClocks:
    """The shared table of signal-word clocks (and the host barrier's), made before the fork."""

    def __init__(self, layout: Layout, buf: mmap.mmap | None = None,
                 locks: list[Any] | None = None, cache: SlotMap | None = None) -> None:
        """``buf`` / ``locks`` / ``cache``: a pool's memory (of :meth:`nbytes` with
        ``POOL_SLOTS``), its ``_STRIPES + 1`` locks shared with the ranks
        already, and this process's map of its slots; else a run's own, made here."""
        self.layout = layout
        k = layout.size
        self.slots = n = SLOTS if buf is None else POOL_SLOTS
        self.keep = 0 if buf is None else SLOTS  # keys of earlier runs kept at most
        # anonymous, shared over fork: keys, tags, host stores, generations, the table's
        # (generation, epoch), clocks, every notify's join
        # (untouched pages take no memory: a run touches the rows of the words it uses)
        self._map = (mmap.mmap(-1, self.nbytes(layout, n), flags=mmap.MAP_SHARED | MAP_NORESERVE)
                     if buf is None else buf)
        n += _BARRIER_SLOTS
        self.keys = np.ndarray((n,), np.int64, self._map, 0)  # 0 = free, else key + 1
        # barrier slots: their round; word slots: 1 once ``joined`` is kept apart (see _apart)
        self.tags = np.ndarray((n,), np.int32, self._map, n * 8)
        # the last plain host store into the word: (host component + 1, its epoch); 0: none
        self.stores = np.ndarray((n, 2), np.int64, self._map, n * 12)
        # the generation of the last run that made the slot (it is made in this run when equal)
        self.gens = np.ndarray((n,), np.int64, self._map, n * 28)
        # the run's generation, the keys' epoch (cleared that many times), keys added since
        self.meta = np.ndarray((_META,), np.int64, self._map, n * 36)
        if self.meta[0] == 0:  # fresh memory (a pool's, or a run's own): generation 1 first
            self.meta[0] = 1
        at = n * 36 + _META * 8
        self.clocks = np.ndarray((n, k), CLOCK, self._map, at)
        self.joined = np.ndarray((n, k), CLOCK, self._map, at + n * k * 4)
        if locks is None:
            locks = new_locks()
        self.locks, self.table_lock = locks[:_STRIPES], locks[_STRIPES]
        self.cache = SlotMap() if cache is None else cache
        self.index = self.cache.index  # word key -> slot (this process's, of every run)
        self.made: dict[int, int] = {}  # word key -> slot, made (its generation written) this run
        # this process's cache: a signal's words (rank, offset, rows, cols, stride) -> slots
        self.sig_slots: dict[tuple[int, int, int, int, int], list[int]] = {}
        self.gen = 0
        self.begin()

    def begin(self) -> None:
        """A run starts on the table (a pool's view is kept for its next runs): the run's
        generation, and this process's map of slots dropped if the table's keys were cleared."""
        self.gen = int(self.meta[0])
        if self.cache.epoch != self.meta[1]:
            self.index.clear()
            self.cache.epoch = int(self.meta[1])
        self.made.clear()
        self.sig_slots.clear()

    @staticmethod
    def nbytes(layout: Layout, slots: int = SLOTS) -> int:
        """Bytes of shared memory the table takes for ``layout`` with ``slots`` word slots."""
        n = slots + _BARRIER_SLOTS
        return n * 36 + _META * 8 + 2 * n * layout.size * 4

    def reset(self) -> None:
        """Zero what a run wrote (the clocks of the words it used, the barrier's), so that a
        pool's next run starts clean; touches only the rows in use. The keys stay (their slots
        are the next run's too) unless more than ``keep`` are held: then they go, and the
        table's epoch tells the ranks their maps went stale. The next run is a new generation."""
        n, meta, cache = self.slots, self.meta, self.cache
        if cache.added != meta[2]:  # the slots that have a key, found again only when it grew
            cache.keyed = np.flatnonzero(self.keys[:n])
            cache.added = int(meta[2])
        used = cache.keyed[self.gens[cache.keyed] == self.gen]
        self.clocks[used] = 0
        self.joined[used[self.tags[used] != 0]] = 0  # (the only rows of it a run writes)
        self.clocks[n:] = 0
        self.tags[used] = 0
        self.tags[n:] = 0
        self.stores[used] = 0
        if meta[2] > self.keep:
            self.keys[:n] = 0
            meta[1] += 1
            meta[2] = cache.added = 0
            cache.keyed = cache.keyed[:0]
        meta[0] += 1

    def slot(self, rank: int, offset: int) -> int:
        """The slot of the word at byte ``offset`` of ``rank``'s window (made at first use)."""
        key = (rank << 40) | offset
        s = self.made.get(key)
        if s is not None:
            return s
        s = self.index.get(key)
        if s is None:
            s = self._new_slot(key)
        # made in this run from now on (before the caller releases into it)
        self.gens[s] = self.gen
        self.made[key] = s
        return s

    def signal_slots(self, rank: int, offset: int, rows: int, cols: int,
                     stride: int) -> list[int]:
        """The slots of a signal's ``rows x cols`` words (``stride`` elements apart by row),
        made at first use; kept per signal, so a wait looks its words up once."""
        key = (rank, offset, rows, cols, stride)
        got = self.sig_slots.get(key)
        if got is None:
            got = self.sig_slots[key] = [self.slot(rank, offset + 4 * (r * stride + c))
                                         for r in range(rows) for c in range(cols)]
        return got

    def _new_slot(self, key: int) -> int:
        """The word's slot in the shared table (it may be there already: another process's,
        or an earlier run's), added if not."""
        lock = self.table_lock
        if not lock.acquire(False) and not lock.acquire(timeout=_LOCK_S):
            raise ShmcommError("race detector: the table of signal-word clocks stayed locked "
                               f"for {_LOCK_S:g} s (a rank died while adding a word)")
        try:
            n = self.slots
            s = (key * 0x9E3779B1) % n
            for _ in range(n):
                k = self.keys.item(s)
                if k == key + 1:
                    break
                if k == 0:
                    self.keys[s] = key + 1
                    self.meta[2] += 1
                    break
                s = (s + 1) % n
            else:
                raise ShmcommError(f"race detector: more than {SLOTS} signal words used in one "
                                   "run; the detector keeps a clock for at most that many")
        finally:
            lock.release()
        self.index[key] = s
        return s

    def find(self, rank: int, offset: int) -> int | None:
        """The slot of the word at byte ``offset`` of ``rank``'s window if some notify or atomic
        made one in this run, else ``None`` (a plain load of data makes none). Reads the table
        without its lock: a key and a generation are each one aligned 8-byte store, and a word
        whose slot is being made has released nothing yet."""
        key = (rank << 40) | offset
        s = self.made.get(key)
        if s is not None:
            return s
        s = self.index.get(key)
        if s is None:
            n = self.slots
            s = (key * 0x9E3779B1) % n
            for _ in range(n):
                k = self.keys.item(s)
                if k == 0:
                    return None
                if k == key + 1:
                    self.index[key] = s
                    break
                s = (s + 1) % n
            else:
                return None
        if self.gens.item(s) != self.gen:  # an earlier run's word, not made in this one yet
            return None
        self.made[key] = s
        return s

    @contextmanager
    def _locked(self, slot: int) -> Iterator[np.ndarray]:
        """The clock of ``slot``, under its lock."""
        lock = self.locks[slot % _STRIPES]
        if not lock.acquire(timeout=_LOCK_S):
            raise ShmcommError("race detector: a signal word's clock stayed locked for "
                               f"{_LOCK_S:g} s (a rank died while releasing into it)")
        try:
            yield self.clocks[slot]
        finally:
            lock.release()

    def release(self, slot: int, clock: np.ndarray, replace: bool) -> tuple[int, int] | None:
        """A notify: join ``clock`` into the word's (``replace``: the word's becomes ``clock``).
        Returns ``(component, epoch)`` of a plain host store into the word that ``clock`` does
        not hold (the notify races with it), else ``None``."""
        lock = self._lock(slot)
        try:
            word = self.clocks[slot]
            if replace:
                self._apart(slot, word)
                word[:] = clock
            else:
                np.maximum(word, clock, out=word)
            if self.tags.item(slot):
                joined = self.joined[slot]
                np.maximum(joined, clock, out=joined)
            comp = self.stores.item(slot, 0)
            epoch = self.stores.item(slot, 1) if comp else 0
        finally:
            lock.release()
        return (comp - 1, epoch) if comp and clock[comp - 1] < epoch else None

    def _apart(self, slot: int, word: np.ndarray) -> None:
        """The word's clock is about to be replaced: keep the join of every notify into it
        (``joined``) apart from now on. Until then the two are equal (both are the join of
        every notify: each release joins into both), so a notify writes one row of shared
        memory instead of two, and a host store reads the word's clock. (Under the lock.)"""
        if not self.tags.item(slot):
            self.joined[slot][:] = word
            self.tags[slot] = 1

    def _joined(self, slot: int) -> np.ndarray:
        """The join of every notify into the word (see :meth:`_apart`; under the lock)."""
        return self.joined[slot] if self.tags.item(slot) else self.clocks[slot]

    def store_release(self, slot: int, clock: np.ndarray) -> None:
        """A plain host store into the word (``rt.signals[i] = v``): like a ``Set``, the word's
        clock becomes ``clock`` (a waiter that sees the value learns what the host did
        before); ``joined`` (the notifies a host store must not race) is left alone."""
        lock = self._lock(slot)
        try:
            word = self.clocks[slot]
            self._apart(slot, word)
            word[:] = clock
        finally:
            lock.release()

    def _lock(self, slot: int) -> Any:
        """The lock of ``slot``'s clock, acquired (the hot paths skip the context manager)."""
        lock = self.locks[slot % _STRIPES]
        # a free lock first: a timed acquire costs a clock read and sem_timedwait every time
        if not lock.acquire(False) and not lock.acquire(timeout=_LOCK_S):
            raise ShmcommError("race detector: a signal word's clock stayed locked for "
                               f"{_LOCK_S:g} s (a rank died while releasing into it)")
        return lock

    def host_store(self, rank: int, lo: int, hi: int, comp: int,
                   clock: np.ndarray) -> list[tuple[int, int]]:
        """A plain host store into bytes [lo, hi) of ``rank``'s window, by host component
        ``comp`` with ``clock``: marks every word there that has a clock (a word used as a
        signal), and returns ``(offset, component)`` of a notify into one that ``clock`` does
        not hold (the store races with it)."""
        # a key is (rank << 40 | offset) + 1 (0: free): the range's are one interval of them
        keys = self.keys[:self.slots]
        base = rank << 40
        hit = np.flatnonzero((keys > base + lo) & (keys <= base + hi))
        hit = hit[self.gens[hit] == self.gen]  # (those made in this run)
        races = []
        for slot in hit:
            with self._locked(int(slot)):
                ahead = np.flatnonzero(self._joined(int(slot)) > clock)
                self.stores[slot] = (comp + 1, int(clock[comp]))
            if ahead.size:
                races.append((int(keys[slot]) - 1 - base, int(ahead[0])))
        return races

    def acquire(self, slot: int, clock: np.ndarray) -> bool:
        """A wait or test that observed the word: join its clock into ``clock``; whether that
        taught ``clock`` anything (a poll loop re-reading an unchanged word learns nothing, and
        then its accesses keep one snapshot and merge into one record).

        Reads take no lock. The notify whose value the reader saw finished its release before
        its atomic landed, so that release is whole in what the read sees; a release still
        under way (of a notify the reader has not seen) changes each element at most once, so
        the read sees each element before or after it: the reader may learn more than it
        observed (which can hide a race, as a read just after that release would), never less.
        (Whether ``clock`` grew is told by its bytes: numpy's ``any`` of a comparison cost four
        times the join.)"""
        before = clock.tobytes()
        np.maximum(clock, self.clocks[slot], out=clock)
        return clock.tobytes() != before

    def acquire_all(self, slots: list[int], clock: np.ndarray) -> bool:
        """:meth:`acquire` of every slot in ``slots``: a ``TWAIT`` on a row of signals joins
        their clocks in one pass (a join per row: cheaper than numpy's fancy index and reduce)."""
        before = clock.tobytes()
        clocks = self.clocks
        for s in slots:
            np.maximum(clock, clocks[s], out=clock)
        return clock.tobytes() != before

    def barrier_arrive(self, rnd: int, clock: np.ndarray) -> None:
        """Host ``rnd``'s arrival at the host barrier: join into that round's clock. A round's
        slot is reused three rounds later, when every host has left it (each host arrived at
        the round in between)."""
        slot = self.slots + rnd % _BARRIER_SLOTS
        with self._locked(slot) as word:
            fresh = self.tags[slot] != rnd
            self.tags[slot] = rnd
            self.release_into(word, clock, fresh)

    @staticmethod
    def release_into(word: np.ndarray, clock: np.ndarray, replace: bool) -> None:
        if replace:
            word[:] = clock
        else:
            np.maximum(word, clock, out=word)

    def barrier_leave(self, rnd: int, clock: np.ndarray) -> None:
        """Every host arrived at round ``rnd``: acquire what all of them knew."""
        self.acquire(self.slots + rnd % _BARRIER_SLOTS, clock)
