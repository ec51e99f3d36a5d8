"""Replay a recorded schedule: step i runs the agent the record names for step i.

Exactly as recorded, a replay never diverges. An edited schedule (shortened, preemptions
removed) is followed while its agent is enabled; where it is not, or past its end, the current
agent keeps running if it can, else the first enabled one: a run without further preemptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Replay:
    """Follows ``choices`` (agent ids, one per step)."""

    name = "replay"
    params = ()
    help = "follow a recorded schedule (replay=FILE)"
    runs = "file"

    def __init__(self, choices: list[int]) -> None:
        self.choices = choices

    def new_execution(self, sh: Any, seed: int) -> None:
        pass

    def next_agent(self, sh: Any, enabled: Sequence[int], current: int, step: int) -> int:
        if step < len(self.choices):
            want = self.choices[step]
            if want in enabled:
                return want
        return current if current in enabled else enabled[0]
