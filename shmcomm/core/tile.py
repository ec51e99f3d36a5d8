"""``Tile``: a block-local UB buffer (made by ``ctx.tile``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from .gm import as_dtype, check_shape


def tile_shape(shape: Any) -> tuple[int, int]:
    """``shape`` checked as a tile's, as ``(rows, cols)`` (a 1-D shape is one row)."""
    dims = check_shape(shape, "tile shape", max_dims=2)
    if len(dims) == 1:
        dims = (1, dims[0])
    if dims[0] < 1 or dims[1] < 1:
        raise ArgumentError(f"tile shape must be at least 1x1, got {dims}")
    return dims[0], dims[1]


class Tile:
    """A block-local UB buffer of ``rows x cols`` elements (made by ``ctx.tile``).

    ``valid`` is the region the last ``TLOAD`` filled, as PTO's ``ValidRow`` / ``ValidCol``.
    ``array`` is the numpy buffer (block-local memory, never shared).
    """

    __slots__ = ("array", "rows", "cols", "dtype", "valid")

    def __init__(self, shape: Any, dtype: Any) -> None:
        shape = tile_shape(shape)
        self.dtype = as_dtype(dtype, "tile dtype")
        self.rows, self.cols = shape
        self.array = np.zeros(shape, dtype=self.dtype)
        self.valid = (0, 0)

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def __repr__(self) -> str:
        return f"Tile({self.rows}x{self.cols} {self.dtype}, valid={self.valid[0]}x{self.valid[1]})"
