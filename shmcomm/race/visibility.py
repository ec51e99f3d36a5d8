"""Delayed cross-rank visibility and the 64-byte line model of ``Set`` signals.

:class:`RemoteStores` (sub-model ``visibility``): a completed store into another rank's window is
kept, with a copy of its data, in the writer block's buffer; it reaches the target window at the
block's next ``dsb(DSB_DDR)`` / ``dsb(DSB_ALL)``, at a seeded later time (drawn around
``hazard_delay``), or when the kernel returns. Flushes keep the issue order. Stores into the
block's own rank's window are visible at completion (local reads see completed stores); a block
reading back another rank's memory it has just written is not modelled (it reads memory).

:class:`LineModel` (sub-model ``lines``): ``TNOTIFY(sig, v, Set)`` fills the 64-byte line of the
signal into the block's cache (a snapshot of its 16 words) and writes the whole line back later
(next Set or notify on that line, ``dcci``, ``dsb``, a seeded time, kernel end), own words
included. A word of the
line that another writer changed in between is overwritten with the stale snapshot: packed Set
slots of different writers clobber each other (pto-isa #322). With ``checkers`` on, the
write-back raises ``hazard [line-shared]`` instead. AtomicAdd notifies are memory-side atomics
and bypass the line.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from .. import _atomics as at

if TYPE_CHECKING:
    from ..tensor import GlobalTensor

LINE_BYTES = 64
_WORDS = LINE_BYTES // 4
_Line = ctypes.c_int32 * _WORDS


class RemoteStores:
    """FIFO of completed but not yet visible remote stores of one block."""

    __slots__ = ("items", "apply")

    def __init__(self, apply) -> None:
        self.items: deque = deque()  # (due, dst, data, atomic)
        self.apply = apply  # apply(dst, data, atomic): the real write

    def add(self, due: float, dst: GlobalTensor, data: np.ndarray, atomic: int) -> None:
        self.items.append((due, dst, data, atomic))

    def flush(self, now: float | None = None) -> int:
        """Make visible every store (``now=None``) or those due by ``now``; returns how many."""
        n = 0
        items = self.items
        while items and (now is None or items[0][0] <= now):
            _, dst, data, atomic = items.popleft()
            self.apply(dst, data, atomic)
            n += 1
        return n


class LineModel:
    """Lines of one block's data cache holding a Set's word, waiting for their write-back."""

    __slots__ = ("lines", "on_clobber")

    def __init__(self, on_clobber) -> None:
        self.lines: dict[int, tuple] = {}  # line -> (due, snapshot, own word indices, Set's site)
        self.on_clobber = on_clobber  # on_clobber(addr, stale, current, site) -> True: write stale

    def fill(self, addr: int, value: int, due: float, site: str = "") -> None:
        """A Set of ``value`` at ``addr``: write back a pending copy of its line, then refill."""
        line = addr & ~(LINE_BYTES - 1)
        if line in self.lines:
            self.write_back(line)
        snap = list(_Line.from_address(line))
        j = (addr - line) // 4
        snap[j] = value
        self.lines[line] = (due, snap, {j}, site)

    def touch(self, addr: int) -> None:
        """Any other notify of the block on ``addr``'s line: program order writes the line first."""
        line = addr & ~(LINE_BYTES - 1)
        if line in self.lines:
            self.write_back(line)

    def write_back(self, line: int) -> None:
        _, snap, own, site = self.lines.pop(line)
        cur = _Line.from_address(line)
        for j in range(_WORDS):
            if cur[j] == snap[j]:
                continue
            if j in own or self.on_clobber(line + 4 * j, snap[j], cur[j], site):
                at.store(line + 4 * j, snap[j])  # the whole line goes back, stale words included

    def flush(self, now: float | None = None, addr: int | None = None) -> int:
        """Write back every line (``now=None``), those due by ``now``, or ``addr``'s line."""
        if addr is not None:
            line = addr & ~(LINE_BYTES - 1)
            if line in self.lines:
                self.write_back(line)
                return 1
            return 0
        due = [ln for ln, v in self.lines.items() if now is None or v[0] <= now]
        for ln in due:
            self.write_back(ln)
        return len(due)


def monotonic() -> float:
    return time.perf_counter()
