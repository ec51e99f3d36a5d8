"""``phase-reuse``: a block starts a new round of a protocol (it notified since) and then waits
``GE`` / ``GT`` on a slot it already waited on in this launch, with a threshold the earlier wait
already reached: the new round waits for nothing (the seed's ``DeviceBarrier`` called twice
ignores ``phase``). A notify to the slot by any block of the rank in between forgets the earlier
wait; a second wait with no notify of the block in between is only redundant, not a new round.

Advisory: a wait that holds before it starts is also how a correct kernel re-checks a condition
it knows holds (a re-wait after a notify of its own, a wait on a count that only grows), so the
finding is printed only beside a failure that something else proved.
"""

from __future__ import annotations

from typing import Any

from ....types import CMP_FUNCS, CMP_SYMBOLS, WaitCmp
from .base import Checker

_COUNTING = (WaitCmp.GE, WaitCmp.GT)


class PhaseReuse(Checker):
    name = "phase-reuse"
    exact = False
    decides = "a new round waits on a slot with a threshold an earlier wait reached"

    def __init__(self, block: Any) -> None:
        super().__init__(block)
        # slot -> (threshold reached, notifies to it, this block's notifies) at the last wait
        self.waited: dict[tuple, tuple[int, int, int]] = {}
        self.mine = 0  # notifies this block made

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.mine += 1
        sets = self.block.launch.sets
        key = (sig.ptr.rank, sig.ptr.offset)
        sets[key] = sets.get(key, 0) + 1

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if cmp not in _COUNTING:
            return
        ptr = sig.ptr
        words = sig.words
        key = (ptr.rank, ptr.offset, len(words))
        thr = value if cmp == WaitCmp.GE else value + 1
        notifies = self.block.launch.sets.get((ptr.rank, ptr.offset), 0)
        prev = self.waited.get(key)
        fn = CMP_FUNCS[cmp]
        if prev is not None and prev[1] == notifies:
            if thr <= prev[0] and prev[2] != self.mine and all(fn(w.load(), value) for w in words):
                self.found(f"TWAIT({CMP_SYMBOLS[cmp]} {value}) is satisfied before it starts: this "
                           f"block already waited on this slot for >= {prev[0]} earlier in this "
                           "launch, so if this is a new round it waits for nothing (a second "
                           "phase needs its own slot, a reset, or a higher threshold)",
                           ptr.offset, ptr.rank)
            thr = max(thr, prev[0])
        self.waited[key] = (thr, notifies, self.mine)
