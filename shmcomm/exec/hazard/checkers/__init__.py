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
``self.found(...)``, and add the class to :data:`CHECKER_CLASSES`. If the events it observes do
nothing until some other event happened (a store, a flag), name those in ``starts_on``: a block
that never sees them never makes it.
"""

from __future__ import annotations

from typing import Any

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


class Observers(dict):
    """``event -> `` the bound methods of a block's checkers that override it, each entry made
    at its event's first use, and each checker at the first event that can change what it
    finds (its ``starts_on``; by default the first event it observes): every block of every
    launch makes a table, and most blocks see few of the events (making all eight checkers up
    front was two thirds of a hazard block model's setup; a block that stores nothing never
    makes the store checker). A checker's state starts where it would have been had it been
    made with the block: every event before its first one was a no-op for it. Making one
    drops the entries made without it, of the events it observes."""

    __slots__ = ("block", "made")

    def __init__(self, block: Any) -> None:  # (dict's own __init__ has nothing to fill)
        self.block = block
        self.made: dict[type, Checker] = {}

    def __missing__(self, event: str) -> tuple:
        made = self.made
        for cls in _MAKES[event]:
            if cls not in made:
                # (setdefault: two threads' first events still share one checker)
                made.setdefault(cls, cls(self.block))
                for e in _OBSERVES[cls]:
                    if e != event:
                        self.pop(e, None)
        got = self[event] = tuple([getattr(made[cls], event) for cls in _BY_EVENT[event]
                                   if cls in made])
        return got


NO_OBSERVERS: dict[str, tuple] = {e: () for e in EVENTS}  # checkers off (read, never written)

# checker class -> the events it overrides; event -> the classes that override it, in
# CHECKER_CLASSES' order; event -> the classes made at it
_OBSERVES: dict[type[Checker], frozenset[str]] = {
    c: frozenset(e for e in EVENTS if getattr(c, e) is not getattr(Checker, e))
    for c in CHECKER_CLASSES}
_BY_EVENT: dict[str, tuple[type[Checker], ...]] = {
    e: tuple(c for c in CHECKER_CLASSES if e in _OBSERVES[c]) for e in EVENTS}
_MAKES: dict[str, tuple[type[Checker], ...]] = {
    e: tuple(c for c in CHECKER_CLASSES
             if e in (_OBSERVES[c] if c.starts_on is None else c.starts_on)) for e in EVENTS}
