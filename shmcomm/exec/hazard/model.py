"""The hazard model of a block (sub-models ``pipes``, ``visibility``, ``lines``, ``jitter``,
``checkers``; see :mod:`shmcomm.exec.hazard`), and of a rank (the launch-time snapshot).

Pipes. ``TLOAD`` queues on ``PIPE_MTE2``, ``TSTORE`` on ``PIPE_MTE3``, a tile vector
instruction (:mod:`shmcomm.vector`) on ``PIPE_V``; each pipe retires in
order, an item no earlier than its seeded due time (``hazard_delay`` x U(0.5, 1.5)) unless a sync
forces it. A load reads GM and fills the tile when it retires, a store reads the tile when it
retires. ``set_flag(src, dst, e)`` records how much ``src`` work was issued; ``wait_flag`` then
makes ``dst`` wait for it: for a queued ``dst`` (MTE2 / MTE3) a fence item joins ``dst``'s
queue, so later ``dst`` work retires only after that ``src`` work (the scalar unit does not block);
for any other ``dst`` (S, V, M, ...: the Python code after it may read the tile at once) the
``src`` work retires now. A ``src`` of V waits for the queued vector work.
``pipe_barrier(p)`` retires everything issued to ``p`` (every pipe for ``PIPE_ALL``).
TNOTIFY and signal reads are scalar and happen at once. While a wait blocks, ``idle`` retires
what is due; the kernel's end retires everything. While work is pending the agent's
``A_PENDING`` word is 1, so the deadlock watch waits for the retirement instead of reporting.

The DMA engine (``TPUT_ASYNC`` / ``TGET_ASYNC``) is not a pipe: :mod:`.dma`.
Visibility and lines: :mod:`.visibility`. Jitter: :mod:`.jitter`. Checkers: :mod:`.checkers`,
each an observer of this model's events. Trace: :mod:`shmcomm.exec.trace`.
"""

from __future__ import annotations

import random
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import parse_hazards
from ...core import control as C
from ...core.heap import SymmetricArray
from ...core.model import BlockModel, RankModel, StepClock, atomic_add
from ...types import PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_NAMES, PIPE_V
from .cache import EVICT_FACTOR, ScalarCache
from .checkers import NO_OBSERVERS, Observers
from .dma import AsyncEngine
from .jitter import Jitter
from .report import Advice, kernel_site
from .visibility import LineModel, RemoteStores

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...core.agent import Agent
    from ...core.gm import GlobalTensor
    from ...core.runtime import RankRuntime
    from ...core.tile import Tile

_LOAD, _STORE, _FENCE, _VECTOR = 0, 1, 2, 3
_KIND_NAMES = ("TLOAD", "TSTORE", "fence", "vector")
_QUEUED = (PIPE_MTE2, PIPE_MTE3)  # pipes that wait in their queue for a wait_flag's event
# pipes whose work is queued: V too (tile vector instructions), but a wait_flag(src, PIPE_V)
# retires src's work at once, since Python code after it may read the tile (tile.array)
_PIPES = (PIPE_MTE2, PIPE_MTE3, PIPE_V)
_DSB_ALL, _DSB_DDR = 0, 1
_NO_QUEUE: tuple = ()  # the queue of a pipe that nothing was issued to yet
_perf = time.perf_counter


class LaunchState:
    """What the checkers of one rank remember about the current launch."""

    __slots__ = ("launch", "stale", "sets", "takers", "waited")

    def __init__(self, launch: int, stale: dict[int, int] | None,
                 waited: set[int] | None = None) -> None:
        self.launch = launch
        self.stale = stale  # offset -> non-zero value at launch; None when the snapshot is unsafe
        self.sets: dict[tuple[int, int], int] = {}  # (rank, offset) -> notifies by this rank's blocks
        # (kernel, param, count) -> the blocks that declared that arrival count (expect_blocks)
        self.takers: dict[tuple[str, str, int], set[int]] = {}
        # offsets of this rank's words outside the signal matrix (rt.alloc arrays) its blocks
        # waited on, in any launch: the next launch's snapshot covers them
        self.waited: set[int] = set() if waited is None else waited


class HazardRankModel(RankModel):
    """Hazard mode in one rank process: the launch-time snapshot, and a block model per block.

    ``step_clock``: a scheduled interleaving's clock (:class:`~shmcomm.core.model.StepClock`):
    due times in steps, no jitter, and no wall-clock host trace (the scheduler writes the
    run's trace)."""

    def __init__(self, rt: RankRuntime, step_clock: StepClock | None = None) -> None:
        super().__init__(rt)
        self.launch = LaunchState(0, None)
        cfg = rt.config
        self.step_clock = step_clock
        self.checking = "checkers" in parse_hazards(cfg.hazards)  # stale-at-launch's snapshot
        self.host_stored: list[tuple[int, int]] = []  # byte ranges the host stored since a launch
        self.advice = Advice()  # the advisory checkers' findings, sent with the rank's result
        SymmetricArray.observers.append(self._host_store)

    def _host_store(self, arr: SymmetricArray, key: Any) -> None:
        where = arr.stored_range(key)
        if where is not None and where[0] == self.rt.rank:
            self.host_stored.append(where[1:])

    def launch_start(self) -> None:
        """Remember this rank's non-zero signal words (for ``stale-at-launch``).

        The words: the signal matrix, and the words of ``rt.alloc`` arrays that blocks of this
        rank waited on in earlier launches. A value the host stored itself since the last launch
        (credits set before the launch) is not stale, and nothing is on the first launch.
        Taken before this rank publishes its launch count, and kept only if no peer had published
        the same launch count by the end of the snapshot: then no peer block of this launch can
        have notified yet, so every non-zero word is left over from earlier. (Of two racing ranks
        at least one always gets a clean snapshot.)
        """
        rt = self.rt
        waited = self.launch.waited
        if not (self.checking and rt.launches > 1 and rt.running_launches <= 1):
            # no snapshot could be kept (or no checker reads it): skip the scan of the matrix
            self.host_stored = []
            self.launch = LaunchState(rt.launches, None, waited)
            return
        sigs = rt.signals.copy()  # peers may write while we look: scan a copy
        stale = {int(i) * 4: int(sigs[i]) for i in sigs.nonzero()[0]}
        if waited:
            win = rt.window(rt.rank)
            for off in waited:
                v = int(win[off:off + 4].view(np.int32)[0])
                if v:
                    stale[off] = v
        for lo, hi in self.host_stored:
            for off in [o for o in stale if lo <= o < hi]:
                del stale[off]
        self.host_stored = []
        ctl = rt.ctl
        # another launch of this rank running now (a stream) may have notified already
        clean = rt.launches > 1 and rt.running_launches <= 1 and all(
            ctl.load_rank(r, C.R_LAUNCHES) < rt.launches for r in range(rt.nranks) if r != rt.rank)
        self.launch = LaunchState(rt.launches, stale if clean else None, waited)

    def block(self, agent: Agent) -> BlockModel:
        model = HazardBlockModel(agent, self)
        if model.observes():
            agent.hooks = model
        return model


class _Stream:
    """The random stream of a block's due times, made at its first draw: a block that queues
    nothing draws none (seeding a stream costs ~4 us, paid while the host holds the turn of a
    scheduled run). Its seed is the first draw of the block's own stream (``agent.rng``),
    taken then too when ``seed`` is ``None``: that stream is seeded only if something draws."""

    __slots__ = ("seed", "agent", "rng")

    def __init__(self, seed: int | None, agent: Agent) -> None:
        self.seed, self.agent = seed, agent
        self.rng: random.Random | None = None

    def random(self) -> float:
        rng = self.rng
        if rng is None:
            seed = self.seed
            if seed is None:
                seed = self.agent.rng.getrandbits(64)
            rng = self.rng = random.Random(seed)
        return rng.random()


class HazardBlockModel(BlockModel):
    """Queued pipes, delayed remote visibility, line model, jitter and checkers of one block."""

    tracer: Any = None  # the block's tracer, kept as an attribute (read at every queued item)

    def __init__(self, agent: Agent, rank_model: HazardRankModel) -> None:
        super().__init__(agent)
        cfg = agent.rt.config
        models = parse_hazards(cfg.hazards)
        self.m_pipes = "pipes" in models
        self.m_check = "checkers" in models
        self.delay = cfg.hazard_delay
        clock = rank_model.step_clock
        self.wall = clock is None  # due times in seconds (else in a scheduled run's steps)
        # due times: one stream, seeded by the block's first draw (on a step clock, where
        # nothing else draws, at the stream's own first draw)
        self.rng = _Stream(agent.rng.getrandbits(64) if self.wall else None, agent)
        if clock is not None:
            rng = self.rng
            self._now = clock.now  # type: ignore[method-assign]
            self._due = lambda: clock.due(rng)  # type: ignore[method-assign]
        # the remote stores not yet visible and the Set lines not yet written back, each made
        # at its first one (None until then: nothing pending); a read-add Set is an atomic at
        # the memory and fills no line
        self.vis_on = "visibility" in models
        self.fills = "lines" in models and cfg.set_semantics != "read-add"
        self.vis: RemoteStores | None = None
        self.lines: LineModel | None = None
        # the scalar data cache gm_load reads through, kept by the agent (``cache`` below; the
        # model has no attribute to spare): its lines are views of the windows, every window
        # mapped (shm, or MPI's shared peers)
        if "cache" in models and (cfg.transport == "shm" or cfg.mpi_peers == "shared"):
            agent.scalar_cache = ScalarCache(self._now, self._line_life(agent, clock))
        # jitter and idle draw from their own stream (the block's second draw): how often a
        # wait idles depends on timing. On a step clock (a scheduled run) there is no jitter
        # (its 50 us switch interval only let the rank's starting and ending threads take the
        # GIL from the turn's holder), so no draw for it either
        self.jitter = None
        if "jitter" in models and self.wall:
            self.jitter = Jitter(random.Random(agent.rng.getrandbits(64)))
        self.tracer = agent.tracer  # (the trace observer's: its pipe slices go there too)
        if self.tracer and not self.wall:  # stamped with steps: a replay gives the same trace
            self.tracer.use_clock(self._now)
        # issued, not yet retired: a pipe's queue is made at its first item (most blocks of a
        # communication kernel queue nothing; until then every queue reads as empty)
        self.queues: list[Any] = [_NO_QUEUE] * len(PIPE_NAMES)
        self.issued = [0] * len(PIPE_NAMES)
        self.retired = [0] * len(PIPE_NAMES)
        self.marks: dict[tuple[int, int, int], tuple[int, str]] = {}
        # what the program's syncs guarantee of MTE3, whatever retired on its own time: stores
        # and MTE2 items issued, the stores a sync the scalar unit waited for covers, and MTE3
        # marks fenced into MTE2's order (MTE2 item count, stores covered)
        self.n2 = self.n3 = self.sync3 = 0
        self.sync_marks: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.fences3: list[tuple[int, int]] = []
        self.pending = False
        # TPUT_ASYNC / TGET_ASYNC: the DMA engine, which no pipe_barrier or dsb drains
        self.dma: AsyncEngine | None = None  # made at the first TPUT_ASYNC / TGET_ASYNC
        self.launch = rank_model.launch
        self.advice = rank_model.advice
        self.on = Observers(self) if self.m_check else NO_OBSERVERS  # event -> checkers' methods

    def observes(self) -> bool:
        """Whether its sub-models want the scalar hooks (notify, wait, ...)."""
        return bool(self.fills or self.m_check or self.jitter or self.cache)

    @property
    def cache(self) -> ScalarCache | None:
        """The block's scalar data cache (sub-model ``cache``), or None."""
        return self.agent.scalar_cache

    def _line_life(self, agent: Agent, clock: StepClock | None) -> Callable[[], float]:
        """How long a scalar cache line lives on the model's clock: ``EVICT_FACTOR`` due times
        (seconds drawn around ``hazard_delay``, or a scheduled run's steps), from a stream of
        its own (a load draws none of the pipes' due times)."""
        rng = random.Random(f"{agent.seed!r}/cache")
        if clock is None:
            delay = self.delay
            return lambda: EVICT_FACTOR * delay * (0.5 + rng.random())
        return lambda: EVICT_FACTOR * (clock.due(rng) - clock.now())

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.agent.set_pending(False)

    def finish(self) -> None:
        try:
            if self.dma:
                self.dma.flush()
            self.barrier(PIPE_ALL)
            if self.vis:
                self.vis.flush()
            if self.lines:
                self.lines.flush()
            if self.cache:
                self.cache.clear()
            self._sync_pending()
            for f in self.on["finish"]:
                f()
        finally:
            if self.tracer:  # the end-of-block drain's pipe slices (the observers' finish came
                self.tracer.flush()  # before it: the kernel's span is closed already)

    # -- pipe instructions -------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        self.n2 += 1
        tile.valid = (src.rows, src.cols)
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._enqueue(PIPE_MTE2, (_LOAD, self._due(), self.tracer.now() if self.tracer else 0.0,
                                      tile, src, 0))
        else:
            src.read_into(tile.array[:src.rows, :src.cols])

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        self.n3 += 1
        for f in self.on["stored"]:
            f(dst.ptr.rank != self.agent.rank)
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._enqueue(PIPE_MTE3, (_STORE, self._due(), self.tracer.now() if self.tracer else 0.0,
                                      dst, tile, atomic))
        else:
            self._complete_store(dst, tile.array[:dst.rows, :dst.cols], atomic)

    def vector(self, op: Any) -> None:
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._enqueue(PIPE_V, (_VECTOR, self._due(), self.tracer.now() if self.tracer else 0.0, op,
                                   None, 0))
        else:
            op.run()

    def set_flag(self, src: int, dst: int, event: int) -> None:
        key = (src, dst, event)
        for f in self.on["set_flag"]:
            f(key)
        self.flags.add(key)
        self.marks[key] = (self.issued[src], kernel_site(self.agent) if self.m_check else "")
        self.sync_marks[key] = (self.n2, self.n3)
        if self.jitter:
            self.jitter.point()

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        super().wait_flag(src, dst, event)
        mark = self.marks.pop((src, dst, event), (0, ""))[0]
        m2, m3 = self.sync_marks.pop((src, dst, event), (0, 0))
        if src == PIPE_MTE3 and dst == PIPE_MTE2:
            self.n2 += 1
            self.fences3.append((self.n2, m3))
        elif dst not in _QUEUED:
            if src == PIPE_MTE3:
                self.sync3 = max(self.sync3, m3)
            elif src == PIPE_MTE2:
                self._covered2(m2)
        if self.jitter:
            self.jitter.point()
        if src not in _PIPES or self.retired[src] >= mark:
            if dst not in _QUEUED:  # a pipe-to-pipe event drains nothing for the scalar unit
                self._after_sync(PIPE_MTE3)
            return
        if dst in _QUEUED:  # a pipe waits, not the scalar unit: a fence in dst's queue
            q = self.queues[src]
            due = max(item[1] for item in list(q)[:mark - self.retired[src]])
            self._enqueue(dst, (_FENCE, due, self.tracer.now() if self.tracer else 0.0, src, mark, 0))
        else:
            self._retire_upto(src, mark)
            self._after_sync(PIPE_MTE3)  # MTE3 may be retired through a fence chain too

    def barrier(self, pipe: int) -> None:
        if self.jitter:
            self.jitter.point()
        if not (self.n2 or self.n3 or self.issued[PIPE_V]):  # nothing ever issued: no drain
            self._sync_pending()
            return
        pipes = _PIPES if pipe == PIPE_ALL else (pipe,) if pipe in _PIPES else ()
        if PIPE_MTE2 in pipes:
            self._covered2(self.n2)
        if PIPE_MTE3 in pipes:
            self.sync3 = self.n3
        if pipe == PIPE_ALL and self.queues[PIPE_V]:  # vector work finishes when it comes due
            self._retire_due(float("inf"))
        for p in pipes:
            self._retire_upto(p, self.issued[p])
        # fences may have queued nothing new, but a drained MTE2 can still hold a fence on MTE3
        if pipe == PIPE_ALL:
            while any(self.queues[p] for p in _PIPES):
                for p in _PIPES:
                    self._retire_upto(p, self.issued[p])
        # a drain of MTE2 covers MTE3 work fenced into MTE2's order: not only the pipe named
        self._after_sync(PIPE_MTE3)
        self._sync_pending()

    def mark(self, pipe: int) -> Any:
        return self.issued[pipe]

    def completed(self, pipe: int, mark: Any) -> bool:
        self._tick()  # retire what is due by now
        return self.retired[pipe] >= mark

    def notify_drain(self) -> None:
        """TNOTIFY's closing barrier: the queued copies finish when their DMA would (their due
        times), not the instant the signal went out, so a notify issued before its data is
        drained still races with the data (as on the NPU)."""
        if self.wall:  # wall-clock due times (not a step clock)
            due = max((item[1] for p in _PIPES for item in self.queues[p]), default=0.0)
            wait = due - self._now()
            if wait > 0:
                time.sleep(min(wait, 10 * self.delay + 0.01))
        self.barrier(PIPE_ALL)

    def dsb(self, mode: int) -> None:
        if self.jitter:
            self.jitter.point()
        if mode in (_DSB_ALL, _DSB_DDR):
            if self.vis:
                n = self.vis.flush()
                if n and self.tracer:
                    self.tracer.instant("dsb flush", stores=n)
            if self.lines:
                self.lines.flush()
            for f in self.on["fenced"]:
                f()
            self._sync_pending()

    def dcci(self, ptr: Any, mode: int) -> None:
        if self.cache:
            if mode == 0 and ptr is not None:
                self.cache.drop(ptr.rank, ptr.offset)
            else:
                self.cache.clear()
        if self.lines:
            self.lines.flush(at=(ptr.rank, ptr.offset) if mode == 0 and ptr is not None else None)
            self._sync_pending()

    def dma_post(self, copy: Any) -> None:
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._engine().post(copy)
        else:
            copy.land()

    def dma_wait(self, copy: Any) -> None:
        if self.m_pipes:
            self._engine().wait(copy)
        else:
            super().dma_wait(copy)

    def dma_test(self, copy: Any) -> bool:
        return self._engine().test(copy) if self.m_pipes else super().dma_test(copy)

    def _engine(self) -> AsyncEngine:
        if self.dma is None:
            self.dma = AsyncEngine(self._due, self._now, 10 * self.delay + 0.01, self.wall)
        return self.dma

    def idle(self) -> None:
        if self.jitter:
            self.jitter.point()
        if self.pending:
            self._tick()

    # -- queues ------------------------------------------------------------------------------

    def _now(self) -> float:
        """The clock of due times (seconds; a scheduled run's step clock replaces it)."""
        return _perf()

    def retire_due(self) -> None:
        if self.pending:
            self._tick()

    def _due(self) -> float:
        return self._now() + self.delay * (0.5 + self.rng.random())

    def _enqueue(self, pipe: int, item: tuple) -> None:
        q = self.queues[pipe]
        if q is _NO_QUEUE:
            q = self.queues[pipe] = deque()
        q.append(item)
        self.issued[pipe] += 1
        if self.tracer:
            self.tracer.instant(f"{_KIND_NAMES[item[0]]} issue", pipe=PIPE_NAMES[pipe])
        self._tick()

    def _tick(self) -> None:
        """Retire what is due (pipe heads in order, remote stores, line write-backs)."""
        now = self._now()
        if self.queues[PIPE_V]:
            self._retire_due(now)
        else:  # MTE2 first, then MTE3 (the order without vector work, which tests pin)
            for p in _QUEUED:
                q = self.queues[p]
                while q and q[0][1] <= now:
                    self._retire_one(p)
        if self.vis and self.vis.items:
            self.vis.flush(now)
        if self.lines and self.lines.lines:
            self.lines.flush(now)
        self._sync_pending()

    def _retire_due(self, until: float) -> None:
        """Retire the pipe heads due by ``until``, earliest due first across the pipes (each
        pipe in order): a vector op due before a queued store it overwrites runs first. (Used
        while vector work is queued; MTE2 / MTE3 alone keep their older fixed order.)"""
        queues = self.queues
        while True:
            best, due = -1, until
            for p in _PIPES:
                q = queues[p]
                if q and q[0][1] <= due:
                    best, due = p, q[0][1]
            if best < 0:
                return
            self._retire_one(best)

    def _retire_one(self, pipe: int) -> None:
        kind, _due, t0, a, b, c = self.queues[pipe].popleft()
        self.retired[pipe] += 1
        if kind == _LOAD:
            b.read_into(a.array[:b.rows, :b.cols])
        elif kind == _STORE:
            self._complete_store(a, b.array[:a.rows, :a.cols], c)
        elif kind == _VECTOR:
            a.run()
        else:
            self._retire_upto(a, b)
        if self.tracer:
            self.tracer.pipe_span(PIPE_NAMES[pipe], f"{_KIND_NAMES[kind]} on {PIPE_NAMES[pipe]}", t0)

    def _retire_upto(self, pipe: int, mark: int) -> None:
        while self.retired[pipe] < mark:
            self._retire_one(pipe)

    def _covered2(self, upto: int) -> None:
        """The scalar unit waited for MTE2's first ``upto`` items: the MTE3 work fenced into
        them (``wait_flag(PIPE_MTE3, PIPE_MTE2, e)``) is done too."""
        while self.fences3 and self.fences3[0][0] <= upto:
            self.sync3 = max(self.sync3, self.fences3.pop(0)[1])

    def _after_sync(self, src: int) -> None:
        """The scalar unit waited for a sync: tell the checkers when the program's syncs cover
        every MTE3 store issued (whatever retired on its own time: that is no guarantee)."""
        if src == PIPE_MTE3 and self.sync3 >= self.n3 and self.n3:  # (none stored: no news)
            for f in self.on["drained"]:
                f()

    def _sync_pending(self) -> None:
        pending = bool(self.queues[PIPE_MTE2] or self.queues[PIPE_MTE3] or self.queues[PIPE_V]
                       or (self.vis and self.vis.items) or (self.lines and self.lines.lines))
        if pending != self.pending:
            self.pending = pending
            self.agent.set_pending(pending)

    # -- stores and visibility ---------------------------------------------------------------

    def _complete_store(self, dst: GlobalTensor, data: np.ndarray, atomic: int) -> None:
        if self.vis_on and dst.ptr.rank != self.agent.rank:
            if self.vis is None:
                self.vis = RemoteStores(self._apply)
            self.vis.add(self._due(), dst, dst.snapshot(data), atomic)
        else:
            self._apply(dst, data, atomic)

    def _apply(self, dst: GlobalTensor, data: np.ndarray, atomic: int) -> None:
        if atomic:
            atomic_add(self.agent, dst, data)
        else:
            dst.write_from(data)

    def _clobber(self, rank: int, off: int, stale: int, cur: int, site: str) -> bool:
        for f in self.on["clobber"]:
            f(rank, off, stale, cur, site)
        if self.tracer:
            self.tracer.instant("line clobber", rank=rank, offset=off, stale=stale, lost=cur)
        return True

    # -- scalar hooks: the seam's notify / wait / copy events --------------------------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.jitter:
            self.jitter.point()
        ptr = sig.ptr
        for f in self.on["notify"]:
            f(sig, value, op)
        if self.cache:  # TNOTIFY dcci-s its line before and after its store
            self.cache.drop(ptr.rank, ptr.offset)
        if op and self.fills:
            if self.lines is None:
                self.lines = LineModel(self.agent.rt.windows, self._clobber)
            self.lines.fill(ptr.rank, ptr.offset, value, self._due(),
                            kernel_site(self.agent) if self.m_check else "")
            self._sync_pending()
        elif self.lines:  # any other notify on a line this block holds writes it back first
            self.lines.touch(ptr.rank, ptr.offset)
            self._sync_pending()

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if self.cache:
            self._dcci_words(sig)
        for f in self.on["wait"]:
            f(sig, value, cmp)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        if self.cache:
            self._dcci_words(sig)

    def _dcci_words(self, sig: Any) -> None:
        """TWAIT / TTEST ``dcci`` every word they compare: none is read from a cached line."""
        site = sig.site
        cache = self.cache
        if site.sig_rank >= 0 and cache is not None:
            for w in site.words:
                cache.drop(site.sig_rank, w.offset)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        """A store drops the block's cached line: an atomic is done at the memory, and a plain
        store goes through, so the next load reads it."""
        if write and self.cache:
            self.cache.drop(ptr.rank, ptr.offset)

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        for f in self.on["expect_blocks"]:
            f(kernel, param, count)


__all__ = ["HazardBlockModel", "HazardRankModel", "kernel_site"]
