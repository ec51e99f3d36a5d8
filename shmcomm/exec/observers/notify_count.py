"""``notify-count``: how many TNOTIFYs each rank's blocks issued in a run.

The worked example of the observer seam (:mod:`shmcomm.core.observer`): one file, one line in
:data:`shmcomm.exec.observers.OBSERVERS`. Each block counts its own notifies in its thread; the
rank adds them to its rank's counter in the control segment's shared area at the launch's end
(an atomic add: a stream launch may end beside another); the launcher reads the counters back
once every rank has ended and reports them, on a passing run too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.observer import BlockObserver, Observer, RankObserver


class _Block(BlockObserver):
    def __init__(self, agent: Any) -> None:
        super().__init__(agent)
        self.count = 0

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.count += 1


class _Rank(RankObserver):
    def __init__(self, rt: Any, word: int) -> None:
        super().__init__(rt)
        self.word = word  # this rank's counter (an address in the control segment)
        self.blocks: list[_Block] = []

    def block(self, agent: Any) -> _Block:
        b = _Block(agent)
        self.blocks.append(b)
        return b

    def launch_end(self) -> None:
        # blocks of launches still running (streams) count at their own launch's end
        ended = [b for b in self.blocks if b.agent not in self.rt.agents]
        self.blocks = [b for b in self.blocks if b not in ended]
        if total := sum(b.count for b in ended):
            self.rt.ctl.fetch_add(self.word, total)  # the rank's counter, shared


class NotifyCount(Observer):
    """Counts the TNOTIFYs of each rank's blocks; ``counts`` holds them after the run."""

    name = "notify-count"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.shared_bytes = 4 * config.nranks  # one int32 counter per rank
        self.counts: list[int] = []

    @classmethod
    def max_shared_bytes(cls, nranks: int) -> int:
        return 4 * nranks

    def _words(self, ctl: Any) -> np.ndarray:
        return ctl.extra_words(self.shared_offset, self.config.nranks)

    def prepare(self, ctl: Any) -> None:
        self._words(ctl)[:] = 0

    def rank(self, rt: Any) -> _Rank:
        return _Rank(rt, rt.ctl.extra_base + self.shared_offset + 4 * rt.rank)

    def collect(self, ctl: Any, failures: list) -> None:
        self.counts = self._words(ctl).tolist()

    def summary(self) -> str:
        return "notifies per rank: " + ", ".join(f"{r}: {n}" for r, n in enumerate(self.counts))
