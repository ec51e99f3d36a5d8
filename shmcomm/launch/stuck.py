"""The stuck-agent report: who is not waiting, in what state, and every rank's Python stacks.

When a wait times out or the run timeout passes, the launcher prints, before it kills anyone:

* the agents that have not waited for ``NOT_WAITING_S`` or more, each with its thread's state
  from ``/proc``: **stopped** (SIGSTOP, a debugger: state T/t), **spinning** (runnable and
  burning CPU between two samples), **running** (runnable, little CPU: starved by the box), or
  **blocked** in a system call (sleep, I/O, a lock);
* the wait-for table of every agent that waits (a ``TTEST`` loop counts);
* every live rank's Python stacks, all threads, dumped by :mod:`faulthandler` from a signal
  handler in the rank (so a thread in ``while True: pass`` is caught where it spins). A stopped
  rank cannot run its handler; the report says so.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from typing import IO

from ..core import control as C
from ..native.library import dump_stacks_to
from ..transports import Transport
from .deadlock import CorruptControl, Wait, agent_lines, is_waiting, wait_table
from .stacks import trim, wait_sites, waiting_agents

NOT_WAITING_S = 1.0  # an agent running this long without a wait is named
STACK_SIGNAL = signal.SIGUSR2  # the ranks' faulthandler dumps their stacks on it
SAMPLE_S = 0.2  # CPU time is sampled twice this far apart
STACK_WAIT_S = 1.0  # how long the dumps may take
STACK_CHARS = 6000  # per rank, in the report
ENDED_MS = 3000  # waits that ended this recently still appear in the table
_TICK = os.sysconf("SC_CLK_TCK")


def thread_stat(pid: int, tid: int) -> tuple[str, int] | None:
    """``(state letter, CPU ticks)`` of one thread from ``/proc``, or ``None`` if gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()  # after "tid (comm) ": state is field 3
    try:
        return fields[0].decode(), int(fields[11]) + int(fields[12])  # utime + stime
    except (IndexError, ValueError):
        return None


def process_state(pid: int) -> str:
    """The process's state letter (``T`` stopped, ``t`` traced, ``Z`` zombie, ...), or ``?``."""
    st = thread_stat(pid, pid)
    return st[0] if st else "?"


def describe_thread(state: str, ticks: float) -> str:
    """What a thread does, from its state letter and the CPU share it used while sampled."""
    if state in "Tt":
        return "stopped (SIGSTOP or a debugger; it cannot run until continued)"
    if state == "R":
        share = min(ticks / _TICK / SAMPLE_S, 1.0)
        if share >= 0.5:
            return f"spinning ({share:.0%} CPU, not waiting)"
        return f"runnable ({share:.0%} CPU: the box is busy)"
    if state in "SD":
        return "blocked in a system call (sleep, I/O, a lock)" + (" (uninterruptible)"
                                                                  if state == "D" else "")
    return f"state {state}"


class WaitLog:
    """The waits the launcher saw lately, so that the report still shows the wait a timeout has
    just ended (the victim's) beside those that go on. ``record`` is called every poll or so."""

    def __init__(self, ctl: C.Control, transport: Transport) -> None:
        self.ctl, self.transport = ctl, transport
        self.waits: dict[tuple[int, int | None], Wait] = {}
        self.ended: dict[tuple[int, int | None], int] = {}  # when it was first seen over (ms)

    def record(self, live: list[int]) -> None:
        now_ms = self.ctl.now_ms()
        for rank in live:
            try:
                lines = agent_lines(self.ctl, rank)
            except CorruptControl:
                continue  # the deadlock watch reports it
            seen = set()
            for block, line in lines:
                key = (rank, block)
                seen.add(key)
                if is_waiting(line, now_ms):
                    try:
                        self.waits[key] = Wait(self.ctl, self.transport, rank, block, line)
                    except CorruptControl:
                        continue  # the deadlock watch reports it (twice seen, unchanged)
                    self.ended.pop(key, None)
                elif key in self.waits and key not in self.ended:
                    self.ended[key] = now_ms
            for key in self.waits:  # its launch ended (the slots are free): the wait is over
                if key[0] == rank and key not in seen and key not in self.ended:
                    self.ended[key] = now_ms
        for key in self.waits:  # a rank that exited (the victim, after its report) waits no more
            if key[0] not in live and key not in self.ended:
                self.ended[key] = now_ms

    def recent_ends(self, now_ms: int, within_ms: int) -> dict[tuple[int, int | None], Wait]:
        """Waits that ended at most ``within_ms`` ago (the last seen of each such agent)."""
        return {k: self.waits[k] for k, t in self.ended.items() if now_ms - t <= within_ms}


def stuck_report(ctl: C.Control, transport: Transport, live: dict[int, int],
                 stacks: dict[int, IO[bytes]], why: str, log: WaitLog | None = None) -> str:
    """The report for ``live`` ranks (rank -> pid); ``stacks[rank]`` receives the rank's dump."""
    now_ms = ctl.now_ms()
    not_waiting: list[tuple[int, int | None, int, int, int]] = []  # rank, block, tid, ms, state
    waits: list[Wait] = []
    notes: list[str] = []
    for rank in sorted(live):
        try:
            lines = agent_lines(ctl, rank)
        except CorruptControl as exc:
            notes.append(f"  rank {rank}: {exc}")
            continue
        host_joining = int(lines[-1][1][C.A_STATE]) == C.JOINING
        for block, line in lines:
            state = int(line[C.A_STATE])
            if block is None and host_joining:
                continue  # the host waits for its blocks: they are listed
            if is_waiting(line, now_ms):
                try:
                    waits.append(Wait(ctl, transport, rank, block, line))
                except CorruptControl as exc:
                    notes.append(f"  {exc}")
            elif state in (C.RUNNING, C.POLLING):
                idle = now_ms - int(line[C.A_SINCE])
                if idle >= NOT_WAITING_S * 1000:
                    not_waiting.append((rank, block, int(line[C.A_TID]), idle, state))
    # a host agent's last wait may have been made by a thread of the user's that has ended
    # since (a launch or barrier from a helper thread): the host itself is the main thread
    gone_tids: dict[tuple[int, int | None], int] = {}
    for i, (r, b, tid, idle, state) in enumerate(not_waiting):
        if b is None and tid != live[r] and thread_stat(live[r], tid) is None:
            gone_tids[(r, b)] = tid
            not_waiting[i] = (r, b, live[r], idle, state)
    before = {(r, tid): thread_stat(live[r], tid) for r, _b, tid, _i, _s in not_waiting}
    time.sleep(SAMPLE_S)
    out = [f"stuck-agent report ({why}), {now_ms / 1000:.2f} s into the run:"]
    if not_waiting:
        out.append(f"  agents that have not waited for {NOT_WAITING_S:g} s or more:")
    for rank, block, tid, idle, state in not_waiting:
        pid = live[rank]
        first, second = before[(rank, tid)], thread_stat(pid, tid)
        if second is None or first is None:
            what = "its thread is gone"
        else:
            what = describe_thread(process_state(pid) if process_state(pid) in "Tt" else second[0],
                                   second[1] - first[1])
        who = "host" if block is None else f"block {block}"
        if (rank, block) in gone_tids:
            what = (f"the thread that made its last wait ({gone_tids[(rank, block)]}, one of the "
                    f"host's own) has ended; the rank's main thread: {what}")
        out.append(f"    rank {rank} {who} (pid {pid}, thread {tid}): {C.AGENT_STATES[state]}, "
                   f"no wait for {idle / 1000:.2f} s; {what}")
    stopped = [r for r in sorted(live) if process_state(live[r]) in "Tt"]
    for r in stopped:
        out.append(f"    rank {r} (pid {live[r]}): the whole process is stopped (SIGSTOP or a "
                   "debugger)")
    if not not_waiting and not stopped:
        out.append("  every live agent waits (none stuck outside a wait)")
    out.extend(notes)
    ended: dict = {}
    if log is not None:  # the waits a timeout ended just now (the victims')
        log.record(list(live))
        now_keys = {(w.rank, w.block) for w in waits}
        for key, w in log.recent_ends(now_ms, ENDED_MS).items():
            if key not in now_keys:
                waits.append(w)
                ended[key] = log.ended[key]
    if waits:
        waits.sort(key=lambda w: (w.rank, -1 if w.block is None else w.block))
        out.append("  wait-for table:")
        out.append(wait_table(waits, now_ms, ended))
    dumps = collect_dumps(live, stacks, set(stopped))
    spinning = [(r, b) for r, b, _t, _i, _s in not_waiting]
    out += wait_sites(ctl, [(w.rank, w.block) for w in waits if (w.rank, w.block) not in ended]
                      + spinning, dumps, spinning)
    out.append(format_dumps(live, dumps, set(stopped)))
    return "\n".join(out)


def dump_stacks_on_signal(stacks: IO) -> None:
    """In a rank process: dump every thread's Python stack into ``stacks`` on the launcher's
    signal, with where each native kernel's block waits ahead of them."""
    faulthandler.register(STACK_SIGNAL, file=stacks, all_threads=True, chain=False)
    dump_stacks_to(STACK_SIGNAL, stacks.fileno())


def collect_dumps(live: dict[int, int], stacks: dict[int, IO[bytes]], stopped: set[int]
                  ) -> dict[int, str | None]:
    """Signal every live rank to dump its threads' stacks into its file; each rank's new dump
    (``None``: it could not dump, being stopped or gone)."""
    sizes = {}
    for rank, pid in live.items():
        f = stacks.get(rank)
        if f is None or rank in stopped:
            continue
        sizes[rank] = os.fstat(f.fileno()).st_size
        try:
            os.kill(pid, STACK_SIGNAL)
        except OSError:
            sizes.pop(rank)
    deadline = time.monotonic() + STACK_WAIT_S
    last: dict[int, int] = {}
    while time.monotonic() < deadline:  # until every dump has stopped growing
        time.sleep(0.05)
        now = {r: os.fstat(stacks[r].fileno()).st_size for r in sizes}
        if all(now[r] > sizes[r] for r in sizes) and now == last:
            break
        last = now
    return {rank: (os.pread(stacks[rank].fileno(), 1 << 20, sizes[rank]).decode(errors="replace")
                   if rank in sizes else None) for rank in live}


def format_dumps(live: dict[int, int], dumps: dict[int, str | None], stopped: set[int]) -> str:
    """Every live rank's stacks, trimmed to the user's frames (:func:`stacks.trim`)."""
    out = ["  Python stacks of every live rank (all threads, most recent call first):"]
    for rank in sorted(live):
        head = f"  --- rank {rank} (pid {live[rank]}) ---"
        if rank in stopped:
            out.append(head + " stopped: it cannot dump its stacks")
            continue
        text = dumps.get(rank)
        if text is None:
            out.append(head + " no stack dump")
            continue
        text = trim(text)
        if len(text) > STACK_CHARS:
            text = text[:STACK_CHARS] + "\n    ... (cut)"
        out.append(head)
        gone = process_state(live[rank]) in "Z?"
        out.append(text.rstrip() or ("    (it exited before it could dump its stacks)" if gone
                                     else "    (no dump within the time allowed)"))
    return "\n".join(out)


def dump_stacks(live: dict[int, int], stacks: dict[int, IO[bytes]], stopped: set[int]) -> str:
    """Signal every live rank to dump its threads' stacks into its file; collect the dumps."""
    return format_dumps(live, collect_dumps(live, stacks, stopped), stopped)


def deadlock_sites(ctl: C.Control, live: dict[int, int], stacks: dict[int, IO[bytes]]) -> str:
    """For a deadlock report, before the abort wakes anyone: the line of the user's code each
    waiting agent waits at, and the host line of its launch ("" if no dump could tell)."""
    try:
        agents = waiting_agents(ctl, live)
        dumps = collect_dumps(live, stacks, {r for r in live if process_state(live[r]) in "Tt"})
        return "\n".join(wait_sites(ctl, agents, dumps))
    except Exception:  # noqa: BLE001 -- a diagnosis must never hide the failure
        return ""


STOPPED_S = 3.0  # a rank process stopped (state T) this long fails the run
STOPPED_POLL_S = 0.5


class StoppedWatch:
    """Rank processes the kernel shows stopped (``T``: SIGSTOP, SIGTSTP, SIGTTIN from outside
    the run; ``t``, a debugger's stop, is left alone). Such a rank cannot go on until someone
    continues it, so it is named within ``STOPPED_S`` instead of at the run timeout."""

    def __init__(self) -> None:
        self.since: dict[int, float] = {}
        # the first look is STOPPED_POLL_S into the run: a short run (a pool's) reads no /proc
        # file of its ranks at all, where each run's first check read every rank's
        self.checked = time.monotonic()

    def reset(self) -> None:
        """The launcher itself was stopped: judge afresh (Ctrl-Z stops the ranks with it)."""
        self.since.clear()

    def check(self, now: float, live: dict[int, int]) -> str | None:
        """The report naming every rank stopped for ``STOPPED_S``, or ``None``."""
        if now - self.checked < STOPPED_POLL_S:
            return None
        self.checked = now
        for rank, pid in live.items():
            if process_state(pid) == "T":
                self.since.setdefault(rank, now)
            else:
                self.since.pop(rank, None)
        long = sorted(r for r, t in self.since.items() if r in live and now - t >= STOPPED_S)
        if not long:
            return None
        names = ", ".join(f"rank {r} (pid {live[r]})" for r in long)
        return (f"{names} stopped (process state T: SIGSTOP or SIGTSTP from outside the run) "
                f"for {STOPPED_S:g} s; a stopped rank cannot go on, so the run was ended")
