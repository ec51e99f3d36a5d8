"""pto-isa's own tile copies across GM (``TLOAD`` / ``TSTORE`` of a kernel built against a
pto-isa checkout), handed to shmcomm's execution model.

The shadow's ``TLOAD_IMPL`` / ``TSTORE_IMPL`` (``shadow/shmcomm_shadow/tiles.hpp``) run pto-isa's
implementation at once in eager mode. When the block is bridged (hazard, schedule, race
detector) each copy comes here as one bridge call (``OP_TILE_COPY``): the GM tensor it reads or
writes (base, element size, pto-isa's five dims and strides), the tile's bytes, its pipe, and a
native callback that performs the copy with pto-isa's implementation. The copy is issued to the
block's model as ``load`` (MTE2) or ``store`` (MTE3) on :class:`NativeTensor` s, the GM tensor cut
into 2-D pieces the models understand (its dims sorted by stride and merged, one piece per
outer index), so the race detector sees its true byte ranges and its call site. The last piece
carries the callback: when the model lands that piece (a hazard queue's retirement, a
``wait_flag``, a barrier, the kernel's end), pto-isa's copy runs, on the tile as issued; a
remote store whose visibility the model delays runs later on a copy of the tile's bytes taken
when it completed. An ``AtomicAdd`` store runs under shmcomm's cross-process data lock, as a
Python kernel's does (pto-isa's CPU back end adds with a plain ``+=``).

A store from an ``Acc`` tile (a2a3: FIX pipe) runs at once: the models have no FIX queue, so
it is seen as a scalar-ordered GM write (``gm_access``). A copy whose GM lies in no rank's
window (private memory, which no other block can reach through shmcomm) also runs at once.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from ..core.gm import GlobalTensor, GMPtr
from ..core.model import atomic_add
from ..core.tile import Tile
from ..errors import ArgumentError

COPY_LOAD, COPY_STORE, COPY_STORE_NOW = 0, 1, 2
MAX_PIECES = 1 << 16  # 2-D pieces of one copy's GM tensor (one per outer index)
_LAND = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
_land_fns: dict[int, Any] = {}  # the C++ callback's address -> its ctypes function
_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_ZERO = np.zeros(1, np.uint8)
NATIVE_UB_UID = -1  # every native tile of a block is one UB window (a tile is its address range)


class Landing:
    """One issued native copy; :meth:`land` runs pto-isa's implementation once."""

    __slots__ = ("fn", "ctx", "tile_addr", "tile_bytes", "done")

    def __init__(self, fn_addr: int, ctx: int, tile_addr: int, tile_bytes: int) -> None:
        fn = _land_fns.get(fn_addr)
        if fn is None:
            fn = _land_fns[fn_addr] = _LAND(fn_addr)
        self.fn = fn
        self.ctx = ctx
        self.tile_addr = tile_addr
        self.tile_bytes = tile_bytes
        self.done = False

    def land(self, tile_bytes: np.ndarray | None = None) -> None:
        """Perform the copy (``tile_bytes``: a copy of the tile's bytes to store instead)."""
        if self.done:
            return
        self.done = True
        self.fn(self.ctx, None if tile_bytes is None else tile_bytes.ctypes.data, 0)

    def snapshot(self) -> np.ndarray:
        """A copy of the tile's bytes now."""
        raw = (ctypes.c_char * self.tile_bytes).from_address(self.tile_addr)
        return np.frombuffer(memoryview(raw).cast("B"), np.uint8).copy()


class NativeTensor(GlobalTensor):
    """A 2-D piece of a native copy's GM tensor; the last piece of a copy carries its
    :class:`Landing` (``landing``), which ``read_into`` / ``write_from`` run instead of moving
    numpy data. ``span``: (byte offset, bytes) of the whole copy's GM in its window, what an
    ``AtomicAdd`` store locks."""

    __slots__ = ("landing", "span", "snap")
    landing: Landing | None
    span: tuple[int, int]
    snap: np.ndarray | None
    native = True

    def read_into(self, out: np.ndarray) -> None:
        if self.landing is not None:
            self.landing.land()

    def write_from(self, data: np.ndarray) -> None:
        if self.landing is not None:
            self.landing.land(data if data is self.snap else None)

    def snapshot(self, data: np.ndarray) -> np.ndarray:
        if self.landing is None:
            return data
        snap = self.landing.snapshot()
        object.__setattr__(self, "snap", snap)
        return snap


@functools.lru_cache(maxsize=1024)
def pieces(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple[int, ...], int, int, int]:
    """The GM elements of pto-isa's 5-D (shape, strides) as 2-D pieces: (element offsets of
    each piece, rows, cols, row stride); dims sorted by stride, contiguous ones merged."""
    dims = sorted(((n, s) for n, s in zip(shape, strides, strict=True) if n > 1), key=lambda d: -d[1])
    merged: list[list[int]] = []
    for n, s in reversed(dims):  # innermost first
        if merged and s == merged[-1][0] * merged[-1][1]:
            merged[-1][0] *= n
        else:
            merged.append([n, s])
    merged.reverse()  # outermost first
    if merged and merged[-1][1] == 1:
        cols = merged.pop()[0]
    else:
        cols = 1
    rows, rs = (merged.pop() if merged else (1, cols))
    count = 1
    for n, _ in merged:
        count *= n
    if count > MAX_PIECES:
        raise ArgumentError(f"TLOAD/TSTORE: a GM tensor of shape {shape} and strides {strides} is "
                            f"{count} strided pieces; shmcomm's models take at most {MAX_PIECES}")
    offs = [0]
    for n, s in merged:
        offs = [o + i * s for o in offs for i in range(n)]
    return tuple(offs), rows, cols, max(rs, cols) if rows <= 1 else rs


def _piece(ptr: GMPtr, rows: int, cols: int, rs: int, landing: Landing | None,
           span: tuple[int, int]) -> NativeTensor:
    t = object.__new__(NativeTensor)
    base = GlobalTensor._raw(ptr, rows, cols, rs)
    for name in GlobalTensor.__slots__:
        object.__setattr__(t, name, getattr(base, name))
    object.__setattr__(t, "landing", landing)
    object.__setattr__(t, "span", span)
    object.__setattr__(t, "snap", None)
    return t


def _tile(addr: int, nbytes: int) -> Tile:
    """The tile as the models see it: its bytes (the race detector's UB range); the data moves
    natively, so its array is a zero-size stand-in."""
    t = Tile((1, max(nbytes, 1)), _UNSIGNED[1], array=np.broadcast_to(_ZERO, (1, max(nbytes, 1))))
    t.uid, t.uoff = NATIVE_UB_UID, addr
    return t


def issue(d: Any, a: list[int]) -> None:
    """The bridge's ``OP_TILE_COPY``: issue one native copy to the calling block's model."""
    kind, atomic, esize, tile_addr, tile_bytes, fn, ctx, gm = a[:8]
    shape, strides = tuple(a[8:13]), tuple(a[13:18])
    landing = Landing(fn, ctx, tile_addr, tile_bytes)
    dtype = _UNSIGNED.get(esize)
    try:
        base = d.ptr(gm, 7) if dtype is not None else None
    except ArgumentError:
        base = None
    agent = d.agent
    if base is None:  # private memory (or an element size numpy has no word for): at once
        landing.land()
        return
    ptr = GMPtr(base.windows, base.rank, base.offset, dtype)
    offs, rows, cols, rs = pieces(shape, strides)
    extent = max(offs) + (rows - 1) * rs + cols if rows * cols else 0
    span = (ptr.offset, extent * esize)
    tile = _tile(tile_addr, tile_bytes)
    last = len(offs) - 1
    parts = [_piece(ptr + o, rows, cols, rs, landing if i == last else None, span)
             for i, o in enumerate(offs)]
    pipes = agent.pipes
    if kind == COPY_LOAD:
        for p in parts:
            pipes.load(tile, p)
    elif kind == COPY_STORE:
        for p in parts:
            pipes.store(p, tile, atomic)
    else:  # FIX: at once, a write the scalar unit orders (the models hear of it first)
        hooks = agent.hooks
        if hooks is not None:
            for p in parts:
                for r in range(p.rows):
                    hooks.gm_access("TSTORE", p.ptr + r * (p.row_stride or p.cols), p.cols * esize, True,
                                    bool(atomic))
        if atomic:
            atomic_add(agent, parts[-1], np.empty(0, np.uint8))
        else:
            landing.land()
