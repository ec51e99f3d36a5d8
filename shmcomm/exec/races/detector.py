"""The happens-before race detector as an execution model that wraps the run's own model.

:class:`RaceDetector` is made once in the launcher (before the fork: it owns the shared word
clocks and one pipe per rank back to the launcher). In each rank it makes a
:class:`RaceRankModel` around the run's model (eager, hazard, or any other), which makes a
:class:`RaceBlockModel` around each block's model: every instruction goes to the inner model
unchanged and, beside it, advances the block's clocks and records its accesses. So the detector
composes with every mode and sees the race whether or not the data came out wrong.

Happens-before edges (see :mod:`.clocks` for the components):

* ``TNOTIFY`` releases the scalar unit's clock into the word's clock; ``TWAIT`` (when it
  returns) and ``TTEST`` acquire it. A notify releases only what the scalar unit knows: pipe
  work it has not drained (``pipe_barrier``, ``wait_flag``) is not in it, and MTE3 stores are
  visible to other ranks only through ``G3``, which only ``dsb(DSB_DDR)`` / ``dsb(DSB_ALL)``
  advances (to what was drained).
* ``TLOAD`` / ``TSTORE`` run on MTE2 / MTE3 after what the scalar unit issued before them;
  ``set_flag(src, dst, e)`` -> ``wait_flag(src, dst, e)`` orders ``src``'s earlier work before
  ``dst``'s later work; ``pipe_barrier`` orders the pipe's work before the scalar unit.
* A launch's blocks start after their host's clock; the host continues after all of them
  (the kernel's end drains and fences); ``rt.barrier()`` joins every host's clock.

Accesses (:mod:`.shadow`): the GM ranges of ``TLOAD`` / ``TSTORE`` (so of ``TPUT``, ``TGET`` and
the root collectives, which run through them), the UB tile they fill or read, and scalar GM
accesses. Each rank sends its records to the launcher at every launch's end; the launcher checks
them against everything recorded and raises :class:`~shmcomm.errors.RaceReport` at the end of the
run (at the first race with ``race_exitfirst``).
"""

from __future__ import annotations

import itertools
import mmap
import threading
from multiprocessing.connection import Connection, Pipe
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import MAX_BLOCKS, Config
from ...core.agent import _tls as _agent_tls
from ...core.heap import SymmetricArray
from ...core.model import BlockModel, RankModel, RunModel
from ...errors import Failure, ShmcommError
from ...types import DSB_ALL, DSB_DDR, PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_V
from ..hazard.report import kernel_site, user_site
from .clocks import CLOCK, G3, MTE2, MTE3, Layout, V, WordClocks, new_locks
from .report import render
from .shadow import ATOMIC, PIPE3, WRITE, Access, Shadow
from .tiles import record_vector

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.gm import GlobalTensor
    from ...core.runtime import RankRuntime
    from ...core.tile import Tile

MIN_BLOCK_SLOTS = 4  # clocks keep at least this many block slots per rank, whatever blocks= says
# a block sends its records (and its frontier) before the launch's end past this many: the
# launcher can then forget what every agent has passed, and a long kernel stays cheap to judge
_FLUSH_RECORDS = 128
_QUEUED = (PIPE_MTE2, PIPE_MTE3, PIPE_V)


class RaceDetector(RunModel):
    """The run's detector: the factory of rank models, and the launcher's end of it. The inner
    model's launcher-side parts (schedule mode's shared area, its schedule, ...) are its own:
    each hook forwards to it explicitly."""

    def __init__(self, config: Config, inner: RunModel) -> None:
        super().__init__(inner.config)  # a replayed schedule brings its own
        self.inner = inner
        self.layout = Layout(config.nranks, max(config.blocks, MIN_BLOCK_SLOTS))
        # the word clocks and the record pipes: made by ``prepare`` (before the ranks fork), or
        # a pool's, made with its ranks (``use_pool``)
        self.clocks: WordClocks | None = None
        self.conns: list[Connection] = []  # the launcher reads these
        self.writers: list[Connection] = []  # ranks write into theirs
        self.own_pipes = True  # False: a pool's, left open for its next run
        self.shadow = Shadow(self.layout)
        self.reported = 0

    def __getstate__(self) -> dict[str, Any]:
        """What a pool's rank process gets with its job: no launcher state (the shadow, the
        pipes, the clocks' mapping); ``use_pool`` there attaches the pool's."""
        state = self.__dict__.copy()
        state.update(clocks=None, conns=[], writers=[], shadow=None)
        return state

    def use_pool(self, state: Any, rank: int | None) -> None:
        """Use a pool's word-clock memory and record pipes (made before its ranks forked, so
        every rank reaches them): ``state.for_run()`` in the launcher (the readers, with what
        the last run wrote zeroed), its writers in a rank."""
        if rank is None:
            buf, locks, self.conns = state.for_run()
            self.clocks = WordClocks(self.layout, buf, locks)
            state.last = self.clocks  # zeroed before the pool's next run
        else:
            self.clocks = WordClocks(self.layout, state.buf, state.locks)
            self.writers = state.writers
        self.own_pipes = False

    def __call__(self, rt: RankRuntime) -> RankModel:
        return RaceRankModel(rt, self)

    @property
    def shared_bytes(self) -> int:  # type: ignore[override]
        return self.inner.shared_bytes

    @property
    def schedule(self) -> Any:  # type: ignore[override]
        return self.inner.schedule

    def prepare(self, ctl: Any) -> None:
        if self.clocks is None:  # a run of its own: the ranks inherit these at their fork
            self.clocks = WordClocks(self.layout)
            pipes = [Pipe(duplex=False) for _ in range(self.config.nranks)]
            self.conns = [r for r, _ in pipes]
            self.writers = [w for _, w in pipes]
        self.inner.prepare(ctl)

    def collect(self, ctl: Any, failures: list[Failure]) -> None:
        self.inner.collect(ctl, failures)

    def hint(self, host: Any, args: tuple) -> str:
        return self.inner.hint(host, args)

    def set_trace(self, path: str) -> None:
        super().set_trace(path)
        self.inner.set_trace(path)

    # -- the launcher's side -----------------------------------------------------------------

    def receive(self, conn: Connection) -> list[Failure]:
        """Take one batch of records from a rank; with ``race_exitfirst``, the report of the
        first race as soon as one shows."""
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            self.conns = [c for c in self.conns if c is not conn]
            return []
        for rank, block, snaps, records, frontier in batch:
            if block == "race":  # races a rank found itself (a host store against a notify)
                self.shadow.direct.extend(records)
            else:
                self.shadow.add(snaps, [Access(*r) for r in records])
                if frontier is not None:
                    self.shadow.advance((rank, block), frontier)
        if self.config.race_exitfirst and self.shadow.found() and not self.reported:
            return self._report()
        return []

    def finish(self) -> list[Failure]:
        """The run is over: read what is left and report every race (none: ``[]``)."""
        for conn in list(self.conns):
            while conn in self.conns and conn.poll(0):  # (a pool rank killed: EOF)
                self.receive(conn)
            if self.own_pipes:
                conn.close()
        if self.own_pipes:
            for w in self.writers:
                w.close()
        self.conns = []
        return [] if self.reported else self._report()

    def _report(self) -> list[Failure]:
        if not self.shadow.found():
            return []
        self.reported = self.shadow.found()
        if self.shadow.races:
            x, y = self.shadow.races[0]
            rank, block = y.rank, y.block
        else:
            rank, block = self.shadow.direct[0][0], self.shadow.direct[0][1]
        return [Failure(rank, block, "race", render(self.shadow))]


class PoolState:
    """The race detector's shared state for every run of a pool, made before its ranks fork:
    word-clock memory for the largest layout (``MAP_NORESERVE``: only the pages a run touches
    take memory), its locks, and one record pipe per rank."""

    def __init__(self, nranks: int) -> None:
        self.nbytes = WordClocks.nbytes(Layout(nranks, MAX_BLOCKS))
        self.buf = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_SHARED | _MAP_NORESERVE)
        self.locks = new_locks()
        pipes = [Pipe(duplex=False) for _ in range(nranks)]
        self.readers = [r for r, _ in pipes]
        self.writers = [w for _, w in pipes]
        self.last: WordClocks | None = None  # the last run's view: what to zero

    def forked(self) -> None:
        """Every rank holds its writer: the launcher's copies go (a dead rank reads as EOF)."""
        for w in self.writers:
            w.close()

    def for_run(self) -> tuple[Any, list[Any], list[Connection]]:
        """Memory, locks and readers for a launcher's run, what the last one wrote zeroed."""
        if self.last is not None:
            self.last.reset()
            self.last = None
        return self.buf, self.locks, self.readers

    def close(self) -> None:
        for c in self.readers + self.writers:
            c.close()
        self.last = None  # the mapping goes with its last view


_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value (Python < 3.13 lacks it)


def _agent_name(rank: int, block: int | None) -> str:
    return f"rank {rank} " + ("host" if block is None else f"block {block}")


class RaceRankModel(RankModel):
    """The detector in one rank process: the host's clock, launch and barrier edges."""

    def __init__(self, rt: RankRuntime, det: RaceDetector) -> None:
        super().__init__(rt)
        self.inner = det.inner(rt)
        self.det = det
        self.layout = det.layout
        assert det.clocks is not None  # prepare (or use_pool) made them
        self.clocks = det.clocks
        self.conn = det.writers[rt.rank]
        self.send_lock = threading.Lock()
        self.outbox: list[tuple] = []  # messages not sent yet (frontiers alone), in order
        self.snap_ids = itertools.count(rt.rank << 40)
        self.hc = self.layout.host(rt.rank)
        self.clock = np.zeros(self.layout.size, CLOCK)
        self.clock[self.hc] = 1
        self.start_clock = self.clock
        self.blocks: list[RaceBlockModel] = []
        self.rounds = 0
        self.host_snap: int | None = None  # snapshot of the host's clock (None: changed since)
        self.host_snaps: dict[int, np.ndarray] = {}
        self.host_records: list[tuple] = []
        self.signal_races: set[tuple] = set()  # (word, kind) of host-store races reported
        SymmetricArray.observers.append(self._host_write)

    def __getattr__(self, name: str) -> Any:  # the inner model's own state (its launch, ...)
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def launch_start(self) -> None:
        self.inner.launch_start()
        self._flush_host()
        self.start_clock = self.clock.copy()
        self.clock[self.hc] += 1
        self.host_snap = None
        self.blocks = []
        self.send({}, [], self.start_clock)  # the host and this launch's blocks hold it

    def block(self, agent: Agent) -> BlockModel:
        if agent.block_idx >= self.layout.blocks:
            raise ShmcommError(
                f"launch: {agent.block_num} blocks, but the race detector keeps clocks for "
                f"blocks={self.layout.blocks} per rank; run with blocks={agent.block_num} (the "
                "largest launch of the program) to detect races")
        agent.hooks = None
        inner = self.inner.block(agent)
        model = RaceBlockModel(agent, self, inner, agent.hooks)
        agent.hooks = model
        self.blocks.append(model)
        self.send({}, [], model.vs.copy(), agent.block_idx)  # until its first records
        return model

    def launch_end(self) -> None:
        try:
            self.inner.launch_end()
        finally:
            for b in self.blocks:
                for v in (b.vs, b.p2.v, b.p3.v, b.pv.v):
                    np.maximum(self.clock, v, out=self.clock)
                b.flush()
            self.blocks = []
            self.host_snap = None
            # every later access of this rank comes after this; its blocks are done
            self.send({}, [], self.clock, "launch end")

    def barrier_enter(self) -> None:
        self.inner.barrier_enter()
        self._flush_host()
        self.rounds += 1
        self.clocks.barrier_arrive(self.rounds, self.clock)
        self.clock[self.hc] += 1
        self.host_snap = None

    def barrier_exit(self) -> None:
        self.clocks.barrier_leave(self.rounds, self.clock)
        self.host_snap = None
        self.send({}, [], self.clock)
        self.inner.barrier_exit()

    def host_join(self) -> None:
        self.inner.host_join()

    @property
    def inline_streams(self) -> bool:  # type: ignore[override]
        return self.inner.inline_streams

    def host_join_launch(self, first: int, blocks: int) -> None:
        self.inner.host_join_launch(first, blocks)

    def host_wait(self, site: Any, value: int, cmp: int) -> None:
        self.inner.host_wait(site, value, cmp)

    def close(self) -> None:
        self._flush_host()  # the host's stores after its last launch or barrier
        with self.send_lock:
            self._send_outbox()  # before the rank reports: the launcher reads all of it first
        self.inner.close()

    def _host_write(self, arr: np.ndarray, key: Any) -> None:
        """The host stored into a symmetric array (``x[key] = ...``): a write by the host."""
        if getattr(_agent_tls, "agent", None) is not self.rt.host_agent:
            return  # a block thread writing host arrays: not the host's access
        where = arr.stored_range(key)
        if where is None:
            return
        if self.host_snap is None:
            self.host_snap = next(self.snap_ids)
            self.host_snaps[self.host_snap] = self.clock.copy()
        rank, lo, hi = where
        hc = self.hc
        site = user_site() or "<host>"
        self.host_records.append((("gm", rank), lo, hi, WRITE, hc,
                                  int(self.clock[hc]), self.host_snap, hc, int(self.clock[hc]),
                                  site, self.rt.rank, None, "host", "host store"))
        for off, comp in self.clocks.host_store(rank, lo, hi, hc, self.clock):
            r, b = self.layout.agent(comp)
            self.signal_race(rank, off, "store", (
                f"rank {self.rt.rank} host stored it with a plain store at {site}; "
                f"{_agent_name(r, b)} notified it earlier and nothing orders that notify before "
                "the store (a reset other than rt.reset_signals(), with no barrier after the "
                "notifier's launch), so the store may wipe it"), None)

    def signal_race(self, rank: int, off: int, kind: str, text: str, block: int | None) -> None:
        """Report a race on a signal word between a plain host store and a notify."""
        if (rank, off, kind) in self.signal_races:
            return
        self.signal_races.add((rank, off, kind))
        self.send({}, [(self.rt.rank, block, f"data race on signal word {off:#x} of rank "
                        f"{rank}: {text}")], None, "race")

    def _flush_host(self) -> None:
        recs, self.host_records = self.host_records, []
        snaps, self.host_snaps = self.host_snaps, {}
        self.host_snap = None
        self.send(snaps, recs)

    def send(self, snaps: dict[int, np.ndarray], records: list[tuple],
             frontier: np.ndarray | None = None, block: int | str | None = None) -> None:
        """Records (with the snapshots they use) to the launcher. ``frontier``: a clock that
        every later access of the host (``block`` None), of block ``block``, or of the whole
        rank once its blocks are done (``block`` "launch end") will hold: the launcher forgets
        what every frontier covers."""
        if not records and frontier is None:
            return  # (a "race" message carries its text in records)
        with self.send_lock:
            if not records and block != "launch end" and not self.det.config.race_exitfirst:
                # a frontier alone only lets the launcher forget sooner: it goes with the next
                # records or the launch's end (one message a launch for a kernel of signals)
                self.outbox.append((self.rt.rank, block, snaps, records, frontier.copy()))
                return
            self.outbox.append((self.rt.rank, block, snaps, records, frontier))
            self._send_outbox()

    def _send_outbox(self) -> None:
        batch, self.outbox = self.outbox, []
        if not batch:
            return
        try:
            self.conn.send(batch)
        except (BrokenPipeError, OSError):
            pass  # the launcher is gone: the run is over anyway


class _PipeClock:
    """The clock of one queued pipe (MTE2 or MTE3) of a block: its work runs after what the
    scalar unit issued before it (``joined``: it holds the scalar unit's clock already) and
    gets a new epoch each time someone observes the pipe (an event, a drain)."""

    __slots__ = ("v", "comp", "name", "snap", "joined")

    def __init__(self, start: np.ndarray, comp: int, name: str) -> None:
        self.v = start.copy()
        self.v[comp] += 1
        self.comp, self.name = comp, name
        self.snap: int | None = None
        self.joined = True

    def join(self, other: np.ndarray) -> None:
        np.maximum(self.v, other, out=self.v)
        self.snap = None

    def advance(self) -> None:
        self.v[self.comp] += 1
        self.snap = None


class RaceBlockModel(BlockModel):
    """One block: forwards everything to the inner model, and keeps the block's clocks (its
    scalar unit ``vs``, pipes ``p2`` (MTE2) and ``p3`` (MTE3)) and access records."""

    def __init__(self, agent: Agent, rank_model: RaceRankModel, inner: BlockModel,
                 inner_hooks: Any) -> None:
        super().__init__(agent)
        self.inner = inner
        self.ih = inner_hooks
        self.rm = rank_model
        self.clocks = rank_model.clocks
        self.rank = agent.rank
        self.block_idx = agent.block_idx
        s = rank_model.layout.block(agent.rank, agent.block_idx)
        self.cs, self.cg = s, s + G3
        self.vs = rank_model.start_clock.copy()
        self.vs[s] += 1
        self.p2 = _PipeClock(self.vs, s + MTE2, "MTE2")
        self.p3 = _PipeClock(self.vs, s + MTE3, "MTE3")
        self.pv = _PipeClock(self.vs, s + V, "V")  # the tile vector instructions (PIPE_V)
        self.snap_s: int | None = None
        self.marks: dict[tuple[int, int, int], np.ndarray] = {}
        self.snaps: dict[int, np.ndarray] = {}
        self.records: list[list] = []
        self.copy_op = ""
        self.tested: list[Any] = []  # signals a TTEST read: acquired at the block's next step

    def __getattr__(self, name: str) -> Any:  # the inner model's own state (a scheduler's, ...)
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    # -- clock bookkeeping -------------------------------------------------------------------

    def _pipe(self, pipe: int) -> _PipeClock | None:
        return self.p2 if pipe == PIPE_MTE2 else self.p3 if pipe == PIPE_MTE3 else \
            self.pv if pipe == PIPE_V else None

    def _s_changed(self) -> None:
        self.snap_s = None
        self.p2.joined = self.p3.joined = self.pv.joined = False

    def _snap(self, v: np.ndarray) -> int:
        sid = next(self.rm.snap_ids)
        self.snaps[sid] = v.copy()
        return sid

    def _record(self, win: tuple, lo: int, hi: int, flags: int, comp: int, snap: int,
                pipe: str, op: str, v: np.ndarray, site: str) -> None:
        recs = self.records
        if recs:
            last = recs[-1]
            if (last[0] == win and last[3] == flags and last[6] == snap and last[9] == site
                    and last[1] <= hi and lo <= last[2] and last[13] == op):
                last[1], last[2] = min(last[1], lo), max(last[2], hi)
                return
        recs.append([win, lo, hi, flags, comp, int(v[comp]), snap, self.cs,
                     int(self.vs[self.cs]), site, self.rank, self.block_idx, pipe, op])
        if len(recs) >= _FLUSH_RECORDS:
            self.flush()

    def flush(self) -> None:
        """Send this block's records (and the clock snapshots they use) to the launcher."""
        recs, self.records = self.records, []
        snaps, self.snaps = self.snaps, {}
        self.snap_s = self.p2.snap = self.p3.snap = self.pv.snap = None  # sent again when used
        # every later access of this block holds vs: its pipes join vs before they issue
        self.rm.send(snaps, [tuple(r) for r in recs], self.vs.copy(), self.block_idx)

    @staticmethod
    def _ranges(g: GlobalTensor) -> list[tuple[int, int]]:
        """The byte ranges of ``g`` (one per row when it is strided)."""
        p = g.ptr
        if g.rows <= 1 or g.row_stride == g.cols:
            return [(p.offset, p.offset + g.extent_bytes)]
        row, width = g.row_stride * p.itemsize, g.cols * p.itemsize
        return [(p.offset + r * row, p.offset + r * row + width) for r in range(g.rows)]

    def _pipe_access(self, pc: _PipeClock, g: GlobalTensor, tile: Tile, atomic: int) -> None:
        """A TLOAD (``pc`` is MTE2: reads GM, writes the tile) or TSTORE (MTE3: the reverse)."""
        load = pc is self.p2
        site = kernel_site(self.agent)
        what = "TLOAD" if load else "TSTORE"
        op = f"{self.copy_op} (its {what})" if self.copy_op else what
        if not pc.joined:
            pc.join(self.vs)
            pc.joined = True
        if pc.snap is None:
            pc.snap = self._snap(pc.v)
        gflags = 0 if load else WRITE | PIPE3 | (ATOMIC if atomic else 0)
        for lo, hi in self._ranges(g):
            self._record(("gm", g.ptr.rank), lo, hi, gflags, pc.comp, pc.snap, pc.name, op,
                         pc.v, site)
        nbytes = min(g.rows, tile.rows) * tile.cols * tile.array.itemsize
        self._record(("ub", self.rank, self.block_idx, id(tile)), 0, nbytes, WRITE if load else 0,
                     pc.comp, pc.snap, pc.name, op, pc.v, site)

    def _drain(self, pc: _PipeClock) -> None:
        """The scalar unit waited for the pipe's work so far."""
        np.maximum(self.vs, pc.v, out=self.vs)
        self._s_changed()
        pc.advance()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.inner.start()

    def finish(self) -> None:
        if self.tested:
            self._settle()
        self.inner.finish()
        self._drain(self.p2)
        self._drain(self.p3)
        self._drain(self.pv)
        self.vs[self.cg] = max(self.vs[self.cg], self.vs[self.p3.comp])  # the kernel's end fences

    def stop(self) -> None:
        self.inner.stop()

    def idle(self) -> None:
        self.inner.idle()

    # -- pipe instructions -------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        if self.tested:
            self._settle()
        self._pipe_access(self.p2, src, tile, 0)
        self.inner.load(tile, src)

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        if self.tested:
            self._settle()
        self._pipe_access(self.p3, dst, tile, atomic)
        self.inner.store(dst, tile, atomic)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        if self.tested:
            self._settle()
        self.inner.set_flag(src, dst, event)
        pc = self._pipe(src)
        if pc is None:  # the scalar unit (or a pipe that runs at once) signals
            self.marks[(src, dst, event)] = self.vs.copy()
            self.vs[self.cs] += 1
            self._s_changed()
        else:  # the pipe's work so far, issued after the scalar unit's earlier work
            pc.join(self.vs)
            self.marks[(src, dst, event)] = pc.v.copy()
            pc.advance()

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        if self.tested:
            self._settle()
        self.inner.wait_flag(src, dst, event)
        mark = self.marks.pop((src, dst, event), None)
        if mark is None:
            return
        pc = self._pipe(dst)
        if pc is None or pc is self.pv:  # V: Python code after it may read the tile too
            np.maximum(self.vs, mark, out=self.vs)
            self._s_changed()
        if pc is not None:
            pc.join(mark)

    def barrier(self, pipe: int) -> None:
        if self.tested:
            self._settle()
        self.inner.barrier(pipe)
        if pipe == PIPE_ALL:
            self._drain(self.p2)
            self._drain(self.p3)
            self._drain(self.pv)
        elif pipe in _QUEUED:
            self._drain(self._pipe(pipe))

    def dsb(self, mode: int) -> None:
        if self.tested:
            self._settle()
        self.inner.dsb(mode)
        if mode in (DSB_ALL, DSB_DDR) and self.vs[self.cg] < self.vs[self.p3.comp]:
            self.vs[self.cg] = self.vs[self.p3.comp]
            self._s_changed()

    def dcci(self, ptr: Any, mode: int) -> None:
        self.inner.dcci(ptr, mode)

    def vector(self, op: Any) -> None:
        if self.tested:
            self._settle()
        record_vector(self, op)
        self.inner.vector(op)

    def dma_post(self, copy: Any) -> None:  # the DMA engine: its accesses come by async_issue
        self.inner.dma_post(copy)

    def dma_wait(self, copy: Any) -> None:
        self.inner.dma_wait(copy)

    def dma_test(self, copy: Any) -> bool:
        return self.inner.dma_test(copy)

    # -- scalar hooks ------------------------------------------------------------------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.tested:
            self._settle()
        p = sig.ptr
        stored = self.clocks.release(self.clocks.slot(p.rank, p.offset), self.vs, bool(op))
        if stored is not None:
            r, _ = self.rm.layout.agent(stored[0])
            self.rm.signal_race(p.rank, p.offset, "notify", (
                f"{_agent_name(self.rank, self.block_idx)} notified it (TNOTIFY) at "
                f"{kernel_site(self.agent)}; rank {r}'s host had stored it with a plain store, "
                "and nothing orders that store before the notify (no rt.barrier() or launch "
                "between them), so the store may have wiped an earlier notify or this one may "
                "be lost to it"), self.block_idx)
        self.vs[self.cs] += 1
        self._s_changed()
        if self.ih is not None:
            self.ih.notify(sig, value, op)

    def _acquire(self, sig: Any) -> None:
        p = sig.ptr
        slot = self.clocks.slot
        if type(sig).__name__ == "Signal2D":
            for r in range(sig.rows):
                for c in range(sig.cols):
                    off = p.offset + 4 * (r * sig.row_stride + c)
                    self.clocks.acquire(slot(p.rank, off), self.vs)
        else:
            self.clocks.acquire(slot(p.rank, p.offset), self.vs)
        self._s_changed()

    def _settle(self) -> None:
        tested, self.tested = self.tested, []
        for sig in tested:
            self._acquire(sig)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if self.tested:
            self._settle()
        if self.ih is not None:
            self.ih.wait(sig, value, cmp)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self._acquire(sig)
        if self.ih is not None:
            self.ih.waited(sig, value, cmp)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        # this hook runs before TTEST reads: acquire at the block's next step, after the read,
        # so the clock holds every notify whose value the read may have seen (whatever it
        # returned: an over-approximation that may hide a race, never invent one)
        if self.tested:
            self._settle()
        self.tested.append(sig)
        if self.ih is not None:
            self.ih.test(sig, value, cmp)

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        self.copy_op = op
        if self.ih is not None:
            self.ih.copy_begin(op, dst, src)

    def copy_end(self, op: str) -> None:
        self.copy_op = ""
        if self.ih is not None:
            self.ih.copy_end(op)

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        if self.ih is not None:
            self.ih.expect_blocks(kernel, param, count)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        if self.tested:
            self._settle()
        if self.snap_s is None:
            self.snap_s = self._snap(self.vs)
        flags = (WRITE if write else 0) | (ATOMIC if atomic else 0)
        self._record(("gm", ptr.rank), ptr.offset, ptr.offset + nbytes, flags, self.cs,
                     self.snap_s, "S", op, self.vs, kernel_site(self.agent))
        if self.ih is not None:
            self.ih.gm_access(op, ptr, nbytes, write, atomic)
