"""``Tile``: a block-local UB buffer (made by ``ctx.tile``)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .gm import as_dtype, check_shape

_UIDS = itertools.count(1)  # Tile.uid


def tile_shape(shape: Any) -> tuple[int, int]:
    """``shape`` checked as a tile's, as ``(rows, cols)`` (a 1-D shape is one row)."""
    dims = check_shape(shape, "tile shape", max_dims=2)
    if len(dims) == 1:
        dims = (1, dims[0])
    if dims[0] < 1 or dims[1] < 1:
        raise ArgumentError(f"tile shape must be at least 1x1, got {dims}")
    return dims[0], dims[1]


def check_valid(valid: Any, rows: int, cols: int, what: str) -> tuple[int, int]:
    """``valid`` as a tile's valid region ``(valid_row, valid_col)`` inside ``rows x cols``."""
    try:
        vr, vc = valid
    except (TypeError, ValueError):
        raise ArgumentError(f"{what}: valid must be (valid_row, valid_col), got {valid!r}") from None
    for name, v, hi in (("valid_row", vr, rows), ("valid_col", vc, cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= hi:
            raise ArgumentError(f"{what}: {name} must be an int in [1, {hi}], got {v!r}")
    return int(vr), int(vc)


class Tile:
    """A block-local UB buffer of ``rows x cols`` elements (made by ``ctx.tile``).

    ``valid_row`` / ``valid_col`` is the tile's valid region (PTO's ``GetValidRow`` /
    ``GetValidCol``; the whole tile unless given): ``TPUT`` / ``TGET`` chunk by it. ``ub_offset``
    is where the tile sits in its block's UB (``TASSIGN``); tiles whose byte ranges overlap share
    memory, as on hardware. ``valid`` is the region the last ``TLOAD`` filled. ``array`` is the
    numpy buffer (block-local memory, never shared with other blocks).
    """

    __slots__ = ("array", "rows", "cols", "dtype", "valid", "valid_row", "valid_col", "ub_offset",
                 "uid", "uoff")
    array: np.ndarray
    rows: int
    cols: int
    dtype: np.dtype
    valid: tuple[int, int]
    valid_row: int
    valid_col: int
    ub_offset: int
    # the tile's memory for the race detector: ``uid`` is unique in the process (``id()`` is
    # not: a tile freed at a kernel's end gives its id to one of another launch's blocks) and a
    # view (``rows_view``) shares its tile's, at byte ``uoff``
    uid: int
    uoff: int

    def __init__(self, shape: Any, dtype: Any, valid: Any = None, array: np.ndarray | None = None,
                 ub_offset: int = -1) -> None:
        shape = tile_shape(shape)
        self.dtype = as_dtype(dtype, "tile dtype")
        self.rows, self.cols = shape
        self.array = np.zeros(shape, dtype=self.dtype) if array is None else array
        self.valid = (0, 0)
        self.valid_row, self.valid_col = (
            shape if valid is None else check_valid(valid, shape[0], shape[1], "tile"))
        self.ub_offset = ub_offset
        self.uid = next(_UIDS)
        self.uoff = 0

    def GetValidRow(self) -> int:
        return self.valid_row

    def GetValidCol(self) -> int:
        return self.valid_col

    def set_valid(self, valid_row: int, valid_col: int) -> None:
        """Change the valid region (a dynamic ``ValidRow`` / ``ValidCol`` tile)."""
        self.valid_row, self.valid_col = check_valid((valid_row, valid_col), self.rows, self.cols,
                                                     "Tile.set_valid")

    def rows_view(self, r0: int, nrows: int) -> Tile:
        """Rows ``[r0, r0 + nrows)`` as a tile on the same UB bytes (the half tiles of pto-isa's
        intra-tile ping-pong)."""
        t = Tile((nrows, self.cols), self.dtype, array=self.array[r0:r0 + nrows],
                 ub_offset=-1 if self.ub_offset < 0 else
                 self.ub_offset + r0 * self.cols * self.dtype.itemsize)
        t.uid, t.uoff = self.uid, self.uoff + r0 * self.cols * self.dtype.itemsize
        return t

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def __repr__(self) -> str:
        vr = "" if (self.valid_row, self.valid_col) == (self.rows, self.cols) else \
            f", valid region {self.valid_row}x{self.valid_col}"
        at = "" if self.ub_offset < 0 else f" at UB {self.ub_offset:#x}"
        return (f"Tile({self.rows}x{self.cols} {self.dtype}{at}{vr}, "
                f"loaded={self.valid[0]}x{self.valid[1]})")


UB_ALIGN = 32  # UB addresses of tiles are 32-byte aligned on A2/A3


def block_ub(agent: Any) -> np.ndarray:
    """The block's UB as ``ub_bytes`` bytes (made at its first placed tile)."""
    if agent.ub is None:
        agent.ub = np.zeros(agent.rt.config.ub_bytes, dtype=np.uint8)
    return agent.ub


def assign(tile: Tile, ub: np.ndarray, addr: Any, what: str = "TASSIGN: addr") -> None:
    """Place ``tile`` at byte ``addr`` of the block's UB (``TASSIGN``): from now on its data are
    those bytes, shared with every other tile placed over them."""
    nbytes = tile.rows * tile.cols * tile.dtype.itemsize
    if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)):
        raise ArgumentError(f"{what} must be an int (a byte offset in UB), got {addr!r}")
    addr = int(addr)
    if addr % UB_ALIGN or not 0 <= addr <= ub.nbytes - nbytes:
        raise ArgumentError(
            f"{what} must be a multiple of {UB_ALIGN} in [0, {ub.nbytes - nbytes}] for a "
            f"{nbytes}-byte tile in a {ub.nbytes}-byte UB (ub_bytes); got {addr:#x}")
    tile.array = ub[addr:addr + nbytes].view(tile.dtype).reshape(tile.rows, tile.cols)
    tile.ub_offset = addr


class VectorOp:
    """One tile vector instruction issued to ``PIPE_V`` (made by :mod:`shmcomm.vector`).

    ``srcs``: the tiles it reads, each with the ``(rows, cols)`` region it reads; ``dst`` /
    ``region``: the tile it writes and where. ``fn`` maps the source regions (numpy views, read
    when the op runs) to the result, cast into ``dst``'s region. A model runs it at issue
    (eager) or when the V pipe retires it (hazard).
    """

    __slots__ = ("name", "dst", "region", "srcs", "fn")

    def __init__(self, name: str, dst: Tile, region: tuple[int, int],
                 srcs: tuple[tuple[Tile, tuple[int, int]], ...], fn: Any) -> None:
        self.name, self.dst, self.region, self.srcs, self.fn = name, dst, region, srcs, fn

    def run(self) -> None:
        r, c = self.region
        srcs = self.srcs
        if len(srcs) == 2:  # the binary instructions: no list to build
            (a, (ar, ac)), (b, (br, bc)) = srcs
            out = self.fn(a.array[:ar, :ac], b.array[:br, :bc])
        else:
            out = self.fn(*[t.array[:sr, :sc] for t, (sr, sc) in srcs])
        np.copyto(self.dst.array[:r, :c], out, casting="unsafe")

    def __repr__(self) -> str:
        return f"{self.name}({self.dst!r} <- {', '.join(repr(t) for t, _ in self.srcs)})"
