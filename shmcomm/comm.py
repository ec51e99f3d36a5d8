"""PTO communication instructions: signals, ``TNOTIFY`` / ``TWAIT`` / ``TTEST``, ``TPUT`` / ``TGET``.

What each instruction does and does not order (PTO A2/A3 semantics, reference notes §2):

* ``TNOTIFY(sig, v, op)`` updates element [0] of ``sig`` at once on the scalar pipe: a hardware
  atomic add (``AtomicAdd``) or an atomic store (``Set``). It fences its own store, **not** earlier
  data: to publish data first run ``pipe_barrier(PIPE_ALL)`` and ``dsb(DSB_DDR)``.
* ``TWAIT(sig, v, cmp)`` blocks until every element satisfies ``element <cmp> v``, checked as a
  sequential sweep (not an atomic snapshot); ``TTEST`` is one sweep, returning a bool. Unlike the
  hardware (which spins forever) a wait that cannot be satisfied raises after ``wait_timeout``
  or when the run aborts, naming the signal, the comparison, and the value it holds.
* ``TPUT`` / ``TGET`` move data through a UB staging tile: ``TLOAD`` on MTE2, an MTE2 -> MTE3
  event, ``TSTORE`` on MTE3, chunked when the data is larger than the tile. They order MTE2
  against MTE3 only and do not drain before a following ``TNOTIFY``.

Signals are int32, 4-byte aligned, and may live anywhere in a window (the signal matrix at
``ctx.signal_base``, or a symmetric allocation).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _atomics as at
from . import agent as _agent
from .errors import ArgumentError
from .memory import GMPtr
from .pipe import (
    EVENT_ID0,
    EVENT_ID1,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    TLOAD,
    TSTORE,
    Tile,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from .tensor import GlobalTensor
from .types import AtomicType, NotifyOp, ReduceOp, WaitCmp, check_enum
from .wait import CMP_FUNCS, WaitSite, first_unsatisfied, wait_until

__all__ = [
    "Signal", "Signal2D", "NotifyOp", "WaitCmp", "ReduceOp", "AtomicType", "GlobalTensor",
    "TNOTIFY", "TWAIT", "TTEST", "TPUT", "TGET", "GetRemotePtr", "get_block_idx",
    "get_block_num", "ParallelGroup", "TBROADCAST", "TSCATTER", "TGATHER", "TREDUCE",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_I32 = np.dtype(np.int32)
_SEQ = at.SEQ_CST
_fetch_add = at.fast_fetch_add  # these take c_void_p addresses only (Signal.cp)
_store = at.fast_store
_load = at.fast_load
_VP = ctypes.c_void_p
_tls = _agent._tls
_signals: dict[int, Signal] = {}  # address -> Signal, in this rank process (see Signal)


def _check_signal_ptr(ptr: Any, what: str, nbytes: int) -> GMPtr:
    if type(ptr) is GMPtr and ptr.dtype is _I32 and not ptr.offset & 3 \
            and ptr.offset + nbytes <= ptr.windows.size:
        return ptr  # the common case, checked in one expression
    if not isinstance(ptr, GMPtr):
        raise ArgumentError(f"{what}: expected a GM pointer (GMPtr), got {type(ptr).__name__}")
    if ptr.dtype != _I32:
        raise ArgumentError(f"{what}: signal dtype must be int32, got {ptr.dtype}")
    if ptr.offset % 4:
        raise ArgumentError(f"{what}: signal address must be 4-byte aligned, got offset {ptr.offset:#x}")
    ptr.windows.check_extent(ptr.rank, ptr.offset, nbytes, what)
    return ptr


class Signal:
    """One int32 signal word in GM (PTO's ``comm::Signal``, a 1x1x1x1x1 GlobalTensor).

    A Signal holds nothing but the word's address, so ``Signal(ptr)`` hands back the one object
    already made for that word in this rank process: kernels written like the seed build a fresh
    Signal for every instruction, and that lookup costs a third of building one.
    """

    __slots__ = ("ptr", "addr", "cp", "sleepers", "_site")

    def __new__(cls, ptr: GMPtr) -> Signal:
        if type(ptr) is GMPtr and ptr.dtype is _I32:
            sig = _signals.get(ptr.addr)
            if sig is not None and sig.ptr.windows is ptr.windows:
                return sig
        _check_signal_ptr(ptr, "Signal", 4)
        self = object.__new__(cls)
        self.ptr = ptr
        self.addr = ptr.addr
        self.cp = _VP(ptr.addr)
        self.sleepers = _sleepers_addr(ptr.rank)
        self._site = None
        if cls is Signal:
            _signals[ptr.addr] = self
        return self

    @property
    def site(self) -> WaitSite:
        if self._site is None:
            p = self.ptr
            self._site = WaitSite((self.cp,), p.rank, p.offset, sleepers=self.sleepers)
        return self._site

    @property
    def value(self) -> int:
        """The word's current value (an atomic load; for reports and host code)."""
        return _load(self.cp, _SEQ)

    def __repr__(self) -> str:
        return f"Signal(rank={self.ptr.rank}, offset={self.ptr.offset:#x}, value={self.value})"


class Signal2D:
    """A ``rows x cols`` block of int32 signals (``comm::Signal2D<R, C>``).

    ``row_stride`` (elements) makes a strided view of a sub-region of a larger matrix.
    ``TWAIT`` / ``TTEST`` need every element to hold; ``TNOTIFY`` writes element [0, 0] only.
    """

    __slots__ = ("ptr", "addr", "cp", "rows", "cols", "row_stride", "addrs", "sleepers", "_site")

    def __init__(self, ptr: GMPtr, rows: int, cols: int, row_stride: int | None = None) -> None:
        for name, v in (("rows", rows), ("cols", cols)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"Signal2D: {name} must be an int >= 1, got {v!r}")
        if row_stride is None:
            row_stride = cols
        if isinstance(row_stride, bool) or not isinstance(row_stride, int) or row_stride < cols:
            raise ArgumentError(f"Signal2D: row_stride must be an int >= cols ({cols}), got {row_stride!r}")
        _check_signal_ptr(ptr, "Signal2D", 4 * ((rows - 1) * row_stride + cols))
        self.ptr, self.rows, self.cols, self.row_stride = ptr, rows, cols, row_stride
        self.addr = ptr.addr
        self.addrs = tuple(_VP(ptr.addr + 4 * (r * row_stride + c))
                           for r in range(rows) for c in range(cols))
        self.cp = self.addrs[0]
        self.sleepers = _sleepers_addr(ptr.rank)
        self._site: WaitSite | None = None

    @property
    def site(self) -> WaitSite:
        if self._site is None:
            p = self.ptr
            self._site = WaitSite(self.addrs, p.rank, p.offset, self.rows, self.cols,
                                  self.row_stride, sleepers=self.sleepers)
        return self._site

    @property
    def values(self) -> np.ndarray:
        return np.array([_load(a, _SEQ) for a in self.addrs], dtype=np.int32).reshape(self.rows, self.cols)

    def __repr__(self) -> str:
        return (f"Signal2D(rank={self.ptr.rank}, offset={self.ptr.offset:#x}, "
                f"{self.rows}x{self.cols}, stride={self.row_stride})")


def _sleepers_addr(rank: int) -> int:
    return _agent.current().ctl.sleepers[rank]


def _check_sig(sig: Any, op: str) -> None:
    if type(sig) is not Signal and type(sig) is not Signal2D:
        raise ArgumentError(f"{op}: expected a Signal or Signal2D, got {type(sig).__name__}")


def _check_i32(value: Any, op: str) -> None:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ArgumentError(f"{op}: value must be an int32, got {value!r}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise ArgumentError(f"{op}: value must be in [{INT32_MIN}, {INT32_MAX}], got {value}")


def TNOTIFY(sig: Signal | Signal2D, value: int, op: NotifyOp = NotifyOp.AtomicAdd) -> None:
    """Atomically add ``value`` to (``AtomicAdd``) or store it into (``Set``) the signal.

    Local or remote signals alike (the seed notifies local counters too). No fence before the
    store: earlier TSTOREs may still be in flight (hazard mode shows it).
    """
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        _check_sig(sig, "TNOTIFY")
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        _check_i32(value, "TNOTIFY")
        value = int(value)  # a numpy integer: the unchecked ctypes binding takes ints only
    if type(op) is not NotifyOp:  # ints 0/1 pass; another enum (WaitCmp.NE == 1) does not
        op = check_enum(NotifyOp, op, "TNOTIFY: op")
    try:
        hook = _tls.agent.notify_hook
    except AttributeError:
        hook = _agent.current().notify_hook
    if hook is not None:
        hook(sig, op)
    cp = sig.cp
    if op == 0:
        _fetch_add(cp, value, _SEQ)
    else:
        _store(cp, value, _SEQ)
    if _load(sig.sleepers, _SEQ):
        at.futex_wake(sig.addr)


def TWAIT(sig: Signal | Signal2D, value: int, cmp: WaitCmp) -> None:
    """Block until every element of ``sig`` satisfies ``element <cmp> value``.

    Raises ``WaitTimeout`` after ``wait_timeout`` and ``Aborted`` when the run aborts.
    """
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        _check_sig(sig, "TWAIT")
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        _check_i32(value, "TWAIT")
    if type(cmp) is not WaitCmp:
        cmp = check_enum(WaitCmp, cmp, "TWAIT: cmp")
    fn = CMP_FUNCS[cmp]
    if t is Signal:
        if fn(_load(sig.cp, _SEQ), value):
            return
    elif first_unsatisfied(sig.addrs, fn, value)[0] < 0:
        return
    wait_until(_agent.current(), sig.site, value, cmp)


def TTEST(sig: Signal | Signal2D, value: int, cmp: WaitCmp) -> bool:
    """One sweep: True if every element of ``sig`` satisfies ``element <cmp> value`` now."""
    t = type(sig)
    if t is not Signal and t is not Signal2D:
        _check_sig(sig, "TTEST")
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        _check_i32(value, "TTEST")
    if type(cmp) is not WaitCmp:
        cmp = check_enum(WaitCmp, cmp, "TTEST: cmp")
    if t is Signal:
        return CMP_FUNCS[cmp](_load(sig.cp, _SEQ), value)
    return first_unsatisfied(sig.addrs, CMP_FUNCS[cmp], value)[0] < 0


def GetRemotePtr(ctx: Any, ptr: GMPtr, rank: int) -> GMPtr:
    """The address of ``ptr``'s offset in ``rank``'s window (symmetric-heap translation)."""
    if not isinstance(ptr, GMPtr):
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
    if dst.dtype != src.dtype:
        raise ArgumentError(f"{op}: dst dtype {dst.dtype} differs from src dtype {src.dtype}")
    for t in tiles:
        if not isinstance(t, Tile):
            raise ArgumentError(f"{op}: staging tile must be a Tile from ctx.tile(), got {type(t).__name__}")
        if t.dtype != dst.dtype:
            raise ArgumentError(f"{op}: staging tile dtype {t.dtype} differs from the data's {dst.dtype}")


def _chunks(rows: int, cols: int, trows: int, tcols: int):
    for r0 in range(0, rows, trows):
        r1 = min(r0 + trows, rows)
        for c0 in range(0, cols, tcols):
            yield r0, r1, c0, min(c0 + tcols, cols)


def _copy_through(op: str, dst: GlobalTensor, src: GlobalTensor, tiles: tuple, atomic: int) -> None:
    """The body of TPUT/TGET: per chunk TLOAD (MTE2) -> event -> TSTORE (MTE3) -> event.

    With one tile, PTO's single-chunk helper also runs ``pipe_barrier(PIPE_ALL)`` between the load
    and the store (pto-isa a2d8dd86). With ping/pong tiles chunk k+1 loads into the other tile
    while chunk k stores, ordered by EVENT_ID0 / EVENT_ID1. Nothing drains at the end.
    """
    t0 = tiles[0]
    trows = min(t.rows for t in tiles)
    tcols = min(t.cols for t in tiles)
    pingpong = len(tiles) == 2
    for k, (r0, r1, c0, c1) in enumerate(_chunks(src.rows, src.cols, trows, tcols)):
        tile = tiles[k & 1] if pingpong else t0
        ev = (EVENT_ID0, EVENT_ID1)[k & 1] if pingpong else EVENT_ID0
        TLOAD(tile, src.chunk(r0, r1, c0, c1))
        set_flag(PIPE_MTE2, PIPE_MTE3, ev)
        wait_flag(PIPE_MTE2, PIPE_MTE3, ev)
        if not pingpong:
            pipe_barrier(PIPE_ALL)
        TSTORE(dst.chunk(r0, r1, c0, c1), tile, atomic)
        set_flag(PIPE_MTE3, PIPE_MTE2, ev)
        wait_flag(PIPE_MTE3, PIPE_MTE2, ev)


def TPUT(dst: GlobalTensor, src: GlobalTensor, tile: Tile, *more: Any) -> None:
    """Copy local ``src`` to (usually remote) ``dst`` through UB, chunked by the tile's shape.

    Forms, as PTO's overloads: ``TPUT(dst, src, tile)``, ``TPUT(dst, src, tile, atomic)`` with
    ``AtomicType.AtomicAdd`` for an atomic accumulate into ``dst``, and the ping-pong form
    ``TPUT(dst, src, ping, pong[, atomic])``. Ends without draining MTE3.
    """
    tiles: tuple = (tile,)
    atomic: Any = AtomicType.AtomicNone
    if more and isinstance(more[0], Tile):
        tiles, more = (tile, more[0]), more[1:]
    if len(more) > 1:
        raise ArgumentError("TPUT: expected (dst, src, tile[, pong][, atomic])")
    if more:
        atomic = more[0]
    atomic = check_enum(AtomicType, atomic, "TPUT: atomic")
    _check_copy("TPUT", dst, src, tiles)
    _copy_through("TPUT", dst, src, tiles, atomic)


def TGET(dst: GlobalTensor, src: GlobalTensor, tile: Tile, pong: Tile | None = None) -> None:
    """Copy (usually remote) ``src`` to local ``dst`` through UB; ``pong`` for ping-pong."""
    tiles = (tile,) if pong is None else (tile, pong)
    _check_copy("TGET", dst, src, tiles)
    _copy_through("TGET", dst, src, tiles, AtomicType.AtomicNone)


from .group import TBROADCAST, TGATHER, TREDUCE, TSCATTER, ParallelGroup  # noqa: E402  (root collectives)
