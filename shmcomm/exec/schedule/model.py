"""Schedule mode's execution models: the run's semantics (hazard or eager), one agent at a time.

:class:`ScheduleBlockModel` is the scheduled interleaving of one block: before every
instruction it takes a scheduling point (the scheduler may hand the turn to another agent
there), then passes the instruction to the block model of the run's semantics, and its scalar
hooks to that model's hooks, so checkers and any observer of the semantics keep working. The
semantics run on a :class:`StepClock`: queued pipe work, invisible remote stores and line
write-backs fall due ``schedule_delay`` x (live agents) x U(0.5, 1.5) steps after issue and
retire at the owner's first scheduling point after that. A block that returns with work still
pending stays a (draining) agent of the schedule until all of it has retired, so a consumer can
run between the producer's last notify and the arrival of its data. Jitter is off (the schedule
is the jitter), and the blocks' trace is stamped with the step count instead of wall time (so a
replay gives the same trace). Under eager semantics nothing is ever pending: a pure search of
interleavings.

:class:`ScheduleRankModel` adds the host agent: it runs only with the turn (from the rank's
start to its end), passes the turn while it joins a launch and while ``rt.barrier`` waits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core import control as C
from ...core.affinity import apart, pin_thread
from ...core.model import BlockModel, RankModel, StepClock
from ...core.waiting import KIND_SYNCALL, WaitSite, first_unsatisfied
from ...errors import Aborted
from ...types import CMP_FUNCS, WaitCmp
from .scheduler import BLOCKED, DONE, DRAINING, H_LIVE, OP, RUNNABLE, W_GM, Scheduler, agent_id
from .turnwatch import TurnWatch

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.gm import GlobalTensor
    from ...core.runtime import RankRuntime
    from ...core.tile import Tile

_WAIT, _TEST, _NOTIFY = OP["TWAIT"], OP["TTEST"], OP["TNOTIFY"]
_LOAD, _STORE, _SET, _WFLAG = OP["TLOAD"], OP["TSTORE"], OP["set_flag"], OP["wait_flag"]
_BAR, _DSB, _DCCI, _GM, _DRAIN = OP["pipe_barrier"], OP["dsb"], OP["dcci"], OP["gm_access"], OP["drain"]
_SYNC, _POST, _DWAIT, _DTEST = OP["SYNCALL"], OP["TPUT_ASYNC"], OP["AsyncEvent.Wait"], OP["AsyncEvent.Test"]
_POLLS_KEPT = 16  # the polled words an agent remembers (a loop may poll a few in turn)


class Polls:
    """What one agent's recent polls read: a poll that reads what its last poll of the same
    words read brings no news (a stale poll, the stuff of livelocks)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[Any, Any] = {}

    def stale(self, key: Any, values: Any) -> bool:
        seen = self.seen
        if seen.get(key, seen) == values:
            return True
        if len(seen) >= _POLLS_KEPT and key not in seen:
            seen.clear()  # a loop over many words reads news anyway
        seen[key] = values
        return False

    def test(self, sched: Scheduler, aid: int, sig: Any, value: int, cmp: int) -> bool:
        """Whether a failing ``TTEST`` of ``sig`` is stale (then published for the report)."""
        site = sig.site
        words = site.words
        values = tuple(w.load() for w in words)
        if not self.stale((site.sig_rank, site.sig_offset, len(words)), values):
            return False
        idx = first_unsatisfied(words, CMP_FUNCS[cmp], value)[0]
        w = words[max(idx, 0)]
        sched.poll_on(aid, site.sig_rank, w.offset if site.sig_rank >= 0 else site.sig_offset,
                      value, cmp)
        return True

    def load(self, sched: Scheduler, aid: int, ptr: Any, nbytes: int) -> bool:
        """Whether a ``gm_load`` of ``ptr`` is stale (then published for the report)."""
        try:
            values = ptr.windows.view(ptr.rank, ptr.offset, (1,), ptr.dtype).tobytes()
        except Exception:  # noqa: BLE001 -- a window this process cannot view: news, say
            return False
        if not self.stale(("gm", ptr.rank, ptr.offset, nbytes), values):
            return False
        sched.poll_on(aid, ptr.rank, ptr.offset, 0, 0, W_GM)
        return True


def wait_turns(sched: Scheduler, aid: int, op: int, site: Any, value: int, cmp: int,
               pending: Any = None, tick: Any = None) -> None:
    """Poll ``site`` at scheduling points until every word ``<cmp> value``: each failed poll
    blocks ``aid`` on the first unsatisfied word and passes the turn (``pending()`` says whether
    the agent still has hazard work to retire; ``tick()`` retires what is due). The first point
    blocks at once when the condition does not hold yet: running the agent there could only
    fail a poll that no other agent sees (a step, and a hand-off, that changes nothing)."""
    fn = CMP_FUNCS[cmp]
    idx = first_unsatisfied(site.words, fn, value)[0]
    if idx < 0:
        sched.switch(aid, op, RUNNABLE, bool(pending and pending()))
    else:
        sched.block_on(aid, site, idx, value, cmp)
        sched.switch(aid, op, BLOCKED, bool(pending and pending()), yielded=True)
    while True:
        if tick is not None:
            tick()
        idx, _cur = first_unsatisfied(site.words, fn, value)
        if idx < 0:
            return
        sched.block_on(aid, site, idx, value, cmp)
        sched.switch(aid, op, BLOCKED, bool(pending and pending()), yielded=True)


class Steps:
    """The run's step count as the clock of the semantics a scheduled run drives: work falls
    due ``delay`` x (live agents) x U(0.5, 1.5) steps after issue (per live agent: an agent's
    work stays pending for about ``delay`` of its owner's own steps whatever the run's size,
    so the others get as many chances to see it pending)."""

    def __init__(self, sched: Scheduler, delay: float) -> None:
        self.sched, self.delay = sched, delay

    def now(self) -> float:
        return float(self.sched.step())

    def due(self, rng: Any) -> float:
        return float(self.sched.step()) + self.delay * self.sched.live_count() * (0.5 + rng.random())


class ScheduleBlockModel(BlockModel):
    """One block of a scheduled run: a scheduling point before every instruction, then the
    instruction on the block model of the run's semantics (``sem``; ``ih``: its scalar hooks,
    ``None`` when it wants none). Every method of the seam is passed on explicitly."""

    def __init__(self, agent: Agent, rank_model: ScheduleRankModel, sem: BlockModel,
                 ih: Any) -> None:
        super().__init__(agent)
        self.sem, self.ih = sem, ih
        self.sched = rank_model.sched
        self.aid = agent_id(agent.rank, agent.slot)
        self.acts_on_fences = sem.acts_on_fences  # no fences to schedule where they do nothing
        self.polls = Polls()

    @property
    def tracer(self) -> Any:
        return self.sem.tracer

    @property
    def pending(self) -> bool:  # type: ignore[override]
        return self.sem.pending

    # -- the points ----------------------------------------------------------------------------

    def _point(self, op: int, yielded: bool = False, stale: bool = False) -> None:
        sem = self.sem
        tracer = sem.tracer
        if tracer:  # on disk before another agent runs: an aborted run loses none of it
            tracer.flush()
        pending = sem.pending
        self.sched.switch(self.aid, op, RUNNABLE, pending, yielded, stale and not pending)
        if sem.pending:
            sem.retire_due()

    def _has_pending(self) -> bool:
        return self.sem.pending

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.sem.start()
        self.sched.await_turn(self.aid, fresh=True)

    def finish(self) -> None:
        sem = self.sem
        while sem.pending:  # the block returned; its queued work retires at later steps
            self.sched.switch(self.aid, _DRAIN, DRAINING, True, yielded=True)
            sem.retire_due()
        sem.finish()  # its own end-of-block drain takes no points: nothing is left to retire
        self.sched.switch(self.aid, OP["block end"], DONE)

    def stop(self) -> None:
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, Aborted):
            self.agent.ctl.abort(C.ABORT_FAILURE)  # before anyone else takes a step
        self.sem.stop()
        self.sched.wake_all()

    def idle(self) -> None:
        self.sem.idle()

    def retire_due(self) -> None:
        self.sem.retire_due()

    # -- pipe instructions ---------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        self._point(_LOAD)
        self.sem.load(tile, src)

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        self._point(_STORE)
        self.sem.store(dst, tile, atomic)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        self._point(_SET)
        self.sem.set_flag(src, dst, event)

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        self._point(_WFLAG)
        self.sem.wait_flag(src, dst, event)

    def barrier(self, pipe: int) -> None:
        if self.sem.pending:  # with no queued work a drain changes nothing another agent sees
            self._point(_BAR)
        self.sem.barrier(pipe)

    def notify_drain(self) -> None:
        if self.sem.pending:  # (so TNOTIFY's own drain takes no point of its own then)
            self._point(_BAR)
        self.sem.notify_drain()

    def dsb(self, mode: int) -> None:
        if self.acts_on_fences:  # (an observer above may call it where the semantics ignores it)
            self._point(_DSB)
        self.sem.dsb(mode)

    def dcci(self, ptr: Any, mode: int) -> None:
        self._point(_DCCI)
        self.sem.dcci(ptr, mode)

    def mark(self, pipe: int) -> Any:
        return self.sem.mark(pipe)

    def completed(self, pipe: int, mark: Any) -> bool:
        return self.sem.completed(pipe, mark)

    def vector(self, op: Any) -> None:
        self.sem.vector(op)  # tile work on the block's own UB: nothing another agent sees

    # -- the DMA engine: a post, a Wait and a Test are scheduling points (a Test loop advances
    # the step clock its copies fall due on) -------------------------------------------------

    def dma_post(self, copy: Any) -> None:
        self._point(_POST)
        self.sem.dma_post(copy)

    def dma_wait(self, copy: Any) -> None:
        self._point(_DWAIT)
        self.sem.dma_wait(copy)

    def dma_test(self, copy: Any) -> bool:
        self._point(_DTEST)
        return self.sem.dma_test(copy)

    # -- scalar hooks --------------------------------------------------------------------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        self._point(_NOTIFY)
        if self.ih is not None:
            self.ih.notify(sig, value, op)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        if self.ih is not None:
            self.ih.wait(sig, value, cmp)  # observers see the wait start
        wait_turns(self.sched, self.aid, _WAIT, sig.site, value, cmp, self._has_pending,
                   self.sem.retire_due)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        if self.ih is not None:
            self.ih.waited(sig, value, cmp)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        holds = first_unsatisfied(sig.words, CMP_FUNCS[cmp], value)[0] < 0
        stale = not holds and self.polls.test(self.sched, self.aid, sig, value, cmp)
        self._point(_TEST, not holds, stale)  # a failing poll is a yield hint
        if self.ih is not None:
            self.ih.test(sig, value, cmp)

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        stale = not write and self.polls.load(self.sched, self.aid, ptr, nbytes)
        cache = self.agent.scalar_cache
        if stale and cache is not None and cache.behind(ptr):
            stale = False  # its cached line is old: the poll reads news once the line goes
        self._point(_GM, stale=stale)
        if self.ih is not None:
            self.ih.gm_access(op, ptr, nbytes, write, atomic)

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        if self.ih is not None:
            self.ih.copy_begin(op, dst, src)

    def copy_end(self, op: str) -> None:
        if self.ih is not None:
            self.ih.copy_end(op)

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        if self.ih is not None:
            self.ih.expect_blocks(kernel, param, count)

    def async_issue(self, event: Any) -> None:
        if self.ih is not None:
            self.ih.async_issue(event)

    def async_complete(self, event: Any) -> None:
        if self.ih is not None:
            self.ih.async_complete(event)

    # -- SYNCALL: its wait is a blocked agent's, enabled once the counter reaches the target ----

    def syncall_arrive(self, word: Any, target: int) -> None:
        if self.ih is not None:
            self.ih.syncall_arrive(word, target)

    def syncall_wait(self, word: Any, target: int) -> None:
        if self.ih is not None:
            self.ih.syncall_wait(word, target)
        wait_turns(self.sched, self.aid, _SYNC, syncall_site(self.agent, word), target,
                   WaitCmp.GE, self._has_pending, self.sem.retire_due)

    def syncall_done(self, word: Any, target: int) -> None:
        if self.ih is not None:
            self.ih.syncall_done(word, target)


def syncall_site(agent: Any, word: Any) -> WaitSite:
    """The wait site of SYNCALL's counter ``word``: a signal word, or (the hard form) the
    launch's counter in the control segment."""
    if word.rank >= 0:
        return WaitSite((word,), word.rank, word.offset, kind=KIND_SYNCALL, label="SYNCALL")
    return WaitSite((word,), -1, word.addr - agent.ctl.base, kind=KIND_SYNCALL, label="SYNCALL")


class HostHooks:
    """The host agent's scalar hooks: a ``TNOTIFY`` / ``TWAIT`` / ``TTEST`` in host code takes its
    scheduling points too (a wait would otherwise hold the turn while it polls)."""

    def __init__(self, sched: Scheduler, aid: int) -> None:
        self.sched, self.aid = sched, aid
        self.polls = Polls()

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.sched.switch(self.aid, _NOTIFY, RUNNABLE)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        wait_turns(self.sched, self.aid, _WAIT, sig.site, value, cmp)

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        pass

    def test(self, sig: Any, value: int, cmp: int) -> None:
        holds = first_unsatisfied(sig.words, CMP_FUNCS[cmp], value)[0] < 0
        stale = not holds and self.polls.test(self.sched, self.aid, sig, value, cmp)
        self.sched.switch(self.aid, _TEST, RUNNABLE, yielded=not holds, stale=stale)

    def copy_begin(self, op: str, dst: Any, src: Any) -> None:
        pass

    def copy_end(self, op: str) -> None:
        pass

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        pass

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        stale = not write and self.polls.load(self.sched, self.aid, ptr, nbytes)
        self.sched.switch(self.aid, _GM, RUNNABLE, stale=stale)

    def syncall_arrive(self, word: Any, target: int) -> None:
        pass

    def syncall_wait(self, word: Any, target: int) -> None:
        pass

    def async_issue(self, event: Any) -> None:
        pass

    def async_complete(self, event: Any) -> None:
        pass


class ScheduleRankModel(RankModel):
    """A scheduled run in one rank process: the host agent's turns, and the rank model of the
    run's semantics (``semantics(rt, step_clock)``: hazard or eager) on the step clock, every
    block of it behind a :class:`ScheduleBlockModel`."""

    concurrent_launches = False  # the host registers each launch's blocks while holding the turn
    inline_streams = True  # ... so a stream launch starts on the host thread, with the turn

    def __init__(self, rt: RankRuntime, strategy: Any,
                 semantics: Callable[[RankRuntime, StepClock], RankModel],
                 turn_cpu: int | None = None) -> None:
        super().__init__(rt)
        self.sched = Scheduler(rt.ctl, rt.windows.transport, strategy,
                               float(rt.config.livelock_seconds))
        self.sem = semantics(rt, Steps(self.sched, float(rt.config.schedule_delay)))
        self.host = agent_id(rt.rank, C.HOST_SLOT)
        rt.host_agent.hooks = HostHooks(self.sched, self.host)
        self.watch = TurnWatch(self.sched, rt.rank, float(rt.config.turn_timeout))
        self.watch.start()
        # the launcher keeps the turn on one CPU and this host thread off it until now (its
        # setup ran beside the turn's holder): its turns, and the block threads it starts, are
        # on that CPU, so a hand-off to it is a switch there, not a wake of another CPU
        self.off_turn = pin_thread(None if turn_cpu is None else (turn_cpu,))
        self.sched.await_turn(self.host)  # the host runs only with the turn, from its start

    @property
    def advice(self) -> Any:
        return self.sem.advice

    def block(self, agent: Agent) -> ScheduleBlockModel:
        agent.hooks = None
        sem = self.sem.block(agent)  # sets agent.hooks when the semantics wants them
        model = ScheduleBlockModel(agent, self, sem, agent.hooks)
        self.sched.register(model.aid)  # by the host, holding the turn: a deterministic order
        agent.hooks = model
        return model

    # -- the semantics' launch-level state -----------------------------------------------------

    def launch_issued(self, launch: Any, stream: Any) -> None:
        self.sem.launch_issued(launch, stream)

    def launch_starting(self, launch: Any) -> None:
        self.sem.launch_starting(launch)

    def launch_start(self) -> None:
        self.sem.launch_start()

    def launch_end(self) -> None:
        self.sem.launch_end()

    def launch_joined(self, launch: Any) -> None:
        self.sem.launch_joined(launch)

    def barrier_enter(self) -> None:
        self.sem.barrier_enter()

    def barrier_exit(self) -> None:
        self.sem.barrier_exit()

    # -- the host agent's turns ----------------------------------------------------------------

    def host_join(self) -> None:
        try:
            self.sched.join(self.host, OP["launch join"])
        except Aborted:
            pass  # the launch joins its blocks, which stop at their next point

    def host_join_launch(self, first: int, blocks: int) -> None:
        try:
            self.sched.join(self.host, OP["launch join"], (first, blocks))
        except Aborted:
            pass

    def host_wait(self, site: Any, value: int, cmp: int) -> None:
        wait_turns(self.sched, self.host, OP["rt.barrier"], site, value, cmp)

    def launch_poll(self, launch: Any) -> bool:
        """Ended when the scheduler saw each of its blocks end (not when their threads exit:
        that timing is not the schedule's); else a poll that yields the turn, so that a host
        looping on ``Launch.done`` lets the launch run."""
        state = self.sched.sh.state
        if all(state[agent_id(self.rt.rank, a.slot)] == DONE for a in launch.agents):
            return True
        self.sched.switch(self.host, OP["launch poll"], RUNNABLE, yielded=True)
        return False

    def close(self) -> None:
        self.sem.close()
        self.watch.stop()
        if self.rt.ctl.aborted():
            self.sched.wake_all()
            return
        try:
            self.sched.switch(self.host, OP["host end"], DONE)
        except Aborted:
            pass
        finally:  # what the rank does after its last turn runs off the turn's CPU again,
            # beside the agents still taking turns there; after the run's last turn it stays (that
            # CPU is idle now; the others are busy with the ranks' ends and the launcher, and a
            # move waits for them), also for the next run's setup if the process serves one
            if self.sched.sh.hdr[H_LIVE]:
                pin_thread(apart() or self.off_turn)
