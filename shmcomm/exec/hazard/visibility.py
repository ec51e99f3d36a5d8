"""Delayed cross-rank visibility and the 64-byte line model of ``Set`` signals.

:class:`RemoteStores` (sub-model ``visibility``): a completed store into another rank's window is
kept, with a copy of its data, in the writer block's buffer; it reaches the target window at the
block's next ``dsb(DSB_DDR)`` / ``dsb(DSB_ALL)``, at a seeded later time (drawn around
``hazard_delay``), or when the kernel returns. Flushes keep the issue order. Stores into the
block's own rank's window are visible at completion (local reads see completed stores); a block
reading back another rank's memory it has just written is not modelled (it reads memory).

:class:`LineModel` (sub-model ``lines``): ``TNOTIFY(sig, v, Set)`` fills the 64-byte line of the
signal into the block's cache (a snapshot of its 16 words). The Set's own word is written within
the notify, as on hardware, so a peer's later change of that word (an acknowledgement after a
``Set(0)`` re-arm, say) is never undone; the rest of the line goes back later (next Set or
notify on that line, ``dcci``, ``dsb``, a seeded time, kernel end), and a word of the line that
another writer changed in between is overwritten with the stale snapshot: packed Set slots of
different writers clobber each other (pto-isa #322). With ``checkers`` on, the write-back raises
``hazard [line-shared]`` instead. AtomicAdd notifies are memory-side atomics and bypass the
line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...core.gm import GlobalTensor, Windows

LINE_BYTES = 64
_WORDS = LINE_BYTES // 4
_I32 = np.dtype(np.int32)


class RemoteStores:
    """FIFO of completed but not yet visible remote stores of one block."""

    __slots__ = ("items", "apply")

    def __init__(self, apply: Callable[[GlobalTensor, np.ndarray, int], None]) -> None:
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
    """Lines of one block's data cache holding a Set's word, waiting for their write-back.

    A line is ``(rank, byte offset of its first word)``; ``windows`` reads it (a numpy view) and
    writes it back word by word through the transport's atomic store.
    """

    __slots__ = ("lines", "on_clobber", "windows")

    def __init__(self, windows: Windows, on_clobber: Callable[[int, int, int, int, str], bool]) -> None:
        self.windows = windows
        self.lines: dict[tuple[int, int], tuple] = {}  # line -> (due, snapshot, own words, Set's site)
        self.on_clobber = on_clobber  # on_clobber(rank, offset, stale, current, site) -> True: write

    def _view(self, line: tuple[int, int]) -> np.ndarray:
        return self.windows.view(line[0], line[1], (_WORDS,), _I32)

    def fill(self, rank: int, offset: int, value: int, due: float, site: str = "") -> None:
        """A Set of ``value`` at ``offset``: write back a pending copy of its line, then refill."""
        line = (rank, offset & ~(LINE_BYTES - 1))
        if line in self.lines:
            self.write_back(line)
        snap = [int(v) for v in self._view(line)]
        j = (offset - line[1]) // 4
        snap[j] = value
        self.lines[line] = (due, snap, {j}, site)

    def touch(self, rank: int, offset: int) -> None:
        """Any other notify of the block on the line: program order writes the line first."""
        line = (rank, offset & ~(LINE_BYTES - 1))
        if line in self.lines:
            self.write_back(line)

    def write_back(self, line: tuple[int, int]) -> None:
        _, snap, own, site = self.lines.pop(line)
        cur = self._view(line)
        rank, base = line
        word = self.windows.transport.word
        for j in range(_WORDS):
            now = int(cur[j])
            if now == snap[j] or j in own:  # own words were written by their Set's notify
                continue
            if self.on_clobber(rank, base + 4 * j, snap[j], now, site):
                word(rank, base + 4 * j).set(snap[j])  # the rest of the line goes back, stale too

    def flush(self, now: float | None = None, at: tuple[int, int] | None = None) -> int:
        """Write back every line (``now=None``), those due by ``now``, or the line of ``at``
        (``(rank, offset)``)."""
        if at is not None:
            line = (at[0], at[1] & ~(LINE_BYTES - 1))
            if line in self.lines:
                self.write_back(line)
                return 1
            return 0
        due = [ln for ln, v in self.lines.items() if now is None or v[0] <= now]
        for ln in due:
            self.write_back(ln)
        return len(due)
