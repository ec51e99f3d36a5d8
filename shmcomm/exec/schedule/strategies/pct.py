"""PCT, probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010).

Every agent gets a random distinct priority above ``depth``; ``depth - 1`` change steps are drawn
from ``[1, k]``; each step runs the highest-priority enabled agent, and at the i-th change step
the agent that was about to run drops to priority ``i`` (below every initial priority). A bug of
depth d among n agents and k steps is then found with probability at least 1 / (n k^(d-1)) per
run. ``k`` is the run's expected step count: ``pct:D:K``, else ``PCT_STEPS`` (small programs of
2-4 ranks take a few hundred steps; 8 ranks x 4 blocks a few thousand). A change step past the
run's end never happens, so a K much too large makes PCT act as a lower depth.

A failed ``TTEST`` is a yield hint (a polling loop cannot proceed by itself): the agent drops
below every other runnable agent until its next step, so a spin loop never starves the agent it
waits for; a poll that read nothing new (stale) drops below a yielded agent that has news (a
waiter whose condition now holds, or one with work to retire).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..scheduler import H_DEPTH, H_PCT_K, H_PCT_NEXT, MAX_PCT_DEPTH
from .base import Param, next_u64, seed_rng

PCT_STEPS = 400  # default estimate of a run's steps (k)


class PCT:
    """PCT of depth ``depth`` (``pct:D``)."""

    name = "pct"
    params = (Param("D", "depth", 1, MAX_PCT_DEPTH, 3),
              Param("K", "expected step count", 0, 10**8, 0, f"0: {PCT_STEPS}"))
    help = "PCT of depth D for runs of about K steps"
    runs = "one"

    @classmethod
    def from_spec(cls, depth: int, steps: int) -> PCT:
        return cls(depth, steps or PCT_STEPS)

    def __init__(self, depth: int, steps: int = PCT_STEPS) -> None:
        self.depth = depth
        self.steps = steps

    def new_execution(self, sh: Any, seed: int) -> None:
        seed_rng(sh, seed)
        n = len(sh.prio)
        order = list(range(n))
        for i in range(n - 1, 0, -1):  # Fisher-Yates over every possible agent id
            j = next_u64(sh) % (i + 1)
            order[i], order[j] = order[j], order[i]
        for rank, aid in enumerate(order):
            sh.prio[aid] = self.depth + 1 + rank
        changes = sorted(1 + next_u64(sh) % self.steps for _ in range(self.depth - 1))
        for i, c in enumerate(changes):
            sh.changes[i] = c
        sh.hdr[H_DEPTH] = self.depth
        sh.hdr[H_PCT_NEXT] = 0
        sh.hdr[H_PCT_K] = self.steps

    def next_agent(self, sh: Any, enabled: Sequence[int], current: int, step: int) -> int:
        prio, yielded, stale = sh.prio, sh.yielded, sh.stale
        best = max(enabled, key=lambda a: (not yielded[a], not stale[a], prio[a]))
        i = sh.hdr[H_PCT_NEXT]
        if i < self.depth - 1 and step >= sh.changes[i]:
            sh.hdr[H_PCT_NEXT] = i + 1
            prio[best] = self.depth - 1 - i  # drops below every initial priority
            best = max(enabled, key=lambda a: (not yielded[a], not stale[a], prio[a]))
        return best
