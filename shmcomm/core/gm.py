"""Global memory: the rank windows, typed GM pointers, ``GlobalTensor`` views, and the checks
every address goes through.

Layout of one rank's window (whatever the transport)::

    offset 0              signal matrix, ``signal_bytes`` (int32 words, zeroed, 64-byte aligned)
    offset signal_bytes   data heap, ``heap_bytes`` (symmetric allocations, 64-byte aligned)

Every rank sees every window, so a pointer is a ``(rank, byte offset, dtype)`` triple and
``GetRemotePtr(ctx, p, r)`` keeps the offset and changes the rank: the symmetric-heap translation
``windowsIn[r] + (p - windowsIn[me])`` of pto-isa, or ``nvshmem_ptr``.

Pointers are on every kernel's hot path (``signal_base + r``, ``GetRemotePtr``), so a pointer
holds three fields: its :class:`PtrSpace` (the windows and the dtype, shared by every pointer of
that dtype), its rank and its byte offset; ``p + n`` builds one object and checks one range.

A ``GlobalTensor`` is a dense, row-major view of GM through a typed pointer (up to 5-D). The data
instructions see every tensor as 2-D, ``rows x cols`` with ``cols`` the last dimension and
``rows`` the product of the others, as PTO splits transfers along DIM_3 / DIM_4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..transports import Transport

ALIGN = 64  # cache line: allocations and the signal matrix start on one

# dtypes a GM pointer may carry (PTO's data types that numpy has)
DTYPES = tuple(
    np.dtype(t)
    for t in (np.float32, np.float16, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32,
              np.int64, np.uint64, np.float64)
)
I32 = np.dtype(np.int32)


def as_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """Normalize ``dtype`` and check that shmcomm supports it."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{what} must be a numpy dtype, got {dtype!r}") from None
    if dt not in DTYPES:
        raise ArgumentError(f"{what} must be one of {', '.join(str(d) for d in DTYPES)}; got {dt}")
    return dt


def check_shape(shape: Any, what: str, max_dims: int = 5) -> tuple[int, ...]:
    """``shape`` as a tuple of 1 to ``max_dims`` ints >= 0 (an int is a 1-D shape)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ArgumentError(f"{what} must be a tuple of ints, got {shape!r}") from None
    if not 1 <= len(dims) <= max_dims:
        raise ArgumentError(f"{what} must have 1 to {max_dims} dimensions, got {len(dims)}")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ArgumentError(f"{what} entries must be ints >= 0, got {shape!r}")
    return tuple(int(d) for d in dims)


class Windows:
    """Every rank's window as this process sees them: the transport plus the bounds checks.

    One per rank process and run; the table every GM pointer refers to.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.nranks = transport.nranks
        self.signal_bytes = transport.signal_bytes
        self.heap_bytes = transport.heap_bytes
        self.size = transport.size
        self._spaces: dict[np.dtype, PtrSpace] = {}

    def space(self, dtype: np.dtype) -> PtrSpace:
        """The one :class:`PtrSpace` of ``dtype`` (pointers of a dtype share it)."""
        sp = self._spaces.get(dtype)
        if sp is None:
            sp = self._spaces[dtype] = PtrSpace(self, dtype)
        return sp

    def check_rank(self, rank: Any, what: str = "rank") -> int:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
            raise ArgumentError(f"{what} must be an int in [0, {self.nranks}), got {rank!r}")
        if not 0 <= rank < self.nranks:
            raise ArgumentError(f"{what} must be in [0, {self.nranks}), got {rank}")
        return int(rank)

    def check_extent(self, rank: int, offset: int, nbytes: int, what: str) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise ArgumentError(
                f"{what}: bytes [{offset}, {offset + nbytes}) lie outside rank {rank}'s window "
                f"[0, {self.size})"
            )

    def view(self, rank: int, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A numpy view of ``shape`` elements of ``dtype`` at ``offset`` in ``rank``'s window."""
        return self.transport.view(rank, offset, shape, dtype)

    def locate(self, address: int) -> tuple[int, int] | None:
        """``(rank, offset)`` of a process address inside some window, or ``None``."""
        return self.transport.locate(address)


class PtrSpace:
    """What every pointer of one dtype in one run shares: the windows, the dtype, the bounds.

    ``signals`` is the int32 space's table of Signal objects (``None`` for other dtypes).
    """

    __slots__ = ("windows", "dtype", "itemsize", "size", "nranks", "signals")

    def __init__(self, windows: Windows, dtype: np.dtype) -> None:
        self.windows = windows
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.size = windows.size
        self.nranks = windows.nranks
        self.signals: dict[int, Any] | None = {} if dtype == I32 else None


_new = object.__new__


class GMPtr:
    """A typed pointer into global memory: ``(rank, byte offset, dtype)``.

    ``p + n`` moves by ``n`` elements, like ``__gm__ T*`` arithmetic; the result must stay inside
    the window (one past the end allowed).
    """

    __slots__ = ("space", "rank", "offset")

    def __init__(self, windows: Windows, rank: int, offset: int, dtype: Any = np.int32) -> None:
        dt = dtype if isinstance(dtype, np.dtype) and dtype in DTYPES else as_dtype(dtype)
        rank = windows.check_rank(rank)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise ArgumentError(f"pointer offset must be an int, got {offset!r}")
        offset = int(offset)
        if not 0 <= offset <= windows.size:
            raise ArgumentError(
                f"pointer offset {offset} lies outside rank {rank}'s window [0, {windows.size}]"
            )
        self.space = windows.space(dt)
        self.rank = rank
        self.offset = offset

    @property
    def windows(self) -> Windows:
        return self.space.windows

    @property
    def dtype(self) -> np.dtype:
        return self.space.dtype

    @property
    def itemsize(self) -> int:
        return self.space.itemsize

    def __add__(self, n: int) -> GMPtr:
        if type(n) is not int:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise ArgumentError(f"pointer + n: n must be an int (elements), got {n!r}")
            n = int(n)
        sp = self.space
        off = self.offset + n * sp.itemsize
        if not 0 <= off <= sp.size:
            raise ArgumentError(
                f"pointer arithmetic: offset {off} lies outside rank {self.rank}'s window "
                f"[0, {sp.size}]")
        p = _new(GMPtr)  # allocation-light: the hot path of every kernel
        p.space = sp
        p.rank = self.rank
        p.offset = off
        return p

    __radd__ = __add__

    def __sub__(self, n: Any) -> Any:
        if isinstance(n, GMPtr):
            if n.rank != self.rank or n.space is not self.space:
                raise ArgumentError("pointer difference needs two pointers of one rank and dtype")
            return (self.offset - n.offset) // self.space.itemsize
        if type(n) is not int and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
            raise ArgumentError(f"pointer - n: n must be an int (elements) or a GMPtr, got {n!r}")
        return self + (-int(n))

    def on_rank(self, rank: Any) -> GMPtr:
        """The same offset in ``rank``'s window (symmetric-heap translation)."""
        if type(rank) is int and 0 <= rank < self.space.nranks:
            if rank == self.rank:
                return self
        else:
            rank = self.space.windows.check_rank(rank, "GetRemotePtr: rank")
        p = _new(GMPtr)
        p.space = self.space
        p.rank = rank
        p.offset = self.offset
        return p

    def cast(self, dtype: Any) -> GMPtr:
        """The same address seen as ``dtype`` (``reinterpret_cast``)."""
        return GMPtr(self.space.windows, self.rank, self.offset, as_dtype(dtype))

    def tensor(self, shape: Any) -> GlobalTensor:
        """Shorthand for ``GlobalTensor(self, shape)``."""
        return GlobalTensor(self, shape)

    def view(self, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy view of ``shape`` elements starting here (bounds-checked)."""
        return self.space.windows.view(self.rank, self.offset, tuple(shape), self.space.dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GMPtr) and other.space is self.space
                and other.rank == self.rank and other.offset == self.offset)

    def __hash__(self) -> int:
        return hash((self.rank, self.offset, self.space.dtype.str))

    def __repr__(self) -> str:
        return f"GMPtr(rank={self.rank}, offset={self.offset:#x}, {self.space.dtype})"


class GlobalTensor:
    """``shape`` elements of ``ptr.dtype`` starting at ``ptr`` (bounds-checked at creation).

    ``row_stride`` (2-D only, in elements, >= cols) makes a strided view of a sub-region, as
    ``Signal2D(ptr, rowStride)`` does; the default is dense.
    """

    __slots__ = ("ptr", "shape", "rows", "cols", "row_stride", "extent_bytes")

    def __init__(self, ptr: GMPtr, shape: Any, row_stride: int | None = None) -> None:
        if not isinstance(ptr, GMPtr):
            raise ArgumentError(f"GlobalTensor: ptr must be a GM pointer (GMPtr), got {type(ptr).__name__}")
        shape = check_shape(shape, "GlobalTensor: shape")
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
