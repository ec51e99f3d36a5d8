"""The race detector's launcher side: the run model made before the ranks fork, the record
pipes it reads while they run, and the report it makes at the end.

What it learns comes from each rank's :class:`~.rank.RaceRankModel` (the rank process) and its
blocks' :class:`~.block.RaceBlockModel` (the block threads); the edges it judges are described in
:mod:`shmcomm.exec.races`.
"""

from __future__ import annotations

import fcntl
import mmap
import time
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe, wait
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import MAX_BLOCKS, Config, parse_suppressions
from ...core.observer import Observer, RankObserver
from ...errors import Failure, ShmcommWarning
from .clocks import CLOCK, MAP_NORESERVE, POOL_SLOTS, Layout, SlotMap, WordClocks, block_slots, new_locks
from .frames import Closed, Cut, recv_until
from .report import render
from .shadow import Access, Shadow

if TYPE_CHECKING:
    from ...core.runtime import RankRuntime

_RECEIVE_BATCHES = 64  # batches of one rank the launcher takes per wake-up
_FINAL_GRACE_S = 2.0  # at the run's end, how long the rest of a batch may take to arrive

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


class RaceDetector(Observer):
    """The run's detector on the launcher's side: made before the ranks fork (it owns the word
    clocks and one record pipe per rank), the factory of its rank parts, and the reader of
    what they record."""

    name = "races"

    def __init__(self, config: Config,
                 rank_model: Callable[[RankRuntime, RaceDetector], RankObserver]) -> None:
        super().__init__(config)
        # the rank side (the rank process's part, :mod:`.rank`) comes as an argument: this
        # module, loaded in the launcher, imports none of it
        self.rank_model = rank_model
        self.layout = Layout(config.nranks, block_slots(config.blocks, config.nranks))
        # the word clocks and the record pipes: made by ``prepare`` (before the ranks fork), or
        # a pool's, made with its ranks (``use_pool``)
        self.clocks: WordClocks | None = None
        self.conns: list[Connection] = []  # the launcher reads these
        self.writers: list[Connection] = []  # ranks write into theirs
        self.own_pipes = True  # False: a pool's, left open for its next run
        self.shadow = Shadow(self.layout, suppress=parse_suppressions(config.race_suppressions))
        self.reported = 0
        self.rank_of: dict[int, int] = {}  # id(reader) -> its rank
        self.cut: dict[int, str] = {}  # rank -> how its records were cut off (it died mid-batch)

    def __getstate__(self) -> dict[str, Any]:
        """What a pool's rank process gets with its job: no launcher state (the shadow, the
        pipes, the clocks' mapping); ``use_pool`` there attaches the pool's."""
        state = self.__dict__.copy()
        state.update(clocks=None, conns=[], writers=[], shadow=None, rank_of={}, cut={})
        return state

    @classmethod
    def pool_state(cls, nranks: int) -> PoolState:
        return PoolState(nranks)

    def use_pool(self, state: Any, rank: int | None) -> None:
        """Use a pool's word-clock memory and record pipes (made before its ranks forked, so
        every rank reaches them): ``state.for_run()`` in the launcher (the readers, with what
        the last run wrote zeroed), its writers in a rank."""
        if rank is None:
            self.conns = state.for_run()
            self.rank_of = {id(c): r for r, c in enumerate(self.conns)}
            self.clocks = state.last = state.clocks(self.layout)  # zeroed before the next run
        else:
            self.clocks = state.clocks(self.layout)
            self.writers = state.writers
        self.own_pipes = False

    def rank(self, rt: RankRuntime) -> RankObserver:
        return self.rank_model(rt, self)

    def prepare(self, ctl: Any) -> None:
        if self.clocks is None:  # a run of its own: the ranks inherit these at their fork
            self.clocks = WordClocks(self.layout)
            pipes = [record_pipe() for _ in range(self.config.nranks)]
            self.conns = [r for r, _ in pipes]
            self.writers = [w for _, w in pipes]
            self.rank_of = {id(c): r for r, c in enumerate(self.conns)}

    def started(self) -> None:
        """Every rank holds its write end now: the launcher's copies go, so that a rank that
        dies reads as end of file (a pool's were closed at its fork)."""
        if self.own_pipes:
            for w in self.writers:
                w.close()

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

    def _receive_one(self, conn: Connection, final: bool = False) -> bool:
        """One batch, waiting for it at most until the run's deadline (``final``: the ranks
        have ended, a short grace); ``False`` once the rank's pipe is closed or cut."""
        now = time.monotonic()
        until = now + _FINAL_GRACE_S if final else max(
            self.read_deadline or now + self.config.timeout, now + _FINAL_GRACE_S)
        try:
            batch = recv_until(conn, until)
        except (Closed, Cut, EOFError, OSError) as exc:
            self.conns = [c for c in self.conns if c is not conn]
            if isinstance(exc, Cut):  # its framing is lost: nothing more is read from it
                self.cut.setdefault(self.rank_of.get(id(conn), -1), str(exc))
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
                if not self._receive_one(conn, final=True):
                    break
        if self.own_pipes:
            for c in conns + self.writers:
                c.close()
        self.conns = []
        if self.shadow.suppressed:  # a passing run shows them too (the CLI prints the summary)
            warnings.warn(self.summary(), ShmcommWarning, stacklevel=2)
        crashed = [Failure(rank, None, "crash", f"rank process died in the middle of sending its "
                           f"race records ({why}); the races of its lost records are not judged")
                   for rank, why in sorted(self.cut.items()) if rank >= 0]
        return crashed + ([] if self.reported else self._report())

    def summary(self) -> str:
        """The races the run's suppressions accepted (they fail nothing), one line each."""
        got = self.shadow.suppressed if self.shadow is not None else {}
        if not got:
            return ""
        lines = [f"{len(got)} race{'s' if len(got) != 1 else ''} suppressed (race_suppressions):"]
        for (a, b, win), (rule, n) in got.items():
            where = f"rank {win[1]}'s window" if win[0] == "gm" else f"rank {win[1]}'s UB"
            text = f"race:{rule[0]}" + (f" {rule[1]}" if rule[1] else "")
            lines.append(f"  {a} x {b} on {where}, {n} time{'s' if n != 1 else ''} ({text})")
        return "\n".join(lines)

    def _report(self) -> list[Failure]:
        if not self.shadow.found():
            return []
        self.reported = self.shadow.found()
        # in the order of who raced where, not of arrival (records from several ranks arrive
        # in any order), so a scheduled run's report is the same for the same seed
        races = sorted(self.shadow.races, key=_race_order)
        direct = sorted(self.shadow.direct, key=lambda d: (d[0], -1 if d[1] is None else d[1], d[2]))
        if races:
            x, y = races[0]
            rank, block = y.rank, y.block
        else:
            rank, block = direct[0][0], direct[0][1]
        return [Failure(rank, block, "race", render(self.shadow, races, direct))]


def _race_order(pair: tuple[Access, Access]) -> tuple:
    x, y = pair
    return (y.rank, -1 if y.block is None else y.block, x.rank, -1 if x.block is None else x.block,
            str(y.win), y.lo, y.site, x.site)


class PoolState:
    """The race detector's shared state for every run of a pool, made before its ranks fork:
    word-clock memory for the largest layout (``MAP_NORESERVE``: only the pages a run touches
    take memory), its locks, one record pipe per rank, and each process's map of the words
    that have a slot in it and views of it (their own after the fork)."""

    def __init__(self, nranks: int) -> None:
        self.nbytes = WordClocks.nbytes(Layout(nranks, MAX_BLOCKS), POOL_SLOTS)
        self.buf = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_SHARED | MAP_NORESERVE)
        self.locks = new_locks()
        self.slot_map = SlotMap()
        self.views: dict[Layout, WordClocks] = {}  # a view per layout, kept for the next runs
        pipes = [record_pipe() for _ in range(nranks)]
        self.readers = [r for r, _ in pipes]
        self.writers = [w for _, w in pipes]
        self.last: WordClocks | None = None  # the last run's view: what to zero

    def closes_in(self, rank: int) -> list[Connection]:
        """What rank ``rank``'s process closes at its fork: the readers, the others' writers."""
        return [*self.readers, *(w for r, w in enumerate(self.writers) if r != rank)]

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


