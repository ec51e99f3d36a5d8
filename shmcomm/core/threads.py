"""Block threads kept between launches.

Starting a thread costs a clone and a wait until the new thread runs: on an oversubscribed
machine that is a context switch per block, paid by the host at every launch, and in schedule
mode while the host holds the turn (every other agent of the run waits meanwhile). A block
therefore runs on an idle thread of this process when there is one; a thread whose block
returned goes back to the idle list, and only the first launches of a process (and a launch
wider than any before) start threads. A pool's rank process keeps them from run to run.

An idle thread sleeps on its own lock (no polling) and holds no state of the block it ran: the
block's agent is unbound before the thread goes idle. The list is per process: a fork starts
with none (the parent's threads do not exist in the child).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

IDLE_NAME = "shmcomm-block-idle"  # an idle thread's name: neither a leftover nor a host helper
KEEP_IDLE = 256  # idle threads a process keeps at most (more end when their block returns)


class BlockThread:
    """One block's run on a kept thread: ``is_alive`` until the block's function returned,
    ``join`` waits for that (the thread itself goes on, idle)."""

    __slots__ = ("name", "_fn", "_args", "_done")

    def __init__(self, fn: Callable[..., Any], args: tuple, name: str) -> None:
        self.name = name
        self._fn, self._args = fn, args
        # held until the block returned (a lock costs a fraction of an Event to make, and a
        # launch makes one per block)
        self._done = threading.Lock()
        self._done.acquire()

    def is_alive(self) -> bool:
        return self._done.locked()

    def join(self, timeout: float | None = None) -> None:
        if self._done.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            self._done.release()  # the next joiner passes too


class _Worker:
    __slots__ = ("job", "ready", "thread")

    def __init__(self) -> None:
        self.job: BlockThread | None = None
        self.ready = threading.Lock()
        self.ready.acquire()  # released when a job is handed over
        self.thread = threading.Thread(target=_serve, args=(self,), name=IDLE_NAME, daemon=True)


_idle: list[_Worker] = []
_deferred: list[tuple[Any, _Worker]] = []  # (key, worker) handed a job, not woken yet
_lock = threading.Lock()


def start(fn: Callable[..., Any], args: tuple, name: str, defer: bool = False,
          key: Any = None) -> BlockThread:
    """Run ``fn(*args)`` on a kept thread named ``name`` while it runs; returns at once.
    ``defer``: an idle thread is handed the job but woken only by :func:`release_deferred`
    (schedule mode's host wakes its launch's blocks once it has passed the turn on: a wake
    made while it held the turn cost the whole run a context switch); ``key`` names it there."""
    job = BlockThread(fn, args, name)
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
        worker.job = job
        worker.thread.name = name
        worker.thread.start()
        worker.ready.release()
        return job
    worker.job = job
    worker.thread.name = name
    if defer:
        with _lock:
            _deferred.append((key, worker))
    else:
        worker.ready.release()  # the idle thread wakes and runs it
    return job


def release_deferred(only: Any = None) -> None:
    """Wake the threads :func:`start` handed a job with ``defer`` (every join of a launch
    calls this first). ``only``: when a deferred thread has this key, wake just that one and
    leave the others for the next call. Schedule mode passes the block it gave the turn to:
    woken alone, it reaches its turn without sharing the GIL with its launch's other starting
    blocks (woken together, the chosen one waited behind them for 0.1 ms), and its own first
    wait for the turn wakes the rest."""
    if not _deferred:
        return
    with _lock:
        workers = [w for k, w in _deferred if k == only] if only is not None else []
        if workers:
            _deferred[:] = [(k, w) for k, w in _deferred if k != only]
        else:
            workers = [w for _k, w in _deferred]
            _deferred.clear()
    for w in workers:
        w.ready.release()


def _serve(worker: _Worker) -> None:
    while True:
        worker.ready.acquire()
        job = worker.job
        if job is None:
            return
        worker.job = None
        try:
            job._fn(*job._args)
        except BaseException:  # noqa: BLE001,S110 -- the block's main reports its own failures
            pass
        job._fn = job._args = None  # type: ignore[assignment]  # no reference kept while idle
        threading.current_thread().name = IDLE_NAME
        with _lock:
            keep = len(_idle) < KEEP_IDLE
            if keep:
                _idle.append(worker)
        job._done.release()  # after it is idle again: the next launch finds it
        if not keep:
            return


def idle_count() -> int:
    """Idle kept threads of this process."""
    return len(_idle)


def _forget() -> None:  # a forked child has none of its parent's threads
    global _lock
    _idle.clear()
    _deferred.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget)

__all__ = ["BlockThread", "start", "release_deferred", "idle_count", "IDLE_NAME", "KEEP_IDLE"]
