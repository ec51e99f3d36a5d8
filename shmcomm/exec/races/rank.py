"""The race detector's rank side: one :class:`RaceRankModel` per rank process, around the run's
own rank model. It keeps the launches' clocks, the host's clock and accesses (symmetric-array
stores and reads, host TNOTIFY / TWAIT / atomics, ``rt.barrier()``), SYNCALL rounds, and the
outbox of records its blocks (:mod:`.block`) and host send to the launcher (:mod:`.launcher`).
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.agent import _tls as _agent_tls
from ...core.gm import I32
from ...core.heap import SymmetricArray
from ...core.observer import BlockObserver, RankObserver
from ...errors import ShmcommError
from ..hazard.report import user_site
from .block import RaceBlockModel, agent_name, gm_win
from .clocks import CLOCK, MIN_BLOCK_SLOTS, PER_BLOCK
from .shadow import ATOMIC, WRITE

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.runtime import RankRuntime
    from .launcher import RaceDetector

# a launch's end sends what the rank's outbox holds once it holds this many records (without
# race_exitfirst): a run of short launches sends a message every few launches, not one each
_SEND_RECORDS = 512




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


class RaceRankModel(RankObserver):
    """The detector in one rank process: the host's clock, launch and barrier edges."""

    def __init__(self, rt: RankRuntime, det: RaceDetector) -> None:
        super().__init__(rt)
        self.det = det
        self.layout = det.layout
        assert det.clocks is not None  # prepare (or use_pool) made them
        self.clocks = det.clocks
        self.conn = det.writers[rt.rank]
        # this process writes only its own pipe: the other ranks' write ends (and the readers)
        # it inherited go, so a rank that dies mid-batch reads as end of file to the launcher
        for r, c in enumerate(det.writers):
            if r != rt.rank:
                c.close()
        for c in det.conns:
            c.close()
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

    def host(self) -> BlockObserver:
        """The host's own TNOTIFY / TWAIT / TTEST (host code may call them) synchronize too."""
        return _HostHooks(self)

    def launch_issued(self, launch: Any, stream: Any) -> None:
        """A stream launch: it starts after what the host did before issuing it (not after
        what the host learns meanwhile, at a synchronize() of another stream) and after the
        end of the stream's launch before it."""
        self._flush_host()
        with self.rt._lock:
            self.issued[launch] = (self.clock.copy(), self.stream_last.get(stream))
            self.stream_last[stream] = launch
        self.clock[self.hc] += 1
        self.host_snap = None

    def launch_starting(self, launch: Any) -> None:
        self.starting = launch

    def launch_start(self) -> None:
        # called under the runtime's lock, and the launch's block() calls follow under it
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

    def block(self, agent: Agent) -> BlockObserver:
        launch = self.current
        assert launch is not None
        slot, fresh = self._clock_slot(launch.start, agent)
        model = RaceBlockModel(agent, self, launch.start, slot, fresh)
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
                f"{self.layout.blocks} blocks running at once per rank (the widest launch the "
                f"run may make, twice blocks=, at least {MIN_BLOCK_SLOTS}) and launches on "
                f"streams already hold the others: join one first (synchronize()), run with "
                f"blocks={-(-need // 2)} or more to detect races, or with detect_races=False")
        hi = self.slot_hi
        for k in free:
            c = self.slot_comps[k]  # (six numbers: compared in Python, cheaper than numpy's)
            if all(a >= b for a, b in zip(start[c:c + PER_BLOCK].tolist(),
                                          hi[c:c + PER_BLOCK].tolist(), strict=True)):
                return k, True
        return min(free, key=lambda k: hi[self.slot_comps[k]]), False

    def launch_end(self) -> None:
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
        self._flush_host()
        self.rounds += 1
        self.clocks.barrier_arrive(self.rounds, self.clock)
        self.clock[self.hc] += 1
        self.host_snap = None

    def barrier_exit(self) -> None:
        self.clocks.barrier_leave(self.rounds, self.clock)
        self.host_snap = None
        self.send({}, [], self.clock)

    def host_join(self) -> None:
        # a launch without a stream: the host joins the one it just started on this thread
        me = threading.get_ident()
        for g in reversed(self.launches):
            if g.thread == me and g.end is None:
                g.sync = True
                break

    def host_join_launch(self, first: int, blocks: int) -> None:
        for g in self.launches:  # the host joins this one now (it waits for its end)
            if g.end is None and g.agents and g.agents[0].slot == first:
                g.sync = True
                break

    def close(self) -> None:
        # a later run in this process (a pool's) must not feed a closed model
        for obs, each in ((self._host_write, SymmetricArray.observers),
                          (self._host_read, SymmetricArray.read_observers),
                          (self._host_pre_write, SymmetricArray.pre_observers)):
            if obs in each:
                each.remove(obs)
        # (after the model's close: a scheduled run's host passes its last turn there, and what
        # follows is no work for the turn's CPU, it is this process's own state)
        self._flush_host()  # the host's accesses after its last launch or barrier
        with self.send_lock:
            if not any(g.end is None for g in self.launches):
                # no block of the rank runs and its host is done: no record follows, so the
                # frontiers after its last records would let the launcher forget nothing that
                # could still race (a run without records sends nothing, and wakes no one)
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
                f"{agent_name(r, b)} notified it earlier and nothing orders that notify before "
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
        recs.append((gm_win(rank), lo, hi, flags, hc, int(self.clock[hc]), self.host_snap, hc,
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


class _HostHooks(BlockObserver):
    """The host agent's scalar instructions under the detector: a TNOTIFY in host code releases
    the host's clock into the word, a TWAIT that returned and a TTEST acquire the words' clocks
    (as a block's do), and so do the host's scalar atomics and int32 gm_loads."""

    def __init__(self, rm: RaceRankModel) -> None:
        super().__init__(rm.rt.host_agent)
        self.rm = rm

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.rm.host_notify(sig, op)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self.rm.host_acquire(_words(sig), True)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        self.rm.host_acquire(_words(sig), False)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
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
