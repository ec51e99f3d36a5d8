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

A ``GlobalTensor`` is a view of GM through a typed pointer: up to 5-D, with one stride per
dimension (dense row-major by default). The data instructions see every tensor as 2-D,
``rows x cols`` with ``cols`` the last dimension and ``rows`` the product of the others, as PTO
splits transfers along DIM_3 / DIM_4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..transports import Transport
from .regions import SignalRegions

ALIGN = 64  # cache line: allocations and the signal matrix start on one

# dtypes a GM pointer may carry: PTO's data types that numpy has, and bfloat16
NUMPY_DTYPES = tuple(
    np.dtype(t)
    for t in (np.float32, np.float16, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32,
              np.int64, np.uint64, np.float64)
)
DTYPE_NAMES = tuple(d.name for d in NUMPY_DTYPES) + ("bfloat16",)
I32 = np.dtype(np.int32)


def bfloat16() -> np.dtype:
    """numpy's bfloat16 (numpy has none; ml_dtypes, the JAX project's package, gives it one with
    its ufuncs). Imported on first use: ml_dtypes takes longer to import than numpy itself, and
    every rank, CLI and test process would pay for it whether or not it names bfloat16."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def as_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """Normalize ``dtype`` and check that shmcomm supports it."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        return bfloat16()
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{what} must be a numpy dtype, got {dtype!r}") from None
    if dt in NUMPY_DTYPES:
        return dt
    if dt.name == "bfloat16" and dt == bfloat16():  # (a bfloat16 of another package is not)
        return dt
    raise ArgumentError(f"{what} must be one of {', '.join(DTYPE_NAMES)}; got {dt}")


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

    One per rank process and run; the table every GM pointer refers to. ``regions`` keeps score
    of which signal words the library's kernels and the user's signals use in this run.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.nranks = transport.nranks
        self.signal_bytes = transport.signal_bytes
        self.heap_bytes = transport.heap_bytes
        self.size = transport.size
        self._kinds: dict[np.dtype, list[PtrKind]] = {}
        self.regions = SignalRegions(self.signal_bytes // 4)

    def next_run(self) -> Windows:
        """This process's windows for its next run (a pool's rank serves many): the interned
        pointers and the Signals made on them stay, so a kernel does not build them again
        every run; what a run notes of its signal words starts anew (``regions``), and a kept
        user Signal goes back into that record at its first use in the run (``comm``).
        Returns itself."""
        self.regions = SignalRegions(self.signal_bytes // 4)
        for kinds in self._kinds.values():
            for k in kinds:
                if k.signals:
                    for sig in k.signals.values():
                        set_signal(sig.ptr, None)
                    k.kept.update(k.signals)
                    k.signals.clear()
        return self

    def kind(self, dtype: np.dtype, rank: int) -> PtrKind:
        """The one :class:`PtrKind` of ``(dtype, rank)``: every such pointer shares it."""
        kinds = self._kinds.get(dtype)
        if kinds is None:
            # made whole, then published: another block thread making its first pointer of this
            # dtype at the same time must never see a list still being filled
            made: list[PtrKind] = []
            made.extend(PtrKind(self, dtype, r, made) for r in range(self.nranks))
            kinds = self._kinds.setdefault(dtype, made)
        return kinds[rank]

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


class PtrKind:
    """What every pointer of one dtype into one rank's window shares.

    ``ptrs`` interns the pointers into the signal matrix (bounded by its size), so the seed's
    ``signal_base + r`` and ``GetRemotePtr(ctx, p, r)`` are one dictionary hit after their first
    use; ``peers[r]`` is the kind of the same dtype on rank ``r``. ``signals`` holds the Signal of
    each int32 word made from a pointer that is not interned (``None`` for other dtypes);
    ``lib_signals`` the Signals library kernels made on the words they claimed (never shared with
    user code: see :mod:`shmcomm.core.regions`).
    """

    __slots__ = ("windows", "dtype", "itemsize", "rank", "nranks", "size", "intern_end", "peers",
                 "ptrs", "signals", "lib_signals", "kept")

    def __init__(self, windows: Windows, dtype: np.dtype, rank: int, peers: list[PtrKind]) -> None:
        self.windows = windows
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.rank = rank
        self.nranks = windows.nranks
        self.size = windows.size
        self.intern_end = windows.signal_bytes
        self.peers = peers
        self.ptrs: dict[int, GMPtr] = {}
        self.signals: dict[int, Any] | None = {} if dtype == I32 else None
        self.lib_signals: dict[int, Any] | None = {} if dtype == I32 else None
        self.kept: dict[int, Any] = {}  # user Signals of earlier runs, not yet used in this one


_new = object.__new__


def _make(kind: PtrKind, offset: int, what: str) -> GMPtr:
    """The pointer at ``offset`` of ``kind`` (range-checked; interned in the signal matrix)."""
    if not 0 <= offset <= kind.size:
        raise ArgumentError(f"{what}: offset {offset} lies outside rank {kind.rank}'s window "
                            f"[0, {kind.size}]")
    p = _new(GMPtr)
    _set_kind(p, kind)
    _set_offset(p, offset)
    _set_sig(p, None)
    if offset < kind.intern_end:
        kind.ptrs[offset] = p
    return p


def _elements(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ArgumentError(f"{what}: n must be an int (elements), got {n!r}")
    return int(n)


class GMPtr:
    """A typed pointer into global memory: ``(rank, byte offset, dtype)``, immutable.

    ``p + n`` moves by ``n`` elements, like ``__gm__ T*`` arithmetic; the result must stay inside
    the window (one past the end allowed). Pointers into the signal matrix are interned: equal
    pointers made twice are the same object. Nothing can be assigned to a pointer after its
    checks (its address is always its rank's window base plus the checked offset): assignment
    raises ``AttributeError``.
    """

    __slots__ = ("kind", "offset", "_sig")
    kind: PtrKind
    offset: int
    _sig: Any

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"GMPtr is immutable: cannot set {name!r} (make a new pointer: "
                             "p + n, GetRemotePtr, p.cast)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"GMPtr is immutable: cannot delete {name!r}")

    def __new__(cls, windows: Windows, rank: int, offset: int, dtype: Any = np.int32) -> GMPtr:
        dt = dtype if isinstance(dtype, np.dtype) and dtype in NUMPY_DTYPES else as_dtype(dtype)
        rank = windows.check_rank(rank)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise ArgumentError(f"pointer offset must be an int, got {offset!r}")
        kind = windows.kind(dt, rank)
        p = kind.ptrs.get(int(offset))
        return p if p is not None else _make(kind, int(offset), "pointer")

    @property
    def rank(self) -> int:
        return self.kind.rank

    @property
    def windows(self) -> Windows:
        return self.kind.windows

    @property
    def dtype(self) -> np.dtype:
        return self.kind.dtype

    @property
    def itemsize(self) -> int:
        return self.kind.itemsize

    def __add__(self, n: int) -> GMPtr:
        if type(n) is not int:
            n = _elements(n, "pointer + n")
        k = self.kind
        off = self.offset + n * k.itemsize
        p = k.ptrs.get(off)
        return p if p is not None else _make(k, off, "pointer arithmetic")

    __radd__ = __add__

    def __sub__(self, n: Any) -> Any:
        if isinstance(n, GMPtr):
            if n.kind is not self.kind:
                raise ArgumentError("pointer difference needs two pointers of one rank and dtype")
            return (self.offset - n.offset) // self.kind.itemsize
        return self + (-_elements(n, "pointer - n"))

    def on_rank(self, rank: Any) -> GMPtr:
        """The same offset in ``rank``'s window (symmetric-heap translation)."""
        k = self.kind
        if type(rank) is not int or not 0 <= rank < k.nranks:
            rank = k.windows.check_rank(rank, "GetRemotePtr: rank")
        if rank == k.rank:
            return self
        pk = k.peers[rank]
        p = pk.ptrs.get(self.offset)
        return p if p is not None else _make(pk, self.offset, "GetRemotePtr")

    def cast(self, dtype: Any) -> GMPtr:
        """The same address seen as ``dtype`` (``reinterpret_cast``)."""
        return GMPtr(self.kind.windows, self.kind.rank, self.offset, as_dtype(dtype))

    def tensor(self, shape: Any) -> GlobalTensor:
        """Shorthand for ``GlobalTensor(self, shape)``."""
        return GlobalTensor(self, shape)

    def view(self, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy view of ``shape`` elements starting here (bounds-checked)."""
        k = self.kind
        return k.windows.view(k.rank, self.offset, tuple(shape), k.dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GMPtr) and other.kind is self.kind and other.offset == self.offset

    def __hash__(self) -> int:
        return hash((self.kind.rank, self.offset, self.kind.dtype.str))

    def __repr__(self) -> str:
        return f"GMPtr(rank={self.kind.rank}, offset={self.offset:#x}, {self.kind.dtype})"


# the only writers of a pointer's slots: _make, and comm's Signal cache (set_signal); the slot
# descriptors are read from the class dict (mypy takes ``GMPtr.kind`` for the PtrKind it holds)
_set_kind = GMPtr.__dict__["kind"].__set__
_set_offset = GMPtr.__dict__["offset"].__set__
_set_sig = GMPtr.__dict__["_sig"].__set__


def set_signal(ptr: GMPtr, sig: Any) -> None:
    """Cache ``sig`` as ``ptr``'s Signal (the one write a made pointer allows)."""
    _set_sig(ptr, sig)


class GlobalTensor:
    """``shape`` elements of ``ptr.dtype`` starting at ``ptr`` (bounds-checked at creation).

    PTO's ``GlobalTensor<T, Shape<5>, Stride<5>>``: up to 5 dimensions (a shorter shape is
    padded on the left with 1s, as ``Shape<1, 1, 1, R, C>``) and one stride per dimension in
    elements (``strides=None``: dense row-major). The last dimension must be contiguous
    (stride 1, PTO's ND layout). ``row_stride`` (2-D only, >= cols) is the older shorthand for a
    strided 2-D view, as ``Signal2D(ptr, rowStride)``.

    The data instructions see the tensor as ``rows x cols``: ``cols`` the last dimension,
    ``rows`` the product of the others. When the outer dimensions are not one evenly strided
    run of rows (``row_stride`` is ``None``), ``TPUT`` / ``TGET`` loop over them as pto-isa does;
    ``TLOAD`` / ``TSTORE`` need such a tensor in 2-D slices (``tensor.slab(i0, i1, i2)``).
    A tensor is immutable once checked: assigning an attribute raises.
    """

    __slots__ = ("ptr", "shape", "strides", "shape5", "strides5", "rows", "cols", "row_stride",
                 "extent_bytes")
    ptr: GMPtr
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    shape5: tuple[int, int, int, int, int]
    strides5: tuple[int, int, int, int, int]
    rows: int
    cols: int
    row_stride: int | None
    extent_bytes: int
    native = False  # a native kernel's copy moves the data itself (shmcomm.native.tilecopy)

    def __init__(self, ptr: GMPtr, shape: Any, strides: Any = None,
                 row_stride: int | None = None) -> None:
        if not isinstance(ptr, GMPtr):
            raise ArgumentError(f"GlobalTensor: ptr must be a GM pointer (GMPtr), got {type(ptr).__name__}")
        shape = check_shape(shape, "GlobalTensor: shape")
        nd = len(shape)
        if row_stride is not None:
            if strides is not None:
                raise ArgumentError("GlobalTensor: give strides or row_stride, not both")
            if nd != 2 or isinstance(row_stride, bool) or not isinstance(row_stride, int) \
                    or row_stride < shape[-1]:
                raise ArgumentError(
                    f"GlobalTensor: row_stride needs a 2-D shape and an int >= cols ({shape[-1]}); "
                    f"got {row_stride!r} for shape {shape}")
            strides = (row_stride, 1)
        if strides is None:
            dense, acc = [], 1
            for d in reversed(shape):
                dense.append(acc)
                acc *= d
            strides = tuple(reversed(dense))
        else:
            strides = _check_strides(strides, nd)
        pad = 5 - nd
        shape5 = (1,) * pad + shape
        strides5 = _pad_strides(shape5, (0,) * pad + strides)
        rows = shape5[0] * shape5[1] * shape5[2] * shape5[3]
        n = rows * shape5[4]
        extent = 0 if n == 0 else 1 + sum((d - 1) * st for d, st in zip(shape5, strides5, strict=True))
        _set = object.__setattr__
        _set(self, "ptr", ptr)
        _set(self, "shape", shape)
        _set(self, "strides", strides)
        _set(self, "shape5", shape5)
        _set(self, "strides5", strides5)
        _set(self, "cols", shape5[4])
        _set(self, "rows", rows)
        _set(self, "row_stride", _row_stride(shape5, strides5))
        _set(self, "extent_bytes", extent * ptr.itemsize)
        ptr.windows.check_extent(ptr.rank, ptr.offset, self.extent_bytes, "GlobalTensor")

    def __setattr__(self, name: str, value: Any) -> None:
        raise ArgumentError(f"GlobalTensor is immutable: make a new one instead of setting {name!r}")

    @classmethod
    def _raw(cls, ptr: GMPtr, rows: int, cols: int, row_stride: int) -> GlobalTensor:
        """A 2-D tensor inside one the caller has already checked (chunking inside TPUT)."""
        t = object.__new__(cls)
        _set = object.__setattr__
        _set(t, "ptr", ptr)
        _set(t, "shape", (rows, cols))
        _set(t, "strides", (row_stride, 1))
        _set(t, "shape5", (1, 1, 1, rows, cols))
        _set(t, "strides5", (rows * row_stride, rows * row_stride, rows * row_stride, row_stride, 1))
        _set(t, "rows", rows)
        _set(t, "cols", cols)
        _set(t, "row_stride", row_stride)
        _set(t, "extent_bytes", _extent(rows, cols, row_stride) * ptr.itemsize)
        return t

    def chunk(self, r0: int, r1: int, c0: int, c1: int) -> GlobalTensor:
        """Rows ``[r0, r1)`` and columns ``[c0, c1)`` of the 2-D form, as a strided tensor."""
        rs = self.row_stride
        if rs is None:
            raise ArgumentError(
                f"{self!r}: its outer dimensions are not one evenly strided run of rows; take "
                "2-D slices with .slab(i0, i1, i2) first")
        return GlobalTensor._raw(self.ptr + (r0 * rs + c0), r1 - r0, c1 - c0, rs)

    def slab(self, i0: int, i1: int, i2: int) -> GlobalTensor:
        """The 2-D ``(DIM_3, DIM_4)`` slice at outer index ``(i0, i1, i2)`` (pto-isa's chunk loop)."""
        s, st = self.shape5, self.strides5
        for name, i, d in (("i0", i0, s[0]), ("i1", i1, s[1]), ("i2", i2, s[2])):
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < d:
                raise ArgumentError(f"GlobalTensor.slab: {name} must be an int in [0, {d}), got {i!r}")
        rows = s[3]
        return GlobalTensor._raw(self.ptr + (i0 * st[0] + i1 * st[1] + i2 * st[2]), rows, s[4],
                                 st[3] if rows > 1 else max(st[3], s[4]))

    def slabs(self):
        """Every 2-D ``(DIM_3, DIM_4)`` slice in outer-index order (DIM_0, then DIM_1, DIM_2)."""
        s = self.shape5
        for i0 in range(s[0]):
            for i1 in range(s[1]):
                for i2 in range(s[2]):
                    yield self.slab(i0, i1, i2)

    @property
    def dtype(self) -> np.dtype:
        return self.ptr.dtype

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def dense(self) -> bool:
        """Whether the tensor is one contiguous run of ``size`` elements."""
        return self.row_stride == self.cols or (self.rows <= 1 and self.row_stride is not None)

    def GetShape(self, dim: int) -> int:
        """PTO's ``GetShape(GlobalTensorDim::DIM_i)``: dimension ``dim`` of the 5-D shape."""
        return self.shape5[_dim(dim, "GetShape")]

    def GetStride(self, dim: int) -> int:
        """PTO's ``GetStride(GlobalTensorDim::DIM_i)``: stride (elements) of dimension ``dim``."""
        return self.strides5[_dim(dim, "GetStride")]

    def data(self) -> GMPtr:
        """The tensor's first element (PTO's ``data()``)."""
        return self.ptr

    def view(self) -> np.ndarray:
        """The numpy view of the tensor in its window, shaped ``shape`` (strided if it is)."""
        p = self.ptr
        if self.dense:
            return p.windows.view(p.rank, p.offset, self.shape, p.dtype)
        flat = p.windows.view(p.rank, p.offset, (self.extent_bytes // p.itemsize,), p.dtype)
        return np.lib.stride_tricks.as_strided(
            flat, self.shape, tuple(st * p.itemsize for st in self.strides), writeable=True)

    def view2d(self) -> np.ndarray:
        """The ``rows x cols`` numpy view (strided when ``row_stride > cols``)."""
        p = self.ptr
        rs = self.row_stride
        if rs is None:
            raise ArgumentError(
                f"{self!r}: its outer dimensions are not one evenly strided run of rows, so it has "
                "no 2-D view; move it in 2-D slices (.slab(i0, i1, i2)), as TPUT / TGET do")
        if rs == self.cols or self.rows <= 1:
            return p.windows.view(p.rank, p.offset, (self.rows, self.cols), p.dtype)
        flat = p.windows.view(p.rank, p.offset, (self.extent_bytes // p.itemsize,), p.dtype)
        return np.lib.stride_tricks.as_strided(
            flat, (self.rows, self.cols), (rs * p.itemsize, p.itemsize))

    def pitch_bytes(self) -> int:
        """Bytes from one row of the 2-D form to the next (the pitch of a transport's put / get)."""
        if self.row_stride is None:
            raise ArgumentError(
                f"{self!r}: its outer dimensions are not one evenly strided run of rows, so it has "
                "no row pitch; move it in 2-D slices (.slab(i0, i1, i2)), as TPUT / TGET do")
        return self.row_stride * self.ptr.itemsize

    def read_into(self, out: np.ndarray) -> None:
        """Copy the ``rows x cols`` elements into ``out`` (a view when the transport maps the
        window, else the transport's ``get``)."""
        p = self.ptr
        t = p.windows.transport
        if p.rank in t.unmapped:
            t.get(p.rank, p.offset, self.pitch_bytes(), out)
        else:
            np.copyto(out, self.view2d())

    def write_from(self, data: np.ndarray) -> None:
        """Copy the ``rows x cols`` array ``data`` into the tensor (a view, or ``put``)."""
        p = self.ptr
        t = p.windows.transport
        if p.rank in t.unmapped:
            t.put(p.rank, p.offset, self.pitch_bytes(), data)
        else:
            np.copyto(self.view2d(), data)

    def snapshot(self, data: np.ndarray) -> np.ndarray:
        """What a store into this tensor that completes now but lands later keeps of ``data``
        (the tile's rows x cols): a copy."""
        return data.copy()

    def __repr__(self) -> str:
        st = "" if self.dense else f", strides={self.strides}"
        return f"GlobalTensor({self.ptr!r}, shape={self.shape}{st})"


def _check_strides(strides: Any, nd: int) -> tuple[int, ...]:
    try:
        st = tuple(strides)
    except TypeError:
        raise ArgumentError(f"GlobalTensor: strides must be a tuple of ints, got {strides!r}") from None
    if len(st) == 5 and nd < 5:
        st = st[5 - nd:]
    if len(st) != nd:
        raise ArgumentError(f"GlobalTensor: strides must give one int per dimension ({nd}) or 5; "
                            f"got {strides!r}")
    for v in st:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ArgumentError(f"GlobalTensor: strides must be ints >= 1 (elements); got {strides!r}")
    if st[-1] != 1:
        raise ArgumentError(f"GlobalTensor: the last dimension must be contiguous (stride 1, ND "
                            f"layout); got strides {strides!r}")
    return tuple(int(v) for v in st)


def _pad_strides(shape5: tuple, strides5: tuple) -> tuple[int, ...]:
    """Strides of the padded (size-1) dimensions: what a dense outer dimension would have."""
    out = list(strides5)
    for i in range(3, -1, -1):
        if out[i] == 0:
            out[i] = out[i + 1] * shape5[i + 1]
    return tuple(out)


def _row_stride(shape5: tuple, strides5: tuple) -> int | None:
    """The one stride between consecutive rows of the 2-D form, or ``None`` when the outer
    dimensions are not one evenly strided run of rows."""
    rs = None
    expect = None
    for i in range(3, -1, -1):
        d = shape5[i]
        if d == 1:
            continue
        if rs is None:
            rs, expect = strides5[i], strides5[i] * d
        elif strides5[i] != expect:
            return None
        else:
            expect *= d
    return shape5[4] if rs is None else rs


def _dim(dim: Any, what: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < 5:
        raise ArgumentError(f"GlobalTensor.{what}: dim must be an int in [0, 5) (DIM_0..DIM_4), "
                            f"got {dim!r}")
    return int(dim)


def _extent(rows: int, cols: int, row_stride: int) -> int:
    """Elements spanned by a strided 2-D region."""
    return 0 if rows == 0 or cols == 0 else (rows - 1) * row_stride + cols
