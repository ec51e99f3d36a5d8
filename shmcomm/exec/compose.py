"""One run's execution, decided once from its configuration and built by one function.

A run's execution is three independent choices:

* **semantics**, what an instruction does: ``eager`` (everything completes at issue,
  :mod:`.eager`) or ``hazard`` (queued pipes, delayed visibility, cache lines, jitter,
  :mod:`.hazard`; ``hazards`` picks the sub-models);
* **interleaving**, who runs when: ``free`` (the OS schedules every block thread and rank
  process) or ``scheduled`` (one agent at a time, chosen by a strategy: ``random``, ``pct``,
  ``replay``; ``exhaustive`` enumerates schedules through :mod:`shmcomm.stress.explore`,
  :mod:`.schedule`);
* **observers**, what watches without changing it: the race detector (``races``,
  :mod:`.races`), the Chrome trace (``trace``, :mod:`.trace`) and the hazard checkers
  (``checkers``, :mod:`.hazard.checkers`).

:class:`Execution` is that decision, derived from a :class:`~shmcomm.config.Config` (every
module that needs to know "is ``hazards`` read", "who writes the trace" asks it instead of
looking at ``mode``); :func:`compose` builds the run's
:class:`~shmcomm.core.model.RunModel` from it. A combination that does not exist raises
:class:`~shmcomm.errors.ArgumentError` naming the setting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..config import MODE_ONLY, Config, parse_hazards
from ..core.model import RunModel
from ..core.observer import Observer, PoolStates, observe
from ..errors import ArgumentError
from .schedule.strategies import parse_strategy  # (its import describes the strategy setting)
from .semantics import SEMANTICS, semantics_model, semantics_of

INTERLEAVINGS = ("free", "scheduled")
OBSERVERS = ("races", "trace", "checkers")
# mode -> interleaving (its semantics: .semantics, hazard unless hazards='none')
_INTERLEAVING = {"eager": "free", "hazard": "free", "schedule": "scheduled"}
# settings only some modes read, and those modes: the configuration's table (which warns about
# the others) and the scheduler's own settings
_READ_BY = MODE_ONLY


@dataclass(frozen=True)
class Execution:
    """How one run executes: ``semantics`` x ``interleaving`` (with its ``strategy``) x
    ``observers``. ``hazards``: the hazard sub-models on (empty under eager semantics)."""

    mode: str
    semantics: str
    interleaving: str
    strategy: str  # "" when the interleaving is free
    hazards: frozenset[str]
    observers: frozenset[str]

    @classmethod
    def of(cls, config: Config) -> Execution:
        """The execution ``config`` asks for; ArgumentError for one that does not exist."""
        interleaving = _INTERLEAVING[config.mode]
        semantics = semantics_of(config)
        if config.replay and interleaving != "scheduled":
            raise ArgumentError(f"replay: a schedule file runs only in mode 'schedule'; mode must "
                                f"be 'schedule' with replay, got mode {config.mode!r}")
        if config.transport != "shm":  # ranks started by another tool: no launcher to coordinate
            if interleaving == "scheduled":
                raise ArgumentError(f"mode: schedule mode (one agent at a time, chosen by the shm "
                                    f"launcher's scheduler) needs transport='shm'; under "
                                    f"{config.transport} use mode 'eager' or 'hazard'")
            if config.detect_races:
                raise ArgumentError(f"detect_races needs transport='shm' (the race detector is "
                                    f"not wired to the {config.transport} launcher)")
        strategy = ""
        if interleaving == "scheduled":
            strategy = "replay" if config.replay else parse_strategy(config.strategy)[0]
        hazards = parse_hazards(config.hazards) if semantics == "hazard" else frozenset()
        observers = {name for name, on in (("races", config.detect_races),
                                           ("trace", bool(config.trace)),
                                           ("checkers", "checkers" in hazards)) if on}
        return cls(config.mode, semantics, interleaving, strategy, hazards, frozenset(observers))

    def reads(self, setting: str) -> bool:
        """Whether this execution reads ``setting`` (every setting not tied to some modes is)."""
        return reads(self.mode, setting)

    @property
    def trace_writer(self) -> str:
        """Who writes the trace file: ``"schedule"`` (the scheduler, one event per step, at the
        end of the run) or ``"events"`` (every rank appends; the launcher finalizes it)."""
        return "schedule" if self.interleaving == "scheduled" else "events"

    def trace_meta(self, config: Config) -> dict[str, object]:
        """The execution's part of a trace file's metadata (``config``: the run's)."""
        return {"mode": self.mode, "hazards": config.hazards if self.semantics == "hazard" else None}


def reads(mode: str, setting: str) -> bool:
    """Whether a run in ``mode`` reads ``setting``: ``hazards`` is read by hazard semantics (so
    by hazard and schedule modes), ``hazard_delay`` by hazard mode (a scheduled run counts
    steps, ``schedule_delay``), ``strategy`` / ``replay`` / ``record`` by the scheduler; every
    other setting by every mode."""
    return mode in _READ_BY.get(setting, (mode,))


def max_shared_bytes(nranks: int) -> int:
    """The largest shared area any execution of ``nranks`` ranks needs, with every registered
    observer on (a pool sizes its control segment once for every run it will serve)."""
    from .observers import OBSERVERS
    from .schedule import shared_bytes

    total = -(-shared_bytes(nranks) // 64) * 64
    for make in OBSERVERS.values():
        total += -(-getattr(make, "max_shared_bytes", lambda n: 0)(nranks) // 64) * 64
    return total


def pool_state(nranks: int) -> PoolStates:
    """What a pool of ``nranks`` ranks makes before it forks them, for its runs' observers, by
    observer name (the race detector's clocks and pipes; each run's observers take theirs by
    ``use_pool``)."""
    from .races import RaceDetector

    return PoolStates({RaceDetector.name: RaceDetector.pool_state(nranks)})


def compose(config: Config, observers: Iterable[Any] = (), strategy: Any = None) -> RunModel:
    """The run's execution model: the semantics and interleaving of ``config``, under its
    observers (the race detector when ``detect_races``; then ``observers``, each a registered
    name, an :class:`~shmcomm.core.observer.Observer` subclass or an instance), built once in
    the launcher (its rank models are made in each rank process). ``strategy``: a strategy
    object (see :mod:`.schedule.strategies`) that schedules the run instead of
    ``config.strategy``'s."""
    ex = Execution.of(config)
    model: RunModel
    if strategy is not None and ex.interleaving != "scheduled":
        raise ArgumentError(f"strategy: a strategy object schedules mode 'schedule' only; got "
                            f"mode {config.mode!r}")
    if ex.interleaving == "scheduled":  # the scheduler drives the semantics on its step clock
        from .schedule import ScheduleMode

        model = ScheduleMode(config, strategy=strategy)
        if model.config != config:  # a replay runs the recorded run's options
            ex = Execution.of(model.config)
    else:
        model = RunModel(config, semantics_model(ex.semantics))
    model.execution = ex  # decided once, here: the launcher and the models read it
    # the checkers observe inside hazard semantics (its own events: stores, drains, clobbers);
    # the race detector, the trace and the run's other observers plug into the observer seam
    watching: list[Observer] = []
    if "races" in ex.observers:
        from .races import race_detector

        watching.append(race_detector(model.config))  # (a replay's: the recorded run's)
    if "trace" in ex.observers:
        from .trace import TraceObserver

        # (a scheduled run's scheduler writes the hosts' track, one event per step)
        watching.append(TraceObserver(model.config, ex.trace_writer == "events"))
    return observed(model, observers, watching)


def observed(model: RunModel, observers: Iterable[Any], first: Iterable[Observer] = ()
             ) -> RunModel:
    """``model`` under ``first`` and then ``observers`` (names, classes or instances: see
    :func:`~shmcomm.exec.observers.make_observer`)."""
    watching = list(first)
    if observers:
        from .observers import make_observer

        watching += [make_observer(o, model.config) for o in observers]
    return observe(model, watching)


__all__ = ["Execution", "compose", "observed", "reads", "max_shared_bytes", "pool_state", "SEMANTICS",
           "INTERLEAVINGS", "OBSERVERS"]
