"""The eager model: every pipe operation completes when issued; stores are visible at once.

It wants no scalar hooks (``agent.hooks`` stays ``None``), so ``TNOTIFY`` and ``TWAIT`` run
their fast paths. This is what pto-isa's CPU simulator does, with real atomics and real
concurrency added. A run with a trace file records the instructions through the observer seam
(:class:`~shmcomm.exec.trace.TraceObserver`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.model import BlockModel, RankModel, StepClock, atomic_add

if TYPE_CHECKING:
    from ..core.agent import Agent
    from ..core.gm import GlobalTensor
    from ..core.runtime import RankRuntime
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
    """No launch state, no hooks. ``step_clock``: a scheduled run's (the blocks' trace, when
    the run writes one, is stamped with its steps)."""

    def __init__(self, rt: RankRuntime, step_clock: StepClock | None = None) -> None:
        super().__init__(rt)
        self.step_clock = step_clock

    def block(self, agent: Agent) -> BlockModel:
        if agent.tracer is not None and self.step_clock is not None:  # a replay: the same trace
            agent.tracer.use_clock(self.step_clock.now)
        return EagerBlockModel(agent)
