"""The execution-model seam: how a block executes, and what a model learns of it.

A run has one execution model, built once in the launcher from the configuration
(:func:`shmcomm.exec.compose.compose`): a :class:`RunModel`, which holds the launcher's part of
the run (a shared area set up before the ranks start, pipes it reads while they run, what it
reports at the end) and makes, in each rank process, the rank's :class:`RankModel`. A model that
is not a mode plugs in as ``shmcomm.run(host, ..., model=MyRunModel(config))`` (or
``Launcher(config, host, args, model=...)`` of :mod:`shmcomm.launch.supervisor`; a bare
:class:`RankModel` subclass is taken too). In each rank process the :class:`RankModel`
makes, at every launch, one :class:`BlockModel` per block, bound to the block's agent once:

* ``agent.pipes`` is the block model: every pipe instruction (``TLOAD``, ``TSTORE``,
  ``set_flag``, ``wait_flag``, ``pipe_barrier``, ``dsb``, ``dcci``) goes to it (``pipe_barrier``
  and ``dsb`` through ``agent.fences``, ``None`` for a model in which they do nothing);
* tile vector instructions go to ``vector`` (``PIPE_V``), and the asynchronous DMA engine's
  copies to ``dma_post`` / ``dma_wait`` / ``dma_test`` (no pipe instruction drains them);
* ``agent.hooks`` is the block model too when it wants to see the scalar instructions
  (``notify``, ``wait`` / ``waited``, ``test``, ``copy_begin`` / ``copy_end``,
  ``expect_blocks``, ``gm_access``, ``async_issue`` / ``async_complete``), else
  ``None``: the eager model's ``TNOTIFY`` and ``TWAIT`` pay one ``is None`` check for the seam.

Models learn everything from these calls: never from profilers, frames or code objects. A new
semantics, interleaving or observer is one more :class:`RunModel` with its pair of rank and
block models, put together with the others in :mod:`shmcomm.exec.compose`; a new checker is one
more observer inside the hazard model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import Aborted, ShmcommError, WaitTimeout
from ..types import PIPE_ALL, PIPE_NAMES

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..config import Config
    from ..errors import Failure
    from .agent import Agent
    from .gm import GlobalTensor
    from .runtime import RankRuntime
    from .tile import Tile


class StepClock(Protocol):
    """The clock a scheduled interleaving gives the semantics it drives: time is the run's
    step count, so deferred work falls due some steps after issue (and a replay retires it at
    the same steps). A semantics on a step clock draws no jitter: the schedule is the jitter."""

    def now(self) -> float:
        """The run's step."""
        ...

    def due(self, rng: Any) -> float:
        """When work issued now falls due (``rng``: the block's seeded stream)."""
        ...


class BlockModel:
    """One block's execution: pipe work (always called) and scalar hooks (called when
    ``agent.hooks`` is this object). The base class keeps the event-flag bookkeeping.

    ``acts_on_fences``: whether ``barrier`` / ``dsb`` do anything; when not, ``pipe_barrier`` and
    ``dsb`` skip the call (``agent.fences`` is ``None``). ``pending``: whether work the block
    issued is still to complete (a deferring model's; an interleaving keeps such a block alive
    until ``retire_due`` has retired it all)."""

    acts_on_fences = True
    pending = False

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.flags: set[tuple[int, int, int]] = set()

    @property
    def tracer(self) -> Any:
        """The block's trace writer when the run writes a trace (the trace observer's), else
        ``None``: a scheduled run flushes it at every step, reports name it."""
        return self.agent.tracer

    # -- lifecycle (the block's thread) ------------------------------------------------------

    def start(self) -> None:
        """Just before the kernel runs."""

    def finish(self) -> None:
        """The kernel returned: complete everything still queued."""
        self.barrier(PIPE_ALL)

    def stop(self) -> None:
        """The kernel raised (``finish`` is not called)."""

    def idle(self) -> None:
        """Called while the block waits: a deferring model may retire work here."""

    def retire_due(self) -> None:
        """Retire the work due by the model's clock now (a scheduled interleaving calls it at
        the block's scheduling points)."""

    # -- pipe instructions -------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:  # MTE2: GM -> UB
        raise NotImplementedError

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:  # MTE3: UB -> GM
        raise NotImplementedError

    def set_flag(self, src: int, dst: int, event: int) -> None:
        self.flags.add((src, dst, event))

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        key = (src, dst, event)
        if key not in self.flags:
            raise ShmcommError(
                f"wait_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{event}) on "
                f"{self.agent.where()}: no set_flag is pending for this event; on hardware "
                "the pipe would stall forever"
            )
        self.flags.discard(key)

    def barrier(self, pipe: int) -> None:
        pass

    def dsb(self, mode: int) -> None:
        pass

    def mark(self, pipe: int) -> Any:
        """A mark of the work issued to ``pipe`` so far (``completed`` takes it)."""
        return None

    def completed(self, pipe: int, mark: Any) -> bool:
        """Whether the work issued to ``pipe`` up to ``mark`` has completed (a model that
        completes work at issue: always)."""
        return True

    def notify_drain(self) -> None:
        """The ``pipe_barrier(PIPE_ALL)`` that ends every ``TNOTIFY`` (a2a3): it runs after the
        signal is out, so a model may let queued work finish at its own pace here."""
        self.barrier(PIPE_ALL)

    def dcci(self, ptr: Any, mode: int) -> None:
        pass

    # -- the vector pipe (PIPE_V: the tile vector instructions) ------------------------------

    def vector(self, op: Any) -> None:
        """A tile vector instruction (``op``: a :class:`~shmcomm.core.tile.VectorOp`) issued to
        ``PIPE_V``; a model that completes work at issue runs it now."""
        op.run()

    # -- the DMA engine (TPUT_ASYNC / TGET_ASYNC): outside the AI core, no pipe drains it ----

    def dma_post(self, copy: Any) -> None:
        """A ``DmaCopy`` was posted; a model that completes work at issue lands it now."""
        copy.land()

    def dma_wait(self, copy: Any) -> None:
        """``AsyncEvent.Wait``: ``copy`` and every earlier copy of its session land (quiet)."""
        copy.session.land_upto(copy.seq)

    def dma_test(self, copy: Any) -> bool:
        """``AsyncEvent.Test``: whether ``copy`` has landed (landing what the engine finished)."""
        if not copy.landed:
            copy.session.land_upto(copy.seq)
        return True

    # -- scalar hooks (only when agent.hooks is this model) ----------------------------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        """Before ``TNOTIFY`` writes ``value`` with ``op`` to ``sig``."""

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        """At the start of ``TWAIT(sig, value, cmp)``, before its first check."""

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        """``TWAIT(sig, value, cmp)`` returned: the condition held."""

    def test(self, sig: Any, value: int, cmp: int) -> None:
        """Before ``TTEST(sig, value, cmp)`` reads."""

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        """``TPUT`` / ``TGET`` / ``TBROADCAST`` / ``TSCATTER`` / ``TGATHER`` starts moving ``src``
        to ``dst`` (a broadcast: one call per destination, all before its work). ``TREDUCE``
        combines rather than copies: its ``TLOAD`` / ``TSTORE`` reach the model as pipe work."""

    def copy_end(self, op: str) -> None:
        """The copy started by the matching ``copy_begin`` has issued all its work."""

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        """A kernel declares that its intra-rank arrival count assumes ``count`` blocks."""

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        """A scalar GM instruction ``op`` (a load, store, atomic store or atomic add of one
        element) is about to access ``nbytes`` bytes at ``ptr`` (a ``GMPtr``)."""


    def async_issue(self, event: Any) -> None:
        """Right after ``TPUT_ASYNC`` / ``TGET_ASYNC`` posted ``event``'s copy (``event.copy``:
        its ``dst`` and ``src``; ``None`` for an empty copy) to the DMA engine."""

    def syncall_arrive(self, word: Any, target: int) -> None:
        """``SYNCALL`` added this block's arrival to its counter ``word`` (a ``Word``); the round
        ends when the counter reaches ``target``."""

    def syncall_wait(self, word: Any, target: int) -> None:
        """``SYNCALL`` is about to wait until its counter ``word`` reaches ``target``."""

    def syncall_done(self, word: Any, target: int) -> None:
        """``SYNCALL``'s wait returned: every participant of the round ending at ``target``
        arrived."""

    def async_complete(self, event: Any) -> None:
        """``event.Wait`` returned, or ``event.Test`` returned True for the first time: the copy
        (and every earlier one of its session) has landed."""


class RankModel:
    """The execution model in one rank process: launch-level state and the block factory.

    ``concurrent_launches``: whether launches of one rank may run at the same time (streams,
    several host threads); a model that runs one agent at a time says no."""

    concurrent_launches = True
    advice: Any = None  # the advisory checkers' findings of the run, when the model keeps them
    # a model that runs one agent at a time may still take stream launches if they start on
    # the host thread (which joins each with host_join_launch)
    inline_streams = False

    def __init__(self, rt: RankRuntime) -> None:
        self.rt = rt

    def launch_issued(self, launch: Any, stream: Any) -> None:
        """The host issued ``launch`` (a :class:`~shmcomm.core.runtime.Launch`) on ``stream``;
        it starts later, after the stream's earlier launches."""

    def launch_starting(self, launch: Any) -> None:
        """``launch`` is about to start: ``launch_start`` (and its ``block`` calls) follow."""

    def launch_start(self) -> None:
        """Before a launch's blocks start (and before peers can see its launch count)."""

    def launch_end(self) -> None:
        """After every block of the launch has returned or failed."""

    def barrier_enter(self) -> None:
        """The host calls ``rt.barrier()``, before its arrival is visible to the other hosts."""

    def barrier_exit(self) -> None:
        """The host leaves ``rt.barrier()``: every host has arrived."""

    def block(self, agent: Agent) -> BlockModel:
        """The block model of ``agent``; also sets ``agent.hooks`` if it wants scalar hooks."""
        raise NotImplementedError

    def host_join(self) -> None:
        """The host started the launch's block threads and is about to join them."""

    def host_join_launch(self, first: int, blocks: int) -> None:
        """The host is about to join the launch of ``blocks`` blocks in slots from ``first``
        (a stream launch of an ``inline_streams`` model)."""
        self.host_join()

    def launch_joined(self, launch: Any) -> None:
        """The host joined ``launch`` (a :class:`~shmcomm.core.runtime.Launch`: ``wait()``,
        ``synchronize()``, or the rank's end): every block of it has ended."""

    def host_wait(self, site: Any, value: int, cmp: int) -> None:
        """The host is about to wait (``rt.barrier``) until ``site``'s words ``<cmp> value``."""

    def launch_poll(self, launch: Any) -> bool:
        """The host asks whether ``launch`` (started) has ended (``Launch.done``): whether every
        one of its blocks did. A model that runs one agent at a time lets the blocks run here."""
        return not any(t.is_alive() for t in launch.threads)

    def close(self) -> None:
        """The host function returned or raised (after the run's abort flag, if it failed): the
        rank's last act in the run."""


class RunModel:
    """The run's execution model on the launcher's side, and the factory of its rank models.

    Made once in the launcher, before the rank processes start (they inherit it, or a pool's
    ranks receive it pickled); called with each rank's ``rt`` in the rank process, it makes that
    rank's :class:`RankModel` (``rank_model(rt)`` unless a subclass overrides ``__call__``).
    Every launcher-side hook is declared here with a default that does nothing, so the launcher
    calls each one directly and a model overrides only what it uses:

    * ``shared_bytes``: bytes of the control segment's shared area the model keeps its
      cross-process state in (at ``ctl.extra_base``), set up by ``prepare(ctl)`` before the
      ranks start and read back by ``collect(ctl, failures)`` after they end;
    * ``conns``: connections the launcher watches while the run goes, each handed to
      ``receive(conn)`` when readable (a model that reports from the launcher: the race
      detector); ``finish()`` returns what it found at the end of the run;
    * ``schedule`` (what a scheduled run followed, after ``collect``) and ``hint(host, args)``
      (how to replay the run) go into the run's error;
    * ``config``: the run's configuration as the model runs it (a replay takes the recorded
      run's seed); ``set_trace(path)`` moves the trace a model writes itself;
    * ``use_pool(state, rank)``: on a pool, the state its ranks inherited at their fork (the
      race detector's clocks and pipes), given in the launcher (``rank`` None) before
      ``prepare`` and in each rank process before the run;
    * ``first_rank``: after ``prepare``, the rank the run needs first (a scheduled run's first
      agent's), which the launcher starts before the others; ``None``: rank order.
    * ``started()``: every rank process has started (the launcher drops the pipe ends only the
      ranks need); ``read_deadline``: the run's deadline (``time.monotonic()``), set by the
      launcher: no read of ``conns`` waits past it;
    * ``one_at_a_time``: the model runs one agent of the whole run at a time (a scheduled run);
      the launcher then keeps every rank on one CPU (``pin_ranks``), its choice in
      ``turn_cpu`` (``None``: the ranks are spread as in any other run).
    """

    shared_bytes = 0
    schedule: Any = None
    execution: Any = None  # the Execution it runs (compose sets it; None: a model of its own)
    first_rank: int | None = None
    one_at_a_time = False
    turn_cpu: int | None = None
    read_deadline: float | None = None

    def __init__(self, config: Config,
                 rank_model: Callable[[Any], RankModel] | None = None) -> None:
        self.config = config
        self.rank_model = rank_model
        self.conns: list[Connection] = []

    def __call__(self, rt: RankRuntime) -> RankModel:
        """The rank model of ``rt``'s rank (in the rank process)."""
        if self.rank_model is None:
            raise NotImplementedError(f"{type(self).__name__} makes no rank model: give "
                                      "rank_model or override __call__")
        return self.rank_model(rt)

    def prepare(self, ctl: Any) -> None:
        """Before the ranks start (or a pool's next run): set up the shared area."""

    def started(self) -> None:
        """Every rank process has started (after ``prepare``; not on a pool)."""

    def use_pool(self, state: Any, rank: int | None) -> None:
        """Run on a pool: ``state`` was made before its ranks forked (``rank``: None in the
        launcher, else the rank process this is called in)."""

    def receive(self, conn: Connection) -> list[Failure]:
        """``conn`` (one of ``conns``) is readable: take what it holds; failures to report now."""
        return []

    def finish(self) -> list[Failure]:
        """Every rank has ended: what the model found in the run (none: ``[]``)."""
        return []

    def collect(self, ctl: Any, failures: list[Failure]) -> None:
        """Before the run's memory goes: read the shared area back; may add to ``failures``."""

    def hint(self, host: Any, args: tuple) -> str:
        """A line telling how to reproduce a failed run (``""``: nothing to add)."""
        return ""

    def summary(self) -> str:
        """What the run's observers report, on a passing run too (``""``: nothing)."""
        return ""

    def set_trace(self, path: str) -> None:
        """The run's trace goes to ``path`` (the launcher writes it beside the final path)."""
        self.config = self.config.replace(trace=path)


def atomic_add(agent: Agent, dst: GlobalTensor, data: np.ndarray) -> None:
    """``dst += data``, atomic with respect to every other ``atomic_add`` on the same memory,
    from any block of any rank (the transport's data locks; the add itself is numpy)."""
    p = dst.ptr
    transport = agent.rt.windows.transport
    abort = agent.ctl.aborted
    try:
        if dst.native:  # a native copy adds itself (pto-isa's +=): under the lock of all it spans
            nat: Any = dst  # (shmcomm.native.tilecopy.NativeTensor)
            if nat.landing is not None:
                off, nbytes = nat.span
                with transport.data_lock(p.rank, off, nbytes, agent.wait_timeout, abort):
                    nat.write_from(data)
            return
        with transport.data_lock(p.rank, p.offset, dst.extent_bytes, agent.wait_timeout, abort):
            if p.rank in transport.unmapped:
                transport.accumulate(p.rank, p.offset, dst.pitch_bytes(), data)
                return
            view = dst.view2d()
            np.add(view, data, out=view, casting="unsafe")
    except (Aborted, WaitTimeout) as exc:
        raise type(exc)(f"TSTORE(AtomicAdd): {agent.where()} {exc}") from None
