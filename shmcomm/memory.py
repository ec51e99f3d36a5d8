"""Shared-memory segments, rank windows, typed GM pointers and the symmetric heap.

Layout of one rank's window (one POSIX shared-memory segment per rank)::

    offset 0              signal matrix, ``signal_bytes`` (int32 words, zeroed, 64-byte aligned)
    offset signal_bytes   data heap, ``heap_bytes`` (symmetric allocations, 64-byte aligned)

Every rank maps every window, so a pointer is a ``(rank, byte offset, dtype)`` triple and
``GetRemotePtr(ctx, p, r)`` keeps the offset and changes the rank: the symmetric-heap translation
``windowsIn[r] + (p - windowsIn[me])`` of pto-isa, or ``nvshmem_ptr``.

Segments are created exclusive with mode 0600 under a random name (96 random bits) that carries
the creating process id, mapped, and unlinked at once, before any rank process starts: the ranks
inherit the mappings through ``fork``, so no name stays in ``/dev/shm`` while a run goes on and
no other process can attach. Should the creator die in the few microseconds between create and
unlink, ``python -m shmcomm.cleanup`` finds the name by its dead pid.

Every address is checked here before it reaches a ctypes call.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import secrets
import sys
from typing import Any

import numpy as np
import posix_ipc

from .errors import ArgumentError, ShmcommError

PREFIX = "shmcomm."
SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared memory (a tmpfs)
ALIGN = 64  # cache line: allocations and the signal matrix start on one

# dtypes a GM pointer may carry (PTO's data types that numpy has)
DTYPES = tuple(
    np.dtype(t)
    for t in (np.float32, np.float16, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32,
              np.int64, np.uint64, np.float64)
)


def as_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """Normalize ``dtype`` and check that shmcomm supports it."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{what} must be a numpy dtype, got {dtype!r}") from None
    if dt not in DTYPES:
        raise ArgumentError(f"{what} must be one of {', '.join(str(d) for d in DTYPES)}; got {dt}")
    return dt


# Segments are mapped with libc's mmap, not Python's: mmap.mmap keeps a dup of the fd (until
# 3.13's trackfd=False), and any process allowed to read /proc/<pid>/fd could reopen a live run's
# window through it. The mapping needs no fd once made.
_libc = ctypes.CDLL(None, use_errno=True)
_c_mmap, _c_munmap = _libc.mmap, _libc.munmap
_c_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                    ctypes.c_long]
_c_mmap.restype = ctypes.c_void_p
_c_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_c_munmap.restype = ctypes.c_int
_MAP_FAILED = ctypes.c_void_p(-1).value


def shm_free_bytes() -> int | None:
    """Bytes free in the shared-memory file system (``None`` if it cannot be told)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def segment_name(tag: str) -> str:
    """A fresh segment name: prefix, creator pid, 96 random bits, tag."""
    return f"/{PREFIX}{os.getpid()}.{secrets.token_hex(12)}.{tag}"


class Segment:
    """One POSIX shared-memory segment, mapped read-write and already unlinked.

    ``base`` is the address of its first byte; ``array`` a uint8 numpy view of it.
    """

    def __init__(self, tag: str, size: int) -> None:
        if size <= 0:
            raise ArgumentError(f"segment size must be > 0, got {size}")
        self.size = size
        self.name = segment_name(tag)
        try:
            shm = posix_ipc.SharedMemory(self.name, posix_ipc.O_CREX, mode=0o600, size=size)
        except posix_ipc.ExistentialError:  # exclusive create: never attach to someone else's
            raise ShmcommError(
                f"shared-memory segment {self.name} already exists; refusing to attach to memory "
                "this run did not create (another process took the name)") from None
        except (OSError, posix_ipc.Error) as exc:  # EMFILE, ENOSPC, EACCES on /dev/shm ...
            raise ShmcommError(f"cannot create shared-memory segment {self.name} of {size} "
                               f"bytes: {exc}") from None
        try:
            addr = _c_mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, shm.fd, 0)
            err = ctypes.get_errno()
        finally:
            shm.close_fd()  # the mapping keeps the memory; no fd is left to borrow
            shm.unlink()  # nothing left to attach to: ranks inherit the mapping through fork
        if addr is None or addr == _MAP_FAILED:
            raise ShmcommError(f"cannot map shared-memory segment {self.name} of {size} bytes: "
                               f"{os.strerror(err)}")
        self.base = addr
        # every numpy view of the segment holds a reference to this buffer: close() counts them
        self._buf: Any = (ctypes.c_uint8 * size).from_address(addr)
        self.array = np.frombuffer(self._buf, dtype=np.uint8)

    def close(self) -> None:
        """Unmap. Views of the segment must be gone first (otherwise it stays mapped)."""
        if self._buf is None:
            return
        self.array = None  # type: ignore[assignment]
        buf, self._buf = self._buf, None
        if sys.getrefcount(buf) > 2:  # a user still holds a view: the mapping dies with the process
            return
        del buf
        _c_munmap(self.base, self.size)


class Windows:
    """Every rank's window, as mapped in this process; the table GM pointers refer to."""

    def __init__(self, nranks: int, signal_bytes: int, heap_bytes: int) -> None:
        self.nranks = nranks
        self.signal_bytes = signal_bytes
        self.heap_bytes = heap_bytes
        self.size = signal_bytes + heap_bytes
        free = shm_free_bytes()
        if free is not None and nranks * self.size > free:  # tmpfs past its size: SIGBUS on touch
            raise ArgumentError(
                f"windows: nranks={nranks} x (signal_bytes + heap_bytes = {self.size}) = "
                f"{nranks * self.size} bytes exceed the {free} bytes free in {SHM_DIR}; lower "
                "heap_bytes or nranks")
        self.segments: list[Segment] = []
        try:
            for r in range(nranks):
                self.segments.append(Segment(f"win{r}", self.size))
        except BaseException:
            self.close()
            raise
        self.bases = [s.base for s in self.segments]

    def close(self) -> None:
        for s in self.segments:
            s.close()
        self.segments = []

    # -- checks (every public address goes through one of these) ------------------------------

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
        n = math.prod(shape) * dtype.itemsize  # not np.prod: ~3 us on every TLOAD / TSTORE
        self.check_extent(rank, offset, n, "view")
        seg = self.segments[rank]
        return seg.array[offset:offset + n].view(dtype).reshape(shape)

    def locate(self, address: int) -> tuple[int, int] | None:
        """``(rank, offset)`` of a process address inside some window, or ``None``."""
        for r, base in enumerate(self.bases):
            if base <= address < base + self.size:
                return r, address - base
        return None


class GMPtr:
    """A typed pointer into global memory: ``(rank, byte offset, dtype)``.

    ``p + n`` moves by ``n`` elements, like ``__gm__ T*`` arithmetic; the result must stay inside
    the window (one past the end allowed). ``addr`` is the absolute address in this process.
    """

    __slots__ = ("windows", "rank", "offset", "dtype", "itemsize", "addr")

    def __init__(self, windows: Windows, rank: int, offset: int, dtype: Any = np.int32) -> None:
        dt = dtype if isinstance(dtype, np.dtype) else as_dtype(dtype)
        rank = windows.check_rank(rank)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise ArgumentError(f"pointer offset must be an int, got {offset!r}")
        offset = int(offset)
        if not 0 <= offset <= windows.size:
            raise ArgumentError(
                f"pointer offset {offset} lies outside rank {rank}'s window [0, {windows.size}]"
            )
        self.windows = windows
        self.rank = rank
        self.offset = offset
        self.dtype = dt
        self.itemsize = dt.itemsize
        self.addr = windows.bases[rank] + offset

    def _moved(self, delta_bytes: int) -> GMPtr:
        off = self.offset + delta_bytes
        if not 0 <= off <= self.windows.size:
            raise ArgumentError(
                f"pointer arithmetic: offset {off} lies outside rank {self.rank}'s window "
                f"[0, {self.windows.size}]"
            )
        p = object.__new__(GMPtr)  # allocation-light: the hot path of every kernel
        p.windows, p.rank, p.offset, p.dtype, p.itemsize = (
            self.windows, self.rank, off, self.dtype, self.itemsize)
        p.addr = self.addr + delta_bytes
        return p

    def __add__(self, n: int) -> GMPtr:
        if type(n) is not int:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
                raise ArgumentError(f"pointer + n: n must be an int (elements), got {n!r}")
            n = int(n)
        return self._moved(n * self.itemsize)

    __radd__ = __add__

    def __sub__(self, n: Any) -> Any:
        if isinstance(n, GMPtr):
            if n.rank != self.rank or n.dtype != self.dtype:
                raise ArgumentError("pointer difference needs two pointers of one rank and dtype")
            return (self.offset - n.offset) // self.itemsize
        if type(n) is not int and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
            raise ArgumentError(f"pointer - n: n must be an int (elements) or a GMPtr, got {n!r}")
        return self + (-int(n))

    def on_rank(self, rank: int) -> GMPtr:
        """The same offset in ``rank``'s window (symmetric-heap translation)."""
        if type(rank) is int and rank == self.rank:  # type first: an array has no single truth
            return self
        rank = self.windows.check_rank(rank, "GetRemotePtr: rank")
        p = object.__new__(GMPtr)
        p.windows, p.rank, p.offset, p.dtype, p.itemsize = (
            self.windows, rank, self.offset, self.dtype, self.itemsize)
        p.addr = self.windows.bases[rank] + self.offset
        return p

    def cast(self, dtype: Any) -> GMPtr:
        """The same address seen as ``dtype`` (``reinterpret_cast``)."""
        return GMPtr(self.windows, self.rank, self.offset, as_dtype(dtype))

    def tensor(self, shape: Any) -> Any:
        """Shorthand for ``GlobalTensor(self, shape)``."""
        from .comm import GlobalTensor

        return GlobalTensor(self, shape)

    def view(self, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy view of ``shape`` elements starting here (bounds-checked)."""
        return self.windows.view(self.rank, self.offset, tuple(shape), self.dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GMPtr) and other.windows is self.windows
                and (other.rank, other.offset, other.dtype) == (self.rank, self.offset, self.dtype))

    def __hash__(self) -> int:
        return hash((self.rank, self.offset, self.dtype.str))

    def __repr__(self) -> str:
        return f"GMPtr(rank={self.rank}, offset={self.offset:#x}, {self.dtype})"


class SymmetricArray(np.ndarray):
    """A numpy array living in this rank's window; ``x.ptr`` is its GM pointer.

    Views and slices keep a valid ``ptr``; results of arithmetic are ordinary arrays in spirit
    (their ``ptr`` raises because they lie outside the window). ``copy()`` gives a plain ndarray.
    """

    _windows: Windows | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self._windows = getattr(obj, "_windows", None)

    @property
    def ptr(self) -> GMPtr:
        w = self._windows
        where = w.locate(int(self.ctypes.data)) if w is not None else None
        if where is None:
            raise ShmcommError("x.ptr: this array does not live in a shmcomm window (a copy?)")
        if not self.flags.c_contiguous:
            raise ShmcommError("x.ptr: the array must be C-contiguous to have a GM pointer")
        return GMPtr(w, where[0], where[1], self.dtype)

    def copy(self, order: str = "C") -> np.ndarray:  # type: ignore[override]
        return np.array(self, order=order, copy=True, subok=False)

    def __reduce__(self) -> Any:  # pickles (results sent to the launcher) as a plain ndarray
        return np.asarray(self).copy().__reduce__()


class SymmetricHeap:
    """Bump allocator over the heap part of the windows; identical on every rank.

    Like ``nvshmem_malloc`` it is symmetric by construction: every rank must make the same
    allocations in the same order, and gets the same offsets.
    """

    def __init__(self, windows: Windows, rank: int) -> None:
        self.windows = windows
        self.rank = rank
        self.start = windows.signal_bytes
        self.top = self.start

    def alloc(self, shape: Any, dtype: Any) -> SymmetricArray:
        dt = as_dtype(dtype, "alloc: dtype")
        shape = _check_shape(shape, "alloc: shape")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        offset = -(-self.top // ALIGN) * ALIGN
        end = offset + max(nbytes, 1)
        if end > self.windows.size:
            free = self.windows.size - offset
            raise ArgumentError(
                f"alloc: {nbytes} bytes requested but only {max(free, 0)} of heap_bytes="
                f"{self.windows.heap_bytes} are left; raise heap_bytes"
            )
        self.top = end
        arr = self.windows.view(self.rank, offset, shape, dt).view(SymmetricArray)
        arr._windows = self.windows
        arr[...] = 0
        return arr

    def reset(self) -> None:
        """Forget every allocation (arrays handed out before must not be used again)."""
        self.top = self.start


def _check_shape(shape: Any, what: str, max_dims: int = 5) -> tuple[int, ...]:
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
