"""The CPUs a thread runs on: a scheduled run moves its host threads onto the turn's CPU for
their turns and off it for the rest (the launcher chose the CPUs, :mod:`shmcomm.launch`)."""

from __future__ import annotations

import os
from collections.abc import Collection


def pin_thread(cpus: Collection[int] | None) -> frozenset[int] | None:
    """Pin the calling thread (only it: ``sched_setaffinity`` of thread id 0) to ``cpus``;
    returns the CPUs it was allowed before, to go back to. ``None``: leave it, return ``None``.
    A CPU taken away meanwhile (cgroups) leaves it where it was."""
    if cpus is None:
        return None
    before = frozenset(os.sched_getaffinity(0))
    if before != set(cpus):
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass
    return before


__all__ = ["pin_thread"]
