"""Blocking waits that survive oversubscription: spin, yield, futex sleep, with a deadline.

The normal case is 8 ranks x 4 blocks on 2 cores, under the GIL. A pure Python spin holds the
GIL for a whole switch interval and starves the rank's other blocks, and spinning processes
starve whoever must notify them. So a wait, once its first check failed:

1. registers itself in the control segment (the deadlock detector reads it);
2. under ``adaptive`` spins for ``spin_us`` only while the run's active agents fit the cores and
   no other block of its own rank is running;
3. then yields (``os.sched_yield`` releases the GIL) for ``YIELD_S``;
4. then sleeps on the word with a cross-process futex, woken by ``TNOTIFY``, re-checking at
   least every ``SLEEP_MAX_S`` so that a missed wake costs latency, never a hang.

Every pass re-checks the abort flag and the deadline. The other policies (``spin``, ``yield``,
``futex``) use one phase only; they exist to be measured against ``adaptive``.
"""

from __future__ import annotations

import operator
import os
import time

from . import _atomics as at
from . import control as C
from .agent import Agent
from .errors import Aborted, WaitTimeout

CMP_FUNCS = (operator.eq, operator.ne, operator.gt, operator.ge, operator.lt, operator.le)
CMP_SYMBOLS = ("==", "!=", ">", ">=", "<", "<=")
YIELD_S = 0.002
SLEEP_MAX_S = 0.02
KIND_SIGNAL, KIND_HOST_BARRIER, KIND_LOCK = 0, 1, 2

_load = at.fast_load  # addresses in a WaitSite are c_void_p
_SEQ = at.SEQ_CST
_perf = time.perf_counter
_sched_yield = os.sched_yield


class WaitSite:
    """What a wait waits on: ``addrs`` (``c_void_p``, sequential sweep order) and how to report
    it. ``sleepers`` is the ``c_void_p`` of the futex-sleeper counter notifiers check."""

    __slots__ = ("addrs", "sig_rank", "sig_offset", "rows", "cols", "stride", "kind", "label",
                 "sleepers")

    def __init__(self, addrs: list[int] | tuple[int, ...], sig_rank: int, sig_offset: int,
                 rows: int = 1, cols: int = 1, stride: int = 1, kind: int = KIND_SIGNAL,
                 label: str = "TWAIT", sleepers: int | None = None) -> None:
        self.addrs = addrs
        self.sig_rank = sig_rank
        self.sig_offset = sig_offset
        self.rows, self.cols, self.stride = rows, cols, stride
        self.kind = kind
        self.label = label
        self.sleepers = sleepers  # futex-sleeper counter the notifier checks; None: always wake

    def describe(self, index: int = 0) -> str:
        where = ("the host barrier" if self.kind == KIND_HOST_BARRIER else
                 f"signal rank {self.sig_rank} offset {self.sig_offset:#x}")
        if self.rows * self.cols > 1:
            where += f" (element [{index // self.cols}, {index % self.cols}] of {self.rows}x{self.cols})"
        return where


def first_unsatisfied(addrs, fn, value: int) -> tuple[int, int]:
    """Sequential sweep as TWAIT does on hardware: index and value of the first failing element,
    or ``(-1, 0)`` when every element holds."""
    for i, a in enumerate(addrs):
        cur = _load(a, _SEQ)
        if not fn(cur, value):
            return i, cur
    return -1, 0


def wait_until(agent: Agent, site: WaitSite, value: int, cmp: int) -> None:
    """Block the calling agent until every word of ``site`` satisfies ``word <cmp> value``.

    Raises :class:`Aborted` when the run aborts and :class:`WaitTimeout` after the agent's
    ``wait_timeout``; both name the agent, the signal, the comparison and the observed value.
    """
    fn = CMP_FUNCS[cmp]
    addrs = site.addrs
    idx, cur = first_unsatisfied(addrs, fn, value)
    if idx < 0:
        return
    ctl = agent.ctl
    _register(agent, site, value, cmp)
    abort_addr = ctl.abort_cp
    t0 = _perf()
    deadline = t0 + agent.wait_timeout
    policy = agent.policy
    if policy == "spin":
        spin_until, yield_until = deadline, deadline
    elif policy == "yield":
        spin_until, yield_until = t0, deadline
    elif policy == "futex":
        spin_until = yield_until = t0
    else:
        spin_until = t0 + agent.spin_s if _may_spin(agent) else t0
        yield_until = spin_until + YIELD_S
    pipes = agent.pipes
    sleep_s = 0.0005
    n = 0
    try:
        while True:
            n += 1
            now = _perf()
            if now < spin_until:
                if n & 63 == 0 and _load(abort_addr, _SEQ):
                    _raise_aborted(agent, site, value, cmp, cur, idx, now - t0)
            else:
                if agent.active:
                    agent.set_active(False)
                if _load(abort_addr, _SEQ):
                    _raise_aborted(agent, site, value, cmp, cur, idx, now - t0)
                if now > deadline:
                    _raise_timeout(agent, site, value, cmp, cur, idx, now - t0)
                if pipes is not None:
                    pipes.idle()
                if now < yield_until:
                    _sched_yield()
                else:
                    _sleep(site, addrs[idx], cur, fn, value, min(sleep_s, deadline - now))
                    sleep_s = min(sleep_s * 2, SLEEP_MAX_S)
            idx, cur = first_unsatisfied(addrs, fn, value)
            if idx < 0:
                return
    finally:
        if not agent.is_host:
            agent.set_active(True)
        agent.set_state(C.RUNNING)


def _may_spin(agent: Agent) -> bool:
    """Spin only while spinning cannot starve anyone: the run's active agents fit the cores and
    no other block of this rank needs the GIL."""
    if at.load(agent.ctl.active_addr) > agent.ctl.ncores:
        return False
    return sum(1 for a in agent.rt.agents if a.active and a is not agent) == 0


def _sleep(site: WaitSite, addr, seen: int, fn, value: int, timeout: float) -> None:
    if site.sleepers is None:
        at.futex_wait(addr.value, seen, timeout)
        return
    at.fast_fetch_add(site.sleepers, 1, _SEQ)
    try:
        # re-check after announcing ourselves: a notifier that stored before our increment is
        # seen here, one that stores after it sees the sleeper and wakes us (both seq_cst)
        now = _load(addr, _SEQ)
        if now == seen and not fn(now, value):
            at.futex_wait(addr.value, seen, timeout)
    finally:
        at.fast_fetch_add(site.sleepers, -1, _SEQ)


def _register(agent: Agent, site: WaitSite, value: int, cmp: int) -> None:
    agent.seq += 1
    w = agent.ctl.agent_word(agent.rank, agent.slot)
    words = agent.ctl.words
    words[w + C.A_SEQ:w + C.A_KIND + 1] = (
        agent.seq, site.sig_rank, site.sig_offset, site.rows, site.cols, site.stride, cmp,
        value, agent.ctl.now_ms(), site.kind)
    agent.set_state(C.WAITING)


def _message(agent: Agent, site: WaitSite, value: int, cmp: int, cur: int, idx: int,
             elapsed: float, why: str) -> str:
    return (f"{site.label}: {agent.where()} {why} after {elapsed:.3f} s waiting on "
            f"{site.describe(idx)} for value {CMP_SYMBOLS[cmp]} {value}; it holds {cur}")


def _raise_aborted(agent, site, value, cmp, cur, idx, elapsed) -> None:
    reason = C.ABORT_NAMES.get(agent.ctl.aborted(), "an abort")
    raise Aborted(_message(agent, site, value, cmp, cur, idx, elapsed, f"stopped by {reason}"))


def _raise_timeout(agent, site, value, cmp, cur, idx, elapsed) -> None:
    raise WaitTimeout(_message(agent, site, value, cmp, cur, idx, elapsed,
                               f"timed out (wait_timeout={agent.wait_timeout:g} s)"))
