"""Random walk: every step, a uniformly random enabled agent (shuttle's ``RandomScheduler``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import next_u64, seed_rng


class RandomWalk:
    """Uniform choice among the enabled agents at every step."""

    name = "random"
    params = ()
    help = "a uniformly random enabled agent every step"
    runs = "one"

    @classmethod
    def from_spec(cls) -> RandomWalk:
        return cls()

    def new_execution(self, sh: Any, seed: int) -> None:
        seed_rng(sh, seed)

    def next_agent(self, sh: Any, enabled: Sequence[int], current: int, step: int) -> int:
        if len(enabled) == 1:
            return enabled[0]
        return enabled[next_u64(sh) % len(enabled)]
