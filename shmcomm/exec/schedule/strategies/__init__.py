"""Schedule-mode strategies behind one small protocol (one module each).

A strategy is built in the launcher (``make``), seeds the run's shared state once before the
ranks fork (``new_execution``) and then, in whichever process holds the turn, picks the agent of
each step (``next_agent``) from the enabled ones. Its state lives in the shared area
(:class:`~shmcomm.exec.schedule.scheduler.Shared`), never in a process, so every process
continues one deterministic sequence. ``next_u64`` is the shared PRNG (splitmix64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ....config import Config, parse_strategy
from ..scheduler import H_RNG

_MASK = (1 << 64) - 1


class Strategy(Protocol):
    """Chooses who runs each step of a schedule-mode run."""

    name: str

    def new_execution(self, sh: Any, seed: int) -> None:
        """Seed the shared state of a new run (launcher, before the ranks fork)."""

    def next_agent(self, sh: Any, enabled: Sequence[int], current: int, step: int) -> int:
        """The agent that runs step ``step`` (one of ``enabled``; -1: cannot go on)."""


def next_u64(sh: Any) -> int:
    """The next number of the run's shared splitmix64 stream."""
    x = (sh.hdr[H_RNG] + 0x9E3779B97F4A7C15) & _MASK
    sh.hdr[H_RNG] = x - (1 << 64) if x >> 63 else x
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def seed_rng(sh: Any, seed: int) -> None:
    x = (seed * 0x2545F4914F6CDD1D + 0x5851F42D4C957F2D) & _MASK
    sh.hdr[H_RNG] = x - (1 << 64) if x >> 63 else x


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
