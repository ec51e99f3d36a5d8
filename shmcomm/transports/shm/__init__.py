"""The shared-memory transport: POSIX shared memory, libatomic through ctypes, futexes, fork.

Layout of one rank's segment::

    offset 0                       signal matrix, ``signal_bytes`` (int32 words, zeroed)
    offset signal_bytes            data heap, ``heap_bytes``
    offset signal_bytes+heap_bytes tail (not part of the window): line 0 counts the futex
                                   sleepers on this window's words, in SLEEPER_BUCKETS counters
                                   (a word's bucket: :func:`sleeper_bucket`); then LOCK_STRIPES
                                   lock words guarding data AtomicAdd, one per 4 KiB stripe

Every segment is created by the launcher and inherited by the rank processes through ``fork``
(:mod:`.segments`), so a window is the same memory in every process, at one address each.
A notifier wakes futex sleepers only when its word's sleeper bucket says there are any, so an
uncontended ``TNOTIFY`` is one atomic and one plain read. One count per window made every notify
of a window with any sleeper pay a wake syscall (CentralBarrier: every arrival, for the sleepers on
the release word); buckets keep that to words that share a bucket with a sleeper's.
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import Aborted, ArgumentError, WaitTimeout
from ..seam import Transport, Word
from . import atomics as at
from .segments import SHM_DIR, Segment, memory_room, page_round, shm_free_bytes

# On x86-64 (TSO) a plain aligned load is an acquire load and a locked read-modify-write or a
# seq_cst store is a full barrier, so a plain ctypes read may stand for an atomic one.
TSO = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
_ALWAYS = ctypes.c_int32(1)  # the waiter count of a word without one: always wake
SLEEPER_BUCKETS = 16  # one 64-byte line of int32 counters
LOCK_STRIPES = 256
LOCK_STRIPE_BYTES = 4096
_TAIL_BYTES = 64 + 4 * LOCK_STRIPES
_SEQ = at.SEQ_CST
_fetch_add, _exchange, _load = at.fast_fetch_add, at.fast_exchange, at.fast_load


def sleeper_bucket(offset: int) -> int:
    """The sleeper counter of the word at ``offset``: neighbouring words, and words a multiple of
    16 words apart (the library barriers' words), fall in different buckets."""
    w = offset >> 2
    return (w ^ (w >> 4)) % SLEEPER_BUCKETS


class _AtomicCell:
    """``value`` is a seq_cst atomic load: the acquire read where plain loads are not enough."""

    __slots__ = ("cp",)

    def __init__(self, cp: ctypes.c_void_p) -> None:
        self.cp = cp

    @property
    def value(self) -> int:
        return _load(self.cp, _SEQ)


class ShmWord(Word):
    """An int32 word in mapped shared memory: ``cp`` for libatomic, ``cell`` for acquire reads
    (a plain ``c_int32`` view on x86-64)."""

    __slots__ = ("rank", "offset", "addr", "cp", "handle", "cell", "waiters", "waiters_cp")
    addr: int
    cp: ctypes.c_void_p
    waiters_cp: ctypes.c_void_p | None
    fetch_add = staticmethod(_fetch_add)  # libatomic itself: TNOTIFY calls it directly
    exchange = staticmethod(_exchange)

    def __init__(self, rank: int, offset: int, addr: int,
                 waiters: tuple[Any, Any] | None) -> None:
        init = object.__setattr__  # immutable once made: its address is its window's + offset
        cp = ctypes.c_void_p(addr)  # what libatomic's functions take
        init(self, "rank", rank)
        init(self, "offset", offset)
        init(self, "addr", addr)
        init(self, "cp", cp)
        init(self, "handle", cp)
        init(self, "cell", ctypes.c_int32.from_address(addr) if TSO else _AtomicCell(cp))
        # the window's sleeper count (plain-read view, atomic address); None: always wake
        w = waiters if waiters is not None else (_ALWAYS, None)
        init(self, "waiters", w[0])
        init(self, "waiters_cp", w[1])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ShmWord is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ShmWord is immutable: cannot delete {name!r}")

    def add(self, value: int) -> int:
        old = _fetch_add(self.cp, value, _SEQ)
        if self.waiters.value:  # ordered after the seq_cst read-modify-write
            at.futex_wake(self.cp)
        return old

    def set(self, value: int) -> None:
        # an exchange, not a store: a read-modify-write orders the waiter read after it
        _exchange(self.cp, value, _SEQ)
        if self.waiters.value:
            at.futex_wake(self.cp)

    def load(self) -> int:
        return _load(self.cp, _SEQ)

    def wake(self) -> None:
        at.futex_wake(self.cp)

    def sleep(self, seen: int, timeout: float, holds: Callable[[int], bool]) -> None:
        scp = self.waiters_cp
        if scp is None:  # no sleeper count (a control word): every update wakes
            now = _load(self.cp, _SEQ)
            if now == seen and not holds(now):
                at.futex_wait(self.cp, seen, timeout)
            return
        _fetch_add(scp, 1, _SEQ)
        try:
            # re-check after announcing ourselves: a notifier that wrote before our increment is
            # seen here, one that writes after it sees the sleeper and wakes us (both seq_cst)
            now = _load(self.cp, _SEQ)
            if now == seen and not holds(now):
                at.futex_wait(self.cp, seen, timeout)
        finally:
            _fetch_add(scp, -1, _SEQ)

    def __repr__(self) -> str:
        return f"ShmWord(rank={self.rank}, offset={self.offset:#x}, value={self.load()})"


class ShmTransport(Transport):
    """Every rank's window as a POSIX shared-memory segment mapped in this process."""

    name = "shm"

    def __init__(self, nranks: int, signal_bytes: int, heap_bytes: int) -> None:
        self.nranks = nranks
        self.signal_bytes = signal_bytes
        self.heap_bytes = heap_bytes
        self.size = signal_bytes + heap_bytes
        seg_bytes = self.size + _TAIL_BYTES
        need = nranks * page_round(seg_bytes)  # whole pages: what tmpfs really hands out
        what = (f"windows: nranks={nranks} x (signal_bytes + heap_bytes = {self.size}, "
                f"{page_round(seg_bytes)} bytes in whole pages) = {need} bytes")
        free = shm_free_bytes()
        if free is not None and need > free:  # the reservation would fail: say why up front
            raise ArgumentError(f"{what} exceed the {free} bytes free in {SHM_DIR}; lower "
                                "heap_bytes or nranks")
        room = memory_room()
        if room is not None and need > room[0]:
            raise ArgumentError(f"{what} exceed {room[1]} ({room[0]} bytes); lower heap_bytes "
                                "or nranks")
        self.segments: list[Segment] = []
        try:
            for r in range(nranks):
                self.segments.append(Segment(f"win{r}", seg_bytes))
        except BaseException:
            self.close()
            raise
        self.bases = [s.base for s in self.segments]
        self._sleepers = [[(ctypes.c_int32.from_address(a), ctypes.c_void_p(a))
                           for a in range(b + self.size, b + self.size + 4 * SLEEPER_BUCKETS, 4)]
                          for b in self.bases]
        self._locks = [b + self.size + 64 for b in self.bases]
        self._words: dict[int, ShmWord] = {}

    # -- words and views ---------------------------------------------------------------------

    def word(self, rank: int, offset: int) -> ShmWord:
        """The word at ``offset`` of ``rank``'s window. A signal-matrix word is made once and
        kept with the mapping (immutable; a pool's rank makes the same Signals every run)."""
        key = (rank << 40) | offset
        w = self._words.get(key)
        if w is None:
            w = ShmWord(rank, offset, self.bases[rank] + offset,
                        self._sleepers[rank][sleeper_bucket(offset)])
            if offset < self.signal_bytes:  # (bounded by the matrix; heap words are not kept)
                self._words[key] = w
        return w

    def control_word(self, address: int) -> ShmWord:
        return ShmWord(-1, 0, address, None)

    def view(self, rank: int, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        n = dtype.itemsize
        for d in shape:  # not np.prod: ~3 us on every TLOAD / TSTORE
            n *= d
        if offset < 0 or offset + n > self.size:
            raise ArgumentError(f"view: bytes [{offset}, {offset + n}) lie outside rank {rank}'s "
                                f"window [0, {self.size})")
        return self.segments[rank].array[offset:offset + n].view(dtype).reshape(shape)

    def window(self, rank: int) -> np.ndarray:
        return self.segments[rank].array[:self.size]

    def locate(self, address: int) -> tuple[int, int] | None:
        for r, base in enumerate(self.bases):
            if base <= address < base + self.size:
                return r, address - base
        return None

    # -- data AtomicAdd ----------------------------------------------------------------------

    @contextmanager
    def data_lock(self, rank: int, offset: int, nbytes: int, timeout: float,
                  aborted: Callable[[], Any]) -> Iterator[None]:
        """Spin-locks, one per 4 KiB stripe of the window, taken with a real atomic exchange in
        ascending stripe order (two adders never deadlock). Signal atomics never need them."""
        first, last = offset, offset + max(nbytes, 1) - 1
        count = last // LOCK_STRIPE_BYTES - first // LOCK_STRIPE_BYTES + 1
        stripes = sorted({(first // LOCK_STRIPE_BYTES + i) % LOCK_STRIPES
                          for i in range(min(count, LOCK_STRIPES))})
        base = self._locks[rank]
        taken: list[int] = []
        try:
            for s in stripes:
                addr = base + 4 * s
                _lock(addr, timeout, aborted)
                taken.append(addr)
            yield
        finally:
            for addr in taken:
                at.store(addr, 0)

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, rank: int) -> None:
        """Nothing to do: the rank process inherited every mapping through ``fork``."""

    def close(self) -> None:
        self._sleepers = []
        self._words = {}
        for s in self.segments:
            s.close()
        self.segments = []


def _lock(addr: int, timeout: float, aborted: Callable[[], Any]) -> None:
    if at.exchange(addr, 1) == 0:
        return
    deadline = time.perf_counter() + timeout
    while True:
        os.sched_yield()
        if at.load(addr) == 0 and at.exchange(addr, 1) == 0:
            return
        if aborted():
            raise Aborted("stopped by an abort while waiting for a data lock")
        if time.perf_counter() > deadline:
            raise WaitTimeout(f"could not take a data lock within wait_timeout={timeout:g} s")


__all__ = ["ShmTransport", "ShmWord", "Segment", "LOCK_STRIPES", "LOCK_STRIPE_BYTES",
           "SLEEPER_BUCKETS", "sleeper_bucket"]
