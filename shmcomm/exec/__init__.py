"""Execution models: how a block's instructions execute (see :mod:`shmcomm.core.model`).

``eager``: everything completes at issue, as pto-isa's CPU simulator. ``hazard``: queued pipes,
delayed visibility, the line model, jitter and the checkers (:mod:`shmcomm.exec.hazard`).
``races``: the happens-before race detector, wrapped around either (``detect_races``).
:func:`model_for` picks the run's model from its configuration, once, in the launcher.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from ..core.model import RankModel
from ..core.runtime import RankRuntime
from .eager import EagerRankModel


def model_for(config: Config) -> Callable[[RankRuntime], RankModel]:
    """The factory of the run's execution model (called in each rank process with its ``rt``)."""
    factory: Callable[[RankRuntime], RankModel] = EagerRankModel
    if config.mode == "hazard":
        from .hazard import HazardRankModel

        factory = HazardRankModel
    if config.detect_races:  # an observer around the mode's model, not a mode of its own
        from .races import RaceDetector

        return RaceDetector(config, factory)
    return factory


__all__ = ["model_for"]
