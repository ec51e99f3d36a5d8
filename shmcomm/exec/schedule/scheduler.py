"""The cross-process turn: one agent of the whole run executes at a time.

Every agent of a schedule-mode run (each block thread of each rank process, and each rank's host
thread) has an id, ``rank * SLOTS + slot``, and a state in the run's control segment (its
``extra`` area, set up by the launcher before the ranks fork). Only the agent holding the turn
runs; at a scheduling point it publishes its state, computes the *enabled* agents (runnable, or
blocked on a word whose condition now holds, or holding pending hazard work, or a host whose
blocks have all finished), asks the strategy which one runs the next step, records that choice
and, when it is another agent, stores that agent's ``go`` word, wakes its futex and sleeps on its
own until the turn comes back. Everything between two points is atomic with respect to every
other agent, so a run is a pure function of the choices.

The strategy's state (PRNG, PCT priorities, the step that is also the replay cursor) lives in
the same segment, advanced by whichever process holds the turn. No enabled agent while some are
blocked is a deadlock, found at once and deterministically: the deciding agent writes the
wait-for table into the segment, aborts the run, and the launcher reports it. So is a livelock:
a point may be *stale* (a ``TTEST`` / ``gm_load`` that read what the agent's last poll of the
same words read); ``LIVELOCK_PER_AGENT`` stale steps per live agent in a row (the step bound),
lasting ``livelock_seconds`` of wall time, while every enabled agent's last step was stale and
none has hazard work pending, end the run the same way. Any other step restarts the count. The
seconds tell a bounded poll from a livelock: a legal loop may poll past any step bound (pto-isa's
own timeout pattern polls a million times), but it gives up; a replay ends where its recording
did, so its report is the recorded one.

Layout of the shared area (little-endian, 8-byte words unless said)::

    header   step, rng state, live count, status, preemptions, last agent, strategy, depth,
             pct change index, pct step estimate, record-enabled flag, stale steps in a row,
             the stuck agent, when the stale steps began (monotonic ns) (HEADER words)
    live     int32 ids of the live agents, in registration order (the enabled list's order)
    state    int32 per agent id: UNREG, RUNNABLE, BLOCKED, JOINING, DRAINING, DONE
    pending  int32 per id: hazard work still to retire; yielded: a failed TTEST (PCT demotes)
    go       int32 per id, each on its own 64-byte line: 1 = your turn (the futex word)
    wait     per id: signal rank (-1: a control word), byte offset, comparison, value, what it
             is (signal, host barrier, SYNCALL, GM word); a stale poller's polled word too; how
             many waits it published (a process keeps what it read of a wait until this moves)
    stale    per id: its last step was a stale poll
    prio     per id: PCT priority
    changes  PCT change steps
    report   a deadlock's wait-for table (UTF-8)
    record   per step: the agent chosen (int16), the agent that decided (int16), its op (uint8)
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from ...core import control as C
from ...core.threads import release_deferred
from ...core.waiting import KIND_HOST_BARRIER, KIND_SYNCALL
from ...errors import Aborted, ShmcommError
from ...types import CMP_FUNCS, CMP_SYMBOLS

UNREG, RUNNABLE, BLOCKED, JOINING, DRAINING, DONE = range(6)
STATE_NAMES = ("unregistered", "runnable", "blocked", "joining", "draining", "done")

# ops of a scheduling point (the record and the trace name them)
OPS = ("start", "TNOTIFY", "TWAIT", "TTEST", "TLOAD", "TSTORE", "set_flag", "wait_flag",
       "pipe_barrier", "dsb", "dcci", "gm_access", "drain", "block start", "launch join",
       "rt.barrier", "host start", "host end", "block end", "SYNCALL", "TPUT_ASYNC",
       "AsyncEvent.Wait", "AsyncEvent.Test", "launch poll")
OP = {name: i for i, name in enumerate(OPS)}

# header words
H_STEP, H_RNG, H_LIVE, H_STATUS, H_PREEMPT, H_LAST, H_STRATEGY, H_DEPTH, H_PCT_NEXT, H_PCT_K = range(10)
MAX_PCT_DEPTH = 16  # PCT's deepest depth (its change steps' slots in the shared area)
H_RECORD_EN = 10  # 1: record every step's enabled agents (bounded exhaustive search)
H_STALE = 11  # steps in a row that were polls reading what the poller's last poll read
H_STUCK = 12  # ST_STUCK: the agent that held the turn outside the API
H_STALE_T0 = 13  # time.monotonic_ns() of the first of the stale steps in a row
HEADER = 16
ST_RUNNING, ST_DEADLOCK, ST_STEPS, ST_DIVERGED, ST_STUCK = 0, 1, 2, 3, 4
MAX_STEPS = 4_000_000  # a run longer than this is a livelock (a spin loop nothing ends)
# a livelock: this many stale polls in a row per live agent (at least LIVELOCK_MIN), nobody
# writing anything meanwhile, for livelock_seconds of wall time (a bounded poll of more steps
# than this gives up within those seconds); a poll that another agent satisfies ends the
# stretch at that agent's first step, whatever it does.
LIVELOCK_PER_AGENT = 5000
LIVELOCK_MIN = 20000
# what a blocked or polling agent waits on (its wkind), for the reports
W_SIGNAL, W_BARRIER, W_SYNCALL, W_GM = 0, 1, 2, 3
REPORT_BYTES = 16384
EN_STEPS = 1 << 16  # steps whose enabled agents can be recorded
EN_IDS = 1 << 20  # agent ids those records can hold
_WAIT_S = 0.05  # a waiting agent re-checks the abort flag this often
_CMP = CMP_FUNCS
_HOST = C.HOST_SLOT
_monotonic_ns = time.monotonic_ns  # one clock for every process of the run (CLOCK_MONOTONIC)


class ScheduleError(ShmcommError):
    """Schedule mode cannot go on: the step limit, or a replay that does not fit the program."""


def shared_bytes(nranks: int) -> int:
    """Bytes of the control segment's extra area that a run of ``nranks`` ranks needs."""
    return layout(nranks).size


# the parts of the shared area: name, item format, items (an int, or "agents" x an int)
_Format = Literal["q", "i", "h", "B"]  # the memoryview item formats the parts use
_PARTS: tuple[tuple[str, _Format, Any], ...] = (
    ("hdr", "q", HEADER), ("live", "i", ("agents", 1)), ("state", "i", ("agents", 1)),
    ("pending", "i", ("agents", 1)), ("yielded", "i", ("agents", 1)),
    ("go", "i", ("agents", 16)),  # one 64-byte line per agent: the futex words of the turn
    ("wrank", "i", ("agents", 1)), ("woff", "q", ("agents", 1)), ("wcmp", "i", ("agents", 1)),
    ("wval", "i", ("agents", 1)), ("wkind", "i", ("agents", 1)), ("wgen", "i", ("agents", 1)),
    ("stale", "i", ("agents", 1)),
    ("prio", "q", ("agents", 1)),
    ("changes", "q", MAX_PCT_DEPTH), ("report_area", "B", REPORT_BYTES),
    ("en_start", "i", EN_STEPS + 1),  # step i's enabled agents: en_ids[en_start[i]:en_start[i+1]]
    ("rec_next", "h", MAX_STEPS), ("rec_me", "h", MAX_STEPS), ("rec_op", "B", MAX_STEPS),
    ("en_ids", "h", EN_IDS),
)
_SIZES = {"q": 8, "i": 4, "h": 2, "B": 1}


class Layout:
    """Byte offsets and sizes of the shared area's parts (the same in every process)."""

    def __init__(self, nranks: int) -> None:
        self.nagents = n = nranks * C.SLOTS
        self.parts: dict[str, tuple[int, int, _Format]] = {}  # name -> (offset, bytes, format)
        off = 0
        for name, fmt, items in _PARTS:
            count = n * items[1] if isinstance(items, tuple) else items
            nbytes = count * _SIZES[fmt]
            self.parts[name] = (off, nbytes, fmt)
            off = -(-(off + nbytes) // 64) * 64
        self.size = off
        self.go = self.parts["go"][0]
        self.report = self.parts["report_area"][0]
        self.rec_next = self.parts["rec_next"][0]


@functools.lru_cache(maxsize=8)
def layout(nranks: int) -> Layout:
    """The layout of ``nranks`` ranks (made once: every run's launcher and ranks ask)."""
    return Layout(nranks)


class Shared:
    """Typed views of the shared area at ``base`` (memoryviews: fast scalar access), one
    attribute per part of ``_PARTS``."""

    hdr: memoryview
    live: memoryview
    state: memoryview
    pending: memoryview
    yielded: memoryview
    wrank: memoryview
    woff: memoryview
    wcmp: memoryview
    wval: memoryview
    wkind: memoryview
    wgen: memoryview
    stale: memoryview
    prio: memoryview
    changes: memoryview
    rec_next: memoryview
    rec_me: memoryview
    rec_op: memoryview
    en_start: memoryview
    en_ids: memoryview

    def __init__(self, base: int, nranks: int) -> None:
        self.layout = lay = layout(nranks)
        self.base = base
        self.raw = raw = memoryview((ctypes.c_char * lay.size).from_address(base)).cast("B")
        for name, (off, nbytes, fmt) in lay.parts.items():
            setattr(self, name, raw[off:off + nbytes].cast(fmt))

    def go_addr(self, agent: int) -> int:
        return self.base + self.layout.go + 64 * agent

    def live_ids(self) -> list[int]:
        return list(self.live[:self.hdr[H_LIVE]])

    def set_report(self, text: str) -> None:
        data = text.encode()[:REPORT_BYTES - 1] + b"\0"
        off = self.layout.report
        self.raw[off:off + len(data)] = data

    def report(self) -> str:
        off = self.layout.report
        data = bytes(self.raw[off:off + REPORT_BYTES])
        return data.split(b"\0", 1)[0].decode(errors="replace")

    def release(self) -> None:
        """Drop the views (the segment can then be unmapped)."""
        for name in self.layout.parts:
            getattr(self, name).release()
        self.raw.release()


def record_enabled(sh: Shared, step: int, enabled: Sequence[int]) -> None:
    """Note the agents that were enabled at ``step`` (while the records have room)."""
    if step >= EN_STEPS:
        return
    start = sh.en_start[step]
    end = start + len(enabled)
    if end > EN_IDS:
        return
    for i, a in enumerate(enabled):
        sh.en_ids[start + i] = a
    sh.en_start[step + 1] = end


agent_id = C.agent_id


def agent_name(aid: int) -> str:
    rank, slot = divmod(aid, C.SLOTS)
    return f"rank {rank} " + ("host" if slot == C.HOST_SLOT else f"block {slot}")


def register(sh: Shared, aid: int, state: int = RUNNABLE) -> None:
    """Add ``aid`` to the live agents (called by the turn holder, or before the ranks fork)."""
    n = sh.hdr[H_LIVE]
    sh.live[n] = aid
    sh.hdr[H_LIVE] = n + 1
    sh.state[aid] = state
    sh.pending[aid] = 0
    sh.yielded[aid] = 0
    sh.stale[aid] = 0


class Scheduler:
    """One process's handle on the run's turn: wait for it, pass it on.

    ``strategy`` (:mod:`.strategies`) picks the next agent; ``transport`` gives the words that
    blocked agents wait on and the futex words of the turn.
    """

    def __init__(self, ctl: C.Control, transport: Any, strategy: Any,
                 livelock_seconds: float = 10.0) -> None:
        self.ctl = ctl
        self.livelock_ns = int(livelock_seconds * 1e9)
        # a replay ends a livelock where its recording did (the recorded steps' end), not on
        # this run's clock: the same report
        choices = getattr(strategy, "choices", None) if strategy.name == "replay" else None
        self.replay_end = None if choices is None else len(choices)
        kept = _kept(ctl, transport)
        self.sh = kept.sh
        self.transport = transport
        self.strategy = strategy
        self.abort = ctl.abort_cell
        self._go, self._turns, self._words, self._cells = kept.go, kept.turns, kept.words, kept.cells
        # agent id -> the thread it runs on (in this process): Python ident, kernel thread id
        self.threads: dict[int, tuple[int, int]] = {}
        # blocks that got the turn at their start and have not reached a point since: their
        # first point offers the same choice as their start did (nothing of theirs ran between)
        self._fresh: set[int] = set()
        # blocked agent -> (its wait's number, the waited word's cell, comparison, value): what
        # this process read of each wait, until its agent publishes another (this run's numbers)
        self._waits: dict[int, tuple[int, Any, Any, int]] = {}

    # -- words ---------------------------------------------------------------------------------

    def _go_word(self, aid: int) -> Any:
        w = self._go.get(aid)
        if w is None:
            w = self._go[aid] = self.transport.control_word(self.sh.go_addr(aid))
        return w

    def _word(self, rank: int, offset: int) -> Any:
        key = (rank, offset)
        w = self._words.get(key)
        if w is None:
            t = self.transport
            w = t.control_word(self.ctl.base + offset) if rank < 0 else t.word(rank, offset)
            self._words[key] = w
        return w

    # -- the turn ------------------------------------------------------------------------------

    def step(self) -> int:
        return self.sh.hdr[H_STEP]

    def live_count(self) -> int:
        return self.sh.hdr[H_LIVE]

    def register(self, aid: int) -> None:
        register(self.sh, aid)

    def join(self, aid: int, op: int, slots: tuple[int, int] | None = None) -> None:
        """The host ``aid`` joins its blocks: all of its rank's, or (``slots``: first slot and
        count) one launch's, so a stream launch can be joined while another stream runs."""
        sh = self.sh
        sh.woff[aid], sh.wval[aid] = slots if slots is not None else (0, C.MAX_BLOCKS)
        self.switch(aid, op, JOINING)

    def await_turn(self, aid: int, fresh: bool = False, passed_to: int | None = None) -> None:
        """Sleep until ``aid`` holds the turn; raises :class:`Aborted` when the run aborts.
        ``fresh``: a block's start (its first point then takes no step of its own).
        ``passed_to``: the agent ``aid`` just gave the turn to (its thread is woken first)."""
        turn = self._turns.get(aid)
        if turn is None:  # its go word, and a plain view of it
            turn = self._turns[aid] = (self._go_word(aid),
                                       ctypes.c_int32.from_address(self.sh.go_addr(aid)))
        go, cell = turn
        ident = threading.get_ident()
        known = self.threads.get(aid)
        if known is None or known[0] != ident:  # (its kernel id costs a system call to ask)
            self.threads[aid] = (ident, threading.get_native_id())
        # the blocks a launch handed the turn holder, now that it passed it (the one it passed
        # the turn to first, if it is one of them: they are keyed by agent id)
        release_deferred(passed_to)
        while cell.value == 0:
            if self.abort.value:
                self._raise_aborted(aid)
            go.sleep(0, _WAIT_S, _never)
        cell.value = 0  # we hold the turn: nobody else writes our go word until we pass it on
        if self.abort.value:
            self._raise_aborted(aid)
        if fresh:
            self._fresh.add(aid)

    def _raise_aborted(self, aid: int) -> None:
        reason = C.ABORT_NAMES.get(self.ctl.aborted(), "an abort")
        raise Aborted(f"schedule: {agent_name(aid)} stopped by {reason} while waiting for its turn")

    def block_on(self, aid: int, site: Any, index: int, value: int, cmp: int) -> None:
        """Publish that ``aid`` waits for word ``index`` of ``site`` to satisfy ``<cmp> value``."""
        sh = self.sh
        sh.wrank[aid] = site.sig_rank
        w = site.words[index]
        sh.woff[aid] = w.offset if site.sig_rank >= 0 else site.sig_offset
        sh.wcmp[aid] = cmp
        sh.wval[aid] = value
        sh.wkind[aid] = (W_BARRIER if site.kind == KIND_HOST_BARRIER else
                         W_SYNCALL if site.kind == KIND_SYNCALL else W_SIGNAL)
        sh.wgen[aid] += 1

    def poll_on(self, aid: int, rank: int, offset: int, value: int, cmp: int,
                kind: int = W_SIGNAL) -> None:
        """Publish what the stale poll ``aid`` is about to take reads (the livelock report)."""
        sh = self.sh
        sh.wrank[aid], sh.woff[aid], sh.wcmp[aid], sh.wval[aid] = rank, offset, cmp, value
        sh.wkind[aid] = kind

    def switch(self, aid: int, op: int, state: int, pending: bool = False,
               yielded: bool = False, stale: bool = False) -> None:
        """A scheduling point of ``aid`` (which holds the turn): publish ``state``, let the
        strategy choose who runs the next step, and return once ``aid`` holds the turn again
        (at once if it was chosen). ``DONE`` hands the turn on and returns without waiting.
        ``stale``: the step is a poll that reads what the agent's last poll of the same words
        read (no news); a long enough run of such steps by every live agent is a livelock."""
        if self.abort.value:
            self._raise_aborted(aid)
        if aid in self._fresh:
            self._fresh.discard(aid)
            if state == RUNNABLE and not pending:
                # the block's first point right after its start: only its own local code ran
                # since the strategy chose it, so a step here would repeat that choice (every
                # schedule it adds equals one where the others ran before the block started)
                return
        sh = self.sh
        sh.state[aid] = state
        sh.pending[aid] = 1 if pending else 0
        sh.yielded[aid] = 1 if yielded else 0
        sh.stale[aid] = 1 if stale else 0
        if state == DONE:
            self._remove_live(aid)
        hdr = sh.hdr
        step = hdr[H_STEP]
        if step >= MAX_STEPS:
            hdr[H_STATUS] = ST_STEPS
            raise ScheduleError(f"schedule: {agent_name(aid)} reached the step limit ({MAX_STEPS} "
                                "scheduling points): a livelock, e.g. a TTEST loop nothing ends")
        if stale:
            n = hdr[H_STALE] = hdr[H_STALE] + 1
            if n == 1:
                hdr[H_STALE_T0] = _monotonic_ns()
            elif n >= max(LIVELOCK_MIN, LIVELOCK_PER_AGENT * hdr[H_LIVE]) and self._long(step):
                self._check_livelock(aid)
        elif hdr[H_STALE]:
            hdr[H_STALE] = 0
            # a step that was not a stale poll may be news for every poller: none is stale
            # until it polls again (else PCT would keep starving a poller whose word changed)
            flags = sh.stale
            for a in range(len(flags)):
                flags[a] = 0
        enabled = self.enabled()
        if not enabled:
            if hdr[H_LIVE]:
                self._deadlock(aid)
            return  # the run's last agent is done
        nxt = self.strategy.next_agent(sh, enabled, aid, step)
        if nxt < 0:
            hdr[H_STATUS] = ST_DIVERGED
            raise ScheduleError(f"schedule: the replayed schedule does not fit this run at step "
                                f"{step}: its agent is not enabled ({agent_name(aid)} decided)")
        if nxt != aid and state in (RUNNABLE, DRAINING) and aid in enabled:
            hdr[H_PREEMPT] += 1
        sh.rec_next[step] = nxt
        sh.rec_me[step] = aid
        sh.rec_op[step] = op
        if hdr[H_RECORD_EN]:
            record_enabled(sh, step, enabled)
        hdr[H_STEP] = step + 1
        hdr[H_LAST] = nxt
        if nxt == aid:
            return
        self._go_word(nxt).set(1)  # an exchange and a futex wake: the other agent runs now
        if state != DONE:
            self.await_turn(aid, passed_to=nxt)

    def _remove_live(self, aid: int) -> None:
        sh = self.sh
        n = sh.hdr[H_LIVE]
        live = sh.live
        ids = live[:n].tolist()
        if aid in ids:
            i = ids.index(aid)
            for j in range(i, n - 1):  # the later ones move up: registration order stays
                live[j] = ids[j + 1]
            sh.hdr[H_LIVE] = n - 1

    def enabled(self) -> list[int]:
        """The live agents that can take a step now, in registration order."""
        sh = self.sh
        state, wgen, waits = sh.state, sh.wgen, self._waits
        out = []
        for a in sh.live[:sh.hdr[H_LIVE]].tolist():  # (the hottest loop of a scheduled run)
            s = state[a]
            if s == RUNNABLE or s == DRAINING:
                out.append(a)
            elif s == BLOCKED:
                w = waits.get(a)
                if w is None or w[0] != wgen[a]:
                    w = self._wait(a)
                if w[2](w[1].value, w[3]):
                    out.append(a)
                    sh.yielded[a] = 0  # it can make progress: no longer a mere retirement step
                elif sh.pending[a]:
                    out.append(a)  # only to retire its pending work (yielded: PCT runs it last)
            elif s == JOINING:  # a host joining the blocks in its slots [woff, woff + wval)
                lo = a - _HOST + sh.woff[a]
                for b in range(lo, lo + sh.wval[a]):
                    sb = state[b]
                    if sb != UNREG and sb != DONE:  # live (the first one still running ends it)
                        break
                else:
                    out.append(a)
        return out

    def _wait(self, aid: int) -> tuple[int, Any, Any, int]:
        """What blocked agent ``aid`` waits for, as published: its number, the acquire-read cell
        of the waited word (a plain read on x86-64: the turn's hand-off already orders every
        earlier write before this read), the comparison and the value."""
        sh = self.sh
        key = sh.wrank[aid] << 40 | sh.woff[aid]  # the words' cells are kept from run to run
        cell = self._cells.get(key)
        if cell is None:
            rank, offset = key >> 40, key & ((1 << 40) - 1)
            cell = self._cells[key] = self._word(rank, offset).cell
        w = self._waits[aid] = (sh.wgen[aid], cell, _CMP[sh.wcmp[aid]], sh.wval[aid])
        return w

    def _deadlock(self, aid: int) -> None:
        """No live agent can take a step: write the wait-for table, abort, wake everyone."""
        sh = self.sh
        self.end_run(["deadlock (schedule mode): no agent can take a step; at step "
                      f"{sh.hdr[H_STEP]} every live agent waits"], ST_DEADLOCK, C.ABORT_DEADLOCK)
        self._raise_aborted(aid)

    def _long(self, step: int) -> bool:
        """Whether the stale steps in a row have lasted long enough to be a livelock: for
        ``livelock_seconds`` (a replay: up to the recorded run's last step)."""
        if self.replay_end is not None:
            return step >= self.replay_end
        return _monotonic_ns() - self.sh.hdr[H_STALE_T0] >= self.livelock_ns

    def _check_livelock(self, aid: int) -> None:
        """The stale polls ran past the bound: a livelock if every agent that can take a step
        polls too and no agent has work pending (which would land at its own later steps)."""
        sh = self.sh
        live = sh.live_ids()
        if any(sh.pending[a] for a in live):
            return
        if not all(sh.stale[a] for a in self.enabled()):
            return  # an agent with news has not run yet: the strategy will run it
        self.end_run([f"deadlock (schedule mode): a livelock: for the last {sh.hdr[H_STALE]} "
                      f"steps every agent that could take a step polled words that no agent "
                      f"changed (a TTEST or gm_load loop that nothing ends); at step "
                      f"{sh.hdr[H_STEP]}"], ST_DEADLOCK, C.ABORT_DEADLOCK)
        self._raise_aborted(aid)

    def end_run(self, head: list[str], status: int, reason: int) -> None:
        """End the run: ``head`` and the wait-for table as its report, abort, wake everyone."""
        sh = self.sh
        sh.set_report("\n".join(head + self.table()))
        sh.hdr[H_STATUS] = status
        self.ctl.abort(reason)
        self.wake_all()

    def table(self) -> list[str]:
        """The wait-for table: what every live agent waits on or polls, or its state."""
        sh = self.sh
        lines = ["  agent            waits on                             cmp  expected  current"]
        for a in sh.live_ids():
            s = sh.state[a]
            if s == BLOCKED or (s == RUNNABLE and sh.stale[a]):
                r, off, kind = sh.wrank[a], sh.woff[a], sh.wkind[a]
                where = ("the host barrier" if kind == W_BARRIER else
                         "SYNCALL (its launch's blocks)" if kind == W_SYNCALL and r < 0 else
                         f"gm rank {r} offset {off:#x}" if kind == W_GM else
                         f"signal rank {r} offset {off:#x}")
                if s == RUNNABLE:
                    where = ("polls (gm_load) " if kind == W_GM else "polls (TTEST) ") + where
                if kind == W_GM:
                    lines.append(f"  {agent_name(a):<16} {where}")
                    continue
                cur = self._word(r, off).load()
                lines.append(f"  {agent_name(a):<16} {where:<36} {CMP_SYMBOLS[sh.wcmp[a]]:<4} "
                             f"{sh.wval[a]:<9} {cur}")
            else:
                lines.append(f"  {agent_name(a):<16} {STATE_NAMES[s]}")
        return lines

    def wake_all(self) -> None:
        """Wake every live agent's turn futex (after an abort: they see it and stop)."""
        for a in self.sh.live_ids():
            self._go_word(a).wake()


class _Kept:
    """What a process's schedulers share from run to run: the views of the shared area and
    the words of the turn and of waits (made once; a pool's rank serves many runs on the same
    memory)."""

    def __init__(self, ctl: C.Control, transport: Any) -> None:
        self.transport = transport
        self.sh = Shared(ctl.extra_base, ctl.nranks)
        self.go: dict[int, Any] = {}
        self.turns: dict[int, tuple[Any, Any]] = {}
        self.words: dict[tuple[int, int], Any] = {}
        self.cells: dict[int, Any] = {}  # rank << 40 | offset -> the word's read cell


_KEPT: dict[tuple[int, int, int], _Kept] = {}


def _kept(ctl: C.Control, transport: Any) -> _Kept:
    """This process's kept views and words for ``ctl``'s segment and ``transport``."""
    key = (ctl.base, ctl.extra_base, ctl.nranks)
    kept = _KEPT.get(key)
    if kept is None or kept.transport is not transport:
        kept = _KEPT[key] = _Kept(ctl, transport)
    return kept


os.register_at_fork(after_in_child=_KEPT.clear)  # a child's schedulers make their own


def _never(_value: int) -> bool:
    return False


def summarize(sh: Shared) -> dict[str, Any]:
    """The recorded schedule of a finished run: choices, deciders, ops, status, preemptions."""
    n = sh.hdr[H_STEP]
    enabled: list[list[int]] = []
    if sh.hdr[H_RECORD_EN]:
        starts = sh.en_start[:min(n, EN_STEPS) + 1].tolist()
        for i in range(len(starts) - 1):
            if starts[i + 1] < starts[i]:
                break  # the records ran out of room here
            enabled.append(sh.en_ids[starts[i]:starts[i + 1]].tolist())
    return dict(steps=n, enabled=enabled, next=bytes(sh.rec_next[:n].cast("B")) if n else b"",
                me=bytes(sh.rec_me[:n].cast("B")) if n else b"", ops=bytes(sh.rec_op[:n]),
                status=sh.hdr[H_STATUS], preemptions=sh.hdr[H_PREEMPT], report=sh.report())


def choices_of(data: bytes) -> Sequence[int]:
    """The int16 agent ids packed in ``data``."""
    return memoryview(data).cast("h").tolist() if data else []
