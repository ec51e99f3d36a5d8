"""What the corpus programs share: the registry, the data helpers, the release / acquire steps.

A program is a host function ``host(rt)`` that launches its kernels and raises
``AssertionError`` when any result differs from numpy's. :func:`program` registers it with the
shape it runs at and the known gaps (:data:`NEEDS`) that make some modes fail on it for now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shmcomm.comm import GlobalTensor
from shmcomm.pipe import DSB_DDR, PIPE_ALL, TLOAD, TSTORE, dsb, pipe_barrier
from shmcomm.stress.catalogue._common import expect  # noqa: F401 (the programs' check)

N = 64  # elements per chunk: one (1, N) float32 tile
ROUNDS = 3  # rounds of the multi-round protocols

# Modes a program runs in: the run's keyword arguments (the race detector on in each).
MODES: dict[str, dict[str, Any]] = {
    "eager": dict(mode="eager"),
    "hazard": dict(mode="hazard", hazards="all"),
    "schedule-random": dict(mode="schedule", strategy="random"),
    "schedule-pct": dict(mode="schedule", strategy="pct"),
}

# Gaps of the runtime that make a correct program fail in some modes today: name -> (modes,
# reason, whether the failure is a hang that costs the run's whole timeout). A program lists the
# gaps it hits; its cells in those modes are expected to fail (not strictly: a fix makes them
# pass, and then the gap's entry here goes).
NEEDS: dict[str, tuple[tuple[str, ...], str, bool]] = {}


@dataclass(frozen=True)
class Program:
    """One correct program of the corpus and the shape it runs at."""

    name: str
    host: Callable[..., Any]
    pattern: str
    nranks: int = 2
    blocks: int = 2
    needs: frozenset[str] = field(default_factory=frozenset)

    def gaps(self, mode: str) -> list[str]:
        """The gaps that make this program fail in ``mode`` for now (none: it must pass)."""
        return [n for n in sorted(self.needs) if mode in NEEDS[n][0]]

    def hangs(self, mode: str) -> bool:
        """Whether one of those gaps makes the run hang until its timeout."""
        return any(NEEDS[n][2] for n in self.gaps(mode))


PROGRAMS: list[Program] = []


def program(nranks: int = 2, blocks: int = 2, needs: tuple[str, ...] = ()):
    """Register the decorated host function as a corpus program of its module's pattern."""
    for n in needs:
        if n not in NEEDS:
            raise ValueError(f"program: unknown gap {n!r} (known: {', '.join(NEEDS)})")

    def deco(host: Callable[..., Any]) -> Callable[..., Any]:
        pattern = host.__module__.rsplit(".", 1)[-1]
        PROGRAMS.append(Program(f"{pattern}.{host.__name__}", host, pattern, nranks, blocks,
                                frozenset(needs)))
        return host
    return deco


def gt(ptr, n: int = N) -> GlobalTensor:
    """A (1, n) view of GM at ``ptr``."""
    return GlobalTensor(ptr, (1, n))


def tile(ctx, n: int = N, dtype=np.float32):
    return ctx.tile((1, n), dtype)


def release() -> None:
    """Drain every pipe, then the DDR fence: what this block stored is visible to every rank."""
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


def copy_local(t, dst, src, n: int = N) -> None:
    """Copy ``n`` elements GM -> GM through tile ``t`` (TLOAD, drain, TSTORE, drain)."""
    TLOAD(t, gt(src, n))
    pipe_barrier(PIPE_ALL)
    TSTORE(gt(dst, n), t)
    pipe_barrier(PIPE_ALL)


def store(t, dst, values, n: int = N) -> None:
    """Fill tile ``t`` with ``values`` and TSTORE it to ``dst`` (not drained)."""
    pipe_barrier(PIPE_ALL)  # the tile is free: earlier stores from it have read it
    t.array[0, :n] = values
    TSTORE(gt(dst, n), t)


def load(t, src, n: int = N) -> np.ndarray:
    """TLOAD ``n`` elements at ``src`` and return a copy of them (drained)."""
    TLOAD(t, gt(src, n))
    pipe_barrier(PIPE_ALL)
    return t.array[0, :n].copy()


def chunk(rank: int, k: int, n: int = N) -> np.ndarray:
    """The data rank ``rank`` sends in round ``k``: distinct for every (rank, round, element)."""
    return (1000.0 * (rank + 1) + 10.0 * k + np.arange(n) % 7).astype(np.float32)
