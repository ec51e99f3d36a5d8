"""``arrival-count`` (exact) and ``arrival-takers`` (advisory): a kernel's declared
(``ctx.expect_blocks``) intra-rank arrival count against the launch.

``arrival-count``: the count is more than the launch has blocks, so the wait for it can never be
satisfied (a hang). ``arrival-takers``: more blocks of this rank declared the same count than it
counts, so it may be reached before every one arrived; advisory, because the declaration does
not name the signal region, and two groups of blocks may each run their own barrier on their
own region with the same count (``CentralBarrier(signal_base=..., num_blocks=k)``). A count
equal to the blocks that take part is right even when the launch has more blocks that do not
call the kernel. The kernels of :mod:`shmcomm.kernels` declare theirs."""

from __future__ import annotations

from .base import Checker


class ArrivalCount(Checker):
    name = "arrival-count"
    decides = "a declared arrival count above the launch's blocks: the wait can never hold"

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        real = self.agent.block_num
        if count > real:
            self.found(f"{kernel}({param}={count}) in a launch of {real} blocks: its intra-rank "
                       "arrival count can never be reached (a hang)")


class ArrivalTakers(Checker):
    name = "arrival-takers"
    exact = False
    decides = "more blocks declare an arrival count than it counts (two groups may share it)"

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        # the blocks of this rank that declared this count in this launch (shared by them)
        takers = self.block.launch.takers.setdefault((kernel, param, count), set())
        takers.add(self.agent.block_idx)
        if len(takers) > count:
            self.found(f"{kernel}({param}={count}) in a launch of {self.agent.block_num} blocks, "
                       f"but {len(takers)} blocks of this rank take part (blocks "
                       f"{sorted(takers)}): unless they use separate signal regions, its "
                       "intra-rank arrival count is reached before every block arrived")
