"""``notify-unfenced``: TNOTIFY after MTE3 work (TSTORE, TPUT) without ``pipe_barrier`` (drain)
and, if the stores went to another rank, ``dsb(DSB_DDR)`` (fence)."""

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
        self.remote = False

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
        if self.state == _QUEUED or (self.state == _DRAINED and self.remote):
            what = ("TSTORE / TPUT work may still be queued on PIPE_MTE3 (no pipe_barrier or "
                    "wait_flag(PIPE_MTE3, ...) drained it)" if self.state == _QUEUED else
                    "stores to another rank were drained but not fenced (no dsb(DSB_DDR))")
            raise report(self.agent, self.name,
                         f"TNOTIFY after {what}: the peer may see the signal before the data; "
                         "use pipe_barrier(PIPE_ALL) + dsb(DSB_DDR) first", sig.ptr.offset,
                         sig.ptr.rank)
