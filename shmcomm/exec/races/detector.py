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
  (the kernel's end drains and fences); ``rt.barrier()`` joins every host's clock. A stream
  launch starts after the host's clock at its issue and after its stream's previous launch;
  the host acquires its end only at ``synchronize()`` / ``Launch.wait()`` (or a
  ``Launch.done`` that returned True).
* ``SYNCALL`` (hard and soft): every participant's clock at its arrival joins, and each
  acquires the join when it leaves.
* Scalar atomics on an int32 word (``gm_atomic_store``, ``gm_atomic_add``, ``st_atomic``)
  release into the word's clock; ``gm_load``, ``TWAIT`` and ``TTEST`` that read the word acquire
  it (an int32 ``gm_load`` is an atomic read: it does not race with the atomics).
* ``TPUT_ASYNC`` / ``TGET_ASYNC``: the copy's reads and writes run on the block's DMA engine
  clock, after what the scalar unit issued before it; ``AsyncEvent.Wait`` and a ``Test`` that
  returned True acquire it (and the session's earlier copies); no pipe_barrier or dsb does.

Accesses (:mod:`.shadow`): the GM ranges of ``TLOAD`` / ``TSTORE`` (so of ``TPUT``, ``TGET`` and
the root collectives, which run through them), the UB tile they fill or read, the DMA copies,
scalar GM accesses and the host's stores into and reads of symmetric arrays (the accesses
:class:`~shmcomm.core.heap.SymmetricArray` shows its observers: ``x[...] = v``, element reads,
ufuncs, ``np.array_equal``; not ``np.asarray(x)``, ``tolist()`` or ``bytes(x)``).
Each rank sends its records to the launcher at a launch's end once a few launches' worth have
gathered (at every launch's end with ``race_exitfirst``), with the host's own records, and at the
rank's end; the launcher checks them against everything recorded and raises
:class:`~shmcomm.errors.RaceReport` at the end of the run (at the first race with
``race_exitfirst``).
"""

from __future__ import annotations

import fcntl
import itertools
import mmap
import threading
from multiprocessing.connection import Connection, Pipe, wait
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import MAX_BLOCKS, Config
from ...core.agent import HOOKED
from ...core.agent import _tls as _agent_tls
from ...core.gm import I32
from ...core.heap import SymmetricArray
from ...core.model import BlockModel, RankModel, RunModel
from ...errors import Failure, ShmcommError
from ...types import DSB_ALL, DSB_DDR, PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_V
from ..hazard.report import kernel_site, user_site
from .clocks import CLOCK, G3, MTE2, MTE3, PER_BLOCK, POOL_SLOTS, D, Layout, SlotMap, V, WordClocks, new_locks
from .report import render
from .shadow import ATOMIC, PIPE3, WRITE, Access, Shadow
from .sites import SiteCache, cached_site
from .tiles import record_vector

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.gm import GlobalTensor
    from ...core.runtime import RankRuntime
    from ...core.tile import Tile

# clocks keep this many block slots per rank: twice blocks= (a stream launch beside another),
# at least MIN_BLOCK_SLOTS, at most MAX_BLOCKS
MIN_BLOCK_SLOTS = 8
# a block sends its records (and its frontier) before the launch's end past this many: the
# launcher can then forget what every agent has passed, and a long kernel stays cheap to judge
_FLUSH_RECORDS = 128
_QUEUED = (PIPE_MTE2, PIPE_MTE3, PIPE_V)
_RECEIVE_BATCHES = 64  # batches of one rank the launcher takes per wake-up
# a launch's end sends what the rank's outbox holds once it holds this many records (without
# race_exitfirst): a run of short launches sends a message every few launches, not one each
_SEND_RECORDS = 512


# a record pipe's capacity: a rank's message (a few launches' records, ~200 KiB at 8 ranks x 4
# blocks) goes in whole, so a launch's end does not wait for the launcher to be scheduled and
# read (on a loaded box, 5-15 ms per message at the default 64 KiB)
_PIPE_BYTES = 1 << 20


def record_pipe() -> tuple[Connection, Connection]:
    """A rank's record pipe to the launcher (reader, writer), widened to ``_PIPE_BYTES`` where
    the OS allows it (Linux, within the user's pipe budget; else its default)."""
    reader, writer = Pipe(duplex=False)
    try:
        fcntl.fcntl(writer.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except OSError:
        pass  # (over the budget, or no such fcntl): the default size works, only slower
    return reader, writer


def block_slots(blocks: int) -> int:
    """The block slots of the clocks of a run with ``blocks=`` (see ``MIN_BLOCK_SLOTS``)."""
    return min(MAX_BLOCKS, max(2 * blocks, MIN_BLOCK_SLOTS))


class RaceDetector(RunModel):
    """The run's detector: the factory of rank models, and the launcher's end of it. The inner
    model's launcher-side parts (schedule mode's shared area, its schedule, ...) are its own:
    each hook forwards to it explicitly."""

    def __init__(self, config: Config, inner: RunModel) -> None:
        super().__init__(inner.config)  # a replayed schedule brings its own
        self.inner = inner
        self.layout = Layout(config.nranks, block_slots(config.blocks))
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
            self.conns = state.for_run()
            self.clocks = state.last = state.clocks(self.layout)  # zeroed before the next run
        else:
            self.clocks = state.clocks(self.layout)
            self.writers = state.writers
        self.own_pipes = False

    def __call__(self, rt: RankRuntime) -> RankModel:
        return RaceRankModel(rt, self)

    @property
    def shared_bytes(self) -> int:  # type: ignore[override]
        return self.inner.shared_bytes

    @property
    def schedule(self) -> Any:
        return self.inner.schedule

    @property
    def first_rank(self) -> int | None:  # type: ignore[override]
        return self.inner.first_rank

    @property
    def one_at_a_time(self) -> bool:  # type: ignore[override]
        return self.inner.one_at_a_time

    @property
    def turn_cpu(self) -> int | None:
        return self.inner.turn_cpu

    @turn_cpu.setter
    def turn_cpu(self, cpu: int | None) -> None:  # the launcher's claim: the inner model pins
        self.inner.turn_cpu = cpu

    def prepare(self, ctl: Any) -> None:
        if self.clocks is None:  # a run of its own: the ranks inherit these at their fork
            self.clocks = WordClocks(self.layout)
            pipes = [record_pipe() for _ in range(self.config.nranks)]
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
        """Take the batches of records a rank has sent (up to ``_RECEIVE_BATCHES``: each
        wake-up of the launcher's loop also polls the ranks, so one per batch would cost that
        poll per batch); with ``race_exitfirst``, the report of the first race as soon as one
        shows."""
        for _ in range(_RECEIVE_BATCHES):
            if not self._receive_one(conn):
                break
            if self.config.race_exitfirst and self.shadow.found() and not self.reported:
                return self._report()
            try:
                if not conn.poll(0):
                    break
            except (EOFError, OSError):
                break
        return []

    def _receive_one(self, conn: Connection) -> bool:
        """One batch; ``False`` once the rank's pipe is closed."""
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            self.conns = [c for c in self.conns if c is not conn]
            return False
        for rank, block, snaps, records, frontier in batch:
            if block == "race":  # races a rank found itself (a host store against a notify)
                self.shadow.direct.extend(records)
            else:
                if snaps is not None:  # (ids, the bytes of their clocks, one after another)
                    rows = np.frombuffer(snaps[1], CLOCK).reshape(len(snaps[0]), -1)
                    snaps = dict(zip(snaps[0], rows, strict=True))
                self.shadow.add(snaps or {}, [Access(*r) for r in records])
                if frontier is not None:
                    self.shadow.advance((rank, block), np.frombuffer(frontier, CLOCK))
        return True

    def finish(self) -> list[Failure]:
        """The run is over: read what is left and report every race (none: ``[]``)."""
        conns = list(self.conns)
        for conn in wait(conns, 0) if conns else ():  # (one poll for all: most have nothing)
            while conn in self.conns and conn.poll(0):  # (a pool rank killed: EOF)
                self.receive(conn)
        if self.own_pipes:
            for c in conns + self.writers:
                c.close()
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
    take memory), its locks, one record pipe per rank, and each process's map of the words
    that have a slot in it and views of it (their own after the fork)."""

    def __init__(self, nranks: int) -> None:
        self.nbytes = WordClocks.nbytes(Layout(nranks, MAX_BLOCKS), POOL_SLOTS)
        self.buf = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_SHARED | _MAP_NORESERVE)
        self.locks = new_locks()
        self.slot_map = SlotMap()
        self.views: dict[Layout, WordClocks] = {}  # a view per layout, kept for the next runs
        pipes = [record_pipe() for _ in range(nranks)]
        self.readers = [r for r, _ in pipes]
        self.writers = [w for _, w in pipes]
        self.last: WordClocks | None = None  # the last run's view: what to zero

    def forked(self) -> None:
        """Every rank holds its writer: the launcher's copies go (a dead rank reads as EOF)."""
        for w in self.writers:
            w.close()

    def for_run(self) -> list[Connection]:
        """The readers for a launcher's run, with what the last one wrote zeroed."""
        if self.last is not None:
            self.last.reset()
            self.last = None
        return self.readers

    def clocks(self, layout: Layout) -> WordClocks:
        """This process's view of the table for a run of ``layout`` (made once per layout: a
        view costs a dozen arrays)."""
        view = self.views.get(layout)
        if view is None:
            view = self.views[layout] = WordClocks(layout, self.buf, self.locks, self.slot_map)
        else:
            view.begin()
        return view

    def close(self) -> None:
        for c in self.readers + self.writers:
            c.close()
        self.last = None  # the mapping goes with its last view
        self.views.clear()


_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value (Python < 3.13 lacks it)


def _agent_name(rank: int, block: int | None) -> str:
    return f"rank {rank} " + ("host" if block is None else f"block {block}")


class _LaunchClocks:
    """One launch's clocks in its rank: where its blocks start, and (once it ended) the join of
    their ends, which the host acquires when it joins the launch."""

    __slots__ = ("start", "raw", "blocks", "agents", "sync", "end", "thread", "job")

    def __init__(self, start: np.ndarray) -> None:
        self.start = start
        self.raw = b""  # start's bytes (a frontier: the launch's blocks hold it)
        self.blocks: list[RaceBlockModel] = []
        self.agents: list[Any] = []
        self.sync = False  # the host joins it at once (a launch without a stream)
        self.end: np.ndarray | None = None
        self.thread = 0  # the thread that started it
        self.job: Any = None  # a stream launch: its Launch (its stream's next one starts after it)


_SYNCALL_WAIT_S = 1.0  # longest a SYNCALL leaver waits for a peer's arrival to be recorded


class RaceRankModel(RankModel):
    """The detector in one rank process: the host's clock, launch and barrier edges."""

    def __init__(self, rt: RankRuntime, det: RaceDetector) -> None:
        super().__init__(rt)
        self.det = det
        self.layout = det.layout
        assert det.clocks is not None  # prepare (or use_pool) made them
        self.clocks = det.clocks
        self.conn = det.writers[rt.rank]
        self.send_lock = threading.Lock()
        self.outbox: list[tuple] = []  # messages not sent yet (frontiers alone), in order
        self.outbox_records = 0  # the records they hold
        self.snap_ids = itertools.count(rt.rank << 40)
        self.hc = self.layout.host(rt.rank)
        self.clock = np.zeros(self.layout.size, CLOCK)
        self.clock[self.hc] = 1
        self.start_clock = self.clock
        self.launches: list[_LaunchClocks] = []  # started, not yet joined by the host
        self.current: _LaunchClocks | None = None  # the launch whose blocks are being made
        self.by_agent: dict[int, _LaunchClocks] = {}  # id(agent) -> its launch
        # the highest epoch each block-slot component reached in an ended launch: a later
        # launch's block in the slot continues from there (its epochs stay unique)
        self.slot_hi = np.zeros(self.layout.size, CLOCK)
        self.slot_comps = [self.layout.block(rt.rank, k) for k in range(self.layout.blocks)]
        self.live_slots: set[int] = set()  # the block slots of the clocks of running blocks
        self.taken: set[int] = set()  # the block slots any block took in this run
        # stream launches: issued -> (the host's clock at the issue, the stream's launch before)
        self.issued: dict[Any, tuple[np.ndarray, Any]] = {}
        self.stream_last: dict[Any, Any] = {}  # stream -> its last issued launch
        self.ends: dict[Any, np.ndarray] = {}  # a stream launch's end, until its successor starts
        self.starting: Any = None  # the launch whose launch_start comes next
        # SYNCALL rounds: (counter address, target) -> [join of the arrivals, arrivals, leaves]
        self.sync_cond = threading.Condition()
        self.sync_rounds: dict[tuple[int, int], list] = {}
        self.sync_targets: dict[int, set[int]] = {}  # a soft counter's targets seen this launch
        self.rounds = 0
        self.host_snap: int | None = None  # snapshot of the host's clock (None: changed since)
        self.host_snaps: dict[int, np.ndarray] = {}
        self.host_records: list[tuple] = []
        self.signal_races: set[tuple] = set()  # (word, kind) of host-store races reported
        self.host_tested: list[tuple[int, int]] = []  # words a host TTEST / gm_load read
        SymmetricArray.observers.append(self._host_write)
        SymmetricArray.read_observers.append(self._host_read)
        SymmetricArray.pre_observers.append(self._host_pre_write)
        # the model it observes last: a scheduled run's host waits there for its first turn,
        # and what is made above is no work for the turn's CPU then
        self.inner = det.inner(rt)
        # the host's own TNOTIFY / TWAIT / TTEST (host code may call them) synchronize too
        rt.host_agent.hooks = _HostHooks(self, rt.host_agent.hooks)
        HOOKED[0] = True

    @property
    def concurrent_launches(self) -> bool:  # type: ignore[override]
        return self.inner.concurrent_launches

    @property
    def advice(self) -> Any:
        return self.inner.advice

    def launch_issued(self, launch: Any, stream: Any) -> None:
        """A stream launch: it starts after what the host did before issuing it (not after
        what the host learns meanwhile, at a synchronize() of another stream) and after the
        end of the stream's launch before it."""
        self.inner.launch_issued(launch, stream)
        self._flush_host()
        with self.rt._lock:
            self.issued[launch] = (self.clock.copy(), self.stream_last.get(stream))
            self.stream_last[stream] = launch
        self.clock[self.hc] += 1
        self.host_snap = None

    def launch_starting(self, launch: Any) -> None:
        self.inner.launch_starting(launch)
        self.starting = launch

    def launch_start(self) -> None:
        # called under the runtime's lock, and the launch's block() calls follow under it
        self.inner.launch_start()
        job, self.starting = self.starting, None
        issued = self.issued.pop(job, None) if job is not None else None
        if issued is not None and getattr(_agent_tls, "agent", None) is not self.rt.host_agent:
            # started by its stream's worker: from its issue, after its predecessor's end
            self.start_clock = issued[0]
            end = self.ends.pop(issued[1], None) if issued[1] is not None else None
            if end is not None:
                np.maximum(self.start_clock, end, out=self.start_clock)
        else:  # on the host thread (a stream launch there waited for its predecessors)
            self._flush_host()
            self.start_clock = self.clock.copy()
            self.clock[self.hc] += 1
        self.host_snap = None
        self.current = _LaunchClocks(self.start_clock)
        self.current.thread = threading.get_ident()
        self.current.job = job if issued is not None else None
        self.launches.append(self.current)
        # the host and this launch's blocks hold it: each block's first frontier (its own
        # clock is above it) is these bytes too
        self.current.raw = self.start_clock.tobytes()
        self._queue(None, None, [], self.current.raw)

    def block(self, agent: Agent) -> BlockModel:
        launch = self.current
        assert launch is not None
        slot, fresh = self._clock_slot(launch.start, agent)
        agent.hooks = None
        inner = self.inner.block(agent)
        model = RaceBlockModel(agent, self, inner, agent.hooks, launch.start, slot, fresh)
        agent.hooks = model
        launch.blocks.append(model)
        launch.agents.append(agent)
        self.by_agent[id(agent)] = launch
        self.live_slots.add(slot)
        self.taken.add(slot)
        self._queue(slot, None, [], launch.raw)  # until its first records
        return model

    def _clock_slot(self, start: np.ndarray, agent: Agent) -> tuple[int, bool]:
        """The block slot of the clocks for a new block, and whether ``start`` holds all of the
        slot's epochs already. A slot is reused only once the new block's start knows all of
        its last user's work (the host joined that launch): a slot's component is one agent's
        history, and a block that inherits it claims to know it. A stream launch that nobody
        joined yet keeps its slot; only when every slot is held so is the oldest reused (its
        later races with this block may then be missed)."""
        live = self.live_slots
        for k in range(self.layout.blocks):  # the first slot no block took yet in this run
            if k not in live:  # holds no epoch anywhere: any start holds them all
                if k not in self.taken:
                    return k, True
                break
        free = [k for k in range(self.layout.blocks) if k not in live]
        if not free:
            assert self.current is not None  # a block is made inside a launch
            need = len(self.live_slots) + agent.block_num - len(self.current.blocks)
            raise ShmcommError(
                f"launch: {agent.block_num} blocks, but the race detector keeps clocks for "
                f"{self.layout.blocks} blocks running at once per rank (twice blocks=, at least "
                f"{MIN_BLOCK_SLOTS}); run with blocks={-(-need // 2)} or more to detect races, "
                "or with detect_races=False")
        hi = self.slot_hi
        for k in free:
            c = self.slot_comps[k]  # (six numbers: compared in Python, cheaper than numpy's)
            if all(a >= b for a, b in zip(start[c:c + PER_BLOCK].tolist(),
                                          hi[c:c + PER_BLOCK].tolist(), strict=True)):
                return k, True
        return min(free, key=lambda k: hi[self.slot_comps[k]]), False

    def launch_end(self) -> None:
        try:
            self.inner.launch_end()
        finally:
            self._ended(self._which_ended())

    def _which_ended(self) -> _LaunchClocks | None:
        """The launch that just ended: the runtime drops its agents first (under its lock)."""
        live = {id(a) for a in self.rt.agents}
        for launch in self.launches:
            if launch.end is None and not any(id(a) in live for a in launch.agents):
                return launch
        return None

    def _ended(self, launch: _LaunchClocks | None) -> None:
        if launch is None:
            return
        # joined in place (a reduction over a stack of them allocates it: page faults in situ)
        end = launch.start.copy()
        for b in launch.blocks:
            np.maximum(end, b.vs, out=end)
            for pc in (b.p2, b.p3, b.pv, b.pd):
                if pc._v is not None:  # (a pipe never used: no clock holds its epoch)
                    np.maximum(end, pc._v, out=end)
            # one message for the launch's blocks (sent below); a block without records has
            # nothing to send: its last frontier would only let the launcher forget sooner
            if b.records:
                b.flush(defer=True)
        launch.end = end
        if launch.job is not None:
            self.ends[launch.job] = end
        np.maximum(self.slot_hi, end, out=self.slot_hi)
        self.live_slots.difference_update(b.slot for b in launch.blocks)
        for a in launch.agents:
            self.by_agent.pop(id(a), None)
        if launch.sync:
            self._acquire_launch(launch)
        if not any(g.end is None for g in self.launches):
            with self.sync_cond:  # SYNCALL rounds end with their launch
                self.sync_rounds.clear()
                self.sync_targets.clear()
            # no block of this rank runs: every later access of it holds the host's clock
            self.send({}, [], self.clock, "launch end")
        else:
            with self.send_lock:
                self._send_outbox()

    def _acquire_launch(self, launch: _LaunchClocks) -> None:
        """The host joined ``launch``: its blocks' work happens before the host's next step."""
        if launch.end is None or launch not in self.launches:
            return
        self.launches.remove(launch)
        np.maximum(self.clock, launch.end, out=self.clock)
        self.host_snap = None

    def launch_joined(self, launch: Any) -> None:
        """The host returned from ``Launch.wait()`` (or ``synchronize()``) on ``launch``."""
        self.inner.launch_joined(launch)
        agents = getattr(launch, "agents", None)
        if agents:
            for g in self.launches:
                if g.agents and g.agents[0] is agents[0]:
                    self._acquire_launch(g)
                    break

    # -- SYNCALL: a barrier of one launch's blocks (all in this process) -------------------

    def syncall_arrive(self, block: RaceBlockModel, word: Any, target: int) -> None:
        key = (word.addr, target)
        with self.sync_cond:
            r = self.sync_rounds.get(key)
            if r is None:
                r = self.sync_rounds[key] = [block.vs.copy(), 0, 0]
            else:
                np.maximum(r[0], block.vs, out=r[0])
            r[1] += 1
            if word.rank >= 0:
                self.sync_targets.setdefault(word.addr, set()).add(target)
            self.sync_cond.notify_all()

    def syncall_wait(self, block: RaceBlockModel, word: Any, target: int) -> None:
        """Every arrival of the round landed; wait (briefly) until each was recorded (a peer
        records its arrival just after it lands), then acquire them all."""
        key = (word.addr, target)
        n = block.agent.block_num if word.rank < 0 else self._soft_count(word.addr, target,
                                                                           block.agent.block_num)
        with self.sync_cond:
            self.sync_cond.wait_for(lambda: self.sync_rounds[key][1] >= n, _SYNCALL_WAIT_S)
            r = self.sync_rounds[key]
            np.maximum(block.vs, r[0], out=block.vs)
            r[2] += 1
            if r[2] >= n:
                del self.sync_rounds[key]

    def _soft_count(self, addr: int, target: int, blocks: int) -> int:
        """The participants of a soft SYNCALL round: the distance to the round before it on
        the same counter; at a counter's first round of the launch the target itself (the
        counter starts at zero) or, for a counter carried over from an earlier launch, its
        largest divisor within the launch's blocks (too many only delays the leaver)."""
        with self.sync_cond:
            before = [t for t in self.sync_targets.get(addr, ()) if t < target]
        if before:
            return target - max(before)
        if target <= blocks:
            return target
        return max(d for d in range(1, blocks + 1) if target % d == 0)

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
        # a launch without a stream: the host joins the one it just started on this thread
        me = threading.get_ident()
        for g in reversed(self.launches):
            if g.thread == me and g.end is None:
                g.sync = True
                break
        self.inner.host_join()

    @property
    def inline_streams(self) -> bool:  # type: ignore[override]
        return self.inner.inline_streams

    def host_join_launch(self, first: int, blocks: int) -> None:
        for g in self.launches:  # the host joins this one now (it waits for its end)
            if g.end is None and g.agents and g.agents[0].slot == first:
                g.sync = True
                break
        self.inner.host_join_launch(first, blocks)

    def host_wait(self, site: Any, value: int, cmp: int) -> None:
        self.inner.host_wait(site, value, cmp)

    def launch_poll(self, launch: Any) -> bool:
        return self.inner.launch_poll(launch)

    def close(self) -> None:
        # a later run in this process (a pool's) must not feed a closed model
        for obs, each in ((self._host_write, SymmetricArray.observers),
                          (self._host_read, SymmetricArray.read_observers),
                          (self._host_pre_write, SymmetricArray.pre_observers)):
            if obs in each:
                each.remove(obs)
        try:  # first: a scheduled run's host passes its last turn there, and what follows is
            self.inner.close()  # no work for the turn's CPU (it is this process's own state)
        finally:
            self._flush_host()  # the host's accesses after its last launch or barrier
            with self.send_lock:
                if not any(g.end is None for g in self.launches):
                    # no block of the rank runs and its host is done: no record follows, so
                    # the frontiers after its last records would let the launcher forget
                    # nothing that could still race (a run without records sends nothing, and
                    # wakes no one)
                    while self.outbox and not self.outbox[-1][3]:
                        self.outbox.pop()
                self._send_outbox()  # before the rank reports: the launcher reads it all first

    def _host_range(self, arr: SymmetricArray, key: Any) -> tuple[int, int, int] | None:
        """What the host's access ``arr[key]`` touches in the windows; ``None`` when it touches
        nothing there or the thread is a block's (a block reading host arrays: not the host)."""
        if getattr(_agent_tls, "agent", None) is not self.rt.host_agent:
            return None
        return arr.stored_range(key)

    def _host_read(self, arr: SymmetricArray, key: Any) -> None:
        """The host read a symmetric array (an element, a ufunc on it): a read by the host."""
        where = self._host_range(arr, key)
        if where is None:
            return
        rank, lo, hi = where
        word = arr.dtype == I32 and hi - lo == 4
        # an int32 element is a word, read atomically (as gm_load): it acquires what the
        # notifies and atomics released into it (a host polling rt.signals, then reading data)
        self._host_record(where, ATOMIC if word else 0, "host read", user_site() or "<host>")
        if word and (slot := self.clocks.find(rank, lo)) is not None:
            self.clocks.acquire(slot, self.clock)
            self.host_snap = None

    def _host_pre_write(self, arr: SymmetricArray, key: Any) -> None:
        """The host is about to store into an int32 array: a store into a signal word (one
        element, or words some notify made signals) releases the host's clock into the word,
        before a waiter can see the value (host-granted credits, a flag the host raises for a
        running stream kernel after filling its data)."""
        if arr.dtype != I32:
            return
        where = self._host_range(arr, key)
        if where is None:
            return
        rank, lo, hi = where
        if hi - lo == 4 and lo < self.rt.config.signal_bytes:  # a word of the signal matrix
            slots = [self.clocks.slot(rank, lo)]
        else:
            find = self.clocks.find
            slots = [s for s in (find(rank, off) for off in range(lo, hi, 4)) if s is not None]
        if not slots:
            return
        self._host_settle()
        for s in slots:
            self.clocks.store_release(s, self.clock)
        self.clock[self.hc] += 1  # the store itself is recorded after it: covered by the release
        self.host_snap = None

    def _host_settle(self) -> None:
        """Acquire the words the host's TTESTs / gm_loads read since its last step."""
        tested, self.host_tested = self.host_tested, []
        for rank, off in tested:
            s = self.clocks.find(rank, off)
            if s is not None and self.clocks.acquire(s, self.clock):
                self.host_snap = None

    def host_notify(self, sig: Any, op: int) -> None:
        """The host's TNOTIFY (or scalar atomic store / add): release its clock into the word."""
        self._host_settle()
        p = sig.ptr
        self.clocks.release(self.clocks.slot(p.rank, p.offset), self.clock, bool(op))
        self.clock[self.hc] += 1
        self.host_snap = None

    def host_acquire(self, words: list[tuple[int, int]], now: bool) -> None:
        """The host's TWAIT returned (``now``) or its TTEST / gm_load read ``words`` (acquired
        at its next step, after the read: the value it saw may come from a later notify)."""
        self._host_settle()
        if not now:
            self.host_tested.extend(words)
            return
        for rank, off in words:
            s = self.clocks.find(rank, off)
            if s is not None and self.clocks.acquire(s, self.clock):
                self.host_snap = None

    def _host_write(self, arr: SymmetricArray, key: Any) -> None:
        """The host stored into a symmetric array (``x[key] = ...``): a write by the host."""
        where = self._host_range(arr, key)
        if where is None:
            return
        rank, lo, hi = where
        site = user_site() or "<host>"
        self._host_record(where, WRITE, "host store", site)
        hc = self.hc
        for off, comp in self.clocks.host_store(rank, lo, hi, hc, self.clock):
            r, b = self.layout.agent(comp)
            self.signal_race(rank, off, "store", (
                f"rank {self.rt.rank} host stored it with a plain store at {site}; "
                f"{_agent_name(r, b)} notified it earlier and nothing orders that notify before "
                "the store (a reset other than rt.reset_signals(), with no barrier after the "
                "notifier's launch), so the store may wipe it\n    fix: zero signals with "
                "rt.reset_signals(), or put rt.barrier() after the notifier's launch and before "
                "the store"), None)

    def _host_record(self, where: tuple[int, int, int], flags: int, op: str, site: str) -> None:
        """One access of the host to ``(rank, first byte, end byte)``, at its clock now."""
        if self.host_tested:
            self._host_settle()
        if self.host_snap is None:
            self.host_snap = next(self.snap_ids)
            self.host_snaps[self.host_snap] = self.clock.copy()
        rank, lo, hi = where
        hc = self.hc
        recs = self.host_records
        if recs:  # the same access again (a loop over elements): widen the last record
            last = recs[-1]
            if (last[0][1] == rank and last[3] == flags and last[6] == self.host_snap
                    and last[9] == site and last[1] <= hi and lo <= last[2]):
                recs[-1] = (last[0], min(last[1], lo), max(last[2], hi), *last[3:])
                return
        recs.append((_gm_win(rank), lo, hi, flags, hc, int(self.clock[hc]), self.host_snap, hc,
                     int(self.clock[hc]), site, self.rt.rank, None, "host", op))

    def signal_race(self, rank: int, off: int, kind: str, text: str, block: int | None) -> None:
        """Report a race on a signal word between a plain host store and a notify."""
        if (rank, off, kind) in self.signal_races:
            return
        self.signal_races.add((rank, off, kind))
        self.send({}, [(self.rt.rank, block, f"data race on signal word {off:#x} of rank "
                        f"{rank}: {text}")], None, "race")

    def _flush_host(self) -> None:
        if self.host_tested:
            self._host_settle()
        recs, self.host_records = self.host_records, []
        snaps, self.host_snaps = self.host_snaps, {}
        self.host_snap = None
        self.send(snaps, recs)

    def send(self, snaps: dict[int, np.ndarray], records: list[tuple],
             frontier: np.ndarray | None = None, block: int | str | None = None,
             defer: bool = False) -> None:
        """Records (with the snapshots they use) to the launcher. ``frontier``: a clock that
        every later access of the host (``block`` None), of block ``block``, or of the whole
        rank once its blocks are done (``block`` "launch end") will hold: the launcher forgets
        what every frontier covers. ``defer``: the caller sends the outbox soon (a launch's
        end, one message for all its blocks)."""
        if not records and frontier is None:
            return  # (a "race" message carries its text in records)
        # clocks travel as bytes (pickling an ndarray cost five times its bytes' pickle, and
        # its unpickling six times), every snapshot of a message in one buffer; the bytes are
        # a copy too: the message may wait in the outbox while the clock moves on
        packed = (list(snaps), b"".join([v.tobytes() for v in snaps.values()])) if snaps else None
        self._queue(block, packed, records, None if frontier is None else frontier.tobytes(),
                    defer)

    def _queue(self, block: int | str | None, packed: tuple | None, records: list[tuple],
               raw: bytes | None, defer: bool = False) -> None:
        """:meth:`send` with the snapshots and the frontier as bytes already."""
        with self.send_lock:
            self.outbox.append((self.rt.rank, block, packed, records, raw))
            self.outbox_records += len(records)
            if defer or (not self.det.config.race_exitfirst and not records and (
                    block != "launch end" or self.outbox_records < _SEND_RECORDS)):
                # a frontier alone only lets the launcher forget sooner: it goes with the next
                # records a block flushes mid-launch, a launch's end once the outbox holds
                # enough records, the host's, or the rank's end
                return
            self._send_outbox()

    def _send_outbox(self) -> None:
        batch, self.outbox = self.outbox, []
        self.outbox_records = 0
        if not batch:
            return
        try:
            self.conn.send(batch)
        except (BrokenPipeError, OSError):
            pass  # the launcher is gone: the run is over anyway


def _words(sig: Any) -> list[tuple[int, int]]:
    """``(rank, byte offset)`` of every word of a Signal / Signal2D."""
    p = sig.ptr
    if hasattr(sig, "row_stride"):  # a Signal2D
        return [(p.rank, p.offset + 4 * (r * sig.row_stride + c))
                for r in range(sig.rows) for c in range(sig.cols)]
    return [(p.rank, p.offset)]


class _HostHooks:
    """The host agent's hooks under the detector: a TNOTIFY in host code releases the host's
    clock into the word, a TWAIT that returned and a TTEST acquire the words' clocks (as a
    block's do), and so do the host's scalar atomics and int32 gm_loads; every call then goes
    on to the model's own host hooks (schedule mode's turns), if any."""

    def __init__(self, rm: RaceRankModel, inner: Any) -> None:
        self.rm, self.inner = rm, inner

    def __getattr__(self, name: str) -> Any:  # the inner hooks' others (copy_begin, ...)
        inner = self.__dict__.get("inner")
        if inner is None:
            return _ignore
        return getattr(inner, name)

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.inner is not None:
            self.inner.notify(sig, value, op)
        self.rm.host_notify(sig, op)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if self.inner is not None:
            self.inner.wait(sig, value, cmp)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self.rm.host_acquire(_words(sig), True)
        if self.inner is not None:
            self.inner.waited(sig, value, cmp)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        if self.inner is not None:
            self.inner.test(sig, value, cmp)
        self.rm.host_acquire(_words(sig), False)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        if self.inner is not None and hasattr(self.inner, "gm_access"):
            self.inner.gm_access(op, ptr, nbytes, write, atomic)
        if ptr.dtype == I32:
            if write and atomic:
                self.rm.host_notify(_Word(ptr), 0)
            if not write or op != "gm_atomic_store":
                self.rm.host_acquire([(ptr.rank, ptr.offset)], False)


class _Word:
    """A scalar atomic's word, as a notify's signal."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: Any) -> None:
        self.ptr = ptr


def _ignore(*args: Any, **kw: Any) -> None:
    return None


_OP_NAMES: dict[tuple[str, str], str] = {}
_GM_WINS: dict[int, tuple[str, int]] = {}


def _gm_win(rank: int) -> tuple[str, int]:
    """The record window of ``rank``'s GM: one tuple object per rank, which a batch of records
    pickles once."""
    win = _GM_WINS.get(rank)
    if win is None:
        win = _GM_WINS[rank] = ("gm", rank)
    return win


def _op_name(copy_op: str, what: str) -> str:
    """``TLOAD``, or ``TPUT (its TLOAD)`` inside a copy: one string object per name, so a
    batch of records pickles it once."""
    name = _OP_NAMES.get((copy_op, what))
    if name is None:
        name = _OP_NAMES[(copy_op, what)] = f"{copy_op} (its {what})" if copy_op else what
    return name


def _block_start(start: np.ndarray, hi: np.ndarray | None, s: int) -> np.ndarray:
    """A block's first clock: its launch's ``start``, past its slot's last epochs ``hi`` (the
    slot's six components; ``None``: start holds them), one step on in its scalar unit ``s``."""
    v = start.copy()
    if hi is not None:
        part = v[s:s + PER_BLOCK]
        np.maximum(part, hi, out=part)
    v[s] += 1
    return v


class _PipeClock:
    """The clock of one queued pipe (MTE2 or MTE3) of a block: its work runs after what the
    scalar unit issued before it (``joined``: it holds the scalar unit's clock already) and
    gets a new epoch each time someone observes the pipe (an event, a drain). Made at its first
    use (most blocks use few of their pipes): until then no clock holds its epoch."""

    __slots__ = ("_v", "origin", "comp", "name", "snap", "joined", "busy")

    def __init__(self, origin: tuple[np.ndarray, np.ndarray | None, int], comp: int,
                 name: str) -> None:
        self._v: np.ndarray | None = None
        self.origin = origin  # its block's first clock, as _block_start's arguments
        self.comp, self.name = comp, name
        self.snap: int | None = None
        self.joined = True
        # work, an event or a join since the last drain (a drain of an idle pipe teaches the
        # scalar unit nothing: it is skipped, the most frequent call of a kernel's end)
        self.busy = False

    @property
    def v(self) -> np.ndarray:
        v = self._v
        if v is None:
            v = self._v = _block_start(*self.origin)
            v[self.comp] += 1  # the block's first clock holds the slot's last epoch: a new one
        return v

    def join(self, other: np.ndarray) -> None:
        v = self.v
        np.maximum(v, other, out=v)
        self.snap = None
        self.busy = True

    def advance(self) -> None:
        self.v[self.comp] += 1
        self.snap = None
        self.busy = True


class RaceBlockModel(BlockModel):
    """One block: forwards everything to the inner model, and keeps the block's clocks (its
    scalar unit ``vs``, pipes ``p2`` (MTE2) and ``p3`` (MTE3)) and access records."""

    def __init__(self, agent: Agent, rank_model: RaceRankModel, inner: BlockModel,
                 inner_hooks: Any, start: np.ndarray, slot: int, fresh: bool = False) -> None:
        super().__init__(agent)
        self.inner = inner
        self.ih = inner_hooks
        self.rm = rank_model
        self.clocks = rank_model.clocks
        self.rank = agent.rank
        self.block_idx = agent.block_idx
        self.slot = slot  # of its clocks (see RaceRankModel._clock_slot)
        s = rank_model.slot_comps[slot]
        self.cs, self.cg = s, s + G3
        # continue the slot's epochs past its last launch's (``fresh``: start has)
        origin = (start, None if fresh else rank_model.slot_hi[s:s + PER_BLOCK].copy(), s)
        self.vs = _block_start(*origin)
        self.p2 = _PipeClock(origin, s + MTE2, "MTE2")
        self.p3 = _PipeClock(origin, s + MTE3, "MTE3")
        self.pv = _PipeClock(origin, s + V, "V")  # the tile vector instructions (PIPE_V)
        self.pd = _PipeClock(origin, s + D, "DMA")  # TPUT_ASYNC / TGET_ASYNC copies
        self.dma_marks: dict[int, np.ndarray] = {}  # id(copy) -> the engine's clock after it
        self.snap_s: int | None = None
        self.marks: dict[tuple[int, int, int], np.ndarray] = {}
        self.snaps: dict[int, np.ndarray] = {}
        self.records: list[list] = []
        self.ub_wins: dict[int, tuple] = {}  # tile uid -> its record window (one object each)
        self.sites = SiteCache()  # the last access's site (holds a frame: cleared at the end)
        self.copy_op = ""
        self.copy_site = ""  # the line of the copy being issued (its TLOADs / TSTOREs share it)
        self.last_async = "TPUT_ASYNC"  # the async copy being posted (its copy_begin's op)
        # word clocks a TTEST read (slots), or words a gm_load / atomic add read ((rank,
        # offset): their clock may be made after the hook): acquired at the block's next step
        self.tested: list[Any] = []
        # a waiting block calls idle at every poll: the inner model's own, without a hop here
        # (the method is still defined below, for the seam). Only that one: at 30 attributes
        # CPython stops sharing the instances' attribute keys, and making one costs half again
        self.idle = inner.idle  # type: ignore[method-assign]

    @property
    def tracer(self) -> Any:
        return self.inner.tracer

    # the inner model's answers: an interleaving or a semantics below may define them (but
    # acts_on_fences stays True: the detector's clocks need every barrier and dsb)
    @property
    def pending(self) -> bool:  # type: ignore[override]
        return self.inner.pending

    def retire_due(self) -> None:
        self.inner.retire_due()

    def mark(self, pipe: int) -> Any:
        return self.inner.mark(pipe)

    def completed(self, pipe: int, mark: Any) -> bool:
        return self.inner.completed(pipe, mark)

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
        self._add(win, lo, hi, flags, comp, int(v[comp]), snap, int(self.vs[self.cs]), pipe,
                  op, site)

    def _add(self, win: tuple, lo: int, hi: int, flags: int, comp: int, epoch: int, snap: int,
             issue: int, pipe: str, op: str, site: str) -> None:
        """One access record (``epoch``: ``comp``'s, ``issue``: the scalar unit's); the same
        access again (a loop over a tile's rows) widens the last one."""
        recs = self.records
        if recs:
            last = recs[-1]
            if (last[6] == snap and last[3] == flags and last[1] <= hi and lo <= last[2]
                    and last[0] == win and last[9] == site and last[13] == op):
                if lo < last[1]:
                    last[1] = lo
                if hi > last[2]:
                    last[2] = hi
                return
        recs.append([win, lo, hi, flags, comp, epoch, snap, self.cs, issue, site, self.rank,
                     self.block_idx, pipe, op])

    def flush_some(self) -> None:
        """Send the records once there are many (after an instruction's last record: its
        records share a snapshot that a flush forgets)."""
        if len(self.records) >= _FLUSH_RECORDS:
            self.flush()

    def flush(self, defer: bool = False) -> None:
        """Send this block's records (and the clock snapshots they use) to the launcher
        (``defer``: with the rank's next message: the launch's end sends every block's in one)."""
        recs, self.records = self.records, []
        snaps, self.snaps = self.snaps, {}
        # sent again when used
        self.snap_s = self.p2.snap = self.p3.snap = self.pv.snap = self.pd.snap = None
        # every later access of this block holds vs: its pipes join vs before they issue
        self.rm.send(snaps, [tuple(r) for r in recs], self.vs, self.slot, defer)

    @staticmethod
    def _ranges(g: GlobalTensor) -> list[tuple[int, int]]:
        """The byte ranges of ``g`` (one per row when it is strided)."""
        p = g.ptr
        if g.rows <= 1 or g.row_stride == g.cols:
            return [(p.offset, p.offset + g.extent_bytes)]
        row, width = g.pitch_bytes(), g.cols * p.itemsize
        return [(p.offset + r * row, p.offset + r * row + width) for r in range(g.rows)]

    def _pipe_access(self, pc: _PipeClock, g: GlobalTensor, tile: Tile, atomic: int) -> None:
        """A TLOAD (``pc`` is MTE2: reads GM, writes the tile) or TSTORE (MTE3: the reverse).
        (The hot path of a kernel's data: its clocks are read once for both records.)"""
        load = pc is self.p2
        site = self.copy_site or cached_site(self.sites, self.agent)  # a copy's: its line
        op = _op_name(self.copy_op, "TLOAD" if load else "TSTORE")
        if not pc.joined:
            pc.join(self.vs)
            pc.joined = True
        snap = pc.snap
        if snap is None:
            snap = pc.snap = self._snap(pc.v)
        pc.busy = True
        comp, name = pc.comp, pc.name
        epoch, issue = int(pc.v[comp]), int(self.vs[self.cs])
        p = g.ptr
        gwin = _gm_win(p.rank)
        gflags = 0 if load else WRITE | PIPE3 | (ATOMIC if atomic else 0)
        if g.rows <= 1 or g.row_stride == g.cols:
            off = p.offset
            self._add(gwin, off, off + g.extent_bytes, gflags, comp, epoch, snap, issue, name,
                      op, site)
        else:
            for lo, hi in self._ranges(g):
                self._add(gwin, lo, hi, gflags, comp, epoch, snap, issue, name, op, site)
        nbytes = min(g.rows, tile.rows) * tile.cols * tile.array.itemsize
        off = tile.uoff  # (a view's bytes in its tile's)
        uwin = self.ub_wins.get(tile.uid)
        if uwin is None:
            uwin = self.ub_wins[tile.uid] = ("ub", self.rank, self.block_idx, tile.uid)
        self._add(uwin, off, off + nbytes, WRITE if load else 0, comp, epoch, snap, issue, name,
                  op, site)
        if len(self.records) >= _FLUSH_RECORDS:
            self.flush()

    def _drain(self, pc: _PipeClock) -> None:
        """The scalar unit waited for the pipe's work so far."""
        if not pc.busy:
            return
        np.maximum(self.vs, pc.v, out=self.vs)
        self._s_changed()
        pc.advance()
        pc.busy = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.inner.start()

    def finish(self) -> None:
        self.sites.clear()  # (the kernel's frames go now, not with this model)
        if self.tested:
            self._settle()
        self.inner.finish()
        self._drain(self.p2)
        self._drain(self.p3)
        self._drain(self.pv)
        self._drain(self.pd)  # the kernel's end lands every copy still in flight
        vs = self.vs  # the kernel's end fences (read as Python ints: cheaper than numpy's)
        if vs.item(self.p3.comp) > vs.item(self.cg):
            vs[self.cg] = vs.item(self.p3.comp)

    def stop(self) -> None:
        self.sites.clear()
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
        if pipe != PIPE_ALL or self.p2.busy or self.p3.busy or self.pv.busy:
            self._drained(pipe)

    def notify_drain(self) -> None:
        # the inner model's own (hazard lets queued copies reach their due time first): the
        # base class's would call barrier and skip it, changing the semantics under observation
        if self.tested:
            self._settle()
        self.inner.notify_drain()
        if self.p2.busy or self.p3.busy or self.pv.busy:  # (a notify after the first of a row
            self._drained(PIPE_ALL)                       # drains nothing)

    def _drained(self, pipe: int) -> None:
        """The scalar unit waited for ``pipe`` (``PIPE_ALL``: every queued pipe)."""
        if pipe == PIPE_ALL:  # (the busy tests inline: a TNOTIFY ends with this barrier)
            if self.p2.busy:
                self._drain(self.p2)
            if self.p3.busy:
                self._drain(self.p3)
            if self.pv.busy:
                self._drain(self.pv)
        elif (pc := self._pipe(pipe)) is not None:  # a queued pipe: MTE2, MTE3 or V
            self._drain(pc)

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
                "be lost to it\n    fix: put rt.barrier() between the host's store and the "
                "launch that notifies"), self.block_idx)
        self.vs[self.cs] += 1
        self._s_changed()
        if self.ih is not None:
            self.ih.notify(sig, value, op)

    def _slots(self, sig: Any) -> list[int]:
        """The slots of ``sig``'s words (a Signal2D's: kept by the table)."""
        p = sig.ptr
        if hasattr(sig, "row_stride"):  # a Signal2D
            return self.clocks.signal_slots(p.rank, p.offset, sig.rows, sig.cols, sig.row_stride)
        return [self.clocks.slot(p.rank, p.offset)]

    def _acquire_slots(self, slots: list[int]) -> None:
        if self.clocks.acquire_all(slots, self.vs):
            self._s_changed()

    def _settle(self) -> None:
        tested, self.tested = self.tested, []
        find = self.clocks.find
        found = [s if type(s) is int else find(*s) for s in tested]
        slots = [s for s in found if s is not None]
        if slots:
            self._acquire_slots(slots)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if self.tested:
            self._settle()
        if self.ih is not None:
            self.ih.wait(sig, value, cmp)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self._acquire_slots(self._slots(sig))
        if self.ih is not None:
            self.ih.waited(sig, value, cmp)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        # this hook runs before TTEST reads: acquire at the block's next step, after the read,
        # so the clock holds every notify whose value the read may have seen (whatever it
        # returned: an over-approximation that may hide a race, never invent one)
        if self.tested:
            self._settle()
        self.tested.extend(self._slots(sig))
        if self.ih is not None:
            self.ih.test(sig, value, cmp)

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        self.copy_op = op
        self.copy_site = cached_site(self.sites, self.agent)
        if op.endswith("_ASYNC"):
            self.last_async = op
        if self.ih is not None:
            self.ih.copy_begin(op, dst, src)

    def copy_end(self, op: str) -> None:
        self.copy_op = self.copy_site = ""
        if self.ih is not None:
            self.ih.copy_end(op)

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        if self.ih is not None:
            self.ih.expect_blocks(kernel, param, count)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        if self.tested:
            self._settle()
        word = ptr.dtype == I32  # an int32 element is a word: loads and atomics synchronize
        if word and not write:
            atomic = True  # gm_load reads an int32 word atomically
        if self.snap_s is None:
            self.snap_s = self._snap(self.vs)
        flags = (WRITE if write else 0) | (ATOMIC if atomic else 0)
        self._record(_gm_win(ptr.rank), ptr.offset, ptr.offset + nbytes, flags, self.cs,
                     self.snap_s, "S", op, self.vs, cached_site(self.sites, self.agent))
        self.flush_some()
        if word and atomic:
            if write:  # an atomic store / add releases what the block knows into the word
                self.clocks.release(self.clocks.slot(ptr.rank, ptr.offset), self.vs, False)
                self.vs[self.cs] += 1
                self._s_changed()
            if op != "gm_atomic_store":  # a load or an add reads it: acquire once it has
                # (the word's clock is looked up then too: a release may make it meanwhile)
                self.tested.append((ptr.rank, ptr.offset))
        if self.ih is not None:
            self.ih.gm_access(op, ptr, nbytes, write, atomic)

    # -- SYNCALL and the DMA engine -----------------------------------------------------------

    def syncall_arrive(self, word: Any, target: int) -> None:
        if self.tested:
            self._settle()
        self.rm.syncall_arrive(self, word, target)
        self.vs[self.cs] += 1
        self._s_changed()
        if self.ih is not None:
            self.ih.syncall_arrive(word, target)

    def syncall_wait(self, word: Any, target: int) -> None:
        if self.ih is not None:  # (a scheduling model waits for its turn here)
            self.ih.syncall_wait(word, target)

    def syncall_done(self, word: Any, target: int) -> None:
        self.rm.syncall_wait(self, word, target)
        self._s_changed()
        if self.ih is not None:
            self.ih.syncall_done(word, target)

    def async_issue(self, event: Any) -> None:
        """The copy's accesses, on the DMA engine's clock: after what the scalar unit issued
        before it, ordered before the block's later work only by its Wait / Test."""
        copy = event.copy
        if copy is not None:
            if self.tested:
                self._settle()
            pd = self.pd
            pd.join(self.vs)  # (busy)
            pd.snap = self._snap(pd.v)
            site = cached_site(self.sites, self.agent)
            op = self.last_async
            for g, flags in ((copy.src, 0), (copy.dst, WRITE)):
                for lo, hi in self._ranges(g):
                    self._record(_gm_win(g.ptr.rank), lo, hi, flags, pd.comp, pd.snap, pd.name,
                                 f"{op} (the DMA copy)", pd.v, site)
            self.flush_some()
            self.dma_marks[id(copy)] = pd.v.copy()
            pd.advance()  # the next copy is a later event of the engine
        if self.ih is not None:
            self.ih.async_issue(event)

    def async_complete(self, event: Any) -> None:
        """``Wait`` returned or ``Test`` said True: the copy and the earlier ones of its session
        landed (their marks are below this one's on the engine's component)."""
        mark = self.dma_marks.pop(id(event.copy), None)
        if mark is not None:
            np.maximum(self.vs, mark, out=self.vs)
            self._s_changed()
        if self.ih is not None:
            self.ih.async_complete(event)
