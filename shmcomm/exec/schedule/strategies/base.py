"""The strategy protocol and the run's shared PRNG (splitmix64 in the shared area)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..scheduler import H_RNG

_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class Param:
    """One integer argument of a strategy's spec (``pct:D:K``): its letter, what it means, its
    range and its default."""

    letter: str
    meaning: str
    low: int
    high: int
    default: int
    note: str = ""  # what a value means beyond the number (``0: 400``)

    def text(self) -> str:
        high = f"{self.high:.0e}".replace("e+0", "e") if self.high >= 10**6 else str(self.high)
        note = f" ({self.note})" if self.note else ""
        return f"{self.meaning} {self.letter} in [{self.low}, {high}]{note}"


class Strategy(Protocol):
    """Chooses who runs each step of a schedule-mode run.

    Besides the two methods, a strategy class declares (the registry reads them):
    ``name``; ``params``, its spec's integer arguments in order (``pct:D:K``); ``help``, one
    line for ``--help`` and the docs; ``runs``: ``"one"`` (a run follows it), ``"many"`` (a
    search of many runs: the stress explorer's) or ``"file"`` (it needs a recorded schedule);
    and, for ``"one"``, ``from_spec(*args)`` making it from the spec's arguments."""

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
