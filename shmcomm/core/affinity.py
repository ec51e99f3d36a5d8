"""The CPUs a thread runs on: a scheduled run moves its host threads onto the turn's CPU for
their turns and off it for the rest (the launcher chose the CPUs, :mod:`shmcomm.launch`)."""

from __future__ import annotations

import os
from collections.abc import Collection

# the CPUs this process's host thread takes outside its turns (set by the rank's setup)
_APART: list[frozenset[int]] = []


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


def set_apart(cpus: Collection[int] | None) -> None:
    """Note the CPUs this process's host thread takes outside its turns (``None``: none)."""
    _APART[:] = [] if cpus is None else [frozenset(cpus)]


def apart() -> frozenset[int] | None:
    """The CPUs :func:`set_apart` noted, or ``None``."""
    return _APART[0] if _APART else None


__all__ = ["apart", "pin_thread", "set_apart"]
