"""``notify-unfenced``: TNOTIFY after MTE3 work (TSTORE, TPUT) that no sync of the program has
drained (``pipe_barrier``, ``wait_flag`` from MTE3, or a drain of MTE2 after MTE3 was fenced into
it), or after drained stores that another rank can read but no ``dsb(DSB_DDR)`` fenced: stores
into another rank's window, or into this rank's own window when the notify goes to another
rank (it may pull them). Work that retired on its own time is no guarantee and does not count.

With the race detector on (``detect_races``) this checker stays silent: whether the notify had
to publish those stores is a happens-before question the detector answers from who actually
reads them, without the false alarms of a pattern (a store to a buffer nobody is told about).
"""

from __future__ import annotations

from typing import Any

from ..report import report
from .base import Checker

_CLEAN, _QUEUED, _DRAINED = 0, 1, 2


class NotifyUnfenced(Checker):
    name = "notify-unfenced"

    def __init__(self, block: Any) -> None:
        super().__init__(block)
        self.state = _CLEAN
        self.remote = False  # unfenced stores into another rank's window
        self.own = False  # unfenced stores into this rank's window
        self.silent = bool(getattr(self.agent.rt.config, "detect_races", False))

    def stored(self, remote: bool) -> None:
        self.state = _QUEUED
        if remote:
            self.remote = True
        else:
            self.own = True

    def drained(self) -> None:
        if self.state == _QUEUED:
            self.state = _DRAINED

    def fenced(self) -> None:
        if self.state == _DRAINED:
            self.state, self.remote, self.own = _CLEAN, False, False

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.silent or self.state == _CLEAN:
            return
        to_peer = sig.ptr.rank != self.agent.rank
        if self.state == _QUEUED:
            what = ("TSTORE / TPUT work may still be queued on PIPE_MTE3 (no pipe_barrier or "
                    "wait_flag(PIPE_MTE3, ...) drained it)")
        elif self.remote or (self.own and to_peer):
            what = ("stores that another rank can read were drained but not fenced (no "
                    "dsb(DSB_DDR))" + ("" if self.remote else ": this rank's own window, and the "
                                       "notify goes to another rank, which may pull them"))
        else:
            return
        raise report(self.agent, self.name,
                     f"TNOTIFY after {what}: the peer may see the signal before the data; "
                     "use pipe_barrier(PIPE_ALL) + dsb(DSB_DDR) first", sig.ptr.offset,
                     sig.ptr.rank)
