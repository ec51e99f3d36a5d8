"""The atomics layer: real hardware atomics and cross-process futexes on shared memory."""

from __future__ import annotations

import mmap
import os
import threading
import time

import numpy as np
import pytest

from shmcomm.transports.shm import atomics as at

pytestmark = pytest.mark.timeout(60)


def _shared_words(n: int = 16):
    mm = mmap.mmap(-1, 4 * n, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    arr = np.frombuffer(mm, dtype=np.int32)
    return mm, arr, int(arr.ctypes.data)


def test_basic_ops_have_atomic_semantics():
    _mm, arr, base = _shared_words()
    assert at.fetch_add(base, 5) == 0
    assert at.load(base) == 5
    at.store(base, -7)
    assert arr[0] == -7
    assert at.exchange(base, 3) == -7
    assert at.compare_exchange(base, 3, 9) == (True, 3)
    assert at.compare_exchange(base, 3, 11) == (False, 9)
    assert at.fetch_add(base, 2**31 - 1 - 9) == 9
    assert at.fetch_add(base, 1) == 2**31 - 1  # wraps like the hardware
    assert at.load(base) == -(2**31)


def test_fetch_add_exact_total_8_processes_x_4_threads():
    nproc, nthreads, iters = 8, 4, 20_000
    _mm, arr, base = _shared_words()
    pids = []
    for _ in range(nproc):
        pid = os.fork()
        if pid == 0:
            try:
                ts = [threading.Thread(target=lambda: [at.fetch_add(base, 1) for _ in range(iters)])
                      for _ in range(nthreads)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert int(arr[0]) == nproc * nthreads * iters


def test_futex_wake_crosses_processes():
    _mm, arr, base = _shared_words()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            t0 = time.monotonic()
            while at.load(base) == 0 and time.monotonic() - t0 < 20:
                at.futex_wait(base, 0, 20.0)
            code = 0 if at.load(base) == 1 and time.monotonic() - t0 < 15 else 3
        finally:
            os._exit(code)
    time.sleep(0.2)  # let the child go to sleep in the kernel
    at.store(base, 1)
    at.futex_wake(base)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_futex_timed_wait_times_out():
    _mm, arr, base = _shared_words()
    t0 = time.monotonic()
    assert at.futex_wait(base, 0, 0.05) is False
    assert time.monotonic() - t0 >= 0.04
    # a value that already differs returns at once
    assert at.futex_wait(base, 1, 5.0) is True


def test_lock_free_was_checked_and_library_named():
    assert "atomic" in at.LIBATOMIC_NAME
