"""A corpus of correct programs, written from the patterns kernel authors use, on which no mode
of shmcomm may raise an alarm (``tests/stress/test_verdict_corpus.py``). One module per pattern; each
program registers itself with :func:`._base.program`."""

from __future__ import annotations

from . import (
    async_copies,
    atomics,
    barriers,
    credit_rings,
    events,
    flags,
    launches,
    pull,
    streams,
    user_extras,
    user_rings,
    user_sync,
)
from ._base import MODES, NEEDS, PROGRAMS, Program

MODULES = (credit_rings, flags, launches, barriers, pull, events, async_copies, streams, atomics,
           user_rings, user_sync, user_extras)

__all__ = ["MODES", "MODULES", "NEEDS", "PROGRAMS", "Program"]
