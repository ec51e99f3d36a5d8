"""The eager model: every pipe operation completes when issued; stores are visible at once.

It wants no scalar hooks (``agent.hooks`` stays ``None``), so ``TNOTIFY`` and ``TWAIT`` run
their fast paths. This is what pto-isa's CPU simulator does, with real atomics and real
concurrency added. A run with a trace file (``Config.trace``) gets the traced variant, which
observes the scalar instructions through the same seam and records them (:mod:`.trace`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.model import BlockModel, RankModel, StepClock, atomic_add
from ..types import CMP_SYMBOLS, PIPE_NAMES
from .trace import HostTrace, Tracer, block_tracer, close_block

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


class TracedEagerBlockModel(EagerBlockModel):
    """Eager execution that records every instruction the seam shows it in the run's trace."""

    def __init__(self, agent: Agent, tracer: Tracer) -> None:
        super().__init__(agent)
        self.tracer = tracer

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            close_block(self.tracer, failed=False)

    def stop(self) -> None:
        close_block(self.tracer, failed=True)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        self.tracer.flag("set_flag", PIPE_NAMES[src], PIPE_NAMES[dst], event)
        super().set_flag(src, dst, event)

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        self.tracer.flag("wait_flag", PIPE_NAMES[src], PIPE_NAMES[dst], event)
        super().wait_flag(src, dst, event)

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.tracer.notify(sig, value, op)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.wait(sig, value, CMP_SYMBOLS[cmp])

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.waited(sig)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.test(sig, value, CMP_SYMBOLS[cmp])

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        self.tracer.copy_begin(op, dst, src)

    def copy_end(self, op: str) -> None:
        self.tracer.copy_end(op)


class EagerRankModel(RankModel):
    """No launch state, no hooks (unless the run writes a trace). ``step_clock``: a scheduled
    run's (the blocks' trace is stamped with its steps; the scheduler writes the host's)."""

    def __init__(self, rt: RankRuntime, step_clock: StepClock | None = None) -> None:
        super().__init__(rt)
        cfg = rt.config
        self.step_clock = step_clock
        self.host_trace = (HostTrace(cfg.trace, rt.ctl.segment.name, rt.rank)
                           if cfg.trace and step_clock is None else None)

    def launch_start(self) -> None:
        if self.host_trace:
            self.host_trace.launch_start()

    def launch_end(self) -> None:
        if self.host_trace:
            self.host_trace.launch_end(self.rt.launches)

    def block(self, agent: Agent) -> BlockModel:
        tracer = block_tracer(agent)
        if tracer is None:
            return EagerBlockModel(agent)
        if self.host_trace is not None:
            self.host_trace.block(agent)
        if self.step_clock is not None:  # a replay gives the same trace
            tracer.use_clock(self.step_clock.now)
        agent.hooks = model = TracedEagerBlockModel(agent, tracer)
        return model
