"""``arrival-count``: a kernel declared (``ctx.expect_blocks``) an intra-rank arrival count
that the blocks taking part cannot match: more than the launch has (a hang), or fewer than the
blocks of this rank that declare it (the count is reached before every one arrived). A count
equal to the blocks that take part is right even when the launch has more blocks that do not
call the kernel. The kernels of :mod:`shmcomm.kernels` declare theirs."""

from __future__ import annotations

from ..report import report
from .base import Checker


class ArrivalCount(Checker):
    name = "arrival-count"

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        real = self.agent.block_num
        # the blocks of this rank that declared this count in this launch (shared by them)
        takers = self.block.launch.takers.setdefault((kernel, param, count), set())
        takers.add(self.agent.block_idx)
        if count > real:
            raise report(self.agent, self.name,
                         f"{kernel}({param}={count}) in a launch of {real} blocks: its intra-rank "
                         "arrival count can never be reached (a hang)")
        if len(takers) > count:
            raise report(self.agent, self.name,
                         f"{kernel}({param}={count}) in a launch of {real} blocks, but "
                         f"{len(takers)} blocks of this rank take part (blocks "
                         f"{sorted(takers)}): its intra-rank arrival count is reached before "
                         "every block arrived")
