"""The C++ ``DeviceContext`` of a rank (``rt.device_context``): pto-isa's ``CommDeviceContext``
layout, with every window's base address in this process; and :func:`place`, which puts a
struct of a kernel's own (another layout) into a window for the kernel to take by pointer."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..config import MAX_RANKS
from ..errors import ArgumentError

_STATE_KEY = "shmcomm.native.device_context"


class CommDeviceContext(ctypes.Structure):
    """``struct CommDeviceContext`` of ``shmcomm/pto.hpp`` (the a2a3 suites' layout)."""

    _fields_ = [("workSpace", ctypes.c_uint64), ("workSpaceSize", ctypes.c_uint64),
                ("rankId", ctypes.c_uint32), ("rankNum", ctypes.c_uint32),
                ("winSize", ctypes.c_uint64),
                ("windowsIn", ctypes.c_uint64 * MAX_RANKS), ("windowsOut", ctypes.c_uint64 * MAX_RANKS)]


class NativeDeviceContext:
    """What ``rt.device_context`` gives: pass it as a native kernel's ``DeviceContext*``
    argument. ``address`` is the struct's address in this rank process."""

    def __init__(self, rt: Any) -> None:
        self.rank, self.nranks = rt.rank, rt.nranks
        self.windows = rt.windows
        self.bases = window_bases(rt.windows)
        s = self.struct = CommDeviceContext()
        s.rankId, s.rankNum, s.winSize = rt.rank, rt.nranks, rt.windows.size
        for r, b in enumerate(self.bases):
            s.windowsIn[r] = s.windowsOut[r] = b
        self.address = ctypes.addressof(s)

    def __repr__(self) -> str:
        return f"<native DeviceContext rank {self.rank}/{self.nranks}>"


def window_bases(windows: Any) -> list[int]:
    """Every rank's window base address in this process (the windows are mapped everywhere)."""
    out = []
    for r in range(windows.nranks):
        arr = windows.transport.window(r)
        out.append(int(np.asarray(arr).ctypes.data))
    return out


def device_context(rt: Any) -> NativeDeviceContext:
    """The rank's native device context, made once per run and rank."""
    ctx = rt.kernel_state.get(_STATE_KEY)
    if ctx is None or ctx.windows is not rt.windows:
        ctx = rt.kernel_state[_STATE_KEY] = NativeDeviceContext(rt)
    return ctx


def place(rt: Any, value: Any) -> Any:
    """``value`` (a ``ctypes`` structure, or bytes) copied into a new allocation of this rank's
    window: pass the result's ``.ptr`` where a kernel takes a pointer to a struct of its own.

    Collective like ``rt.alloc``: every rank places a value of the same size, in the same order.
    The struct is read by this rank's blocks; addresses in it are this process's (window bases:
    ``rt.device_context.bases``; a GM pointer: ``shmcomm.native.address(x.ptr)``), so a peer
    must not read it through a remote pointer."""
    if isinstance(value, ctypes.Structure | ctypes.Array):
        data = ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value))
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    else:
        raise ArgumentError(f"native.place: pass a ctypes Structure or bytes, got {type(value).__name__}")
    arr = rt.alloc((max(len(data), 1),), np.uint8)
    arr[:len(data)] = np.frombuffer(data, np.uint8)
    return arr
