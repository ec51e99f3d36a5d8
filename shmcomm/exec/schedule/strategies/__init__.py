"""Schedule-mode strategies behind one small protocol (one module each).

A strategy is built in the launcher (``make``), seeds the run's shared state once before the
ranks fork (``new_execution``) and then, in whichever process holds the turn, picks the agent of
each step (``next_agent``) from the enabled ones. Its state lives in the shared area
(:class:`~shmcomm.exec.schedule.scheduler.Shared`), never in a process, so every process
continues one deterministic sequence. ``next_u64`` is the shared PRNG (splitmix64).
"""

from __future__ import annotations

from collections.abc import Sequence

from ....config import Config, parse_strategy
from .base import Strategy, next_u64, seed_rng

__all__ = ["Strategy", "make", "next_u64", "seed_rng"]


def make(config: Config, choices: Sequence[int] | None = None) -> Strategy:
    """The strategy of ``config`` (``choices``: the schedule a replay follows)."""
    from .pct import PCT, PCT_STEPS
    from .random import RandomWalk
    from .replay import Replay

    if config.replay or choices is not None:
        return Replay(list(choices or ()))
    name, depth, steps = parse_strategy(config.strategy)
    if name == "pct":
        return PCT(depth, steps or PCT_STEPS)
    if name == "exhaustive":
        from ....errors import ArgumentError

        raise ArgumentError("strategy: 'exhaustive' runs many schedules, not one: use "
                            "python -m shmcomm.stress --strategy exhaustive:K (or "
                            "shmcomm.stress.explore.explore)")
    if name == "replay":
        from ....errors import ArgumentError

        raise ArgumentError("strategy: 'replay' needs a schedule file (replay=PATH / --replay FILE)")
    return RandomWalk()


__all__ = ["Strategy", "make", "next_u64", "seed_rng"]
