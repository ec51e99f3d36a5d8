"""A run's semantics, what an instruction does: ``eager`` or ``hazard`` (see :mod:`.compose`).

Decided here once, from the configuration, for the free interleaving and the scheduled one
alike (which asks without knowing the observers the run composes around it).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, parse_hazards
from ..core.model import RankModel

SEMANTICS = ("eager", "hazard")
_OF_MODE = {"eager": "eager", "hazard": "hazard", "schedule": "hazard"}


def semantics_of(config: Config) -> str:
    """``config``'s semantics: its mode's, and eager when ``hazards='none'`` leaves no
    sub-model of hazard semantics on."""
    name = _OF_MODE[config.mode]
    if name == "hazard" and not parse_hazards(config.hazards):
        return "eager"
    return name


def semantics_model(name: str) -> Callable[..., RankModel]:
    """The rank model of semantics ``name`` (called ``(rt)``, or ``(rt, step_clock)`` by the
    scheduled interleaving)."""
    if name == "hazard":
        from .hazard import HazardRankModel

        return HazardRankModel
    from .eager import EagerRankModel

    return EagerRankModel


__all__ = ["SEMANTICS", "semantics_of", "semantics_model"]
