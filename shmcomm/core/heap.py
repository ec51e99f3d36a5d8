"""The symmetric heap: collective, identical allocations in every rank's window."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import ArgumentError, ShmcommError
from .gm import ALIGN, GMPtr, Windows, as_dtype, check_shape


class SymmetricArray(np.ndarray):
    """A numpy array living in this rank's window; ``x.ptr`` is its GM pointer.

    Views and slices keep a valid ``ptr``; results of arithmetic are ordinary arrays in spirit
    (their ``ptr`` raises because they lie outside the window). ``copy()`` gives a plain ndarray.
    """

    _windows: Windows | None = None
    # each called as observer(array, key) after every ``x[key] = ...`` when a model watches
    # host stores (the race detector, hazard mode's stale-at-launch); one test otherwise
    observers: list[Any] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if SymmetricArray.observers:
            for obs in SymmetricArray.observers:
                obs(self, key)

    def stored_range(self, key: Any) -> tuple[int, int, int] | None:
        """``(rank, first byte, end byte)`` in the windows of what ``x[key] = ...`` wrote (the
        whole array for a single element or a fancy index), or ``None`` outside the windows."""
        try:
            view = np.ndarray.__getitem__(self, key)
        except (IndexError, TypeError, ValueError):
            view = self
        if not isinstance(view, np.ndarray) or not np.shares_memory(view, self):
            view = self
        if view.size == 0 or self._windows is None:
            return None
        lo = hi = int(view.ctypes.data)
        for n, st in zip(view.shape, view.strides, strict=True):
            lo, hi = lo + min(0, st * (n - 1)), hi + max(0, st * (n - 1))
        where = self._windows.locate(lo)
        if where is None:
            return None
        return where[0], where[1], where[1] + hi - lo + view.itemsize

    def __array_finalize__(self, obj: Any) -> None:
        self._windows = getattr(obj, "_windows", None)

    @property
    def ptr(self) -> GMPtr:
        w = self._windows
        where = w.locate(int(self.ctypes.data)) if w is not None else None
        if where is None or w is None:
            raise ShmcommError("x.ptr: this array does not live in a shmcomm window (a copy?)")
        if not self.flags.c_contiguous:
            raise ShmcommError("x.ptr: the array must be C-contiguous to have a GM pointer")
        return GMPtr(w, where[0], where[1], self.dtype)

    def copy(self, order: Literal["K", "A", "C", "F"] = "C") -> np.ndarray:  # type: ignore[override]
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
        shape = check_shape(shape, "alloc: shape")
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
