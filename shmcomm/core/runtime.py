"""The device context a kernel sees, and the host runtime of one rank process.

``DeviceContext`` mirrors pto-isa's ``CommDeviceContext`` plus the block identity: ``rank``,
``nranks``, ``block_idx``, ``block_num``, ``signal_base`` (int32 GM pointer to this rank's signal
matrix) and ``ctx.tile`` for UB buffers.

``RankRuntime`` is the core of the ``rt`` a host function receives: symmetric allocation, kernel
launches (``block`` threads that all start, and a launch that returns when all finish), collective
signal reset and a host barrier. The run's execution model (:mod:`shmcomm.core.model`) is given
to it once and bound to every block of every launch.
"""

from __future__ import annotations

import threading
import traceback
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import MAX_BLOCKS, Config, check_block_threads
from ..errors import Aborted, ArgumentError, ShmcommError
from ..types import WaitCmp
from . import control as C
from . import threads as block_threads
from .agent import FLAGS, Agent, bind
from .agent import _tls as _agent_tls
from .gm import GMPtr, Windows, as_dtype
from .heap import SymmetricArray, SymmetricHeap
from .model import RankModel
from .tile import Tile, assign, block_ub, tile_shape
from .waiting import KIND_HOST_BARRIER, WaitSite, wait_until


class DeviceContext:
    """What a kernel gets as ``ctx``: identity of the block and access to the windows."""

    __slots__ = ("rank", "nranks", "block_idx", "block_num", "signal_base", "windows", "_agent",
                 "rt")

    def __init__(self, agent: Agent) -> None:
        rt = agent.rt
        self._agent = agent
        self.rt = rt
        self.rank = rt.rank
        self.nranks = rt.nranks
        self.block_idx = agent.block_idx
        self.block_num = agent.block_num
        self.signal_base = rt.signal_base
        self.windows = rt.windows

    def tile(self, shape: Any, dtype: Any, valid: Any = None, addr: int | None = None) -> Tile:
        """A block-local UB tile; all tiles of a block together fit ``ub_bytes``.

        ``valid=(valid_row, valid_col)`` sets its valid region (PTO's dynamic ``ValidRow`` /
        ``ValidCol``; default the whole tile). ``addr`` places it at that byte offset of the
        block's UB, as ``TASSIGN(tile, addr)``: tiles placed over the same bytes share them.
        """
        rows, cols = tile_shape(shape)
        agent = self._agent
        if addr is not None:
            t = Tile((rows, cols), dtype, valid)
            assign(t, block_ub(agent), addr, "ctx.tile: addr")
            return t
        need = rows * cols * as_dtype(dtype, "tile dtype").itemsize  # checked before allocating
        cap = agent.rt.config.ub_bytes
        if agent.ub_used + need > cap:
            raise ArgumentError(
                f"ctx.tile: {need} bytes requested but only {cap - agent.ub_used} of "
                f"ub_bytes={cap} are left in {agent.where()}'s UB")
        t = Tile((rows, cols), dtype, valid)
        agent.ub_used += t.nbytes
        return t

    def expect_blocks(self, count: int, kernel: str, param: str = "num_blocks") -> None:
        """Declare that ``kernel``'s intra-rank arrival count assumes ``count`` blocks (its
        parameter ``param``): the hazard checker ``arrival-count`` reports a launch whose real
        block count differs (more blocks: arrivals missed; fewer: a hang)."""
        hooks = self._agent.hooks
        if hooks is not None:
            hooks.expect_blocks(kernel, param, count)

    def ptr(self, rank: int, offset: int, dtype: Any = np.int32) -> GMPtr:
        """A GM pointer to byte ``offset`` of ``rank``'s window."""
        return GMPtr(self.windows, rank, offset, dtype)

    @property
    def seed(self) -> int:
        return self.rt.config.seed

    def __repr__(self) -> str:
        return (f"DeviceContext(rank={self.rank}/{self.nranks}, block={self.block_idx}/"
                f"{self.block_num})")


class KernelError(ShmcommError):
    """A block of a launch raised; ``block``, ``exc`` and ``tb`` tell which and where."""

    def __init__(self, rank: int, block: int, exc: BaseException, tb: str) -> None:
        self.rank, self.block, self.exc, self.tb = rank, block, exc, tb
        super().__init__(f"rank {rank} block {block}: {type(exc).__name__}: {exc}")


def _reported_in_threads(args: Any) -> None:
    """``threading.excepthook`` of a rank process: a launch's failure (or the abort it caused)
    raised in a host thread of the user's is shmcomm's to report, once, with its rank and block;
    Python's "Exception in thread" traceback would only come first and repeat it."""
    if not isinstance(args.exc_value, (KernelError, Aborted)):
        _python_excepthook(args)


_python_excepthook = threading.excepthook


def report_thread_failures_once() -> None:
    """Make this (rank) process's ``threading.excepthook`` leave launch failures to shmcomm's
    report (see :func:`_reported_in_threads`); called once per rank process, before any run."""
    threading.excepthook = _reported_in_threads


class RankRuntime:
    """The host runtime of one rank process (``rt`` in ``host(rt)``)."""

    def __init__(self, rank: int, config: Config, windows: Windows, ctl: C.Control,
                 model: Callable[[RankRuntime], RankModel]) -> None:
        self.rank = rank
        self.nranks = config.nranks
        self.config = config
        self.windows = windows
        self.ctl = ctl
        self.heap = SymmetricHeap(windows, rank)
        self.signal_base = GMPtr(windows, rank, 0, np.int32)
        self.launches = 0
        # what library kernels keep across launches of this run (their prepared signals), by name
        self.kernel_state: dict[str, Any] = {}
        self._regions_digest = 0  # of the rt.signal_region calls so far (their symmetry check)
        self.host_agent = Agent(self, C.HOST_SLOT, 0, seed=(config.seed, rank, 0, C.HOST_SLOT))
        self.agents: list[Agent] = []  # the blocks of every launch running now
        self._lock = threading.Lock()  # launches may start and end in several host threads
        self._slots = 0  # bit s: control slot s belongs to a running launch
        self._running = 0  # launches running now
        self._inline_running = 0  # of which stream launches started on the host thread
        self._joiners = 0  # host threads waiting for a launch
        self._streams: list[Stream] = []
        self._inflight: set[Launch] = set()  # issued, from any host thread, and not joined yet
        self._closed = False  # the rank has joined its launches to report: no new ones
        self._issued = 0  # launches issued so far (their blocks' seeds derive from the count)
        # blocks of this rank that failed on their own: the launcher reports them even when the
        # host code caught the KernelError and went on (a run with a failed block never passes)
        self.block_failures: list[KernelError] = []
        self._hostbar = WaitSite((windows.transport.control_word(ctl.hostbar_addr),), -1,
                                 ctl.hostbar_addr - ctl.base, kind=KIND_HOST_BARRIER,
                                 label="rt.barrier")
        self.flags = FLAGS  # the process's fast-path flags: this run's from now on
        FLAGS.reset(read_add=config.set_semantics == "read-add")
        self.model = model(self)  # after the fields above: a model may read them
        if self.host_agent.hooks is not None:  # (host code's TNOTIFY / TWAIT look them up)
            FLAGS.hooked = True
        bind(self.host_agent)
        self.host_agent.start_running()

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def running_launches(self) -> int:
        """Launches of this rank running now (streams and host threads run several at once)."""
        return self._running

    @property
    def signals(self) -> np.ndarray:
        """This rank's signal matrix as an int32 numpy view (read it; write with TNOTIFY)."""
        arr = self.windows.view(self.rank, 0, (self.config.signal_bytes // 4,),
                                np.dtype(np.int32)).view(SymmetricArray)
        arr._windows = self.windows  # host stores into it are seen as host stores
        return arr

    def window(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s whole window as bytes (for inspection and tests)."""
        return self.windows.transport.window(self.windows.check_rank(rank))

    def alloc(self, shape: Any, dtype: Any = np.float32) -> SymmetricArray:
        """A zeroed symmetric array in this rank's heap; ``x.ptr`` is its GM pointer.

        Collective, like ``nvshmem_malloc``: every rank must make the same allocations in the
        same order, and each call returns only when every rank has zeroed its part, so a fast
        peer's first write into the new array is never wiped. A rank that allocates a different
        size raises ``ArgumentError`` on every rank.
        """
        arr = self.heap.alloc(shape, dtype)
        tops = self._compare(C.R_HEAPTOP, self.heap.top, C.R_HEAPTOP_HI)
        if len(set(tops)) != 1:
            raise ArgumentError(
                f"alloc: allocations are not symmetric (heap tops per rank: {tops}); every "
                "rank must allocate the same shapes and dtypes in the same order")
        return arr

    def _compare(self, field: int, value: int, field_hi: int | None = None) -> list[int]:
        """Collective: publish ``value`` in this rank's control line and return every rank's,
        after every rank has published (what this rank did before is visible to all). ``value``
        is int32, or 64 bits split over ``field`` and ``field_hi`` (heaps reach 16 GiB: a
        31-bit compare would pass heaps that differ by 2 GiB)."""
        ctl = self.ctl
        ctl.set_rank(self.rank, field, _i32(value & 0xFFFFFFFF))
        if field_hi is not None:
            ctl.set_rank(self.rank, field_hi, _i32(value >> 32 & 0xFFFFFFFF))
        self.barrier()
        values = [ctl.rank_field(r, field) & 0xFFFFFFFF for r in range(self.nranks)]
        if field_hi is not None:
            values = [v | (ctl.rank_field(r, field_hi) & 0xFFFFFFFF) << 32
                      for r, v in enumerate(values)]
        self.barrier()  # nobody publishes again before everybody compared
        return values

    def _signal_region(self, name: Any, words: Any, free_start: int) -> GMPtr:
        """``words`` zeroed int32 words named ``name`` of the signal matrix, at or after word
        ``free_start`` (the users' free range, which the kernels' layout knows), 64-byte aligned
        and the same on every rank. Collective; see ``rt.signal_region``."""
        regions = self.windows.regions
        start = regions.reserve(name, words, free_start)
        self.signals[start:start + words] = 0  # before the barrier: no peer has notified yet
        self._regions_digest = zlib.crc32(f"{name}\0{words}".encode(), self._regions_digest)
        digests = self._compare(C.R_SIGREGIONS, self._regions_digest & 0x7FFFFFFF)
        if len(set(digests)) != 1:
            odd = [r for r, d in enumerate(digests) if d != digests[0]]
            raise ArgumentError(
                f"rt.signal_region: signal regions are not symmetric (ranks {odd} differ from rank "
                f"0; this rank's call #{len(regions.named())} asked for {name!r}, words={words}); "
                "every rank must make the same calls, same names and sizes, in the same order")
        return self.signal_base + start

    def stream(self) -> Stream:
        """A new stream: launches on it run in issue order, concurrently with other streams.

        ``rt.launch(kernel, ..., stream=s)`` returns at once (like ``kernel<<<blocks, nullptr,
        s>>>``); ``s.synchronize()`` (``aclrtSynchronizeStream``) waits for its launches and
        raises their :class:`KernelError`.
        """
        s = Stream(self)
        self._streams.append(s)
        return s

    def synchronize(self) -> None:
        """Wait for the launches of every stream of this rank (``aclrtSynchronizeDevice``)."""
        for s in list(self._streams):
            s.synchronize()

    def join_launches(self) -> None:
        """Wait for every launch this rank issued, from any host thread, and refuse new ones.

        The rank reports only after this: a launch a host helper thread made, still running when
        ``host`` returned, would otherwise fail after the rank reported success (its failure
        lands in ``block_failures`` here, whoever catches the ``KernelError``). Raises the first
        stream's failure, as :meth:`synchronize` does."""
        with self._lock:
            self._closed = True
        self.synchronize()
        self._joining(1)  # the host agent joins: the deadlock watch must not see it running
        try:
            while True:
                with self._lock:
                    jobs = list(self._inflight)
                if not jobs:
                    return
                for job in jobs:
                    job._join_quietly()
        finally:
            self._joining(-1)

    def launch(self, kernel: Callable[..., Any], blocks: int | None = None, args: tuple = (),
               kwargs: dict | None = None, stream: Stream | None = None) -> Launch | None:
        """Run ``kernel(ctx, *args, **kwargs)`` on ``blocks`` threads.

        Without ``stream`` it returns ``None`` when all blocks finish. With a ``stream``
        (``rt.stream()``) it returns at once with the :class:`Launch` handle; the launch starts after the
        stream's earlier launches finished, and runs concurrently with other streams' launches
        (a compute kernel beside a communication kernel, as PTO hosts do). Every running launch
        of a rank has its own ``block_idx`` / ``block_num`` and its own control slots; together
        they may use ``MAX_BLOCKS`` blocks.

        If a block raises, the run aborts (every other wait anywhere raises ``Aborted``) and the
        launch raises :class:`KernelError` for the first block that failed on its own (at
        ``wait()`` / ``synchronize()`` for a stream launch).
        """
        if not callable(kernel):
            raise ArgumentError(f"launch: kernel must be callable, got {type(kernel).__name__}")
        blocks = self.config.blocks if blocks is None else blocks
        if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= MAX_BLOCKS:
            raise ArgumentError(f"launch: blocks must be an int in [1, {MAX_BLOCKS}], got {blocks!r}")
        check_block_threads(self.nranks, blocks, "launch")
        if not isinstance(args, tuple):
            raise ArgumentError(f"launch: args must be a tuple, got {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ArgumentError(f"launch: kwargs must be a dict (or None), got {type(kwargs).__name__}")
        if stream is not None and (not isinstance(stream, Stream) or stream.rt is not self):
            raise ArgumentError(f"launch: stream must be a Stream from this rank's rt.stream(), "
                                f"got {stream!r}")
        inline = stream is not None and self.model.inline_streams
        if not self.model.concurrent_launches and not inline and (
                stream is not None or self._running > self._inline_running):
            raise ArgumentError(
                f"launch: the {self.config.mode} mode runs one launch of a rank at a time; "
                "launch without a stream, from one host thread (or use eager / hazard mode)")
        job = Launch(self, kernel, blocks, args, dict(kwargs or {}))
        with self._lock:  # seeds follow the host's issue order, not the streams' start order
            if self._closed:
                raise ShmcommError(
                    f"launch: rank {self.rank}'s host function has returned; a launch from a "
                    "thread it left running is refused (join host threads before returning)")
            self._issued += 1
            job.seq = self._issued
            self._inflight.add(job)
        if stream is None:
            try:
                job.start()
            except BaseException:
                with self._lock:
                    self._inflight.discard(job)
                raise
            try:
                if self.model.inline_streams:  # stream launches may run beside it: join it alone
                    self.model.host_join_launch(job.first, job.blocks)
                else:
                    self.model.host_join()
            finally:
                job.wait()
            return None  # nothing to hold on to (and a host may return it: it must pickle)
        self.model.launch_issued(job, stream)  # the host's order before it, whenever it starts
        if inline:
            stream.start_inline(job)
        else:
            stream.enqueue(job)
        return job

    # -- launch bookkeeping (Launch calls these, under self._lock) -----------------------------

    def _claim_slots(self, blocks: int) -> int:
        """The first of ``blocks`` consecutive free control slots of this rank."""
        used = self._slots
        run = 0
        for s in range(MAX_BLOCKS):
            run = 0 if used >> s & 1 else run + 1
            if run == blocks:
                first = s - blocks + 1
                self._slots |= ((1 << blocks) - 1) << first
                self._publish_slots()
                return first
        busy = bin(used).count("1")
        raise ArgumentError(
            f"launch: {blocks} blocks requested, but {busy} of this rank's MAX_BLOCKS={MAX_BLOCKS} "
            f"block slots are taken by launches still running (free: {MAX_BLOCKS - busy}, "
            "not all consecutive); synchronize a stream first or launch fewer blocks")

    def _release_slots(self, first: int, blocks: int) -> None:
        self._slots &= ~(((1 << blocks) - 1) << first)
        self._publish_slots()

    def _publish_slots(self) -> None:
        """The deadlock watch reads which slots run (two 32-bit halves) and how many blocks."""
        m = self._slots
        ctl = self.ctl
        ctl.set_rank(self.rank, C.R_SLOTS_LO, _i32(m & 0xFFFFFFFF))
        ctl.set_rank(self.rank, C.R_SLOTS_HI, _i32(m >> 32))
        ctl.set_rank(self.rank, C.R_BLOCKS, bin(m).count("1"))

    def _joining(self, delta: int) -> None:
        """Count host threads joining a launch: the host agent is JOINING while any is."""
        if delta > 0:
            self._publish_helpers()
        with self._lock:
            self._joiners += delta
            if self._joiners:
                self.host_agent.set_state(C.JOINING)
            else:
                self.host_agent.start_running()  # its stuck clock restarts with the host code

    def _block_main(self, agent: Agent, kernel: Callable, args: tuple, kwargs: dict,
                    errors: list) -> None:
        bind(agent)
        agent.start_running()
        agent.set_active(True)
        try:
            agent.pipes.start()
            kernel(DeviceContext(agent), *args, **kwargs)
            agent.pipes.finish()
            agent.set_state(C.DONE)
        except BaseException as exc:  # every failure of a block is reported, then aborts the run
            agent.pipes.stop()
            agent.set_state(C.FAILED)
            if not isinstance(exc, Aborted):
                self.ctl.abort(C.ABORT_FAILURE)
            errors.append((agent.block_idx, exc, traceback.format_exc()))
        finally:
            agent.set_active(False)
            bind(None)

    def _publish_helpers(self) -> None:
        """Tell the deadlock watch how many threads the host code started that still live: one
        of them may still notify (a host helper thread), so "every agent waits" is no proof."""
        me = threading.main_thread()
        helpers = sum(1 for t in threading.enumerate()
                      if t is not me and not t.name.startswith("shmcomm-") and t.is_alive())
        self.ctl.set_rank(self.rank, C.R_HELPERS, helpers)

    def barrier(self) -> None:
        """Block until every rank's host has called ``barrier`` as often as this one."""
        n = self.nranks
        self._publish_helpers()
        self.model.barrier_enter()
        arrived = self._hostbar.words[0].add(1)  # and wakes the sleepers
        target = (arrived // n + 1) * n
        self.model.host_wait(self._hostbar, target, WaitCmp.GE)
        wait_until(self.host_agent, self._hostbar, target, WaitCmp.GE)
        self.model.barrier_exit()

    def reset_signals(self) -> None:
        """Collectively zero the signal matrices: zero this rank's, then wait for every rank.

        Like ``aclrtMemset`` + a host barrier: a fast peer's first signal of the next launch can
        never be wiped (NVSHMEM PR #98), because nobody launches before everybody has zeroed.
        """
        self.barrier()  # nobody may still be reading or writing the old values
        self.signals.fill(0)
        self.barrier()

    def __repr__(self) -> str:
        return f"RankRuntime(rank={self.rank}/{self.nranks}, launches={self.launches})"


def _i32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


class Launch:
    """One kernel launch: its blocks, their control slots, and its outcome.

    ``rt.launch`` returns it; ``wait()`` blocks until every block finished and raises the
    launch's :class:`KernelError`; ``done`` tells whether it has finished.
    """

    def __init__(self, rt: RankRuntime, kernel: Callable, blocks: int, args: tuple,
                 kwargs: dict) -> None:
        self.rt, self.kernel, self.blocks, self.args, self.kwargs = rt, kernel, blocks, args, kwargs
        self.threads: list[block_threads.BlockThread] = []
        self.errors: list[tuple[int, BaseException, str]] = []
        self.started = False
        self.seq = 0  # issue number on this rank (rt.launch sets it)
        self.inline = False  # a stream launch started on the host thread (schedule mode)
        self._ended = False
        self._recorded = False  # its own failure is in rt.block_failures already
        self._go = threading.Event()  # set once started, or when its stream gave up on it

    @property
    def done(self) -> bool:
        """Whether every block of the launch ended (``aclrtQueryStream``). Read by the host, a
        ``True`` joins the launch as ``wait()`` does (what its blocks did happens before the
        host's next step; a failure is recorded and fails the run, and ``wait()`` /
        ``synchronize()`` raise it), and a ``False`` is a poll (schedule mode lets the blocks
        run, so a loop on ``done`` ends)."""
        rt = self.rt
        if not self.started:
            return False
        if getattr(_agent_tls, "agent", None) is not rt.host_agent:
            return not any(t.is_alive() for t in self.threads)  # (repr, other threads)
        if not self._ended and not rt.model.launch_poll(self):
            return False
        try:
            self.wait()  # every block ended: this joins them at once
        except KernelError:
            pass  # recorded: the run fails with it
        return True

    def start(self) -> None:
        """Take slots, bind the model and start the blocks (returns at once)."""
        rt = self.rt
        with rt._lock:
            first = rt._claim_slots(self.blocks)
            self.first = first
            rt.launches += 1
            rt._running += 1
            try:
                rt.model.launch_starting(self)
                rt.model.launch_start()  # before peers can see this launch's count
                agents = [Agent(rt, first + b, self.blocks,
                                (rt.config.seed, rt.rank, self.seq, b), block_idx=b)
                          for b in range(self.blocks)]
                for a in agents:
                    a.set_state(C.IDLE)
                    a.kernel = self.kernel
                    a.pipes = rt.model.block(a)
                    a.fences = a.pipes if a.pipes.acts_on_fences else None
                    if a.hooks is not None:
                        rt.flags.hooked = True
                    if a.fences is not None:
                        rt.flags.fenced = True
            except BaseException:
                rt._running -= 1
                rt._release_slots(first, self.blocks)
                raise
            self.agents = agents
            rt.agents = rt.agents + agents
            rt.ctl.set_rank(rt.rank, C.R_LAUNCHES, rt.launches)
        defer = rt.model.inline_streams  # one agent at a time: woken once the host passes the turn
        self.threads = [block_threads.start(
            rt._block_main, (a, self.kernel, self.args, self.kwargs, self.errors),
            f"shmcomm-r{rt.rank}-b{a.block_idx}", defer, C.agent_id(rt.rank, a.slot))
            for a in agents]
        self.started = True  # after the starts: `done` must not see unstarted threads
        self._go.set()

    def wait(self) -> None:
        """Block until every block finished; raise :class:`KernelError` if one failed."""
        rt = self.rt
        if self.inline and self.started and not self._ended:  # pass the turn until it ends
            rt.model.host_join_launch(self.first, self.blocks)
        rt._joining(1)
        try:
            self._go.wait()  # a stream launch still queued behind an earlier one
            block_threads.release_deferred()
            for t in self.threads:
                t.join()
        finally:
            rt._joining(-1)
            self._end()
        if self._ended:
            rt.model.launch_joined(self)
        err = self._outcome()
        if err is not None:
            raise err

    def _outcome(self) -> KernelError | None:
        """The launch's KernelError (``None`` if it passed); its own failure is recorded in
        ``rt.block_failures`` once, whichever thread joins it first."""
        rt = self.rt
        with rt._lock:
            rt._inflight.discard(self)
            if not self.errors:
                return None
            own = [e for e in self.errors if not isinstance(e[1], Aborted)]
            block, exc, tb = (own or self.errors)[0]
            err = KernelError(rt.rank, block, exc, tb)
            if own and not self._recorded:
                self._recorded = True
                rt.block_failures.append(err)
            return err

    def _join_quietly(self) -> None:
        """Join the launch for the rank's report (another host thread may join it too): its
        failure is recorded, not raised."""
        self._go.wait()
        block_threads.release_deferred()
        for t in self.threads:
            t.join()
        self._end()
        if self._ended:
            self.rt.model.launch_joined(self)
        self._outcome()

    def _end(self) -> None:
        rt = self.rt
        with rt._lock:
            if not self.started:  # never started (its stream gave up): nothing to join
                rt._inflight.discard(self)
            if self._ended or not self.started:
                return
            self._ended = True
            rt.agents = [a for a in rt.agents if a not in self.agents]
            rt._release_slots(self.first, self.blocks)
            rt._running -= 1
            if self.inline:
                rt._inline_running -= 1
            rt.model.launch_end()

    def __repr__(self) -> str:
        name = getattr(self.kernel, "__name__", "kernel")
        ended = self.started and not any(t.is_alive() for t in self.threads)
        state = "done" if ended else ("running" if self.started else "queued")
        return f"<Launch {name} x{self.blocks} blocks on rank {self.rt.rank}: {state}>"


class Stream:
    """An ordered queue of launches (``aclrtStream``): each starts after the previous finished.

    Launches of different streams run concurrently. ``synchronize()`` waits for every launch
    issued so far and raises the first failure.
    """

    def __init__(self, rt: RankRuntime) -> None:
        self.rt = rt
        self.pending: list[Launch] = []
        self._worker: threading.Thread | None = None
        self._cond = threading.Condition()
        self._failed: BaseException | None = None

    def enqueue(self, job: Launch) -> None:
        with self._cond:
            self.pending.append(job)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="shmcomm-stream",
                                                daemon=True)
                self._worker.start()
            self._cond.notify_all()

    def _run(self) -> None:
        # a host-side helper thread: starts each queued launch once the previous one ended
        while True:
            with self._cond:
                job = next((j for j in self.pending if not j.started), None)
                if job is None:
                    self._worker = None
                    self._cond.notify_all()
                    return
            try:
                job.start()
            except BaseException as exc:  # a launch that could not start fails the stream
                with self._cond:
                    self._failed = exc
                    for j in self.pending:
                        j._go.set()  # never starts: its waiters return to see the failure
                    self.pending = [j for j in self.pending if j.started]
                    self._worker = None
                    self._cond.notify_all()
                return
            for t in job.threads:
                t.join()
            job._end()

    def start_inline(self, job: Launch) -> None:
        """Start ``job`` on the calling host thread once this stream's earlier launches ended
        (joined with ``host_join_launch``): a model that runs one agent at a time registers
        every block while the host holds the turn, so stream launches stay deterministic."""
        for prev in self.pending:
            if prev.started and not prev._ended and self._failed is None:
                try:
                    prev.wait()
                except BaseException as exc:  # the stream stops here; synchronize raises it
                    self._failed = exc
        if self._failed is not None:
            job._go.set()  # never starts: its waiters return to see the failure
            return
        job.inline = True
        with self.rt._lock:
            self.rt._inline_running += 1
        try:
            job.start()
        except BaseException:
            with self.rt._lock:
                self.rt._inline_running -= 1
            raise
        self.pending.append(job)

    def synchronize(self) -> None:
        """Wait for every launch issued on this stream; raise the first one's KernelError."""
        rt = self.rt
        if rt.model.inline_streams:
            jobs, self.pending = self.pending, []
            failed, self._failed = self._failed, None
            for j in jobs:
                try:
                    j.wait()
                except BaseException as exc:
                    failed = failed or exc
            if failed is not None:
                raise failed
            return
        rt._joining(1)
        try:
            with self._cond:
                while self._worker is not None and self._failed is None:
                    self._cond.wait(0.05)  # bounded: the worker also ends when a block fails
                jobs, self.pending = self.pending, []
                failed, self._failed = self._failed, None
        finally:
            rt._joining(-1)
        for j in jobs:
            j.wait()
        if failed is not None:
            raise failed

    def __repr__(self) -> str:
        return f"<Stream rank {self.rt.rank}: {len(self.pending)} launch(es) issued>"

