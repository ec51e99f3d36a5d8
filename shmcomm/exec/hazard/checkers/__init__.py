"""Hazard checkers: rules that a kernel's synchronization breaks, reported with file:line.

Each checker is one class in its own module, an observer of its block's hazard model: the model
calls the methods a checker overrides (and only those) at the matching event. Each declares its
kind (:class:`.base.Checker`): an *exact* checker decides from what happened and its report
(``hazard [name]``) fails the run; an *advisory* one recognizes a pattern that a correct kernel
can show too, so it never fails a run by itself: its finding is printed as a likely cause
beside a failure that something else proved (a race report, a wrong result, a deadlock).

===================  ========  ===============================================================
checker              kind      what a finding says
===================  ========  ===============================================================
``line-shared``      exact     a Set's 64-byte line write-back overwrote another writer's word
                               (the line model really lost a write) (:mod:`.line_shared`)
``flag-unbalanced``  exact     a ``set_flag`` never consumed when the kernel returns
                               (:mod:`.flag_unbalanced`)
``event-twice``      exact     ``set_flag`` on an event already set and not yet waited for
                               (:mod:`.event_twice`)
``arrival-count``    exact     a declared (``ctx.expect_blocks``) arrival count above the
                               launch's blocks: the wait can never hold (:mod:`.arrival_count`)
``arrival-takers``   advisory  more blocks declare an arrival count than it counts
                               (:mod:`.arrival_count`)
``notify-unfenced``  advisory  TNOTIFY after MTE3 stores no sync drained, or remote stores no
                               ``dsb`` fenced (:mod:`.notify_unfenced`)
``phase-reuse``      advisory  a block that notified waits again on a slot with a threshold an
                               earlier wait reached (:mod:`.phase_reuse`)
``stale-at-launch``  advisory  a TWAIT satisfied by a value left from an earlier launch
                               (:mod:`.stale_at_launch`)
===================  ========  ===============================================================

Whether a notify had to publish data is the race detector's judgement (``detect_races``): it
sees who really reads the data.

To add a checker: subclass :class:`.base.Checker` in a new module here, set ``exact`` (is every
finding a real failure, on every correct program?), override the events it needs, report with
``self.found(...)``, and add the class to :data:`CHECKER_CLASSES`.
"""

from __future__ import annotations

from .arrival_count import ArrivalCount, ArrivalTakers
from .base import Checker
from .event_twice import EventTwice
from .flag_unbalanced import FlagUnbalanced
from .line_shared import LineShared
from .notify_unfenced import NotifyUnfenced
from .phase_reuse import PhaseReuse
from .stale_at_launch import StaleAtLaunch

CHECKER_CLASSES: tuple[type[Checker], ...] = (
    StaleAtLaunch, PhaseReuse, LineShared, NotifyUnfenced, FlagUnbalanced, EventTwice, ArrivalCount,
    ArrivalTakers)
CHECKERS = tuple(c.name for c in CHECKER_CLASSES)
EXACT = tuple(c.name for c in CHECKER_CLASSES if c.exact)
ADVISORY = tuple(c.name for c in CHECKER_CLASSES if not c.exact)
EVENTS = ("notify", "wait", "stored", "drained", "fenced", "set_flag", "finish", "expect_blocks",
          "clobber")


def observers(checkers: list[Checker], event: str) -> tuple:
    """The bound ``event`` methods of the checkers that override it."""
    return tuple(getattr(c, event) for c in checkers if event in _overrides(type(c)))


def observer_table(checkers: list[Checker]) -> dict[str, tuple]:
    """``event -> observers(checkers, event)`` for every event (every block makes one)."""
    on: dict[str, list] = {e: [] for e in EVENTS}
    for c in checkers:
        for e in _overrides(type(c)):
            on[e].append(getattr(c, e))
    return {e: tuple(m) for e, m in on.items()}


_OVERRIDES: dict[type, tuple[str, ...]] = {}


def _overrides(cls: type) -> tuple[str, ...]:
    """The events ``cls`` overrides (asked for each block of every launch: kept per class)."""
    got = _OVERRIDES.get(cls)
    if got is None:
        got = _OVERRIDES[cls] = tuple(e for e in EVENTS
                                      if getattr(cls, e) is not getattr(Checker, e))
    return got
