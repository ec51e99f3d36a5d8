"""Conformance of the shared-memory transport to the transport seam (``Transport`` / ``Word``).

Each test builds a small :class:`ShmTransport` itself. Cross-process behaviour is checked with
children forked from the test, which inherit the windows' mappings exactly as rank processes do.
Every child has its own deadline and dies with the test process (``PR_SET_PDEATHSIG``); every
child is reaped, and killed first if need be, whatever happens. Nothing asserts on timing: a
missing wake-up shows as a test that runs into its pytest timeout.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import signal
import sys
import time
import traceback

import numpy as np
import pytest

from shmcomm.errors import Aborted, ArgumentError, WaitTimeout
from shmcomm.transports import SEQ_CST, Transport, Word
from shmcomm.transports.shm import LOCK_STRIPE_BYTES, ShmTransport, ShmWord
from shmcomm.transports.shm import atomics as at

SIGNAL_BYTES, HEAP_BYTES = 4096, 65536
CHILD_DEADLINE_S = 30.0  # no child outlives this, whatever the parent does
NEVER = lambda: False  # noqa: E731  # the ``aborted`` callable of a run that is not aborting


@pytest.fixture
def transport():
    t = ShmTransport(nranks=2, signal_bytes=SIGNAL_BYTES, heap_bytes=HEAP_BYTES)
    try:
        yield t
    finally:
        t.close()


def until(cond, what: str, deadline_s: float = CHILD_DEADLINE_S) -> None:
    """Poll ``cond()`` until it is true; raise after ``deadline_s`` (a bound, not a check)."""
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.0005)


class Children:
    """Forked children running ``body(*args)``; exit status 0 when the body returned."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.status: dict[int, int] = {}

    def fork(self, body, *args) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                at.set_parent_death_signal(signal.SIGKILL)
                signal.alarm(int(CHILD_DEADLINE_S) + 5)  # a last resort if a body hangs
                body(*args)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        self.pids.append(pid)
        return pid

    def join(self) -> list[int]:
        """Wait for every child; their exit codes (a signal's death is its negative number)."""
        for pid in self.pids:
            if pid not in self.status:
                _, st = os.waitpid(pid, 0)
                self.status[pid] = os.waitstatus_to_exitcode(st)
        return [self.status[p] for p in self.pids]

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc) -> None:
        for pid in self.pids:
            if pid not in self.status:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                self.status[pid] = -signal.SIGKILL


# --- words ------------------------------------------------------------------------------------

def test_transport_and_word_implement_the_seam(transport):
    t = transport
    assert isinstance(t, Transport) and t.name == "shm"
    assert (t.nranks, t.signal_bytes, t.heap_bytes) == (2, SIGNAL_BYTES, HEAP_BYTES)
    assert t.size == SIGNAL_BYTES + HEAP_BYTES
    w = t.word(1, 8)
    assert isinstance(w, Word) and isinstance(w, ShmWord)
    assert (w.rank, w.offset) == (1, 8)
    t.attach(0)  # fork inheritance: nothing to do, and harmless
    t.attach(1)


def test_word_operations(transport):
    t = transport
    w = t.word(1, 8)
    assert w.load() == 0
    assert w.add(5) == 0  # add returns the old value
    assert w.add(-2) == 5
    assert w.load() == w.cell.value == 3
    assert w.set(-7) is None
    assert w.load() == w.cell.value == -7
    # the notify fast path: the raw atomics on the handle return the old value
    assert w.fetch_add(w.handle, 4, SEQ_CST) == -7
    assert w.exchange(w.handle, 11, SEQ_CST) == -3
    assert w.load() == 11
    assert w.waiters.value == 0  # nobody sleeps on this window
    # int32 arithmetic wraps as the hardware's does
    w.set(2**31 - 1)
    assert w.add(1) == 2**31 - 1 and w.load() == -(2**31)
    # another handle of the same word, the window's memory, and the other rank's window agree
    assert t.word(1, 8).load() == -(2**31)
    assert t.view(1, 8, (1,), np.dtype(np.int32))[0] == -(2**31)
    assert t.word(0, 8).load() == 0
    # words of the data heap are words too
    h = t.word(0, SIGNAL_BYTES + HEAP_BYTES - 4)
    assert h.add(9) == 0 and h.load() == 9
    assert t.view(0, SIGNAL_BYTES + HEAP_BYTES - 4, (1,), np.dtype(np.int32))[0] == 9


@pytest.mark.timeout(30)
def test_control_word_always_wakes():
    buf = (ctypes.c_int32 * 4)()
    t = ShmTransport(nranks=1, signal_bytes=SIGNAL_BYTES, heap_bytes=0)
    try:
        w = t.control_word(ctypes.addressof(buf) + 4)
        assert w.add(3) == 0 and w.load() == w.cell.value == 3 and buf[1] == 3
        w.set(5)
        assert buf[1] == 5 and buf[0] == buf[2] == 0
        assert w.waiters.value  # no sleeper count for supervision words: always wake
        w.wake()  # nobody asleep: returns
        # sleep's contract holds without a sleeper count too: no sleep when holds(current)
        w.sleep(5, 600.0, lambda v: v == 5)
        w.sleep(4, 600.0, lambda v: False)  # the word no longer holds ``seen``
        w.sleep(5, 0.01, lambda v: False)  # times out
    finally:
        t.close()


# --- windows ----------------------------------------------------------------------------------

def test_view_window_and_locate_agree(transport):
    t = transport
    off = SIGNAL_BYTES + 64
    v = t.view(1, off, (2, 4), np.dtype(np.float32))
    v[:] = np.arange(8, dtype=np.float32).reshape(2, 4)
    win = t.window(1)
    assert win.dtype == np.uint8 and win.shape == (t.size,)
    assert np.array_equal(win[off:off + 32].view(np.float32), np.arange(8, dtype=np.float32))
    assert not t.window(0)[off:off + 32].any()  # the other rank's window is other memory
    assert t.locate(v.ctypes.data) == (1, off)
    assert t.locate(v[1:].ctypes.data) == (1, off + 16)
    for r in range(t.nranks):
        base = t.window(r).ctypes.data
        assert t.locate(base) == (r, 0)
        assert t.locate(base + t.size - 1) == (r, t.size - 1)
        assert t.locate(base + t.size) is None  # the segment's tail is not window
        w = t.word(r, 12)
        assert t.locate(w.addr) == (r, 12)
        w.set(40 + r)
        assert t.view(r, 12, (1,), np.dtype(np.int32))[0] == 40 + r
        assert t.window(r)[12:16].view(np.int32)[0] == 40 + r
    assert t.locate(0) is None
    with pytest.raises(ArgumentError, match="outside rank 0's window"):
        t.view(0, t.size - 4, (2,), np.dtype(np.int32))
    with pytest.raises(ArgumentError, match="outside"):
        t.view(0, -4, (1,), np.dtype(np.int32))


def _mapped() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


def test_close_unmaps_and_leaves_nothing():
    t = ShmTransport(nranks=2, signal_bytes=SIGNAL_BYTES, heap_bytes=HEAP_BYTES)
    names = [s.name.lstrip("/") for s in t.segments]
    maps = _mapped()
    assert all(n in maps for n in names)
    assert not any(n in os.listdir("/dev/shm") for n in names)  # unlinked at creation
    t.word(0, 0).add(1)
    t.close()
    maps = _mapped()
    assert not any(n in maps for n in names)
    assert t.segments == []
    t.close()  # twice is harmless


def _close_while_viewed() -> None:
    t = ShmTransport(nranks=1, signal_bytes=SIGNAL_BYTES, heap_bytes=0)
    name = t.segments[0].name.lstrip("/")
    v = t.view(0, 0, (4,), np.dtype(np.int32))
    t.word(0, 4).set(7)
    t.close()
    assert name in _mapped()  # a view still uses the memory: it stays mapped, never dangles
    assert v[1] == 7


@pytest.mark.timeout(60)
def test_close_keeps_memory_a_view_still_uses():
    with Children() as kids:  # in a child: that mapping lives until its process ends
        kids.fork(_close_while_viewed)
        assert kids.join() == [0]


# --- across processes -------------------------------------------------------------------------

ADDS = 2000


def _adder(t: ShmTransport, i: int) -> None:
    w = t.word(1, 0)
    olds = t.view(1, SIGNAL_BYTES + 4 * ADDS * i, (ADDS,), np.dtype(np.int32))
    for k in range(ADDS):
        olds[k] = w.add(1)


@pytest.mark.timeout(60)
def test_add_is_atomic_across_processes(transport):
    t = transport
    with Children() as kids:
        for i in range(3):
            kids.fork(_adder, t, i)
        assert kids.join() == [0, 0, 0]
    assert t.word(1, 0).load() == 3 * ADDS
    olds = t.view(1, SIGNAL_BYTES, (3 * ADDS,), np.dtype(np.int32))
    assert sorted(olds.tolist()) == list(range(3 * ADDS))  # every old value handed out once


def _set_when_asleep(t: ShmTransport) -> None:
    w = t.word(0, 16)
    until(lambda: w.waiters.value > 0, "the parent to sleep")
    w.set(1)  # wakes the sleeper


@pytest.mark.timeout(60)
def test_sleep_returns_after_set_in_another_process(transport):
    t = transport
    w = t.word(0, 16)
    with Children() as kids:
        kids.fork(_set_when_asleep, t)
        while w.load() == 0:  # a sleep far longer than the test's timeout: only a wake ends it
            w.sleep(0, 600.0, lambda v: v != 0)
        assert kids.join() == [0]
    assert w.load() == 1 and w.waiters.value == 0


def _wake_until_acked(t: ShmTransport) -> None:
    w, ack = t.word(0, 16), t.word(0, 20)
    end = time.monotonic() + CHILD_DEADLINE_S
    while ack.load() == 0:
        if w.waiters.value:
            w.wake()  # the value stays 0: only the wake-up can end the parent's sleep
        if time.monotonic() > end:
            raise TimeoutError("the parent never acknowledged")
        time.sleep(0.001)


@pytest.mark.timeout(60)
def test_sleep_returns_after_wake_in_another_process(transport):
    t = transport
    w = t.word(0, 16)
    with Children() as kids:
        kids.fork(_wake_until_acked, t)
        w.sleep(0, 600.0, lambda v: False)
        t.word(0, 20).set(1)
        assert kids.join() == [0]
    assert w.load() == 0 and w.waiters.value == 0


@pytest.mark.timeout(60)
def test_sleep_returns_at_its_timeout(transport):
    w = transport.word(1, 32)
    w.sleep(0, 0.05, lambda v: False)  # nobody wakes: it returns by itself
    assert w.load() == 0 and w.waiters.value == 0
    w.set(2)
    w.sleep(0, 600.0, lambda v: False)  # the word no longer holds ``seen``: no sleep at all
    w.sleep(2, 600.0, lambda v: v == 2)  # the condition already holds: no sleep at all
    assert w.waiters.value == 0


ITERS, REGION = 300, 64
RMW_OFF = 2 * LOCK_STRIPE_BYTES - 32  # the region straddles two lock stripes


def _rmw(t: ShmTransport) -> None:
    for _ in range(ITERS):
        with t.data_lock(1, RMW_OFF, REGION, CHILD_DEADLINE_S, NEVER):
            a = t.view(1, RMW_OFF, (REGION // 8,), np.dtype(np.int64))
            seen = a.copy()
            os.sched_yield()  # invite the others in: only the lock keeps them out
            a[:] = seen + 1


@pytest.mark.timeout(90)
def test_data_lock_excludes_other_processes(transport):
    t = transport
    with Children() as kids:
        for _ in range(4):
            kids.fork(_rmw, t)
        assert kids.join() == [0] * 4
    a = t.view(1, RMW_OFF, (REGION // 8,), np.dtype(np.int64))
    assert a.tolist() == [4 * ITERS] * (REGION // 8)


HELD_OFF = 2 * LOCK_STRIPE_BYTES  # the child holds this stripe of rank 1


def _hold_lock(t: ShmTransport) -> None:
    held, release = t.word(0, 40), t.word(0, 44)
    with t.data_lock(1, HELD_OFF, 4, CHILD_DEADLINE_S, NEVER):
        held.set(1)
        until(lambda: release.load() != 0, "the parent to release the lock")


@pytest.mark.timeout(60)
def test_data_lock_raises_aborted_and_wait_timeout(transport):
    t = transport
    entered = []
    with Children() as kids:
        kids.fork(_hold_lock, t)
        until(lambda: t.word(0, 40).load() == 1, "the child to take the lock")
        # the region's first stripe is free, its second is held: Aborted once aborted() turns true
        polls = itertools.count()
        with pytest.raises(Aborted):
            with t.data_lock(1, HELD_OFF - LOCK_STRIPE_BYTES, 2 * LOCK_STRIPE_BYTES, 600.0,
                             lambda: next(polls) >= 3):
                entered.append("aborted")
        with pytest.raises(WaitTimeout):
            with t.data_lock(1, HELD_OFF, 4, 0.05, NEVER):
                entered.append("timeout")
        # the failed attempts gave back the stripe they had taken; other ranks are not locked
        with t.data_lock(1, HELD_OFF - LOCK_STRIPE_BYTES, 4, CHILD_DEADLINE_S, NEVER):
            entered.append("free stripe")
        with t.data_lock(0, HELD_OFF, 4, CHILD_DEADLINE_S, NEVER):
            entered.append("other rank")
        t.word(0, 44).set(1)
        assert kids.join() == [0]
    with t.data_lock(1, HELD_OFF, 4, CHILD_DEADLINE_S, NEVER):  # released by the child
        entered.append("released")
    assert entered == ["free stripe", "other rank", "released"]
