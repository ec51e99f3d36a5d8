"""PTO communication instructions: signals, ``TNOTIFY`` / ``TWAIT`` / ``TTEST``, ``TPUT`` / ``TGET``,
their asynchronous forms, ``SYNCALL`` and scalar GM access.

What each instruction does and does not order (PTO A2/A3 semantics):

* ``TNOTIFY(sig, v, op)`` updates element [0] of ``sig`` at once on the scalar pipe: a hardware
  atomic add (``AtomicAdd``) or an atomic store (``Set``; ``Config.set_semantics="read-add"``:
  a read, then an atomic add). It fences its own store, **not** earlier data: to publish data
  first run ``pipe_barrier(PIPE_ALL)`` and ``dsb(DSB_DDR)``. As on a2a3 it ends with
  ``pipe_barrier(PIPE_ALL)``, after the signal is out.
* ``TWAIT(sig, v, cmp)`` blocks until every element satisfies ``element <cmp> v``, checked as a
  sequential sweep (not an atomic snapshot); ``TTEST`` is one sweep, returning a bool. Unlike the
  hardware (which spins forever) a wait that cannot be satisfied raises after ``wait_timeout``
  or when the run aborts, naming the signal, the comparison, and the value it holds.
* ``TPUT`` / ``TGET`` move data through a UB staging tile: ``TLOAD`` on MTE2, an MTE2 -> MTE3
  event, ``TSTORE`` on MTE3, chunked as pto-isa's a2a3 backend (:mod:`shmcomm.core.copy`). They
  do not drain at the end: a following ``TNOTIFY`` may overtake their data.
* ``TPUT_ASYNC`` / ``TGET_ASYNC`` post a copy to the DMA engine, outside the AI core's pipes,
  and return an ``AsyncEvent``; the data has landed when its ``Wait(session)`` returns (or a
  ``Test`` returns True), never because of a ``pipe_barrier`` or ``dsb``.
* ``SYNCALL`` is a barrier of one launch's blocks; as on a2a3 it drains the block's pipes
  first, and its soft form fences around its arrival (see :func:`SYNCALL`).
* ``gm_load`` / ``gm_store`` / ``gm_atomic_store`` / ``gm_atomic_add`` access one GM element
  through the execution model (``gm_access``), where a numpy view would go unseen.

Signals are int32, 4-byte aligned, and may live anywhere in a window (the signal matrix at
``ctx.signal_base``, or a symmetric allocation). The library's kernels use fixed regions of the
signal matrix (the table in :mod:`shmcomm.kernels.layout`): a ``Signal`` / ``Signal2D`` made on a
word of a region that a library kernel uses in the same run raises ``SignalOverlapError``, in
either order. Take your words from the free range with ``rt.signal_region(name, words)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from .core import agent as _agent
from .core.control import A_SYNCALL as _A_SYNCALL
from .core.copy import copy_through
from .core.gm import I32, GlobalTensor, GMPtr, set_signal
from .core.regions import OWNER as _owner
from .core.tile import Tile
from .core.waiting import KIND_SYNCALL as _KIND_SYNCALL
from .core.waiting import WaitSite, note_poll, wait_until
from .dma import (
    TGET_ASYNC,
    TPUT_ASYNC,
    AsyncEvent,
    AsyncSession,
    BuildAsyncSession,
    DmaEngine,
    SdmaBaseConfig,
)
from .errors import ArgumentError, ShmcommError
from .group import TBROADCAST, TGATHER, TREDUCE, TSCATTER, ParallelGroup
from .pipe import RECORD, RecordEvent
from .pipe import dsb as _dsb
from .pipe import pipe_barrier as _pipe_barrier
from .pipe import wait_events as _wait_events
from .types import (
    CMP_FUNCS,
    DSB_DDR,
    INT32_MAX,
    INT32_MIN,
    PIPE_ALL,
    AtomicType,
    NotifyOp,
    ReduceOp,
    SyncAllMode,
    WaitCmp,
    check_atomic_dtype,
    check_enum,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from .transports import Word

__all__ = [
    "gm_load", "gm_store", "gm_atomic_store", "gm_atomic_add", "st_atomic", "SYNCALL",
    "TPUT_ASYNC", "TGET_ASYNC", "AsyncSession", "AsyncEvent", "BuildAsyncSession", "DmaEngine",
    "SdmaBaseConfig",
    "Signal", "Signal2D", "NotifyOp", "WaitCmp", "ReduceOp", "AtomicType", "GlobalTensor",
    "TNOTIFY", "TWAIT", "TTEST", "TPUT", "TGET", "GetRemotePtr", "GMPtr", "get_block_idx",
    "get_block_num", "SyncAllMode", "ParallelGroup", "TBROADCAST", "TSCATTER", "TGATHER", "TREDUCE",
]

_tls = _agent._tls
_flags = _agent.FLAGS  # hooked, fenced, read_add: the fast paths' questions (ProcessFlags)
_new = object.__new__
_ADD, _SET = NotifyOp.AtomicAdd, NotifyOp.Set
_GE = WaitCmp.GE


def _check_signal_ptr(ptr: Any, what: str, nbytes: int) -> GMPtr:
    if not isinstance(ptr, GMPtr):
        raise ArgumentError(f"{what}: expected a GM pointer (GMPtr), got {type(ptr).__name__}")
    if ptr.dtype != I32:
        raise ArgumentError(f"{what}: signal dtype must be int32, got {ptr.dtype}")
    if ptr.offset % 4:
        raise ArgumentError(f"{what}: signal address must be 4-byte aligned, got offset {ptr.offset:#x}")
    ptr.windows.check_extent(ptr.rank, ptr.offset, nbytes, what)
    return ptr


class Signal:
    """One int32 signal word in GM (PTO's ``comm::Signal``, a 1x1x1x1x1 GlobalTensor).

    A Signal holds nothing but the word's handle, so ``Signal(ptr)`` hands back the one object
    already made for that word in this rank process: kernels written like the seed build a fresh
    Signal for every instruction, and for a pointer into the signal matrix that is one attribute
    read.
    """

    __slots__ = ("ptr", "word", "cell", "handle", "fetch_add", "exchange", "waiters", "wake",
                 "load", "_site")
    ptr: GMPtr
    word: Word
    # the word's fast-path pieces (see Word), copied in by _bind_word
    cell: Any
    handle: Any
    fetch_add: Callable[[Any, int, int], int]
    exchange: Callable[[Any, int, int], int]
    waiters: Any
    wake: Callable[[], None]
    load: Callable[[], int]
    _site: WaitSite | None

    def __new__(cls, ptr: GMPtr) -> Signal:
        if type(ptr) is GMPtr:
            sig = ptr._sig  # the pointer's Signal, once made (exact Signal class only)
            if sig is not None and cls is Signal:
                return sig
            own = _owner.claim  # library code building its signals: the kernel's own Signal
            if own is not None and own.lo <= ptr.offset < own.hi and cls is Signal:
                lib = ptr.kind.lib_signals
                if lib is not None:
                    sig = lib.get(ptr.offset)
                    if sig is not None:
                        return sig
        return _new_signal(cls, ptr)

    @property
    def site(self) -> WaitSite:
        if self._site is None:
            p = self.ptr
            self._site = WaitSite((self.word,), p.rank, p.offset)
        return self._site

    @property
    def words(self) -> tuple:
        return (self.word,)

    @property
    def value(self) -> int:
        """The word's current value (an acquire read)."""
        return self.cell.value

    @property
    def tensor(self) -> GlobalTensor:
        """The signal as PTO sees it: a 1-element int32 ``GlobalTensor`` (``TLOAD`` takes it)."""
        return GlobalTensor(self.ptr, (1,))

    def __repr__(self) -> str:
        return f"Signal(rank={self.ptr.rank}, offset={self.ptr.offset:#x}, value={self.value})"


def _new_signal(cls: type, ptr: Any) -> Signal:
    """The Signal of ``ptr``'s word: the one this process made already, or a new (checked) one.

    Inside a library kernel's owner context (``with claim:``), a word of its claimed region gets
    the kernel's own Signal, kept out of the shared cache. Any other new Signal is a user's: its
    word is noted in ``windows.regions``, which raises if a library kernel claimed it.
    """
    own = _owner.claim
    if own is not None and type(ptr) is GMPtr and cls is Signal and own.lo <= ptr.offset < own.hi:
        lib = ptr.kind.lib_signals
        if lib is not None:
            sig = lib.get(ptr.offset)
            if sig is None:
                _check_signal_ptr(ptr, "Signal", 4)
                sig = lib[ptr.offset] = _make_signal(cls, ptr)
            return sig
    table = ptr.kind.signals if type(ptr) is GMPtr else None
    sig = table.get(ptr.offset) if table is not None and cls is Signal else None
    if sig is None:
        # made (and checked) by an earlier run of this process, or new
        kept = ptr.kind.kept.pop(ptr.offset, None) if table is not None and cls is Signal else None
        if kept is None:
            _check_signal_ptr(ptr, "Signal", 4)
        word = ptr.offset >> 2
        ptr.windows.regions.note_user("Signal", ptr.rank, ((word, word + 1),))
        sig = _make_signal(cls, ptr) if kept is None else kept
        if cls is not Signal:
            return sig
        table[ptr.offset] = sig  # type: ignore[index]
    set_signal(ptr, sig)
    return sig


def _make_signal(cls: type, ptr: GMPtr) -> Signal:
    sig: Signal = _new(cls)
    sig.ptr = ptr
    sig.word = ptr.windows.transport.word(ptr.rank, ptr.offset)
    _bind_word(sig, sig.word)
    sig._site = None
    return sig


def _bind_word(sig: Any, word: Any) -> None:
    """Copy the word's fast-path pieces into the signal: TNOTIFY and TWAIT read them directly."""
    sig.cell, sig.handle, sig.load = word.cell, word.handle, word.load
    sig.fetch_add, sig.exchange, sig.waiters, sig.wake = (
        word.fetch_add, word.exchange, word.waiters, word.wake)


class Signal2D:
    """A ``rows x cols`` block of int32 signals (``comm::Signal2D<R, C>``).

    ``row_stride`` (elements) makes a strided view of a sub-region of a larger matrix.
    ``TWAIT`` / ``TTEST`` need every element to hold; ``TNOTIFY`` writes element [0, 0] only.
    """

    __slots__ = ("ptr", "rows", "cols", "row_stride", "words", "cells", "cell", "handle",
                 "fetch_add", "exchange", "waiters", "wake", "load", "_site")
    # the first word's fast-path pieces (see Word), copied in by _bind_word
    cell: Any
    handle: Any
    fetch_add: Callable[[Any, int, int], int]
    exchange: Callable[[Any, int, int], int]
    waiters: Any
    wake: Callable[[], None]
    load: Callable[[], int]

    def __init__(self, ptr: GMPtr, rows: int, cols: int, row_stride: int | None = None) -> None:
        for name, v in (("rows", rows), ("cols", cols)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"Signal2D: {name} must be an int >= 1, got {v!r}")
        if row_stride is None:
            row_stride = cols
        if isinstance(row_stride, bool) or not isinstance(row_stride, int) or row_stride < cols:
            raise ArgumentError(f"Signal2D: row_stride must be an int >= cols ({cols}), got {row_stride!r}")
        _check_signal_ptr(ptr, "Signal2D", 4 * ((rows - 1) * row_stride + cols))
        first = ptr.offset >> 2
        own = _owner.claim
        if own is None or not own.start <= first < first + (rows - 1) * row_stride + cols <= own.end:
            ptr.windows.regions.note_user("Signal2D", ptr.rank, tuple(
                (first + r * row_stride, first + r * row_stride + cols) for r in range(rows)))
        self.ptr, self.rows, self.cols, self.row_stride = ptr, rows, cols, row_stride
        word = ptr.windows.transport.word
        self.words = tuple(word(ptr.rank, ptr.offset + 4 * (r * row_stride + c))
                           for r in range(rows) for c in range(cols))
        self.cells = tuple(w.cell for w in self.words)
        _bind_word(self, self.words[0])  # TNOTIFY writes element [0, 0]
        self._site: WaitSite | None = None

    @property
    def site(self) -> WaitSite:
        if self._site is None:
            p = self.ptr
            self._site = WaitSite(self.words, p.rank, p.offset, self.rows, self.cols,
                                  self.row_stride)
        return self._site

    @property
    def tensor(self) -> GlobalTensor:
        """The signals as an int32 ``rows x cols`` ``GlobalTensor`` (``TLOAD`` takes it)."""
        return GlobalTensor(self.ptr, (self.rows, self.cols), row_stride=self.row_stride)

    @property
    def values(self) -> np.ndarray:
        return np.array([w.load() for w in self.words], dtype=np.int32).reshape(self.rows, self.cols)

    def __repr__(self) -> str:
        return (f"Signal2D(rank={self.ptr.rank}, offset={self.ptr.offset:#x}, "
                f"{self.rows}x{self.cols}, stride={self.row_stride})")


def _check_sig(sig: Any, op: str, first: bool = False) -> Signal | Signal2D:
    """``sig`` as a Signal / Signal2D: an int32 ``GlobalTensor`` is one too (PTO's signals are
    GlobalTensors): one element, or an N-D block whose rows are evenly strided (``first``: only
    its element [0] matters, as for TNOTIFY)."""
    if type(sig) is Signal or type(sig) is Signal2D:
        return sig
    if isinstance(sig, GlobalTensor):
        if sig.dtype != I32:
            raise ArgumentError(f"{op}: a signal tensor must be int32, got {sig.dtype}")
        if sig.size == 1 or (first and sig.size):
            return Signal(sig.ptr)
        if sig.size == 0 or sig.row_stride is None:
            raise ArgumentError(f"{op}: a signal tensor needs at least one element and evenly "
                                f"strided rows; got {sig!r}")
        return Signal2D(sig.ptr, sig.rows, sig.cols, sig.row_stride)
    raise ArgumentError(f"{op}: expected a Signal, Signal2D or int32 GlobalTensor, got "
                        f"{type(sig).__name__}")


def _nd_signal(sig: Any) -> TypeGuard[GlobalTensor]:
    """An int32 N-D signal tensor whose outer dimensions are not one evenly strided run of rows."""
    return isinstance(sig, GlobalTensor) and sig.dtype == I32 and sig.size > 0 \
        and sig.row_stride is None


def _check_i32(value: Any, op: str) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ArgumentError(f"{op}: value must be an int32, got {value!r}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise ArgumentError(f"{op}: value must be in [{INT32_MIN}, {INT32_MAX}], got {value}")
    return int(value)  # a numpy integer: the transports take ints only


def _hooks() -> Any:
    """The calling block's model hooks (``None`` when its model observes nothing)."""
    try:
        return _tls.agent.hooks
    except AttributeError:
        return _agent.current().hooks


def _holds(cells: tuple, value: int, cmp: int) -> bool:
    """One sweep of acquire reads: does every word satisfy ``word <cmp> value``?"""
    fn = CMP_FUNCS[cmp]
    for c in cells:
        if not fn(c.value, value):
            return False
    return True


def TNOTIFY(sig: Signal | Signal2D, value: int, op: NotifyOp | None = None, *events: Any) -> None:
    """Atomically add ``value`` to (``AtomicAdd``) or store it into (``Set``) the signal.

    ``op`` is required, as in PTO. Local or remote signals alike. As on a2a3 the notify waits for
    ``events`` first, writes the word (``Set``: a store, or a read then an atomic add under
    ``set_semantics="read-add"``), fences that one store, then ends with ``pipe_barrier(PIPE_ALL)``:
    work issued *before* it is drained only after the signal is out, so data must still be
    drained and fenced before the notify (hazard mode shows it).
    """
    if events:
        _wait_events(events, "TNOTIFY")
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        sig = _check_sig(sig, "TNOTIFY", first=True)
        t = type(sig)
    if type(value) is not int or not -0x80000000 <= value <= 0x7FFFFFFF:
        value = _check_i32(value, "TNOTIFY")
    if op is not _ADD and op is not _SET:  # ints 0/1 pass; another enum (WaitCmp.NE) does not
        if op is None:
            raise ArgumentError("TNOTIFY: op is required, as in PTO: NotifyOp.AtomicAdd (0) or "
                                "NotifyOp.Set (1)")
        op = NotifyOp(check_enum(NotifyOp, op, "TNOTIFY: op"))
    if _flags.hooked:
        hooks = _hooks()
        if hooks is not None:
            hooks.notify(sig, value, op)
    if op is _ADD:
        sig.fetch_add(sig.handle, value, 5)  # 5: seq_cst
    elif _flags.read_add:  # pto-isa's proposed Set: read, then add the difference (two steps)
        sig.fetch_add(sig.handle, (value - sig.load() + 0x80000000) % 0x100000000 - 0x80000000, 5)
    else:
        sig.exchange(sig.handle, value, 5)  # a read-modify-write: orders the waiters read below
    if sig.waiters.value:
        sig.wake()
    if _flags.fenced:  # a2a3's TNOTIFY ends with pipe_barrier(PIPE_ALL)
        fences = _tls.agent.fences
        if fences is not None:
            fences.notify_drain()


def TWAIT(sig: Signal | Signal2D, value: int, cmp: WaitCmp | int, *events: Any) -> None:
    """Block until every element of ``sig`` satisfies ``element <cmp> value`` (after waiting for
    the event tokens ``events``).

    Raises ``WaitTimeout`` after ``wait_timeout`` and ``Aborted`` when the run aborts.
    """
    if events:
        _wait_events(events, "TWAIT")
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        if _nd_signal(sig):  # an N-D block: re-sweep it whole until one sweep sees all hold
            _twait_sweep(sig, _check_i32(value, "TWAIT"), check_enum(WaitCmp, cmp, "TWAIT: cmp"))
            return
        sig = _check_sig(sig, "TWAIT")
        t = type(sig)
    if type(value) is not int or not -0x80000000 <= value <= 0x7FFFFFFF:
        value = _check_i32(value, "TWAIT")
    if type(cmp) is not WaitCmp:
        cmp = check_enum(WaitCmp, cmp, "TWAIT: cmp")
    if _flags.hooked:
        hooks = _hooks()
        if hooks is not None:
            hooks.wait(sig, value, cmp)
            wait_until(_tls.agent, sig.site, value, cmp)
            hooks.waited(sig, value, cmp)
            return
    if t is Signal:
        cur = sig.cell.value  # an acquire read (see Word.cell)
        if cur >= value if cmp is _GE else CMP_FUNCS[cmp](cur, value):
            return
    elif _holds(sig.cells, value, cmp):  # type: ignore[union-attr]  # t is Signal2D (hot path)
        return
    wait_until(_agent.current(), sig.site, value, cmp)


def _twait_sweep(sig: GlobalTensor, value: int, cmp: int) -> None:
    """a2a3's TWAIT on an N-D signal tensor: sweep every element in order and start again at the
    first that fails, until one whole sweep sees every element hold. Between sweeps it blocks
    on the 2-D slab that failed (a registered wait, so the deadlock watch sees it)."""
    slabs = [_check_sig(slab, "TWAIT") for slab in sig.slabs()]
    while True:
        for slab in slabs:
            if not _holds(slab.cells if type(slab) is Signal2D else (slab.cell,), value, cmp):
                TWAIT(slab, value, cmp)
                break
        else:
            break
    if _flags.hooked and _hooks() is not None:
        # the sweep that saw every element hold read each of them: the observers see those
        # reads as waits that return at once (the race detector acquires every word's clock;
        # a slab that held on the first sweep was never waited for above)
        for slab in slabs:
            TWAIT(slab, value, cmp)


def TTEST(sig: Signal | Signal2D, value: int, cmp: WaitCmp | int, *events: Any) -> bool:
    """One sweep: True if every element of ``sig`` satisfies ``element <cmp> value`` now (after
    waiting for the event tokens ``events``).

    A pure test, as on a2a3: it never blocks and never raises for a false condition, so a
    bounded polling loop that gives up ends by itself in every mode. A loop of failed tests is
    shown as a poll in the stuck-agent report (at the wait or run timeout); it is never taken
    for a deadlock, since the loop may give up.
    """
    if events:
        _wait_events(events, "TTEST")
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        if _nd_signal(sig):
            return all(TTEST(slab, value, cmp) for slab in sig.slabs())
        sig = _check_sig(sig, "TTEST")
        t = type(sig)
    if type(value) is not int or not -0x80000000 <= value <= 0x7FFFFFFF:
        value = _check_i32(value, "TTEST")
    if type(cmp) is not WaitCmp:
        cmp = check_enum(WaitCmp, cmp, "TTEST: cmp")
    if _flags.hooked:
        hooks = _hooks()
        if hooks is not None:
            hooks.test(sig, value, cmp)
    if t is Signal:
        cur = sig.cell.value
        if cur >= value if cmp is _GE else CMP_FUNCS[cmp](cur, value):
            return True
    elif _holds(sig.cells, value, cmp):  # type: ignore[union-attr]  # t is Signal2D (hot path)
        return True
    note_poll(getattr(_tls, "agent", None), sig.site, value, cmp)  # a TTEST loop is a wait
    return False


def GetRemotePtr(ctx: Any, ptr: GMPtr, rank: int) -> GMPtr:
    """The address of ``ptr``'s offset in ``rank``'s window (symmetric-heap translation)."""
    if type(ptr) is GMPtr and type(rank) is int:
        k = ptr.kind
        if rank == k.rank:
            return ptr
        if 0 <= rank < k.nranks:  # the common case inline: one dictionary hit
            p = k.peers[rank].ptrs.get(ptr.offset)
            if p is not None:
                return p
    elif not isinstance(ptr, GMPtr):
        raise ArgumentError(f"GetRemotePtr: ptr must be a GM pointer (GMPtr), got {type(ptr).__name__}")
    return ptr.on_rank(rank)


def get_block_idx() -> int:
    """This block's index in the launch (``GetBlockIdx``)."""
    return _agent.current().block_idx


def get_block_num() -> int:
    """The real number of blocks of this launch (``GetBlockNum``)."""
    return _agent.current().block_num


# --- TPUT / TGET -------------------------------------------------------------------------------

def _check_copy(op: str, dst: Any, src: Any, tiles: tuple) -> None:
    for name, g in (("dst", dst), ("src", src)):
        if not isinstance(g, GlobalTensor):
            raise ArgumentError(f"{op}: {name} must be a GlobalTensor, got {type(g).__name__}")
    if (dst.rows, dst.cols) != (src.rows, src.cols):
        raise ArgumentError(f"{op}: dst is {dst.rows}x{dst.cols} but src is {src.rows}x{src.cols}")
    if dst.shape5 != src.shape5 and (dst.row_stride is None or src.row_stride is None):
        raise ArgumentError(f"{op}: dst shape {dst.shape} and src shape {src.shape} differ, and "
                            "one of them is strided in its outer dimensions; give both one shape")
    if dst.dtype != src.dtype:
        raise ArgumentError(f"{op}: dst dtype {dst.dtype} differs from src dtype {src.dtype}")
    for t in tiles:
        if not isinstance(t, Tile):
            raise ArgumentError(f"{op}: staging tile must be a Tile from ctx.tile(), got {type(t).__name__}")
        if t.dtype != dst.dtype:
            raise ArgumentError(f"{op}: staging tile dtype {t.dtype} differs from the data's {dst.dtype}")


def _split_events(more: tuple) -> tuple[tuple, tuple]:
    """``(arguments, events)``: PTO's trailing ``WaitEvents&...`` (anything with ``wait()``)."""
    k = len(more)
    while k and not isinstance(more[k - 1], (Tile, int)) and callable(getattr(more[k - 1], "wait", None)):
        k -= 1
    return more[:k], more[k:]


def TPUT(dst: GlobalTensor, src: GlobalTensor, tile: Tile, *more: Any) -> RecordEvent:
    """Copy local ``src`` to (usually remote) ``dst`` through UB, chunked as pto-isa's a2a3 backend
    (by the tile's valid region, looping the outer dimensions; see :mod:`shmcomm.core.copy`).

    Forms, as PTO's overloads: ``TPUT(dst, src, tile)``, ``TPUT(dst, src, tile, atomic)`` with
    ``AtomicType.AtomicAdd`` for an atomic accumulate into ``dst``, and the ping-pong form
    ``TPUT(dst, src, ping, pong[, atomic])``; trailing ``Event`` tokens are waited for first.
    Ends without draining MTE3. Returns ``RECORD`` (PTO's ``RecordEvent``).
    """
    more, events = _split_events(more)
    if events:
        _wait_events(events, "TPUT")
    tiles: tuple = (tile,)
    atomic: Any = AtomicType.AtomicNone
    if more and isinstance(more[0], Tile):
        tiles, more = (tile, more[0]), more[1:]
    if len(more) > 1:
        raise ArgumentError("TPUT: expected (dst, src, tile[, pong][, atomic][, *events])")
    if more:
        atomic = more[0]
    atomic = check_enum(AtomicType, atomic, "TPUT: atomic")
    _check_copy("TPUT", dst, src, tiles)
    if atomic:
        check_atomic_dtype(dst.dtype, "TPUT")
    _copy("TPUT", dst, src, tiles, atomic)
    return RECORD


def TGET(dst: GlobalTensor, src: GlobalTensor, tile: Tile, *more: Any) -> RecordEvent:
    """Copy (usually remote) ``src`` to local ``dst`` through UB: ``TGET(dst, src, tile)`` or the
    ping-pong form ``TGET(dst, src, ping, pong)``; trailing ``Event`` tokens are waited for
    first. Returns ``RECORD``."""
    more, events = _split_events(more)
    if events:
        _wait_events(events, "TGET")
    if len(more) > 1 or (more and not isinstance(more[0], Tile) and more[0] is not None):
        raise ArgumentError("TGET: expected (dst, src, tile[, pong][, *events]); the pong tile "
                            f"must be a Tile, got {type(more[0]).__name__}")
    tiles = (tile,) if not more or more[0] is None else (tile, more[0])
    _check_copy("TGET", dst, src, tiles)
    _copy("TGET", dst, src, tiles, AtomicType.AtomicNone)
    return RECORD


def _copy(op: str, dst: GlobalTensor, src: GlobalTensor, tiles: tuple, atomic: int) -> None:
    agent = _agent.current()
    hooks = agent.hooks
    if hooks is not None:
        hooks.copy_begin(op, dst, src)
    copy_through(agent.pipes, (dst,), src, tiles, atomic, op)
    if hooks is not None:
        hooks.copy_end(op)



# --- scalar GM access ---------------------------------------------------------------------------
#
# A kernel that reads or writes single GM elements (``ptr[i] = v``, ``st_atomic``) goes through
# these rather than a numpy view, so the execution model sees the access (``gm_access``): hazard
# mode, the race detector and the schedule explorer all learn of it.

def _scalar(op: str, ptr: Any) -> GMPtr:
    return _checked_scalar(op, ptr, _agent.current())


def _checked_scalar(op: str, ptr: Any, agent: Any) -> GMPtr:
    """``ptr`` checked for the scalar instruction ``op`` of ``agent``, shown to its hooks."""
    if not isinstance(ptr, GMPtr):
        raise ArgumentError(f"{op}: ptr must be a GM pointer (GMPtr), got {type(ptr).__name__}")
    if ptr.offset % ptr.itemsize:
        raise ArgumentError(f"{op}: ptr must be aligned to its {ptr.itemsize}-byte dtype, got "
                            f"offset {ptr.offset:#x}")
    ptr.windows.check_extent(ptr.rank, ptr.offset, ptr.itemsize, op)
    hooks = agent.hooks
    if hooks is not None:
        hooks.gm_access(op, ptr, ptr.itemsize, op != "gm_load", op.startswith(("gm_atomic", "st_")))
    return ptr


def _elem(ptr: GMPtr) -> np.ndarray:
    return ptr.windows.view(ptr.rank, ptr.offset, (1,), ptr.dtype)


def _value(op: str, ptr: GMPtr, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{op}: value must be a number, got {value!r}")
    if ptr.dtype.kind in "iu":
        if not isinstance(value, (int, np.integer)):
            raise ArgumentError(f"{op}: value must be an int for a {ptr.dtype} pointer, got {value!r}")
        info = np.iinfo(ptr.dtype)
        if not info.min <= value <= info.max:
            raise ArgumentError(f"{op}: value must be in [{info.min}, {info.max}] for {ptr.dtype}, "
                                f"got {value}")
    return value


def gm_load(ptr: GMPtr) -> Any:
    """Read one element at ``ptr`` (``value = *ptr``); int32 words read atomically."""
    agent = _agent.current()  # (one look-up for the hooks and the cache)
    ptr = _checked_scalar("gm_load", ptr, agent)
    cache = agent.scalar_cache
    if cache is not None:  # through the block's data cache (hazard's ``cache``): maybe stale
        value = cache.load(ptr)
        if value is not None:
            return value
    if ptr.dtype == I32:
        return ptr.windows.transport.word(ptr.rank, ptr.offset).load()
    return _elem(ptr)[0].item()


def gm_store(ptr: GMPtr, value: Any) -> None:
    """Write one element at ``ptr`` (``*ptr = value``): a plain store, no fence."""
    ptr = _scalar("gm_store", ptr)
    _elem(ptr)[0] = _value("gm_store", ptr, value)


def gm_atomic_store(ptr: GMPtr, value: Any) -> None:
    """Atomically store one element (int32: a hardware atomic that wakes its waiters; other
    dtypes under the transport's data lock)."""
    ptr = _scalar("gm_atomic_store", ptr)
    value = _value("gm_atomic_store", ptr, value)
    if ptr.dtype == I32:
        ptr.windows.transport.word(ptr.rank, ptr.offset).set(int(value))
        return
    _locked(ptr, lambda a: a.__setitem__(0, value))


def gm_atomic_add(ptr: GMPtr, value: Any) -> Any:
    """Atomically add ``value`` to the element at ``ptr``; return the old value (int32: the
    hardware atomic, which wakes waiters; other dtypes under the transport's data lock)."""
    ptr = _scalar("gm_atomic_add", ptr)
    value = _value("gm_atomic_add", ptr, value)
    if ptr.dtype == I32:
        return ptr.windows.transport.word(ptr.rank, ptr.offset).add(int(value))
    old: list = []

    def add(a: np.ndarray) -> None:
        old.append(a[0].item())
        np.add(a, np.asarray(value, dtype=a.dtype), out=a, casting="unsafe")
    _locked(ptr, add)
    return old[0]


def st_atomic(value: Any, ptr: GMPtr) -> None:
    """PTO's ``st_atomic<T>(value, ptr)`` after ``set_st_atomic_cfg(..., ATOMIC_SUM)``: an
    atomic add at ``ptr`` (argument order as in PTO)."""
    gm_atomic_add(ptr, value)


def _locked(ptr: GMPtr, fn: Any) -> None:
    agent = _agent.current()
    transport = ptr.windows.transport
    with transport.data_lock(ptr.rank, ptr.offset, ptr.itemsize, agent.wait_timeout,
                             agent.ctl.aborted):
        fn(_elem(ptr))


# --- SYNCALL ------------------------------------------------------------------------------------

def SYNCALL(workspace: Any = None, used_cores: int = 0, mode: SyncAllMode | None = None) -> None:
    """Cross-core barrier of the blocks of this launch (PTO's ``SYNCALL``), as on a2a3.

    * ``SYNCALL()`` / ``SYNCALL(ws, n, SyncAllMode.Hard)``: the hardware form. It starts with
      ``pipe_barrier(PIPE_ALL)`` (every block's pipe work is done before it arrives), then every
      block of the launch arrives and all go on; a workspace is accepted and ignored.
    * ``SYNCALL(ws, n)`` / ``SYNCALL(ws, n, SyncAllMode.Soft)`` (``SYNCALL<SyncAllMode::Soft>``):
      the software form on a GM counter, the first int32 of ``ws`` (a ``GlobalTensor`` /
      ``Signal`` / int32 ``GMPtr``, zeroed before first use; pto-isa reserves a 64-byte line for
      it). ``pipe_barrier(PIPE_ALL)``, ``dsb(DSB_DDR)``, an atomic arrival, a poll until
      ``n`` blocks (0: all of the launch) arrived this round, ``dsb(DSB_DDR)``,
      ``pipe_barrier(PIPE_ALL)``. Every participant calls it equally often.

    Neither form fences data for other ranks beyond what those barriers and fences do.
    """
    agent = _agent.current()
    if agent.is_host:
        raise ShmcommError("SYNCALL: a barrier of one launch's blocks, called from host code; "
                           "a host waits for its ranks' hosts with rt.barrier()")
    if mode is None:
        mode = SyncAllMode.Hard if workspace is None else SyncAllMode.Soft
    mode = SyncAllMode(check_enum(SyncAllMode, mode, "SYNCALL: mode"))
    if isinstance(used_cores, bool) or not isinstance(used_cores, int) \
            or not 0 <= used_cores <= agent.block_num:
        raise ArgumentError(f"SYNCALL: used_cores must be an int in [0, {agent.block_num}] "
                            f"(0: every block of the launch), got {used_cores!r}")
    soft = mode is SyncAllMode.Soft
    if soft:
        if workspace is None:
            raise ArgumentError("SYNCALL: the soft form needs a workspace (a GlobalTensor, Signal "
                                "or int32 GMPtr whose first word counts arrivals)")
        ptr = workspace.ptr if isinstance(workspace, (GlobalTensor, Signal)) else workspace
        sig = Signal(_check_signal_ptr(ptr, "SYNCALL: workspace", 4))
        word, site = sig.word, sig.site
        n = used_cores or agent.block_num
    else:  # the launch's own counter, in its block 0's control line
        addr = agent.ctl.agent_addr(agent.rank, agent.first_slot) + 4 * _A_SYNCALL
        word = agent.rt.windows.transport.control_word(addr)
        site = WaitSite((word,), -1, addr - agent.ctl.base, kind=_KIND_SYNCALL, label="SYNCALL")
        n = agent.block_num  # the hardware barrier joins every core of the launch
    _pipe_barrier(PIPE_ALL)
    if soft:
        _dsb(DSB_DDR)
    target = _syncall_arrive(agent, site, word, n)
    _syncall_wait(agent, site, target)
    if soft:
        _dsb(DSB_DDR)
        _pipe_barrier(PIPE_ALL)


def _syncall_arrive(agent: Any, site: WaitSite, word: Any, n: int) -> int:
    """One arrival at SYNCALL's counter (``word``, waited on as ``site``); the count that ends
    this round of ``n`` participants."""
    arrived = word.add(1) + 1
    target = ((arrived - 1) // n + 1) * n
    if agent.hooks is not None:
        agent.hooks.syncall_arrive(word, target)
    return target


def _syncall_wait(agent: Any, site: WaitSite, target: int) -> None:
    """Wait until SYNCALL's counter reaches ``target`` (every participant of the round)."""
    if agent.hooks is not None:  # a scheduling model waits its own way (then this returns at once)
        agent.hooks.syncall_wait(site.words[0], target)
    wait_until(agent, site, target, WaitCmp.GE)
    if agent.hooks is not None:  # every participant arrived: what they did before is ordered
        agent.hooks.syncall_done(site.words[0], target)
