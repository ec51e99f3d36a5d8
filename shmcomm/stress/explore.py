"""Bounded exhaustive search: every schedule of a run with at most ``k`` preemptions.

Schedule mode records, per step, the agents that were enabled and the agent that decided. A
schedule is a prefix of choices followed by the non-preemptive default (the current agent keeps
the turn while it can). The search starts from the empty prefix and, for every run, branches at
each step past its prefix to every other enabled agent: a branch away from an agent that could
have gone on is a preemption and counts against ``k``; a branch where the deciding agent could
not go on (it blocked, or finished) is free (context bounding, as CHESS does). Depth first, each
prefix run once, until a run fails, the tree is exhausted, or ``max_runs`` runs were made.
Meant for small kernels: the tree grows with steps^k times the free choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import RunError
from ..exec.schedule import Schedule, ScheduleMode
from ..launch.supervisor import Launcher


@dataclass
class Exploration:
    """What a search found: the runs made, the first failure and its schedule, and whether every
    schedule within the bound was tried."""

    runs: int
    failure: RunError | None
    schedule: Schedule | None
    complete: bool


def explore(host: Callable[..., Any], config: Config, args: tuple = (), max_preemptions: int = 1,
            max_runs: int = 1000) -> Exploration:
    """Run ``host`` under every schedule with at most ``max_preemptions`` preemptions (schedule
    mode with ``config``'s settings and seed), stopping at the first failure."""
    config = config.replace(mode="schedule", replay="")
    stack: list[tuple[tuple[int, ...], int]] = [((), 0)]
    runs = 0
    while stack and runs < max_runs:
        prefix, cost = stack.pop()
        model = ScheduleMode(config, list(prefix), record_enabled=True)
        runs += 1
        try:
            Launcher(config, host, args, model=model).run()
        except RunError as exc:
            return Exploration(runs, exc, model.schedule, False)
        choices = model.schedule.choices if model.schedule else []
        for i in range(len(prefix), min(len(choices), len(model.enabled))):
            me = model.deciders[i]
            for alt in model.enabled[i]:
                if alt == choices[i]:
                    continue
                extra = 1 if me in model.enabled[i] else 0  # the decider could have gone on
                if cost + extra <= max_preemptions:
                    stack.append((tuple(choices[:i]) + (alt,), cost + extra))
    return Exploration(runs, None, None, not stack)
