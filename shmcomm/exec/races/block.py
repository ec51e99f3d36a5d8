"""The race detector's block side: one :class:`RaceBlockModel` per block of every launch, around
the block's own model. It keeps the block's clocks (its scalar unit, pipes MTE2, MTE3 and V, the
DMA engine) and records the block's accesses, which its rank (:mod:`.rank`) sends on.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.gm import I32
from ...core.observer import BlockObserver
from ...types import DSB_ALL, DSB_DDR, PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_V
from ..hazard.report import kernel_site
from .clocks import G3, MTE2, MTE3, PER_BLOCK, D, V
from .shadow import ATOMIC, PIPE3, WAITED, WRITE
from .sites import SiteCache, cached_site
from .tiles import record_vector

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.gm import GlobalTensor
    from ...core.tile import Tile
    from .rank import RaceRankModel

# a block sends its records (and its frontier) before the launch's end past this many: the
# launcher can then forget what every agent has passed, and a long kernel stays cheap to judge
_FLUSH_RECORDS = 128


def agent_name(rank: int, block: int | None) -> str:
    """``rank R block B`` (``host`` for ``block`` None), as reports name an agent."""
    return f"rank {rank} " + ("host" if block is None else f"block {block}")


_OP_NAMES: dict[tuple[str, str], str] = {}
_GM_WINS: dict[int, tuple[str, int]] = {}


def gm_win(rank: int) -> tuple[str, int]:
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


_U8 = np.dtype(np.uint8)


_LATE = -1  # a store's digest still to take (never sent: settled to a digest or 0 first)


def _digest(data: np.ndarray) -> int:
    """What a store writes, as a number (crc32 + 1: never 0, which means not known)."""
    return zlib.crc32(np.ascontiguousarray(data).data) + 1


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


class RaceBlockModel(BlockObserver):
    """One block's observer: keeps the block's clocks (its scalar unit ``vs``, pipes ``p2``
    (MTE2), ``p3`` (MTE3), ``pv`` (V) and its DMA engine ``pd``) and access records. The seam
    calls it beside the block's model (:mod:`shmcomm.core.observer`): an access when it is
    issued, a drain or a flag once the model has done it."""

    def __init__(self, agent: Agent, rank_model: RaceRankModel, start: np.ndarray, slot: int,
                 fresh: bool = False) -> None:
        super().__init__(agent)
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
        # a store's bytes are known once its data is final: a tile a TLOAD still queued ahead
        # of the store may fill (``loading``: tiles loaded since MTE2's last drain) is read for
        # the store's digest when MTE3 drains, after the model landed both ("late")
        self.loading: set[int] = set()
        self.late: list[tuple[list, np.ndarray]] = []
        self.ub_wins: dict[int, tuple] = {}  # tile uid -> its record window (one object each)
        self.sites = SiteCache()  # the last access's site (holds a frame: cleared at the end)
        self.copy_op = ""
        self.copy_site = ""  # the line of the copy being issued (its TLOADs / TSTOREs share it)
        self.last_async = "TPUT_ASYNC"  # the async copy being posted (its copy_begin's op)
        # word clocks a TTEST read (slots), or words a gm_load / atomic add read ((rank,
        # offset): their clock may be made after the hook): acquired at the block's next step
        self.tested: list[Any] = []
        # work was issued to a pipe or the DMA engine since the scalar unit's last access: its
        # next one gets a new epoch, which that work (it holds the old one) does not know of
        self.issued = False

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
             issue: int, pipe: str, op: str, site: str, digest: int = 0) -> None:
        """One access record (``epoch``: ``comp``'s, ``issue``: the scalar unit's; ``digest``:
        a store's bytes, 0 if not known); the same access again (a loop over a tile's rows)
        widens the last one (whose bytes are then no longer known)."""
        recs = self.records
        if recs:
            last = recs[-1]
            if (last[6] == snap and last[3] == flags and last[1] <= hi and lo <= last[2]
                    and last[0] == win and last[9] == site and last[13] == op):
                if lo < last[1]:
                    last[1] = lo
                if hi > last[2]:
                    last[2] = hi
                if len(last) > 14 and (lo, hi) != (last[1], last[2]):
                    last[14] = 0
                return
        rec = [win, lo, hi, flags, comp, epoch, snap, self.cs, issue, site, self.rank,
               self.block_idx, pipe, op]
        if digest:
            rec.append(digest)
        recs.append(rec)

    def flush_some(self) -> None:
        """Send the records once there are many (after an instruction's last record: its
        records share a snapshot that a flush forgets)."""
        if len(self.records) >= _FLUSH_RECORDS:
            self.flush()

    def flush(self, defer: bool = False) -> None:
        """Send this block's records (and the clock snapshots they use) to the launcher
        (``defer``: with the rank's next message: the launch's end sends every block's in one)."""
        if self.late:
            self._settle_digests(False)
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
        self.issued = True
        comp, name = pc.comp, pc.name
        epoch, issue = int(pc.v[comp]), int(self.vs[self.cs])
        p = g.ptr
        gwin = gm_win(p.rank)
        gflags = 0 if load else WRITE | PIPE3 | (ATOMIC if atomic else 0)
        known = not (load or g.native)  # a native copy's bytes move later, natively: unknown
        late = known and tile.uid in self.loading
        if load:
            self.loading.add(tile.uid)
        if g.rows <= 1 or g.row_stride == g.cols:
            off = p.offset
            view = tile.array[:g.rows, :g.cols]
            self._add(gwin, off, off + g.extent_bytes, gflags, comp, epoch, snap, issue, name,
                      op, site, (_LATE if late else _digest(view)) if known else 0)
            if late:
                self._late(view)
        else:
            for r, (lo, hi) in enumerate(self._ranges(g)):
                if not known:  # a load's (or a native copy's) bytes are not read here
                    self._add(gwin, lo, hi, gflags, comp, epoch, snap, issue, name, op, site, 0)
                    continue
                view = tile.array[r, :g.cols]
                self._add(gwin, lo, hi, gflags, comp, epoch, snap, issue, name, op, site,
                          (_LATE if late else _digest(view)) if known else 0)
                if late:
                    self._late(view)
        nbytes = min(g.rows, tile.rows) * tile.cols * tile.array.itemsize
        off = tile.uoff  # (a view's bytes in its tile's)
        uwin = self.ub_wins.get(tile.uid)
        if uwin is None:
            uwin = self.ub_wins[tile.uid] = ("ub", self.rank, self.block_idx, tile.uid)
        self._add(uwin, off, off + nbytes, WRITE if load else 0, comp, epoch, snap, issue, name,
                  op, site)
        if len(self.records) >= _FLUSH_RECORDS:
            self.flush()

    def _late(self, view: np.ndarray) -> None:
        """The last record's digest is taken when MTE3 drains (see ``late``)."""
        rec = self.records[-1]
        if len(rec) > 14 and rec[14] == _LATE:
            self.late.append((rec, view))

    def _settle_digests(self, landed: bool) -> None:
        """The late digests: the tiles' bytes once the stores landed, else not known."""
        for rec, view in self.late:
            if len(rec) > 14 and rec[14] == _LATE:
                rec[14] = _digest(view) if landed else 0
        self.late.clear()

    def _drain(self, pc: _PipeClock) -> None:
        """The scalar unit waited for the pipe's work so far."""
        if pc is self.p2:
            self.loading.clear()
        elif pc is self.p3 and self.late:
            self._settle_digests(True)
        if not pc.busy:
            return
        np.maximum(self.vs, pc.v, out=self.vs)
        self._s_changed()
        pc.advance()
        pc.busy = False

    # -- lifecycle ---------------------------------------------------------------------------

    def finish(self) -> None:
        self.sites.clear()  # (the kernel's frames go now, not with this model)
        if self.tested:
            self._settle()
        self._drain(self.p2)
        self._drain(self.p3)
        self._drain(self.pv)
        self._drain(self.pd)  # the kernel's end lands every copy still in flight
        vs = self.vs  # the kernel's end fences (read as Python ints: cheaper than numpy's)
        if vs.item(self.p3.comp) > vs.item(self.cg):
            vs[self.cg] = vs.item(self.p3.comp)

    def stop(self) -> None:
        self.sites.clear()

    # -- pipe instructions -------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        if self.tested:
            self._settle()
        self._pipe_access(self.p2, src, tile, 0)

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        if self.tested:
            self._settle()
        self._pipe_access(self.p3, dst, tile, atomic)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        if self.tested:
            self._settle()
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
        if pipe != PIPE_ALL or self.p2.busy or self.p3.busy or self.pv.busy:
            self._drained(pipe)

    def notify_drain(self) -> None:
        if self.tested:
            self._settle()
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
        if mode in (DSB_ALL, DSB_DDR) and self.vs[self.cg] < self.vs[self.p3.comp]:
            self.vs[self.cg] = self.vs[self.p3.comp]
            self._s_changed()

    def vector(self, op: Any) -> None:
        if self.tested:
            self._settle()
        record_vector(self, op)

    # -- scalar hooks ------------------------------------------------------------------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        if self.tested:
            self._settle()
        p = sig.ptr
        stored = self.clocks.release(self.clocks.slot(p.rank, p.offset), self.vs, bool(op))
        if stored is not None:
            r, _ = self.rm.layout.agent(stored[0])
            self.rm.signal_race(p.rank, p.offset, "notify", (
                f"{agent_name(self.rank, self.block_idx)} notified it (TNOTIFY) at "
                f"{kernel_site(self.agent)}; rank {r}'s host had stored it with a plain store, "
                "and nothing orders that store before the notify (no rt.barrier() or launch "
                "between them), so the store may have wiped an earlier notify or this one may "
                "be lost to it\n    fix: put rt.barrier() between the host's store and the "
                "launch that notifies"), self.block_idx)
        self.vs[self.cs] += 1
        self._s_changed()

    def native_dcci(self, word: Any, mode: int) -> None:
        # a native kernel reads and writes a flag with plain loads and stores that no model sees;
        # the dcci of its line is where they show, ordered as a scalar int32 access of the word
        # is (gm_access): what the block knows is released into the word (a plain store, then
        # its write-back) and the word's clock acquired at the next step (an invalidate, then a
        # plain load): an over-approximation that may hide a race, never invent one
        if mode != 0:
            return
        if self.tested:
            self._settle()
        slot = self.clocks.slot(word.rank, word.offset)
        self.clocks.release(slot, self.vs, False)
        self.vs[self.cs] += 1
        self._s_changed()
        self.tested.append(slot)

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

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self._acquire_slots(self._slots(sig))
        self._note_wait(sig, "TWAIT")

    def _note_wait(self, sig: Any, op: str) -> None:
        """Tell the launcher which data words the block waited on (no access: a report on data
        a copy wrote around the waited word says that the word seen orders nothing of the
        rest). Words of the signal matrix, which copies do not write, are not told."""
        p = sig.ptr
        if p.rank < 0 or p.offset < p.windows.signal_bytes:  # (the signal matrix: no copy's)
            return
        if self.snap_s is None:
            self.snap_s = self._snap(self.vs)
        rows, cols = (sig.rows, sig.cols) if hasattr(sig, "row_stride") else (1, 1)
        stride = getattr(sig, "row_stride", cols)
        site = cached_site(self.sites, self.agent)
        for r in range(rows):
            lo = p.offset + 4 * r * stride
            self._record(gm_win(p.rank), lo, lo + 4 * cols, WAITED, self.cs, self.snap_s, "S",
                         op, self.vs, site)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        # this hook runs before TTEST reads: acquire at the block's next step, after the read,
        # so the clock holds every notify whose value the read may have seen (whatever it
        # returned: an over-approximation that may hide a race, never invent one)
        if self.tested:
            self._settle()
        self.tested.extend(self._slots(sig))
        self._note_wait(sig, "TTEST")

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        self.copy_op = op
        self.copy_site = cached_site(self.sites, self.agent)
        if op.endswith("_ASYNC"):
            self.last_async = op

    def copy_end(self, op: str) -> None:
        self.copy_op = self.copy_site = ""

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        if self.tested:
            self._settle()
        if self.issued:  # after queued work that may still read or write these bytes
            self.issued = False
            self.vs[self.cs] += 1
            self._s_changed()
        word = ptr.dtype == I32  # an int32 element is a word: loads and stores synchronize
        if word:
            # a2a3's scalar load or store of an aligned int32 is one access (TNOTIFY's Set is
            # exactly such a store): a word's loads and stores never tear, and a store
            # releases what the block's syncs drained, as a Set notify does
            atomic = True
        if self.snap_s is None:
            self.snap_s = self._snap(self.vs)
        flags = (WRITE if write else 0) | (ATOMIC if atomic else 0)
        self._record(gm_win(ptr.rank), ptr.offset, ptr.offset + nbytes, flags, self.cs,
                     self.snap_s, "S", op, self.vs, cached_site(self.sites, self.agent))
        self.flush_some()
        if word and atomic:
            if write:  # a store / atomic store / add releases what the block knows into the word
                self.clocks.release(self.clocks.slot(ptr.rank, ptr.offset), self.vs, False)
                self.vs[self.cs] += 1
                self._s_changed()
            if op not in ("gm_atomic_store", "gm_store"):  # a load or an add reads it: acquire once it has
                # (the word's clock is looked up then too: a release may make it meanwhile)
                self.tested.append((ptr.rank, ptr.offset))

    # -- SYNCALL and the DMA engine -----------------------------------------------------------

    def syncall_arrive(self, word: Any, target: int) -> None:
        if self.tested:
            self._settle()
        self.rm.syncall_arrive(self, word, target)
        self.vs[self.cs] += 1
        self._s_changed()

    def syncall_done(self, word: Any, target: int) -> None:
        self.rm.syncall_wait(self, word, target)
        self._s_changed()

    def async_issue(self, event: Any) -> None:
        """The copy's accesses, on the DMA engine's clock: after what the scalar unit issued
        before it, ordered before the block's later work only by its Wait / Test."""
        copy = event.copy
        if copy is not None:
            if self.tested:
                self._settle()
            pd = self.pd
            pd.join(self.vs)  # (busy)
            self.issued = True
            pd.snap = self._snap(pd.v)
            site = cached_site(self.sites, self.agent)
            op = self.last_async
            src = copy.src
            for g, flags in ((src, 0), (copy.dst, WRITE)):
                ranges = self._ranges(g)
                # what the copy writes (its source's bytes now), when it is one range
                digest = _digest(src.ptr.windows.view(src.ptr.rank, src.ptr.offset,
                                                      (src.extent_bytes,), _U8)) \
                    if flags and len(ranges) == 1 and len(self._ranges(src)) == 1 else 0
                for lo, hi in ranges:
                    self._add(gm_win(g.ptr.rank), lo, hi, flags, pd.comp, int(pd.v[pd.comp]),
                              pd.snap, int(self.vs[self.cs]), pd.name, f"{op} (the DMA copy)",
                              site, digest)
            self.flush_some()
            self.dma_marks[id(copy)] = pd.v.copy()
            pd.advance()  # the next copy is a later event of the engine

    def async_complete(self, event: Any) -> None:
        """``Wait`` returned or ``Test`` said True: the copy and the earlier ones of its session
        landed (their marks are below this one's on the engine's component)."""
        mark = self.dma_marks.pop(id(event.copy), None)
        if mark is not None:
            np.maximum(self.vs, mark, out=self.vs)
            self._s_changed()
