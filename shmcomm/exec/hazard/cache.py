"""The scalar data cache of one block (sub-model ``cache``).

On a2a3 a scalar load of GM goes through the AI core's data cache: a line filled by an earlier
load keeps its bytes while another core or rank changes memory, until ``dcci`` invalidates it
(pto-isa's troubleshooting guide, "stale data"; ``TWAIT`` and ``TTEST`` ``dcci`` every word
they compare, and a ``TNOTIFY`` ``dcci``-s its signal's line before and after its store). So
``gm_load`` reads through :class:`ScalarCache`: 64-byte lines, filled on a load that misses,
dropped by ``dcci`` (one line, or the whole cache), by the block's ``TWAIT`` / ``TTEST`` /
``TNOTIFY`` on the line, by its atomics (done at the memory) and by its own plain stores (which
go through: the next load reads what it stored), and evicted at a seeded time after the fill
(drawn like the block's other due times, ``EVICT_FACTOR`` times longer) when a later load finds
them expired. A load that forgets ``dcci`` then reads what the line held when it was filled, as
long as the line lives: the missing-``dcci`` bug shows as wrong data, and a poll that forgets it
still ends once its line is evicted.

Copies (``TLOAD`` / ``TSTORE``, the DMA engine) do not go through the scalar cache, as on a2a3;
stores stay write-through here (a store's line is not held back: shmcomm reports no store a
missing ``dcci`` write-back would hide).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

LINE_BYTES = 64
_U8 = np.dtype(np.uint8)
EVICT_FACTOR = 32  # a line lives this many due times: far longer than a sync's round trip


class ScalarCache:
    """One block's cached lines: ``(rank, first byte) -> (eviction due, the line's 64 bytes)``.

    ``now`` is the model's clock (seconds, or a scheduled run's steps); ``life`` draws how long
    a new line lives on that clock."""

    __slots__ = ("lines", "now", "life", "hits")

    def __init__(self, now: Callable[[], float], life: Callable[[], float]) -> None:
        self.lines: dict[tuple[int, int], tuple[float, bytes]] = {}
        self.now, self.life = now, life
        self.hits = 0  # loads served from a cached line

    def load(self, ptr: Any) -> Any:
        """The element at ``ptr`` as this block's load reads it: from its line while the line
        lives (filled now if it is not cached or expired); ``None``: read memory."""
        base = ptr.offset & ~(LINE_BYTES - 1)
        key = (ptr.rank, base)
        now = self.now()
        got = self.lines.get(key)
        if got is None or got[0] <= now:
            windows = ptr.windows
            if base + LINE_BYTES > windows.size:  # a window's last partial line: memory
                return None
            data = windows.view(ptr.rank, base, (LINE_BYTES,), _U8).tobytes()
            got = self.lines[key] = (now + self.life(), data)
        else:
            self.hits += 1
        return np.frombuffer(got[1], ptr.dtype, 1, ptr.offset - base)[0].item()

    def behind(self, ptr: Any) -> bool:
        """Whether the live line holding ``ptr`` differs from memory there: a load reads old
        bytes now, and news when the line is evicted (a poll of it is not stale)."""
        base = ptr.offset & ~(LINE_BYTES - 1)
        got = self.lines.get((ptr.rank, base))
        if got is None or got[0] <= self.now():
            return False
        lo = ptr.offset - base
        now = ptr.windows.view(ptr.rank, ptr.offset, (ptr.itemsize,), _U8).tobytes()
        return got[1][lo:lo + ptr.itemsize] != now

    def drop(self, rank: int, offset: int) -> None:
        """``dcci`` of the line holding byte ``offset`` of ``rank``'s window."""
        self.lines.pop((rank, offset & ~(LINE_BYTES - 1)), None)

    def drop_range(self, rank: int, offset: int, nbytes: int) -> None:
        """Drop every line of ``[offset, offset + nbytes)`` (a signal's words)."""
        if not self.lines:
            return
        first = offset & ~(LINE_BYTES - 1)
        for base in range(first, offset + max(nbytes, 1), LINE_BYTES):
            self.lines.pop((rank, base), None)

    def clear(self) -> None:
        """``dcci`` of the entire data cache, or the kernel's end."""
        self.lines.clear()


__all__ = ["ScalarCache", "LINE_BYTES", "EVICT_FACTOR"]
