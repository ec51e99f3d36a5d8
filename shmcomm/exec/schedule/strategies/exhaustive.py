"""Bounded exhaustive search: every schedule with at most K preemptions (CHESS's iterative
context bounding). Not one run but many: ``python -m shmcomm.stress --strategy exhaustive:K``
(or :func:`shmcomm.stress.explore.explore`) enumerates them, each a replay of its choices."""

from __future__ import annotations

from .base import Param


class Exhaustive:
    """The declaration of ``exhaustive[:K]``; the explorer runs it (each run a replay)."""

    name = "exhaustive"
    params = (Param("K", "preemption bound", 0, 8, 1),)
    help = "every schedule with at most K preemptions (stress only)"
    runs = "many"
