"""Shrink a failing schedule to fewer preemptions before it is printed.

A schedule file may be cut short: its replay follows the recorded choices up to the cut and then
runs without preemptions (the current agent keeps the turn while it can). So a failing schedule
is shrunk by bisecting on the cut: the shortest prefix found whose replay still fails the same
way (same outcome kind, same exception type) is kept, and the schedule that replay recorded (as
long as the original, with the preemptions only of the prefix) replaces the original. Each try
is one run; the search stops after ``tries`` runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, RunError
from ..exec.schedule import Schedule


def signature(kind: str, message: str) -> tuple[str, str]:
    """What must stay the same for a shrunk schedule: the outcome kind and the exception type."""
    head = message.split(": ", 2)
    return kind, head[1].split(":", 1)[0] if len(head) > 1 else ""


def shrink(call: Callable[..., Any], schedule: Schedule, want: tuple[str, str],
           classify: Callable[[BaseException], tuple[str, str]], tries: int = 10) -> Schedule | None:
    """The schedule of a failing replay with fewer preemptions than ``schedule``, or ``None``.

    ``call(replay=path)`` runs the program once (all other settings bound); ``want`` is the
    original failure's :func:`signature`."""
    best: Schedule | None = None
    lo, hi = 0, len(schedule.choices)
    fd, path = tempfile.mkstemp(prefix="shmcomm-shrink-", suffix=".json")
    os.close(fd)
    try:
        for _ in range(tries):
            if lo >= hi:
                break
            cut = (lo + hi) // 2
            Schedule(schedule.nranks, schedule.seed, schedule.strategy, schedule.choices[:cut],
                     0, schedule.options).save(path)
            try:
                call(replay=path)
                failed = None
            except RunError as exc:
                failed = exc
            except ArgumentError:
                return best
            if failed is not None and signature(*classify(failed)) == want \
                    and getattr(failed, "schedule", None) is not None:
                hi = cut
                got = failed.schedule  # type: ignore[attr-defined]  # the supervisor sets it
                if got.preemptions < (best or schedule).preemptions:
                    got.strategy = schedule.strategy
                    best = got
            else:
                lo = cut + 1
    finally:
        os.unlink(path)
    return best
