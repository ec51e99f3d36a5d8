"""``GlobalTensor``: a dense, row-major view of GM through a typed pointer (up to 5-D).

The data instructions see every tensor as 2-D, ``rows x cols`` with ``cols`` the last dimension
and ``rows`` the product of the others, as PTO splits transfers along DIM_3 / DIM_4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ArgumentError
from .memory import GMPtr, _check_shape


class GlobalTensor:
    """``shape`` elements of ``ptr.dtype`` starting at ``ptr`` (bounds-checked at creation).

    ``row_stride`` (2-D only, in elements, >= cols) makes a strided view of a sub-region, as
    ``Signal2D(ptr, rowStride)`` does; the default is dense.
    """

    __slots__ = ("ptr", "shape", "rows", "cols", "row_stride", "extent_bytes")

    def __init__(self, ptr: GMPtr, shape: Any, row_stride: int | None = None) -> None:
        if not isinstance(ptr, GMPtr):
            raise ArgumentError(f"GlobalTensor: ptr must be a GM pointer (GMPtr), got {type(ptr).__name__}")
        shape = _check_shape(shape, "GlobalTensor: shape")
        n = 1
        for d in shape:
            n *= d
        cols = shape[-1]
        self.ptr = ptr
        self.shape = shape
        self.cols = cols
        self.rows = n // cols if cols else 0
        if row_stride is None:
            row_stride = cols
        elif len(shape) != 2 or isinstance(row_stride, bool) or not isinstance(row_stride, int) \
                or row_stride < cols:
            raise ArgumentError(
                f"GlobalTensor: row_stride needs a 2-D shape and an int >= cols ({cols}); "
                f"got {row_stride!r} for shape {shape}")
        self.row_stride = row_stride
        self.extent_bytes = _extent(self.rows, cols, row_stride) * ptr.itemsize
        ptr.windows.check_extent(ptr.rank, ptr.offset, self.extent_bytes, "GlobalTensor")

    @classmethod
    def _raw(cls, ptr: GMPtr, rows: int, cols: int, row_stride: int) -> GlobalTensor:
        """A 2-D tensor inside one the caller has already checked (chunking inside TPUT)."""
        t = object.__new__(cls)
        t.ptr, t.shape, t.rows, t.cols, t.row_stride = ptr, (rows, cols), rows, cols, row_stride
        t.extent_bytes = _extent(rows, cols, row_stride) * ptr.itemsize
        return t

    def chunk(self, r0: int, r1: int, c0: int, c1: int) -> GlobalTensor:
        """Rows ``[r0, r1)`` and columns ``[c0, c1)`` of the 2-D form, as a strided tensor."""
        return GlobalTensor._raw(self.ptr + (r0 * self.row_stride + c0), r1 - r0, c1 - c0,
                                 self.row_stride)

    @property
    def dtype(self) -> np.dtype:
        return self.ptr.dtype

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def view(self) -> np.ndarray:
        """The numpy view of the tensor in its window, shaped ``shape``."""
        if self.row_stride != self.cols:
            return self.view2d()
        p = self.ptr
        return p.windows.view(p.rank, p.offset, self.shape, p.dtype)

    def view2d(self) -> np.ndarray:
        """The ``rows x cols`` numpy view (strided when ``row_stride > cols``)."""
        p = self.ptr
        if self.row_stride == self.cols or self.rows <= 1:
            return p.windows.view(p.rank, p.offset, (self.rows, self.cols), p.dtype)
        flat = p.windows.view(p.rank, p.offset, (self.extent_bytes // p.itemsize,), p.dtype)
        return np.lib.stride_tricks.as_strided(
            flat, (self.rows, self.cols), (self.row_stride * p.itemsize, p.itemsize))

    def __repr__(self) -> str:
        return f"GlobalTensor({self.ptr!r}, shape={self.shape})"


def _extent(rows: int, cols: int, row_stride: int) -> int:
    """Elements spanned by a strided 2-D region."""
    return 0 if rows == 0 or cols == 0 else (rows - 1) * row_stride + cols
