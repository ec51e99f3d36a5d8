"""Execution models: how a block's instructions execute (see :mod:`shmcomm.core.model`).

``eager``: everything completes at issue, as pto-isa's CPU simulator. ``hazard``: queued pipes,
delayed visibility, the line model, jitter and the checkers (:mod:`shmcomm.exec.hazard`).
``schedule``: the hazard models run one agent at a time under a replayable strategy
(:mod:`shmcomm.exec.schedule`).
``races``: the happens-before race detector, wrapped around any of them (``detect_races``: on
by default in hazard and schedule mode).
:func:`model_for` picks the run's model from its configuration, once, in the launcher.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from ..core.model import RankModel
from ..core.runtime import RankRuntime
from ..errors import ArgumentError
from .eager import EagerRankModel


def model_for(config: Config) -> Callable[[RankRuntime], RankModel]:
    """The factory of the run's execution model (called in each rank process with its ``rt``)."""
    factory: Callable[[RankRuntime], RankModel] = EagerRankModel
    if config.replay and config.mode != "schedule":
        raise ArgumentError(f"replay: a schedule file runs only in mode 'schedule'; mode must be "
                            f"'schedule' with replay, got mode {config.mode!r}")
    if config.mode == "schedule":
        from .schedule import ScheduleMode

        factory = ScheduleMode(config)
    if config.mode == "hazard":
        from .hazard import HazardRankModel

        factory = HazardRankModel
    if config.detect_races:  # an observer around the mode's model, not a mode of its own
        from .races import RaceDetector

        return RaceDetector(config, factory)
    return factory


__all__ = ["model_for"]
