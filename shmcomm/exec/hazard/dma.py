"""The DMA engine of a block in hazard mode: ``TPUT_ASYNC`` / ``TGET_ASYNC`` outside the pipes.

On a2a3 the SDMA engine sits outside the AI core: its copies run beside the MTE queues, and no
``pipe_barrier`` or ``dsb`` of the core waits for them. Only the event's ``Wait`` (which polls
the engine's completion flags) or a ``Test`` that returns true say that a copy has landed, and a
completed copy implies that every earlier copy of its session has (pto-isa's quiet semantics).

So here a posted copy gets a due time (as a queued pipe item does) and stays in flight until:

* ``Wait``: it blocks until the due time of the copy and the earlier copies of its session
  (wall-clock due times: a short sleep, so a peer woken by a notify sent before the ``Wait``
  reads while the copy is still in flight), then lands them in post order;
* ``Test``: True, landing them, once those due times have passed; else False;
* the kernel's end: everything still in flight lands.

A copy reads its source when it lands: a source overwritten before the ``Wait`` shows too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class AsyncEngine:
    """The in-flight copies of one block (every session of it)."""

    def __init__(self, due: Callable[[], float], now: Callable[[], float], cap_s: float,
                 wall_clock: bool) -> None:
        self.due, self.now = due, now
        self.cap_s = cap_s  # the longest a Wait sleeps for a copy's due time
        self.wall_clock = wall_clock
        self.posted: list = []  # in post order, landed ones dropped lazily

    def post(self, copy: Any) -> None:
        copy.due = self.due()
        self.posted.append(copy)

    def _done_at(self, copy: Any) -> float:
        """When ``copy`` completes: after every earlier copy of its session."""
        return max((c.due for c in copy.session.inflight if c.seq <= copy.seq), default=copy.due)

    def wait(self, copy: Any) -> None:
        if copy.landed:
            return
        if self.wall_clock:
            left = self._done_at(copy) - self.now()
            if left > 0:
                time.sleep(min(left, self.cap_s))
        copy.session.land_upto(copy.seq)
        self._prune()

    def test(self, copy: Any) -> bool:
        if not copy.landed and self.now() >= self._done_at(copy):
            copy.session.land_upto(copy.seq)
            self._prune()
        return copy.landed

    def flush(self) -> None:
        """The kernel's end: the engine finishes everything."""
        for c in self.posted:
            if not c.landed:
                c.session.land_upto(c.seq)
        self.posted = []

    def _prune(self) -> None:
        self.posted = [c for c in self.posted if not c.landed]

    @property
    def in_flight(self) -> int:
        return sum(not c.landed for c in self.posted)
