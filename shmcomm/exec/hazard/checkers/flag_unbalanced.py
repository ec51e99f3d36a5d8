"""``flag-unbalanced``: a ``set_flag`` never consumed by ``wait_flag`` when the kernel returns
(``wait_flag`` without ``set_flag`` raises at once, in every mode)."""

from __future__ import annotations

from ....types import PIPE_NAMES
from .base import Checker


class FlagUnbalanced(Checker):
    name = "flag-unbalanced"
    decides = "a set_flag never consumed when the kernel returns"
    starts_on = frozenset({"set_flag"})  # a block that set no flag has none left over

    def finish(self) -> None:
        block = self.block
        if block.flags:
            src, dst, ev = key = min(block.flags)
            self.found(f"set_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{ev}) is never "
                       "consumed by wait_flag before the kernel returns",
                       site=block.marks.get(key, (0, ""))[1] or None)
