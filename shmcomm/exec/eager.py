"""The eager model: every pipe operation completes when issued; stores are visible at once.

It wants no scalar hooks (``agent.hooks`` stays ``None``), so ``TNOTIFY`` and ``TWAIT`` run
their fast paths. This is what pto-isa's CPU simulator does, with real atomics and real
concurrency added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.model import BlockModel, RankModel, atomic_add

if TYPE_CHECKING:
    from ..core.agent import Agent
    from ..core.gm import GlobalTensor
    from ..core.tile import Tile


class EagerBlockModel(BlockModel):
    """Pipe work completes at issue, so ``pipe_barrier`` and ``dsb`` have nothing to do."""

    acts_on_fences = False

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        rows, cols = src.rows, src.cols
        tile.valid = (rows, cols)
        src.read_into(tile.array[:rows, :cols])

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        data = tile.array[:dst.rows, :dst.cols]
        if atomic:
            atomic_add(self.agent, dst, data)
        else:
            dst.write_from(data)


class EagerRankModel(RankModel):
    """No launch state, no hooks."""

    def block(self, agent: Agent) -> BlockModel:
        return EagerBlockModel(agent)
