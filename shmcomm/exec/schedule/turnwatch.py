"""The turn watch: an agent that holds the turn too long outside the kernel API ends the run.

Only the turn holder runs, so a block stuck between two scheduling points (in ``time.sleep``, on a
``threading.Lock``, in a loop that calls no instruction) stops the whole run, and every other
agent sleeps on its turn. Each rank process runs one watch thread (kept from run to run in a
pool's process, asleep between runs). While the step count does not move and the holder is one of
this rank's agents, it adds up how long the holder's thread was asleep (its kernel state ``S`` or
``D``: a sleep, a lock, I/O) and how long it held the turn in all. Asleep for ``turn_timeout``
seconds, or holding the turn ``SPIN_FACTOR`` times that long (a loop with no instruction; a
computation merely slowed by a loaded box gets that much longer), the watch writes the report (the
holder, its Python stack from ``sys._current_frames``, the wait-for table), aborts the run and,
once the other agents had a moment to stop, ends its own process, since the stuck thread will not
return. Time the process spent stopped does not count.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

from ...core import control as C
from .scheduler import DONE, H_LAST, H_LIVE, H_STATUS, H_STEP, H_STUCK, ST_RUNNING, ST_STUCK, agent_name

TICK_S = 0.1  # how often the watch looks at the step count
STALLED_S = 1.0  # a look this late: the process was stopped, not the holder stuck
SPIN_FACTOR = 4  # a holder that runs (not asleep) gets this many turn_timeouts
EXIT_GRACE_S = 1.0  # after the report, before this process ends (the others stop first)
EXIT_STATUS = 75  # this rank's process ends with it: its stuck thread cannot be joined


def thread_asleep(tid: int) -> bool:
    """Whether kernel thread ``tid`` of this process sleeps (state ``S`` or ``D``)."""
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] in (b"S", b"D")


class TurnWatch:
    """The watch of one rank's run (``start`` / ``stop``), ticked by the process's watch thread."""

    def __init__(self, sched: Any, rank: int, limit: float) -> None:
        self.sched, self.rank, self.limit = sched, rank, limit
        self.last_step, self.held, self.asleep = -1, 0.0, 0.0
        self.prev = 0.0

    def start(self) -> None:
        self.prev = time.monotonic()
        _watcher().arm(self)

    def stop(self) -> None:
        _watcher().disarm(self)

    def tick(self, now: float) -> bool:
        """One look at the turn; ``False`` once this watch has nothing more to do."""
        sh, ctl = self.sched.sh, self.sched.ctl
        hdr = sh.hdr
        dt, self.prev = now - self.prev, now
        if ctl.aborted() or hdr[H_STATUS] != ST_RUNNING:
            return False
        step = hdr[H_STEP]
        if step != self.last_step:
            self.last_step, self.held, self.asleep = step, 0.0, 0.0
            return True
        holder = hdr[H_LAST]
        if holder // C.SLOTS != self.rank or not hdr[H_LIVE] or sh.state[holder] == DONE:
            return True
        if dt > STALLED_S:
            return True  # this process was stopped (or starved): not the holder's doing
        thread = self.sched.threads.get(holder)
        self.held += dt
        if thread is not None and thread_asleep(thread[1]):
            self.asleep += dt
        if self.asleep > self.limit or self.held > SPIN_FACTOR * self.limit:
            self._report(holder, self.held, self.asleep, thread)
            return False
        return True

    def _report(self, holder: int, held: float, asleep: float, thread: Any) -> None:
        sched = self.sched
        how = (f"asleep for {asleep:.1f} s of it" if asleep > self.limit else
               f"running for most of it: a loop or a computation, given {SPIN_FACTOR} x "
               "turn_timeout")
        head = [f"stuck (schedule mode): {agent_name(holder)} has held the turn for {held:.1f} s "
                f"without reaching a scheduling point ({how}; turn_timeout={self.limit:g} s), "
                f"while every other agent waits for its turn; at step {sched.sh.hdr[H_STEP]}. "
                "It is stuck outside the kernel API (a sleep, a lock, a loop that calls no "
                "instruction) or in a wait the scheduler does not see; raise turn_timeout if "
                "it only computes that long",
                f"  {agent_name(holder)}'s stack (most recent call last):"]
        frame = sys._current_frames().get(thread[0]) if thread is not None else None
        if frame is None:
            head.append("    (its thread is not running Python code this process can see)")
        else:
            head += ["  " + line for chunk in traceback.format_stack(frame)
                     for line in chunk.rstrip().splitlines()]
        sched.sh.hdr[H_STUCK] = holder
        sched.end_run(head, ST_STUCK, C.ABORT_FAILURE)
        time.sleep(EXIT_GRACE_S)
        sys.stderr.flush()
        os._exit(EXIT_STATUS)


class _Watcher:
    """The process's watch thread: started by the first run's watch and kept for the next runs
    of a pool's process (a thread start per run cost the rank a context switch before its first
    turn), asleep while no run is watched. It goes to sleep only after a whole tick without a
    watch: a pool's next run, a few milliseconds later, finds it still ticking and arms it
    without a wake (its wake cost the rank's setup a system call, and the thread's own run the
    CPU every rank sets up on). A forked child starts its own."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed = threading.Event()
        self.watch: TurnWatch | None = None
        self.thread: threading.Thread | None = None

    def arm(self, watch: TurnWatch) -> None:
        with self.lock:
            self.watch = watch
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name=f"shmcomm-turnwatch-r{watch.rank}")
                self.thread.start()
            self.armed.set()  # (no wake when the thread still ticks)

    def disarm(self, watch: TurnWatch) -> None:
        with self.lock:
            if self.watch is watch:
                self.watch = None

    def _run(self) -> None:
        while True:
            self.armed.wait()
            time.sleep(TICK_S)
            with self.lock:
                watch = self.watch
                if watch is None:  # a whole tick without a run: sleep until one arms
                    self.armed.clear()
                    continue
            if not watch.tick(time.monotonic()):
                self.disarm(watch)


_WATCHER: list[_Watcher] = []


def _watcher() -> _Watcher:
    if not _WATCHER:
        _WATCHER.append(_Watcher())
    return _WATCHER[0]


os.register_at_fork(after_in_child=_WATCHER.clear)  # the parent's thread does not exist here
