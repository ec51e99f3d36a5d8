"""Blocking waits that survive oversubscription: spin, yield, futex sleep, with a deadline.

The normal case is 8 ranks x 4 blocks on 2 cores, under the GIL. A pure Python spin holds the
GIL for a whole switch interval and starves the rank's other blocks, and spinning processes
starve whoever must notify them. So a wait, once its first check failed, under ``adaptive``:

0. if the box is busy with other programs (more runnable tasks than this run's threads plus the
   cores, see :func:`_box_busy`), it goes straight to step 3;
1. it polls, unregistered: spinning for ``spin_us`` (a ``sched_yield`` every ``POLL_BATCH``
   polls) while every runnable agent of the run has a core of its own and no other block of its
   rank needs the GIL, else yielding for ``QUIET_YIELD_S`` (``os.sched_yield`` releases the GIL
   and the core), so that a sequence of ``TWAIT`` calls on peers that arrive one by one costs one poll per
   peer and never touches the control segment;
2. registers itself in the control segment (the deadlock watch reads it) and yields for
   ``YIELD_S``, or less: once one yield kept it off the core for ``YIELD_AWAY_S`` the box is busy
   with work that is not waiting (other processes, or the blocks that must notify), and yielding
   would only hand them whole time slices, while a futex sleeper is woken, and scheduled at
   once, by the ``TNOTIFY`` it needs;
3. then sleeps on the word (the transport's ``Word.sleep``: a cross-process futex on shm), woken
   by ``TNOTIFY``, re-checking at least every ``SLEEP_MAX_S`` so that a missed wake costs
   latency, never a hang.

Polls read ``Word.cell`` (an acquire read: a plain load on x86-64), so a poll that finds the
condition true is also the acquire that a returning wait needs. Words are the transport's
handles (:class:`~shmcomm.transports.Word`), so the same loop waits on any transport. Every
pass re-checks the abort flag and the deadline; a loop allocates no ctypes object and reads the
box's load from an already open file. The other policies (``spin``, ``yield``, ``futex``) use
one phase only; they exist to be measured against ``adaptive``
(``benchmarks/barrier_latency.py``).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import Aborted, WaitTimeout
from ..transports import Word
from ..transports import host_atomics as at
from ..types import CMP_FUNCS, CMP_SYMBOLS
from . import control as C
from .agent import Agent
from .model import BlockModel

YIELD_S = 0.002
QUIET_YIELD_S = 0.001  # unregistered yield polling (far below any deadlock_grace)
SLEEP_MIN_S = 0.0005
YIELD_AWAY_S = 0.0005  # a yield that kept us off the core this long: the box is busy, sleep
BUSY_SAMPLE_S = 0.01  # how often a rank process re-reads the box's runnable task count
POLL_BATCH = 16  # polls between two looks at the clock, the abort flag and the model's idle
_BATCH = range(POLL_BATCH)
SLEEP_MAX_S = 0.02
# a wait loop pass this late means the process was stopped (SIGSTOP, a suspended job) or starved:
# that time does not count against wait_timeout
STALLED_S = 1.0
KIND_SIGNAL, KIND_HOST_BARRIER, KIND_TTEST, KIND_SYNCALL = 0, 1, 2, 3

_fetch_add = at.fast_fetch_add  # control-segment words: c_void_p
_store = at.fast_store
_busy: list[Any] = [-1.0, False]  # when the box was last sampled, and whether it was busy
_loadavg_fd = [-1]  # /proc/loadavg, opened once per process and read with pread
_SEQ = at.SEQ_CST
_perf = time.perf_counter
_sched_yield = os.sched_yield
_IDLE = BlockModel.idle


class WaitSite:
    """What a wait waits on: ``words`` (sequential sweep order), their acquire-read ``cells``,
    and how to report it."""

    __slots__ = ("words", "cells", "sig_rank", "sig_offset", "rows", "cols", "stride", "kind",
                 "label")

    def __init__(self, words: Sequence[Word], sig_rank: int, sig_offset: int,
                 rows: int = 1, cols: int = 1, stride: int = 1, kind: int = KIND_SIGNAL,
                 label: str = "TWAIT") -> None:
        self.words = tuple(words)
        self.cells = tuple(w.cell for w in self.words)
        self.sig_rank = sig_rank
        self.sig_offset = sig_offset
        self.rows, self.cols, self.stride = rows, cols, stride
        self.kind = kind
        self.label = label

    def describe(self, index: int = 0) -> str:
        where = ("the host barrier" if self.kind == KIND_HOST_BARRIER else
                 "SYNCALL (the blocks of this launch)" if self.kind == KIND_SYNCALL else
                 f"signal rank {self.sig_rank} offset {self.sig_offset:#x}")
        if self.rows * self.cols > 1:
            where += f" (element [{index // self.cols}, {index % self.cols}] of {self.rows}x{self.cols})"
        return where


def first_unsatisfied(words: Sequence[Word], fn: Callable[[int, int], bool], value: int) -> tuple[int, int]:
    """Sequential sweep as TWAIT does on hardware: index and value of the first failing element,
    or ``(-1, 0)`` when every element holds."""
    for i, w in enumerate(words):
        cur = w.load()
        if not fn(cur, value):
            return i, cur
    return -1, 0


def _holds(cells: tuple, fn: Callable[[int, int], bool], value: int) -> bool:
    """One sweep of acquire reads: does every word satisfy the condition?"""
    for c in cells:
        if not fn(c.value, value):
            return False
    return True


def wait_until(agent: Agent, site: WaitSite, value: int, cmp: int) -> None:
    """Block the calling agent until every word of ``site`` satisfies ``word <cmp> value``.

    Raises :class:`Aborted` when the run aborts and :class:`WaitTimeout` after the agent's
    ``wait_timeout``; both name the agent, the signal, the comparison and the observed value.
    """
    fn = CMP_FUNCS[cmp]
    cells = site.cells
    if _holds(cells, fn, value):
        return
    ctl = agent.ctl
    policy = agent.policy
    t0 = _perf()
    adaptive = policy == "adaptive"
    # the box's load as last sampled, inline: a wait that is over after a few polls (a barrier's
    # waiter at 8x1) must not pay for the full setup below
    busy = adaptive and (_busy[1] if t0 - _busy[0] < BUSY_SAMPLE_S else _box_busy(ctl))
    pipes = agent.pipes
    idle = None if pipes is None or type(pipes).idle is _IDLE else pipes.idle
    spin = False
    if adaptive and not busy:
        spin = agent.spin_s > 0 and _may_spin(agent)
        if not spin and idle is None and _first_polls(cells, fn, value):
            return
    abort = ctl.abort_cell
    deadline = t0 + agent.wait_timeout
    agent.stall_s = 0.0
    if adaptive and not busy:
        if _poll_quietly(agent, site, fn, value, cmp, abort, idle, t0,
                         t0 + (agent.spin_s if spin else QUIET_YIELD_S), spin):
            return
    _register(agent, site, value, cmp)
    try:
        if policy == "spin":
            _poll_quietly(agent, site, fn, value, cmp, abort, idle, t0, deadline, True)
            return
        if policy == "yield":
            yield_until = deadline
        elif policy == "adaptive" and not busy:
            yield_until = _perf() + YIELD_S
        else:
            yield_until = t0  # futex, or a busy box: a sleeper is woken and run at once by its TNOTIFY
        _yield_then_sleep(agent, site, fn, value, cmp, abort, idle, t0, deadline, yield_until,
                          YIELD_AWAY_S if policy == "adaptive" else deadline)
    finally:
        agent.since_cell.value = ctl.now_ms()
        _store(agent.state_cp, C.RUNNING, _SEQ)


def _first_polls(cells: tuple, fn, value: int) -> bool:
    """The first ``POLL_BATCH`` yielding polls of a quiet wait (as :func:`_poll_quietly` makes
    them, with nothing else around them: a bounded number of yields, so the abort flag and the
    clock may wait until after them). True when satisfied.

    With more waiters than cores, every waiter's poll stands between the notifier and its core,
    so a poll must cost a read and a ``sched_yield`` and nothing more."""
    yield_now = _sched_yield
    if len(cells) == 1:
        one = cells[0]
        for _ in _BATCH:
            yield_now()
            if fn(one.value, value):
                return True
        return False
    for _ in _BATCH:
        yield_now()
        if _holds(cells, fn, value):
            return True
    return False


def _poll_quietly(agent: Agent, site: WaitSite, fn: Callable[[int, int], bool], value: int, cmp: int,
                  abort: ctypes.c_int32,
                  idle: Callable[[], None] | None, t0: float, until: float, spin: bool) -> bool:
    """Poll until ``until``; True when satisfied, False when the time is up (or, yielding, when
    ``POLL_BATCH`` yields kept us away long enough to show the box is busy).

    The loop is as lean as a hand-written one (a read and a ``sched_yield``): with more waiters
    than cores, the notifier gets a core only after every waiter on it has polled once, so the
    cost of a poll is paid once per waiter per hand-off. The clock, the abort flag and the
    model's ``idle`` are looked at every ``POLL_BATCH`` polls. Spinning, it yields once per
    batch: with no other runnable task on this core that returns at once, but when the
    notifier was placed on the same core it runs now instead of after our whole budget
    (2 ranks x 1 block: ~60 us per barrier without these yields, ~5 us with them).
    """
    cells = site.cells
    one = cells[0] if len(cells) == 1 else None
    yield_now = _sched_yield
    last = t0
    while True:
        for _ in _BATCH:
            if one is not None:
                if fn(one.value, value):
                    return True
            elif _holds(cells, fn, value):
                return True
            if not spin:
                yield_now()
        if spin:
            yield_now()
        if abort.value:
            _raise_aborted(agent, site, value, cmp, _perf() - t0)
        if idle is not None:
            idle()
        now = _perf()
        if now - last > STALLED_S:
            agent.stall_s += now - last
        if now > until + agent.stall_s:
            if now > t0 + agent.wait_timeout + agent.stall_s:
                _raise_timeout(agent, site, value, cmp, now - t0)
            return False
        if not spin and now - last > POLL_BATCH * YIELD_AWAY_S:
            return False  # every yield of the batch kept us away: the box is busy, go to sleep
        last = now


def _yield_then_sleep(agent: Agent, site: WaitSite, fn: Callable[[int, int], bool], value: int,
                      cmp: int, abort: ctypes.c_int32,
                      idle: Callable[[], None] | None, t0: float, deadline: float,
                      yield_until: float, away: float) -> None:
    """The registered phase: yield until ``yield_until`` (or a yield that kept us away for
    ``away``), then sleep on the first unsatisfied word with a growing timeout."""
    ctl = agent.ctl
    cells = site.cells
    words = site.words
    holds = _Holds(fn, value)
    sleep_s = SLEEP_MIN_S
    asleep = False
    last = _perf()
    deadline += agent.stall_s  # time the quiet phase spent stopped
    try:
        while True:
            if abort.value:
                _raise_aborted(agent, site, value, cmp, _perf() - t0)
            now = _perf()
            if now - last > STALLED_S:
                deadline += now - last
            if now > deadline:
                _raise_timeout(agent, site, value, cmp, now - t0)
            if idle is not None:
                idle()
            if now - last > away:
                yield_until = now  # the yield gave the core away for long: others need it, sleep
            last = now
            if now < yield_until:
                _sched_yield()
            else:
                if not asleep and agent.active:  # a futex sleeper is not runnable: spinners may run
                    _fetch_add(ctl.active_cp, -1, _SEQ)
                    agent.active = False
                    asleep = True
                idx, cur = first_unsatisfied(words, fn, value)
                if idx < 0:
                    return
                words[idx].sleep(cur, min(sleep_s, deadline - now), holds)
                sleep_s = min(sleep_s * 2, SLEEP_MAX_S)
            if _holds(cells, fn, value):
                return
    finally:
        if asleep:
            _fetch_add(ctl.active_cp, 1, _SEQ)
            agent.active = True


class _Holds:
    """``holds(current)``: whether the waited condition is true of a word's value."""

    __slots__ = ("fn", "value")

    def __init__(self, fn: Callable[[int, int], bool], value: int) -> None:
        self.fn, self.value = fn, value

    def __call__(self, current: int) -> bool:
        return self.fn(current, self.value)


def _may_spin(agent: Agent) -> bool:
    """Spin only while spinning cannot starve anyone: every runnable agent of the run (a block
    that is not in a futex sleep; for a host wait, every rank's host too) has a core of its own,
    and no other block of this rank needs the GIL."""
    ctl = agent.ctl
    runnable = ctl.active_cell.value + (ctl.nranks if agent.is_host else 0)
    if runnable > ctl.ncores:
        return False
    for a in agent.rt.agents:
        if a.active and a is not agent:
            return False
    return True


def _box_busy(ctl: C.Control) -> bool:
    """True while tasks that cannot be this run's own outnumber the cores (sampled from the
    kernel's instantaneous ``nr_running`` at most every ``BUSY_SAMPLE_S`` per process).

    The run's own threads count as possibly runnable: every launched block (a block just woken
    from its futex is runnable before it counts itself active again: counting only active
    blocks took the run's own wake-ups for foreign load, at 8 ranks x 4 blocks on a quiet box
    10x slower barriers than plain yield) and every rank's host thread that is not joining its
    blocks (it sets up, launches and starts them first: counting only launched blocks took the
    ranks' start for foreign load, and that verdict, held for ``BUSY_SAMPLE_S``, sent the
    first barriers of a run to futex sleeps, 2-3x slower at 8 ranks x 1 block).

    Then yielding hands whole time slices to other programs (tens of ms per barrier measured
    at load 15-35), while a futex sleeper is woken, and placed ahead of them, by the
    ``TNOTIFY`` it waits for (CFS credits sleepers).
    """
    now = _perf()
    if now - _busy[0] < BUSY_SAMPLE_S:
        return _busy[1]
    try:
        if _loadavg_fd[0] < 0:
            _loadavg_fd[0] = os.open("/proc/loadavg", os.O_RDONLY | os.O_CLOEXEC)
        running = int(os.pread(_loadavg_fd[0], 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        running = 0
    words = ctl.words
    own = sum(int(words[ctl.rank_word(r, C.R_BLOCKS)])
              + (int(words[ctl.agent_word(r, C.HOST_SLOT) + C.A_STATE]) != C.JOINING)
              for r in ctl.local)  # the ranks on this box (a job across hosts: this host's)
    busy = running - own > ctl.ncores
    _busy[0], _busy[1] = now, busy
    return busy


def _register(agent: Agent, site: WaitSite, value: int, cmp: int, kind: int | None = None,
              state: int = C.WAITING) -> None:
    """Publish the wait in the agent's control line (the deadlock watch reads it)."""
    agent.seq += 1
    off = site.sig_offset  # 64 bits as two halves: windows reach 16 GiB
    agent.wait_fields[:] = [agent.seq & 0x7FFFFFFF, site.sig_rank, off & 0xFFFFFFFF, off >> 32,
                            site.rows, site.cols, site.stride, cmp, value, agent.ctl.now_ms(),
                            site.kind if kind is None else kind]
    agent.polling = None
    _store(agent.state_cp, state, _SEQ)  # seq_cst: the fields above are visible first


def note_poll(agent: Agent | None, site: WaitSite, value: int, cmp: int) -> None:
    """A ``TTEST`` found its condition false: a loop of such tests is a wait in all but name,
    so publish it like one (state ``POLLING``, the time of this test in ``A_POLL``). The deadlock
    watch and the stuck-agent report count the agent as waiting while these tests keep coming;
    the line is written at the second failed test in a row of the same condition, and rewritten
    only when the agent tests something else."""
    if agent is None:
        return
    key = (site, value, cmp)
    prev = agent.polling
    if prev is None or prev[0] != key:
        agent.polling = (key, False)  # one failed test (then a TWAIT, say) is no loop yet
        return
    if not prev[1]:
        _register(agent, site, value, cmp, KIND_TTEST, C.POLLING)
        agent.polling = (key, True)
    agent.poll_cell.value = agent.ctl.now_ms()


def _message(agent: Agent, site: WaitSite, value: int, cmp: int, cur: int, idx: int,
             elapsed: float, why: str) -> str:
    return (f"{site.label}: {agent.where()} {why} after {elapsed:.3f} s waiting on "
            f"{site.describe(idx)} for value {CMP_SYMBOLS[cmp]} {value}; it holds {cur}")


def _raise_aborted(agent: Agent, site: WaitSite, value: int, cmp: int, elapsed: float) -> None:
    idx, cur = first_unsatisfied(site.words, CMP_FUNCS[cmp], value)
    reason = C.ABORT_NAMES.get(agent.ctl.aborted(), "an abort")
    raise Aborted(_message(agent, site, value, cmp, cur, idx, elapsed, f"stopped by {reason}"))


def _raise_timeout(agent: Agent, site: WaitSite, value: int, cmp: int, elapsed: float) -> None:
    idx, cur = first_unsatisfied(site.words, CMP_FUNCS[cmp], value)
    raise WaitTimeout(_message(agent, site, value, cmp, cur, idx, elapsed,
                               f"timed out (wait_timeout={agent.wait_timeout:g} s)"))
