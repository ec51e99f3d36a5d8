"""Shrink a failing schedule to fewer preemptions before it is printed.

A schedule file may be cut short: its replay follows the recorded choices up to the cut and then
runs without preemptions (the current agent keeps the turn while it can). So a failing schedule
is shrunk by bisecting on the cut: the shortest prefix found whose replay still fails the same
way (same outcome kind, same exception type) is kept, and the schedule that replay recorded (as
long as the original, with the preemptions only of the prefix) replaces the original. Each try
is one run; the search stops after ``tries`` runs, or before a run that would likely end past
``budget_s`` seconds (a hanging schedule's every replay lasts as long as the hang took to be
found), and then says so in ``notes``: the original schedule is kept as found.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, RunError
from ..exec.schedule import Schedule


def signature(kind: str, message: str) -> tuple[str, str]:
    """What must stay the same for a shrunk schedule: the outcome kind and the exception type."""
    head = message.split(": ", 2)
    return kind, head[1].split(":", 1)[0] if len(head) > 1 else ""


SHRINK_BUDGET_S = 20.0  # seconds a shrink may spend, by default


def shrink(call: Callable[..., Any], schedule: Schedule, want: tuple[str, str],
           classify: Callable[[BaseException], tuple[str, str]], tries: int = 10,
           budget_s: float = SHRINK_BUDGET_S, first_s: float = 0.0,
           notes: list[str] | None = None) -> Schedule | None:
    """The schedule of a failing replay with fewer preemptions than ``schedule``, or ``None``.

    ``call(replay=path)`` runs the program once (all other settings bound); ``want`` is the
    original failure's :func:`signature`. At most ``tries`` runs, none started when it would
    likely end past ``budget_s`` seconds (a run is expected to take as long as the longest so
    far, ``first_s`` being the original's); why the search stopped early goes to ``notes``."""
    best: Schedule | None = None
    lo, hi = 0, len(schedule.choices)
    t0 = time.monotonic()
    longest = first_s
    runs = 0
    fd, path = tempfile.mkstemp(prefix="shmcomm-shrink-", suffix=".json")
    os.close(fd)
    try:
        for _ in range(tries):
            if lo >= hi:
                break
            spent = time.monotonic() - t0
            if spent + longest > budget_s:
                if notes is not None:
                    notes.append(
                        f"shrink gave up after {runs} of {tries} runs ({spent:.1f} s of its "
                        f"{budget_s:g} s budget): one replay takes about {longest:.1f} s (a "
                        "hang is found only by its timeout); "
                        + ("the shortest schedule found so far is kept" if best is not None
                           else "the schedule is kept as found"))
                break
            cut = (lo + hi) // 2
            Schedule(schedule.nranks, schedule.seed, schedule.strategy, schedule.choices[:cut],
                     0, schedule.options).save(path)
            started = time.monotonic()
            runs += 1
            try:
                call(replay=path)
                failed = None
            except RunError as exc:
                failed = exc
            except ArgumentError:
                return best
            finally:
                longest = max(longest, time.monotonic() - started)
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
