"""The transport seam: :class:`Word` (one signal word of some rank's window) and
:class:`Transport` (every rank's window), the interface every transport implements (see
:mod:`shmcomm.transports`)."""

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
