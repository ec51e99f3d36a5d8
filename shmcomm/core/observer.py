"""The observer seam: what watches a run without changing it, and how it plugs in.

A run's execution model (:mod:`.model`: a semantics, driven by an interleaving) decides what
every instruction does. An *observer* only watches: the race detector, the trace, a user's
counter. It plugs in like trio's instruments: subclass the three bases below, override the
hooks you need (each has a no-op default), and the seam calls exactly the observers that
override a hook, at a fixed point relative to the model's own work, and nothing else.

* :class:`Observer`, the run's part in the launcher: made once before the ranks start (they
  inherit it through ``fork``; a pool's ranks receive it pickled). Its lifecycle is the seam's:
  ``shared_bytes`` of the control segment's shared area (its offset, ``shared_offset``, is
  assigned when the run is composed), ``prepare(ctl)`` before the ranks start, ``conns`` the
  launcher watches while they run (``receive(conn)``), ``finish()`` and ``collect(ctl,
  failures)`` at the end, ``summary()``, a line for the run's report, failed or passed, and
  ``pool_state`` / ``use_pool`` for state a pool makes once before it forks its ranks.
  ``rank(rt)`` makes its rank part in each rank process (``None``: nothing to watch there).
* :class:`RankObserver`, the rank process's part: launches, ``rt.barrier()``, the host's end;
  ``block(agent)`` makes the part of each block of a launch and ``host()`` the host agent's
  (``None``: not watched).
* :class:`BlockObserver`, one block thread's part: the block's instructions (see
  :data:`BLOCK_BEFORE` and :data:`BLOCK_AFTER` for when each hook is called).

The seam's dispatchers (:class:`ObservedRun`, :class:`ObservedRank`, :class:`ObservedBlock`)
are execution models themselves: they wrap the run's model, forward every call to it, and call
the observers' overriding hooks beside it. A dispatcher's methods are made once per set of
observer classes, so a hook nobody overrides costs one forwarding call, and a run without
observers has no dispatcher at all. They also own the hook hand-over: a block's
``agent.hooks`` (the scalar instructions' model) is the dispatcher when an observer or the
model wants scalar hooks, and ``None`` otherwise, so the eager fast path stays one ``is None``
check.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .model import BlockModel, RankModel, RunModel

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..config import Config
    from ..errors import Failure
    from .agent import Agent
    from .gm import GlobalTensor
    from .runtime import RankRuntime
    from .tile import Tile


class BlockObserver:
    """One block's observer (made by its :class:`RankObserver`'s ``block``). Every hook has the
    arguments of the :class:`~shmcomm.core.model.BlockModel` method of the same name; a hook of
    :data:`BLOCK_BEFORE` is called before the model acts (the instruction is issued: a queued
    copy has not run yet, a TWAIT has not checked yet), one of :data:`BLOCK_AFTER` after it (a
    barrier has drained, a flag is set)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    # -- issued: called before the model acts --------------------------------------------------
    def load(self, tile: Tile, src: GlobalTensor) -> None:
        """A TLOAD of ``src`` into ``tile`` is issued to MTE2."""

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        """A TSTORE of ``tile`` into ``dst`` is issued to MTE3 (``atomic``: AtomicType)."""

    def vector(self, op: Any) -> None:
        """A tile vector instruction (a ``VectorOp``) is issued to PIPE_V."""

    def notify(self, sig: Any, value: int, op: int) -> None:
        """Before TNOTIFY writes ``value`` with ``op`` to ``sig``."""

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        """At the start of TWAIT, before its first check."""

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        """TWAIT returned: the condition held."""

    def test(self, sig: Any, value: int, cmp: int) -> None:
        """Before TTEST reads."""

    def copy_begin(self, op: str, dst: GlobalTensor, src: GlobalTensor) -> None:
        """A TPUT / TGET / root collective starts moving ``src`` to ``dst``."""

    def copy_end(self, op: str) -> None:
        """The copy started by the matching ``copy_begin`` has issued all its work."""

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        """The kernel declared that its arrival count assumes ``count`` blocks."""

    def gm_access(self, op: str, ptr: Any, nbytes: int, write: bool, atomic: bool) -> None:
        """A scalar GM instruction is about to access ``nbytes`` at ``ptr``."""

    def async_issue(self, event: Any) -> None:
        """TPUT_ASYNC / TGET_ASYNC posted ``event``'s copy to the DMA engine."""

    def async_complete(self, event: Any) -> None:
        """``event``'s copy (and every earlier one of its session) has landed."""

    def syncall_arrive(self, word: Any, target: int) -> None:
        """SYNCALL added this block's arrival to ``word``."""

    def syncall_wait(self, word: Any, target: int) -> None:
        """SYNCALL is about to wait until ``word`` reaches ``target``."""

    def syncall_done(self, word: Any, target: int) -> None:
        """SYNCALL's wait returned: every participant of the round arrived."""

    def finish(self) -> None:
        """The kernel returned (called before the model completes its queued work and, in a
        scheduled run, hands its turn on for good: a record made here is made on its turn)."""

    def stop(self) -> None:
        """The kernel raised (``finish`` is not called)."""

    # -- done: called after the model acted ---------------------------------------------------
    def start(self) -> None:
        """The kernel is about to run."""

    def set_flag(self, src: int, dst: int, event: int) -> None:
        """``set_flag(src, dst, event)`` was issued."""

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        """``wait_flag(src, dst, event)`` returned."""

    def barrier(self, pipe: int) -> None:
        """``pipe_barrier(pipe)`` returned: the pipe's work so far has completed."""

    def notify_drain(self) -> None:
        """The ``pipe_barrier(PIPE_ALL)`` that ends a TNOTIFY returned."""

    def dsb(self, mode: int) -> None:
        """``dsb(mode)`` returned."""

    def dcci(self, ptr: Any, mode: int) -> None:
        """``dcci(ptr, mode)`` returned."""

    def native_dcci(self, word: Any, mode: int) -> None:
        """A native kernel's ``dcci`` of the line holding ``word`` (an int32 GMPtr) returned:
        the only trace of the plain loads and stores native code makes of that line (a2a3's
        idiom: write back after a plain store, invalidate before a plain load), which no model
        sees (called by the native bridge, not by the model)."""


# the hooks called before the model acts, and after it; every other BlockModel method (mark,
# completed, retire_due, idle, the DMA engine's) goes to the model alone
BLOCK_BEFORE = ("load", "store", "vector", "notify", "wait", "waited", "test", "copy_begin",
                "copy_end", "expect_blocks", "gm_access", "async_issue", "async_complete",
                "syncall_arrive", "syncall_wait", "syncall_done", "finish", "stop")
BLOCK_AFTER = ("start", "set_flag", "wait_flag", "barrier", "notify_drain", "dsb", "dcci")
# the scalar instructions' hooks: they reach a block's model only through agent.hooks
SCALAR_HOOKS = ("notify", "wait", "waited", "test", "copy_begin", "copy_end", "expect_blocks",
                "gm_access", "async_issue", "async_complete", "syncall_arrive", "syncall_wait",
                "syncall_done")
# the BlockModel methods that are no hook: forwarded to the model as they are
_BLOCK_FORWARD = ("idle", "retire_due", "mark", "completed", "dma_post", "dma_wait", "dma_test")


class RankObserver:
    """One rank process's observer (made by its :class:`Observer`'s ``rank``). The launch
    hooks are called after the model's, except ``host_join`` / ``host_join_launch`` and
    ``barrier_exit``, called before it (the model may pass a scheduled run's turn there)."""

    def __init__(self, rt: RankRuntime) -> None:
        self.rt = rt

    def block(self, agent: Agent) -> BlockObserver | None:
        """The observer of a launch's block ``agent`` (``None``: this block is not watched)."""
        return None

    def host(self) -> BlockObserver | None:
        """The observer of the host's own scalar instructions (TNOTIFY / TWAIT / TTEST and the
        scalar GM accesses in host code; ``None``: not watched)."""
        return None

    def launch_issued(self, launch: Any, stream: Any) -> None:
        """The host issued ``launch`` on ``stream`` (it starts later)."""

    def launch_starting(self, launch: Any) -> None:
        """``launch`` is about to start."""

    def launch_start(self) -> None:
        """A launch starts: its blocks are made next (under the runtime's lock)."""

    def launch_end(self) -> None:
        """Every block of a launch has returned or failed."""

    def launch_joined(self, launch: Any) -> None:
        """The host joined ``launch``."""

    def barrier_enter(self) -> None:
        """The host entered ``rt.barrier()``."""

    def barrier_exit(self) -> None:
        """The host leaves ``rt.barrier()``: every host arrived (called before the model's)."""

    def host_join(self) -> None:
        """The host is about to join the launch it just started (called before the model's)."""

    def host_join_launch(self, first: int, blocks: int) -> None:
        """The host is about to join a stream launch (called before the model's)."""

    def close(self) -> None:
        """The host function ended: the rank's last act (called after the model's, even when
        that raised)."""


RANK_BEFORE = ("barrier_exit", "host_join", "host_join_launch")
RANK_AFTER = ("launch_issued", "launch_starting", "launch_start", "launch_end", "launch_joined",
              "barrier_enter", "close")
_RANK_FORWARD = ("host_wait", "launch_poll")


class Observer:
    """A run's observer on the launcher's side, and the factory of its rank parts.

    Subclass it with a ``name`` (what reports and ``shmcomm.run(observers=...)`` call it),
    override ``rank`` to watch the ranks and the launcher hooks you need. ``shared_bytes``:
    bytes of the control segment's shared area it keeps (at ``ctl.extra_base +
    shared_offset`` in every process: counters the ranks add to and the launcher reads in
    ``collect``); ``max_shared_bytes(nranks)`` the most any run of ``nranks`` ranks takes (a
    pool reserves it once)."""

    name = ""
    shared_bytes = 0
    shared_offset = 0  # assigned when the run is composed
    read_deadline: float | None = None  # the run's deadline: no read of ``conns`` waits past it

    def __init__(self, config: Config) -> None:
        self.config = config
        self.conns: list[Connection] = []

    @classmethod
    def max_shared_bytes(cls, nranks: int) -> int:
        """The most shared bytes a run of ``nranks`` ranks takes (the class attribute's)."""
        return int(cls.shared_bytes)

    @classmethod
    def pool_state(cls, nranks: int) -> Any:
        """State a pool of ``nranks`` ranks makes once, before it forks them (``None``:
        none); every run of the pool gets it through ``use_pool``."""
        return None

    def use_pool(self, state: Any, rank: int | None) -> None:
        """Run on a pool: ``state`` (``pool_state``'s), in the launcher (``rank`` None) before
        ``prepare``, and in each rank process before the run."""

    def rank(self, rt: RankRuntime) -> RankObserver | None:
        """This observer's part in ``rt``'s rank process (``None``: it watches no rank)."""
        return None

    def prepare(self, ctl: Any) -> None:
        """Before the ranks start (or a pool's next run): set up the shared area."""

    def started(self) -> None:
        """Every rank process has started (not on a pool): drop what only the ranks need (the
        write ends of the observer's pipes)."""

    def receive(self, conn: Connection) -> list[Failure]:
        """``conn`` (one of ``conns``) is readable: failures to report now."""
        return []

    def finish(self) -> list[Failure]:
        """Every rank has ended: what the observer found (none: ``[]``)."""
        return []

    def collect(self, ctl: Any, failures: list[Failure]) -> None:
        """Before the run's memory goes: read the shared area back; may add to ``failures``."""

    def summary(self) -> str:
        """A line (or a few) for the run's report, on a passing run too (``""``: nothing)."""
        return ""

    def set_trace(self, path: str) -> None:
        """The run's trace goes to ``path``."""
        self.config = self.config.replace(trace=path)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["conns"] = []  # the launcher's ends stay in the launcher
        return state


def overrides(cls: type, base: type, name: str) -> bool:
    """Whether ``cls`` overrides ``base``'s hook ``name``."""
    return getattr(cls, name, None) is not getattr(base, name)


# -- the dispatchers ---------------------------------------------------------------------------

_MADE: dict[tuple, type] = {}


def _params(base: type, name: str) -> str:
    return ", ".join(list(inspect.signature(getattr(base, name)).parameters)[1:])


def _compile(name: str, body: list[str], params: str) -> Callable:
    src = f"def {name}(self{', ' if params else ''}{params}):\n" + "\n".join(
        "    " + line for line in body)
    scope: dict[str, Any] = {}
    # (named after this file: the frames of a dispatcher are the runtime's, never the kernel's
    # line a report names)
    exec(compile(src, __file__, "exec"), scope)  # noqa: S102 -- once per hook and observer set
    return scope[name]


def _methods(kinds: tuple[type, ...], observer: type, model: type, before: tuple[str, ...],
             after: tuple[str, ...], forward: tuple[str, ...]) -> dict[str, Any]:
    """The dispatcher's methods for observers of classes ``kinds`` (``observer``: their base,
    ``model``: the model's base): each hook calls the model and, before or after it, exactly
    the observers that override it; ``forward`` goes to the model alone. A scalar hook reaches
    the model through its own hooks (``self.ih``, ``None``: it wants none); the rank's
    ``launch_end`` and ``close`` call the observers even when the model's raised."""
    ns: dict[str, Any] = {}
    for name in before + after:
        who = [i for i, k in enumerate(kinds) if overrides(k, observer, name)]
        params = _params(model, name)
        calls = [f"o[{i}].{name}({params})" for i in who]
        own = (["ih = self.ih", "if ih is not None:", f"    ih.{name}({params})"]
               if name in SCALAR_HOOKS else [f"self.inner.{name}({params})"])
        body = ["o = self.obs"] if who else []
        if name in before:
            body += calls + own
        elif who and name in _ALWAYS_AFTER:
            body += ["try:", *("    " + line for line in own), "finally:",
                     *("    " + c for c in calls)]
        else:
            body += own + calls
        ns[name] = _compile(name, body, params)
    for name in forward:
        params = _params(model, name)
        ns[name] = _compile(name, [f"return self.inner.{name}({params})"], params)
    return ns


_ALWAYS_AFTER = ("launch_end", "close")  # a rank's: the observers' even when the model's raised


def _block_class(kinds: tuple[type, ...]) -> type:
    """The block dispatcher for observers of ``kinds`` (one per block, in order)."""
    made = _MADE.get(("block", kinds))
    if made is None:
        ns = _methods(kinds, BlockObserver, BlockModel, BLOCK_BEFORE, BLOCK_AFTER, _BLOCK_FORWARD)
        ns["observes_fences"] = any(overrides(k, BlockObserver, n) for k in kinds
                                    for n in ("barrier", "dsb", "notify_drain"))
        ns["scalar"] = any(overrides(k, BlockObserver, n) for k in kinds for n in SCALAR_HOOKS)
        made = _MADE[("block", kinds)] = type("ObservedBlock", (ObservedBlock,), ns)
    return made


class ObservedBlock(BlockModel):
    """A block's model under observers: the model's work, and beside it the overriding hooks
    of ``obs`` (its methods are made per set of observer classes: :func:`_block_class`, with
    ``observes_fences`` and ``scalar``: whether some observer watches barriers and fences, and
    the scalar instructions)."""

    observes_fences = False
    scalar = False

    def __init__(self, agent: Agent, inner: BlockModel, hooks: Any,
                 obs: tuple[BlockObserver, ...]) -> None:
        super().__init__(agent)
        self.inner = inner
        self.ih = hooks  # the model's scalar hooks (None: it wants none)
        self.obs = obs
        # an observer of barriers and fences needs every one (the detector's clocks do)
        self.acts_on_fences = self.observes_fences or inner.acts_on_fences
        self.idle = inner.idle  # type: ignore[method-assign]  # (every poll of a wait: no hop)

    @property
    def tracer(self) -> Any:
        return self.inner.tracer

    @property
    def pending(self) -> bool:  # type: ignore[override]
        return self.inner.pending

    @property
    def flags(self) -> set:  # the model's event flags
        return self.inner.flags

    @flags.setter
    def flags(self, value: set) -> None:
        pass  # (BlockModel.__init__ sets its own: the model's stay the ones)


def observe_block(agent: Agent, inner: BlockModel, obs: list[BlockObserver]) -> BlockModel:
    """``inner`` (``agent``'s block model, which set ``agent.hooks`` if it wants scalar hooks)
    under ``obs``; sets ``agent.hooks`` to what the scalar instructions must call."""
    if not obs:
        return inner
    block = _block_class(tuple(type(o) for o in obs))(agent, inner, agent.hooks, tuple(obs))
    if agent.hooks is not None or block.scalar:
        agent.hooks = block
    return block


class _HostHooks:
    """The host agent's scalar hooks under observers: theirs, then the model's own."""

    def __init__(self, obs: tuple[BlockObserver, ...], inner: Any) -> None:
        self.obs, self.inner = obs, inner

    def __getattr__(self, name: str) -> Any:
        if name not in SCALAR_HOOKS:
            raise AttributeError(name)
        calls = [getattr(o, name) for o in self.obs if overrides(type(o), BlockObserver, name)]
        inner = self.__dict__["inner"]
        own = getattr(inner, name, None) if inner is not None else None

        def hook(*args: Any) -> None:
            for c in calls:
                c(*args)
            if own is not None:
                own(*args)

        setattr(self, name, hook)  # made once per hook
        return hook


def _rank_class(kinds: tuple[type, ...]) -> type:
    """The rank dispatcher for observers of ``kinds`` (one per rank, in order)."""
    made = _MADE.get(("rank", kinds))
    if made is None:
        ns = _methods(kinds, RankObserver, RankModel, RANK_BEFORE, RANK_AFTER, _RANK_FORWARD)
        made = _MADE[("rank", kinds)] = type("ObservedRank", (ObservedRank,), ns)
    return made


class ObservedRank(RankModel):
    """A rank's model under observers. The observers are made before the model (a scheduled
    run's host waits in the model's making for its first turn: what the observers set up then
    is no work for the turn's CPU); the host's scalar hooks are theirs, then the model's."""

    def __init__(self, rt: RankRuntime, make_inner: Callable[[RankRuntime], RankModel],
                 obs: tuple[RankObserver, ...]) -> None:
        super().__init__(rt)
        self.obs = obs
        self.inner = make_inner(rt)
        hosts = tuple(h for o in obs if (h := o.host()) is not None)
        if hosts:
            rt.host_agent.hooks = _HostHooks(hosts, rt.host_agent.hooks)

    @property
    def concurrent_launches(self) -> bool:  # type: ignore[override]
        return self.inner.concurrent_launches

    @property
    def inline_streams(self) -> bool:  # type: ignore[override]
        return self.inner.inline_streams

    @property
    def advice(self) -> Any:
        return self.inner.advice

    def block(self, agent: Agent) -> BlockModel:
        agent.hooks = None
        obs = [b for o in self.obs if (b := o.block(agent)) is not None]
        return observe_block(agent, self.inner.block(agent), obs)


class ObservedRun(RunModel):
    """The run's model under observers, on the launcher's side: every launcher hook goes to the
    model and to each observer; the rank processes get an :class:`ObservedRank`."""

    def __init__(self, inner: RunModel, observers: list[Observer]) -> None:
        super().__init__(inner.config)
        self.inner = inner
        self.observers = observers
        offset = -(-inner.shared_bytes // 64) * 64
        for o in observers:  # each observer's shared area follows the model's
            o.shared_offset = offset
            offset += -(-o.shared_bytes // 64) * 64
        self._shared = offset

    def __call__(self, rt: RankRuntime) -> RankModel:
        ranks = tuple(r for o in self.observers if (r := o.rank(rt)) is not None)
        if not ranks:
            return self.inner(rt)
        return _rank_class(tuple(type(r) for r in ranks))(rt, self.inner, ranks)

    @property
    def shared_bytes(self) -> int:  # type: ignore[override]
        return self._shared

    @property
    def config(self) -> Config:  # a replay brings its own
        return self.inner.config

    @config.setter
    def config(self, value: Config) -> None:
        pass  # (RunModel.__init__ sets it: the model's stays the one)

    @property
    def schedule(self) -> Any:
        return self.inner.schedule

    @property
    def execution(self) -> Any:
        return self.inner.execution

    @execution.setter
    def execution(self, value: Any) -> None:
        self.inner.execution = value

    @property
    def first_rank(self) -> int | None:  # type: ignore[override]
        return self.inner.first_rank

    @property
    def one_at_a_time(self) -> bool:  # type: ignore[override]
        return self.inner.one_at_a_time

    @property
    def turn_cpu(self) -> int | None:
        return self.inner.turn_cpu

    @turn_cpu.setter
    def turn_cpu(self, cpu: int | None) -> None:
        self.inner.turn_cpu = cpu

    @property
    def conns(self) -> list[Connection]:
        return [c for o in self.observers for c in o.conns]

    @conns.setter
    def conns(self, value: list[Connection]) -> None:
        pass  # (each observer keeps its own)

    def use_pool(self, state: Any, rank: int | None) -> None:
        states = state or {}
        self.inner.use_pool(states.get(""), rank)
        for o in self.observers:
            if o.name in states:
                o.use_pool(states[o.name], rank)

    def prepare(self, ctl: Any) -> None:
        for o in self.observers:
            o.prepare(ctl)
        self.inner.prepare(ctl)

    def started(self) -> None:
        self.inner.started()
        for o in self.observers:
            o.started()

    @property
    def read_deadline(self) -> float | None:
        return self.inner.read_deadline

    @read_deadline.setter
    def read_deadline(self, value: float | None) -> None:
        self.inner.read_deadline = value
        for o in self.observers:
            o.read_deadline = value

    def receive(self, conn: Connection) -> list[Failure]:
        for o in self.observers:
            if any(c is conn for c in o.conns):
                return o.receive(conn)
        return []

    def finish(self) -> list[Failure]:
        found = list(self.inner.finish())
        for o in self.observers:
            found += o.finish()
        return found

    def collect(self, ctl: Any, failures: list[Failure]) -> None:
        self.inner.collect(ctl, failures)
        for o in self.observers:
            o.collect(ctl, failures)

    def summary(self) -> str:
        return "\n".join(s for o in self.observers if (s := o.summary()))

    def hint(self, host: Any, args: tuple) -> str:
        return self.inner.hint(host, args)

    def set_trace(self, path: str) -> None:
        self.inner.set_trace(path)
        for o in self.observers:
            o.set_trace(path)


class PoolStates(dict):
    """``name -> state`` of a pool's observers (their ``pool_state``s), made before the pool
    forks its ranks. A state may define ``closes_in(rank)`` (the ends of its pipes a rank
    process closes at its fork), ``forked()`` (the launcher's copies of the ranks' ends go) and
    ``close()`` (the pool ends)."""

    def closes_in(self, rank: int) -> list[Any]:
        return [c for s in self.values() if hasattr(s, "closes_in") for c in s.closes_in(rank)]

    def forked(self) -> None:
        for s in self.values():
            if hasattr(s, "forked"):
                s.forked()

    def close(self) -> None:
        for s in self.values():
            if hasattr(s, "close"):
                s.close()


def observe(model: RunModel, observers: list[Observer]) -> RunModel:
    """``model`` under ``observers`` (none: ``model`` itself)."""
    return ObservedRun(model, observers) if observers else model


__all__ = ["Observer", "RankObserver", "PoolStates", "BlockObserver", "ObservedRun", "ObservedRank",
           "ObservedBlock", "observe", "observe_block", "BLOCK_BEFORE", "BLOCK_AFTER",
           "RANK_BEFORE", "RANK_AFTER", "SCALAR_HOOKS"]
