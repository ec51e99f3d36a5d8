"""``event-twice``: ``set_flag`` on an event that is already set and not yet waited for (a 1-bit
flag: the second set is lost)."""

from __future__ import annotations

from ....types import PIPE_NAMES
from .base import Checker


class EventTwice(Checker):
    name = "event-twice"
    decides = "set_flag on an event already set and not yet waited for: a set is lost"

    def set_flag(self, key: tuple[int, int, int]) -> None:
        block = self.block
        if key in block.flags:
            src, dst, event = key
            self.found(f"set_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{event}) while the "
                       f"same event set at {block.marks[key][1]} is not yet waited for (a 1-bit "
                       "flag: the second set is lost)")
