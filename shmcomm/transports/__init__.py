"""Transports: where the windows live and how their words change.

A transport owns every rank's window (signal matrix, then data heap) and offers what the core
needs of memory, nothing more:

* **word handles** (:class:`Word`): one int32 signal word of some rank's window, with an atomic
  ``add``, ``set`` and ``load``, an acquire-read ``cell`` to poll with, and ``sleep`` / wake-up so a waiter
  need not burn a core;
* **window views**: ``view(rank, offset, shape, dtype)`` for the data moves (TLOAD / TSTORE read
  and write through them) and host access to symmetric arrays;
* **data AtomicAdd**: ``data_lock(rank, offset, nbytes, ...)`` makes a ``+=`` on a window region
  atomic with respect to every other one on overlapping memory, from any block of any rank;
* **windows it cannot map** (``unmapped``: ranks whose windows have no view in this process, e.g.
  on another host): ``get`` / ``put`` / ``accumulate`` move data to and from them, complete when
  they return;
* **creation and attach**: built once by the launcher before the rank processes start,
  ``attach(rank)`` in each rank process, ``close()`` at the end.

* **host memory** (``host_atomics``, ``HostSegment``): the CPU atomics, futexes and
  shared-memory segments of one host, whatever carries the windows. The control segment (agent
  lines, the abort flag) lives there on every transport: a transport across hosts adds what
  crosses hosts on top (:mod:`shmcomm.transports.mpi` reads other hosts' lines by RMA).

``shm`` (POSIX shared memory, libatomic through ctypes, futexes, fork inheritance) is the
embedded default and provides host memory; ``mpi`` (MPI one-sided windows under ``mpiexec``)
carries the windows across hosts. A new transport is one package beside them that subclasses
:class:`Transport` and :class:`Word`; nothing above the core changes. The core imports this
module only, never a transport's package (an import-linter contract keeps it so).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np


class Word(ABC):
    """One int32 word of a window (a signal), as the transport reaches it.

    ``add`` and ``set`` are sequentially consistent and wake sleepers of the word; ``load`` is a
    sequentially consistent read. ``cell`` is an object whose ``value`` attribute is an acquire
    read: the satisfied ``TWAIT`` and every poll of a waiting one read it, so it must cost no
    Python call where the platform allows.
    """

    __slots__ = ()
    rank: int
    offset: int
    cell: Any  # ``cell.value`` reads the word with acquire order, as cheaply as the platform allows
    # The notify fast path, with no Python call of the transport's own in between:
    # ``fetch_add(handle, v, SEQ_CST)`` / ``exchange(handle, v, SEQ_CST)`` update the word and return
    # the old value; then ``if waiters.value: wake()`` (``waiters.value`` is non-zero while a
    # waiter may be asleep on the word).
    handle: Any
    fetch_add: Callable[[Any, int, int], int]
    exchange: Callable[[Any, int, int], int]
    waiters: Any

    @abstractmethod
    def add(self, value: int) -> int:
        """Atomically add ``value``; return the old value."""

    @abstractmethod
    def set(self, value: int) -> None:
        """Atomically store ``value``."""

    @abstractmethod
    def load(self) -> int:
        """Atomically read the word."""

    @abstractmethod
    def wake(self) -> None:
        """Wake every waiter asleep on the word."""

    @abstractmethod
    def sleep(self, seen: int, timeout: float, holds: Callable[[int], bool]) -> None:
        """Block for at most ``timeout`` seconds while the word still holds ``seen`` and
        ``holds(current)`` is false; spurious returns are allowed (callers re-check)."""


SEQ_CST = 5  # C11's __ATOMIC_SEQ_CST: the memory order every signal update uses


class Transport(ABC):
    """Every rank's window of one run; see the module docstring for the contract."""

    name: str
    nranks: int
    signal_bytes: int
    heap_bytes: int
    size: int  # bytes of one window: signal_bytes + heap_bytes
    unmapped: frozenset[int] = frozenset()  # ranks without a view here (data goes by get / put)

    @abstractmethod
    def word(self, rank: int, offset: int) -> Word:
        """The handle of the int32 word at byte ``offset`` of ``rank``'s window (checked by the
        caller: in the window and 4-byte aligned)."""

    @abstractmethod
    def control_word(self, address: int) -> Word:
        """A handle of a word of node-local supervision memory (the control segment)."""

    @abstractmethod
    def view(self, rank: int, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A numpy view of ``shape`` elements of ``dtype`` at ``offset`` in ``rank``'s window."""

    @abstractmethod
    def window(self, rank: int) -> np.ndarray:
        """``rank``'s whole window as a uint8 array."""

    @abstractmethod
    def locate(self, address: int) -> tuple[int, int] | None:
        """``(rank, offset)`` of a process address inside some window (a view's data pointer)."""

    @abstractmethod
    def data_lock(self, rank: int, offset: int, nbytes: int, timeout: float,
                  aborted: Callable[[], Any]) -> AbstractContextManager[None]:
        """Hold the locks that make an update of ``rank``'s bytes ``[offset, offset+nbytes)``
        atomic against every other holder of overlapping memory; raise ``WaitTimeout`` after
        ``timeout`` seconds and ``Aborted`` when ``aborted()`` turns true."""

    def get(self, rank: int, offset: int, stride: int, out: np.ndarray) -> None:
        """Copy the ``out.shape == (rows, cols)`` elements at byte ``offset`` of an ``unmapped``
        rank's window (rows ``stride`` bytes apart) into ``out``; complete on return."""
        raise NotImplementedError(f"the {self.name} transport maps every window")

    def put(self, rank: int, offset: int, stride: int, data: np.ndarray) -> None:
        """Copy the 2-D ``data`` to byte ``offset`` of an ``unmapped`` rank's window (rows
        ``stride`` bytes apart); complete at the target on return."""
        raise NotImplementedError(f"the {self.name} transport maps every window")

    def accumulate(self, rank: int, offset: int, stride: int, data: np.ndarray) -> None:
        """Add the 2-D ``data`` into an ``unmapped`` rank's window (the caller holds
        ``data_lock`` on the region); complete at the target on return."""
        raise NotImplementedError(f"the {self.name} transport maps every window")

    @abstractmethod
    def attach(self, rank: int) -> None:
        """Called once in each rank process before any kernel runs."""

    @abstractmethod
    def close(self) -> None:
        """Release the windows (in the launcher, after every rank is gone)."""


# Host memory, as the core reaches it (after Transport and Word: the shm package imports them).
from .shm import atomics as host_atomics  # noqa: E402
from .shm.segments import Segment as HostSegment  # noqa: E402

__all__ = ["SEQ_CST", "HostSegment", "Transport", "Word", "host_atomics"]
