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

    The host's accesses are seen by the models that watch them: stores by ``x[key] = ...`` and
    ufuncs' ``out=``; reads by an element read (``x[0]``, ``x[1, 2]``, a fancy index), every
    ufunc on it (``x == y``, ``x + 1``, ``x.sum()``, ``np.all(x == y)``, ``np.allclose``) and
    ``np.array_equal`` / ``np.array_equiv``. Reads through ``np.asarray(x)``, ``tolist()``,
    ``bytes(x)``, ``x.copy()``, iteration or the buffer protocol are not seen.
    """

    _windows: Windows | None = None
    # each called as observer(array, key) after every ``x[key] = ...`` (and ufunc ``out=``) when
    # a model watches host stores (the race detector, hazard mode's stale-at-launch); one test
    # otherwise
    observers: list[Any] = []
    # each called as observer(array, key) when the host reads the array (the race detector)
    read_observers: list[Any] = []
    # each called as observer(array, key) just before ``x[key] = ...`` (the race detector: a
    # store into a signal word releases the host's clock before a waiter can see the value)
    pre_observers: list[Any] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        if SymmetricArray.pre_observers:
            for obs in SymmetricArray.pre_observers:
                obs(self, key)
        super().__setitem__(key, value)
        if SymmetricArray.observers:
            for obs in SymmetricArray.observers:
                obs(self, key)

    def __getitem__(self, key: Any) -> Any:
        out = super().__getitem__(key)
        # an element or a fancy index's copy is a read; a view is not (yet)
        if SymmetricArray.read_observers and (not isinstance(out, np.ndarray)
                                              or out.flags.owndata):
            for obs in SymmetricArray.read_observers:
                obs(self, key)
        return out

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # the standard override: plain views in, the ufunc, symmetric views of array results out
        # (outside the windows: their ptr raises); the host's reads and out= writes are seen
        windows = self._windows
        args = [np.ndarray.view(x, np.ndarray) if isinstance(x, SymmetricArray) else x
                for x in inputs]
        outs = kwargs.get("out")
        if outs is not None:
            kwargs["out"] = tuple(np.ndarray.view(x, np.ndarray) if isinstance(x, SymmetricArray)
                                  else x for x in outs)
        if SymmetricArray.read_observers:
            for x in inputs:
                if isinstance(x, SymmetricArray):
                    for obs in SymmetricArray.read_observers:
                        obs(x, ...)
        result = getattr(ufunc, method)(*args, **kwargs)
        if SymmetricArray.observers:
            # out= arrays, and ufunc.at's first operand (changed in place), are written
            for x in (outs or ()) if method != "at" else inputs[:1]:
                if isinstance(x, SymmetricArray):
                    for obs in SymmetricArray.observers:
                        obs(x, ...)
        if method == "at":
            return None
        many = isinstance(result, tuple)
        results = result if many else (result,)
        wrapped = tuple(_wrap(r, windows, outs[i] if outs is not None and i < len(outs) else None)
                        for i, r in enumerate(results))
        return wrapped if many else wrapped[0]

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if SymmetricArray.read_observers and func in _READING_FUNCTIONS:
            for x in (*args, *kwargs.values()):
                if isinstance(x, SymmetricArray):
                    for obs in SymmetricArray.read_observers:
                        obs(x, ...)
        return super().__array_function__(func, types, args, kwargs)

    def stored_range(self, key: Any) -> tuple[int, int, int] | None:
        """``(rank, first byte, end byte)`` in the windows of what ``x[key]`` covers (one
        element's bytes for an element, the whole array for a fancy index), or ``None`` outside
        the windows."""
        try:
            view = np.ndarray.__getitem__(self, key)
            if not isinstance(view, np.ndarray) and isinstance(key, (int, np.integer, tuple)):
                # one element: its 0-d view (an integer key with a trailing ``...``)
                view = np.ndarray.__getitem__(
                    self, (*key, ...) if isinstance(key, tuple) else (key, ...))
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


# numpy functions that read their arrays' values through a plain asarray (no ufunc sees them)
_READING_FUNCTIONS = frozenset({np.array_equal, np.array_equiv})


def _wrap(result: Any, windows: Windows | None, out: Any) -> Any:
    """A ufunc's result as the caller sees it: ``out=`` itself, or an array as a symmetric view
    (of memory outside the windows unless it is ``out``)."""
    if out is not None:
        return out
    if type(result) is np.ndarray:
        result = result.view(SymmetricArray)
        result._windows = windows
    return result


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
