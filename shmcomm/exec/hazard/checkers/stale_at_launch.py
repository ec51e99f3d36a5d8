"""``stale-at-launch``: a TWAIT on a signal word of this rank (in its signal matrix, or in an
``rt.alloc`` array its blocks waited on before) is satisfied by a value the word already held
when the launch started, left from an earlier launch (a relaunch without
``rt.reset_signals()``). Values the host stored itself since the last launch (credits) are not
stale, and nothing is on the first launch.

Only checked when the launch-time snapshot is clean: no peer rank had started this launch when
it was taken (:meth:`~shmcomm.exec.hazard.model.HazardRankModel.launch_start`).

Advisory: a launch may mean to find what an earlier launch left (a flag that says "ready once,
for good", a count whose threshold the kernel computes from state the checker cannot see), so
the finding is printed only beside a failure that something else proved.
"""

from __future__ import annotations

from typing import Any

from ....types import CMP_FUNCS, CMP_SYMBOLS
from .base import Checker


class StaleAtLaunch(Checker):
    name = "stale-at-launch"
    exact = False
    decides = "a TWAIT satisfied by a value left from an earlier launch"

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        launch = self.block.launch
        stale_words = launch.stale
        ptr = sig.ptr
        if ptr.rank != self.agent.rank:
            return
        if ptr.offset >= self.agent.rt.config.signal_bytes:  # an rt.alloc word: snapshot it next
            launch.waited.update(w.offset for w in sig.words)
        if stale_words is None:
            return
        fn = CMP_FUNCS[cmp]
        words = sig.words
        if not all(fn(w.load(), value) for w in words):
            return  # it really waits: nothing already satisfied it
        stale = [stale_words.get(w.offset, 0) for w in words]
        if any(stale) and all(fn(v, value) for v in stale):
            self.found(f"TWAIT({CMP_SYMBOLS[cmp]} {value}) is satisfied by "
                       f"{stale if len(stale) > 1 else stale[0]}, which the signal already held "
                       "when this launch started (left from an earlier launch: "
                       "rt.reset_signals() missing, or a threshold that does not count launches)",
                       ptr.offset, ptr.rank)
