"""Module-level hosts for the pool tests (a pool's host must pickle)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np


def ident(rt, tag):
    time.sleep(0.05)
    rt.barrier()
    return (tag, rt.rank)


def pid_host(rt):
    return os.getpid()


def leave_thread(rt):
    arr = rt.alloc((4,), np.int32)
    addr = arr.ctypes.data

    def writer() -> None:  # keeps writing where the next run's first allocation will be
        view = np.frombuffer((np.ctypeslib.as_ctypes_type(np.int32) * 4).from_address(addr),
                             dtype=np.int32)
        while True:
            view[:] = 99
            time.sleep(0.001)

    threading.Thread(target=writer, daemon=True).start()
    return os.getpid()


def fresh_alloc(rt):
    arr = rt.alloc((4,), np.int32)
    rt.barrier()
    time.sleep(0.2)
    return (os.getpid(), arr.tolist())


def patch_module(rt):
    import json
    json.dumps = lambda *a, **k: "patched"
    return os.getpid()


def json_works(rt):
    import json
    return (os.getpid(), json.dumps([1]))


def rebind_private(rt):
    import os

    import hypothesis.internal.conjecture.junkdrawer as junk

    junk._gc_cumulative_time = getattr(junk, "_gc_cumulative_time", 0) + 1.0
    return os.getpid(), 0
