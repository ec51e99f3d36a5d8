"""Hazard checkers: rules that a kernel's synchronization breaks, reported with file:line.

Each checker is one class in its own module, an observer of its block's hazard model: the model
calls the methods a checker overrides (and only those) at the matching event. Names (each
report starts with ``hazard [name]``):

``stale-at-launch``  a TWAIT on a signal word of this rank is satisfied by a value the word
                     already held when the launch started and the host did not store
                     (:mod:`.stale_at_launch`).
``phase-reuse``      a block that started a new round (it notified) waits again on a slot with a
                     threshold an earlier wait of the launch already reached (:mod:`.phase_reuse`).
``line-shared``      a Set's 64-byte line changed under its cached copy (:mod:`.line_shared`).
``notify-unfenced``  TNOTIFY after MTE3 work no sync drained, or drained stores another rank can
                     read but no fence published (:mod:`.notify_unfenced`).
``flag-unbalanced``  a ``set_flag`` never consumed when the kernel returns (:mod:`.flag_unbalanced`).
``event-twice``      ``set_flag`` on an event already set and not yet waited for (:mod:`.event_twice`).
``arrival-count``    a kernel declared (``ctx.expect_blocks``) an arrival count that the blocks
                     taking part cannot match (:mod:`.arrival_count`).

To add a checker: subclass :class:`.base.Checker` in a new module here, override the events it needs,
and add the class to :data:`CHECKER_CLASSES`.
"""

from __future__ import annotations

from .arrival_count import ArrivalCount
from .base import Checker
from .event_twice import EventTwice
from .flag_unbalanced import FlagUnbalanced
from .line_shared import LineShared
from .notify_unfenced import NotifyUnfenced
from .phase_reuse import PhaseReuse
from .stale_at_launch import StaleAtLaunch

CHECKER_CLASSES: tuple[type[Checker], ...] = (
    StaleAtLaunch, PhaseReuse, LineShared, NotifyUnfenced, FlagUnbalanced, EventTwice, ArrivalCount)
CHECKERS = tuple(c.name for c in CHECKER_CLASSES)
EVENTS = ("notify", "wait", "stored", "drained", "fenced", "set_flag", "finish", "expect_blocks",
          "clobber")


def observers(checkers: list[Checker], event: str) -> tuple:
    """The bound ``event`` methods of the checkers that override it."""
    base = getattr(Checker, event)
    return tuple(getattr(c, event) for c in checkers if getattr(type(c), event) is not base)
