"""``arrival-count``: a kernel declared (``ctx.expect_blocks``) that its intra-rank arrival count
assumes a block count other than the launch's real one: it hangs (more) or is reached before
every block arrived (fewer). The kernels of :mod:`shmcomm.kernels` declare theirs."""

from __future__ import annotations

from ..report import report
from .base import Checker


class ArrivalCount(Checker):
    name = "arrival-count"

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        real = self.agent.block_num
        if count != real:
            how = ("can never be reached (a hang)" if count > real
                   else "is reached before every block arrived")
            raise report(self.agent, self.name,
                         f"{kernel}({param}={count}) in a launch of {real} blocks: its intra-rank "
                         f"arrival count {how}")
