"""``notify-unfenced`` (advisory): TNOTIFY after MTE3 work (TSTORE, TPUT) that no sync of the
program has drained (``pipe_barrier``, ``wait_flag`` from MTE3, or a drain of MTE2 after MTE3
was fenced into it), or after drained stores into another rank's window that no
``dsb(DSB_DDR)`` fenced. Work that retired on its own time is no guarantee and does not count.

Advisory: a notify publishes those stores only if its receiver reads them. A credit or an
acknowledgement after a copy into the block's own buffer publishes nothing, and is correct
with no fence at all; whether a reader really depends on the stores is a happens-before
question the race detector answers (``detect_races``), from who actually reads them. So the
finding is printed only beside a failure that something else proved.
"""

from __future__ import annotations

from typing import Any

from .base import Checker

_CLEAN, _QUEUED, _DRAINED = 0, 1, 2


class NotifyUnfenced(Checker):
    name = "notify-unfenced"
    exact = False
    decides = "TNOTIFY after MTE3 stores with no drain, or remote stores with no dsb"
    starts_on = frozenset({"stored"})  # clean until the first store: nothing to find before

    def __init__(self, block: Any) -> None:
        super().__init__(block)
        self.state = _CLEAN
        self.remote = False  # unfenced stores into another rank's window

    def stored(self, remote: bool) -> None:
        self.state = _QUEUED
        self.remote = self.remote or remote

    def drained(self) -> None:
        if self.state == _QUEUED:
            self.state = _DRAINED

    def fenced(self) -> None:
        if self.state == _DRAINED:
            self.state, self.remote = _CLEAN, False

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.state == _CLEAN:
            return
        if self.state == _QUEUED:
            what = ("TSTORE / TPUT work may still be queued on PIPE_MTE3 (no pipe_barrier or "
                    "wait_flag(PIPE_MTE3, ...) drained it)")
        elif self.remote:
            what = "stores into another rank's window were drained but not fenced (no dsb(DSB_DDR))"
        else:
            return
        self.found(f"TNOTIFY after {what}: if the receiver reads that data, it may see the "
                   "signal before the data; pipe_barrier(PIPE_ALL) + dsb(DSB_DDR) first",
                   sig.ptr.offset, sig.ptr.rank)
