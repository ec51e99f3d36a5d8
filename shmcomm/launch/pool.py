"""A persistent pool of rank processes that serves many runs.

Forking the rank processes and mapping their windows costs most of a small run (tens of ms at 8
ranks). A :class:`Pool` forks them once; each :meth:`Pool.run` sends the host function to every
rank process, supervises the run as :func:`shmcomm.run` does (failures, deadlock watch, timeout,
schedule mode's shared state, the race detector's word clocks and record pipes, which the pool
makes with its ranks) and returns the results in rank order. Between runs the launcher
resets what a run may have changed: every signal matrix, the heap up to the highest allocation
of the last run, and the control segment (abort flag, counters, agent and rank lines); each run
builds a fresh runtime (allocations, signal regions, caches) in every rank.

A run that fails in any way (an exception, a crash, a deadlock, a timeout, an interrupt)
replaces the pool: its processes are killed and new ones forked at the next run, so no state of
a broken run can leak into the next. The host function, its arguments and results cross a pipe,
so they must be picklable (a module-level function is).

    with shmcomm.Pool(nranks=8) as pool:
        for seed in range(1000):
            pool.run(host, seed=seed, mode="schedule", strategy="pct:3")
"""

from __future__ import annotations

import functools
import os
import pickle
import queue
import signal
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ..config import Config
from ..core import control as C
from ..core.observer import PoolStates
from ..errors import ArgumentError, RunError, ShmcommError
from ..exec.compose import max_shared_bytes, pool_state
from ..transports.shm import ShmTransport
from .descendants import RunProcesses
from .launchers import external_launcher
from .poolrank import Leftover, serve_pool_rank
from .rank import fork_rank
from .supervisor import Launcher, start_order

_FIXED = ("nranks", "signal_bytes", "heap_bytes")


class Pool:
    """Rank processes and windows kept across runs of the same shape (``nranks``,
    ``signal_bytes``, ``heap_bytes``); every other setting may change from run to run.

    One run at a time: a second thread's ``run`` waits for the first to finish (a ``run`` from
    inside a run, in the same thread, is refused). A run that leaves a thread running in a rank
    process, or changes a module attribute there (a monkeypatch), passes, but its processes
    serve no other run: the pool is replaced. A rank process that died between runs is named
    in a :class:`PoolError` and the pool replaced. ``close()`` (or leaving the ``with`` block)
    stops the processes and unmaps the memory; so does the garbage collector, late. Ranks are
    forked by a helper thread the pool keeps: they die with the process, not with the thread
    that happened to make the first run."""

    def __init__(self, nranks: int | None = None, *, window_bytes: int | None = None,
                 signal_bytes: int | None = None) -> None:
        self.base = Config.from_kwargs(nranks=nranks, heap_bytes=window_bytes,
                                       signal_bytes=signal_bytes)
        self.nranks = self.base.nranks
        self.ctl: C.Control | None = None
        self.transport: ShmTransport | None = None
        self.pids: dict[int, int] = {}
        self.jobs: dict[int, Connection] = {}  # rank -> the pipe its jobs go down
        self.results: dict[int, Connection] = {}  # rank -> the pipe its results come up
        self.runs = 0
        self.replaced = 0
        self.procs: RunProcesses | None = None
        self.closed = False
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread running a run now
        self._retire = False  # a rank reported leftovers of its run: replace before the next
        self._forker: _Forker | None = None
        self.stacks: dict[int, Any] = {}  # rank -> unlinked file its stack dumps go to
        # what the runs' observers share with the ranks (the race detector's clocks and pipes)
        self.observers: PoolStates | None = None
        # the control segment's shared area: the most any run's model and observers keep
        self.ctl_shared_bytes = max_shared_bytes(self.base.nranks)

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Stop the rank processes and unmap the windows (idempotent)."""
        self.closed = True
        self._discard()
        if self._forker is not None:
            self._forker.stop()
            self._forker = None

    def _ensure(self) -> None:
        if self.pids:
            return
        if self._forker is None:
            self._forker = _Forker()
        self._forker.call(self._fork_all)

    def _fork_all(self) -> None:
        """Map the memory and fork the ranks (in the forker thread: their parent-death
        signal follows it, and it lives as long as the pool)."""
        self.procs = RunProcesses()
        procs = self.procs
        cfg = self.base
        self.ctl = C.Control(cfg.nranks, extra_bytes=self.ctl_shared_bytes)
        self.transport = ShmTransport(cfg.nranks, cfg.signal_bytes, cfg.heap_bytes)
        self.observers = states = pool_state(cfg.nranks)
        parent = os.getpid()
        for rank in range(cfg.nranks):
            job_r, job_w = Pipe(duplex=False)
            res_r, res_w = Pipe(duplex=False)
            # where the rank's stack dumps go: a hang's report names the user's lines from them
            self.stacks[rank] = tempfile.TemporaryFile(prefix="shmcomm-stacks-")
            pid = fork_rank(functools.partial(serve_pool_rank, rank, parent, self.transport, self.ctl, job_r,
                                              res_w, procs, states, self.stacks[rank]),
                            [job_w, res_r, *self.jobs.values(), *self.results.values(),
                             *states.closes_in(rank)])
            job_r.close()
            res_w.close()
            procs.note_rank(pid)
            self.pids[rank] = pid
            self.jobs[rank] = job_w
            self.results[rank] = res_r
        states.forked()

    def _discard(self) -> None:
        """Kill the rank processes and unmap everything (the next run forks new ones)."""
        self._kill()
        for c in list(self.jobs.values()) + list(self.results.values()):
            c.close()
        self.pids, self.jobs, self.results = {}, {}, {}
        for f in self.stacks.values():
            f.close()
        self.stacks = {}
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        if self.observers is not None:
            self.observers.close()
            self.observers = None
        if self.procs is not None:
            self.procs.close()  # what the ranks forked dies too; the cgroup goes
            self.procs = None
        self._retire = False

    def _kill(self) -> None:
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self.pids.values():
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.pids = {}

    # -- runs ------------------------------------------------------------------------------

    def run(self, host: Callable[..., Any], *, args: tuple = (), observers: Any = (),
            **settings: Any) -> list[Any]:
        """Run ``host(rt, *args)`` once in every rank process of the pool, as
        :func:`shmcomm.run` does (``observers`` too); the settings are :class:`Config` fields
        (``nranks``, ``signal_bytes`` and ``window_bytes`` / ``heap_bytes`` must be the
        pool's)."""
        if not callable(host):
            raise ArgumentError(f"Pool.run: host must be callable, got {type(host).__name__}")
        if "window_bytes" in settings:
            settings["heap_bytes"] = settings.pop("window_bytes")
        for name in _FIXED:
            v = settings.pop(name, None)
            if v is not None and v != getattr(self.base, name):
                raise ArgumentError(f"Pool.run: {name} is the pool's ({getattr(self.base, name)}); "
                                    f"got {v}: make another Pool for another shape")
        config = Config.from_kwargs(**{n: getattr(self.base, n) for n in _FIXED}, **settings)
        launcher = external_launcher(config.transport)  # mpi: mpiexec keeps the ranks, not us
        if launcher is not None:
            if observers:
                raise ArgumentError("Pool.run: observers= needs transport='shm'")
            return launcher(host, config, args, None)
        try:
            pickle.dumps((host, args))
        except Exception as exc:
            raise ArgumentError(f"Pool.run: the host function and its args must be picklable "
                                f"(a module-level function): {exc}") from None
        me = threading.get_ident()
        if self._owner == me:
            raise ShmcommError("Pool.run: called from inside a run of the same pool (this "
                               "thread is running one); use another Pool")
        with self._lock:  # one run at a time: another thread's run waits for this one
            if self.closed:
                raise ShmcommError("Pool.run: the pool is closed; make a new Pool")
            self._owner = me
            try:
                return self._run_locked(config, host, args, observers)
            finally:
                self._owner = None

    def _run_locked(self, config: Config, host: Callable, args: tuple,
                    observers: Any = ()) -> list[Any]:
        if self._retire:  # the last run left a thread or a patch behind in a rank
            self._discard()
            self.replaced += 1
        self._check_alive()
        self._ensure()
        self.runs += 1
        launcher = _PoolRun(self, config, host, args, observers)
        try:
            return launcher.run()
        except BaseException:
            self._discard()  # a failed run replaces the pool
            self.replaced += 1
            raise

    def _check_alive(self) -> None:
        """A rank process that died between runs (killed, OOM) is named, and the pool
        replaced: the next run forks new processes."""
        dead = []
        for rank, pid in self.pids.items():
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                got, status = pid, None
            if got:
                dead.append((rank, pid, status))
        if not dead:
            return
        for rank, _pid, _status in dead:
            self.pids.pop(rank)
        self._discard()
        self.replaced += 1
        raise PoolError("Pool.run: " + "; ".join(
            f"pool rank {rank} (pid {pid}) {_how(status)} between runs" for rank, pid, status in dead)
            + "; the pool was replaced: this run did not start, the next one forks new ranks")

    def _reset(self, last_tops: list[int]) -> None:
        """Zero what the previous run may have changed (no rank process runs meanwhile)."""
        ctl, t = self.ctl, self.transport
        assert ctl is not None and t is not None
        sig = self.base.signal_bytes
        for rank in range(self.nranks):
            win = t.window(rank)
            win[:max(sig, last_tops[rank])] = 0
        # everything but the info line (magic, sizes) and the models' area (their prepare resets it)
        ctl.words[C.LINE:(ctl.extra_base - ctl.base) // 4] = 0
        ctl.seal()  # a new run magic in the guards the reset zeroed


class _PoolRun(Launcher):
    """One run on a pool's processes: the supervision of :class:`Launcher`, with jobs sent
    instead of processes forked and the memory kept (and reset) instead of unmapped."""

    def __init__(self, pool: Pool, config: Config, host: Callable, args: tuple,
                 observers: Any = ()) -> None:
        super().__init__(config, host, args, observers=observers)
        self.pool = pool
        if self.model.shared_bytes > pool.ctl_shared_bytes:
            raise ArgumentError(
                f"Pool.run: the run's observers keep {self.model.shared_bytes} bytes of shared "
                f"state, over the {pool.ctl_shared_bytes} bytes the pool reserved for its "
                "registered observers; register the observer (shmcomm.exec.observers) or run "
                "it with shmcomm.run")

    def _start(self) -> None:
        pool = self.pool
        self.ctl, self.transport = pool.ctl, pool.transport
        assert self.ctl is not None  # the pool's, made with its processes
        tops = [(self.ctl.rank_field(r, C.R_HEAPTOP) & 0xFFFFFFFF)  # 64 bits in two words
                | (self.ctl.rank_field(r, C.R_HEAPTOP_HI) & 0xFFFFFFFF) << 32
                for r in range(pool.nranks)]
        pool._reset(tops)
        self.model.use_pool(pool.observers, None)  # the observers' (the race detector's pipes)
        self._prepare_model()
        # pickled once for every rank (what Connection.send would do per rank)
        job = ForkingPickler.dumps((self.config, self.host, self.args, self.model))
        self.stacks = dict(pool.stacks)  # the pool's: they outlive the run (the pool closes them)
        for rank in range(pool.nranks):
            self.pids[rank] = pool.pids[rank]
            self.conns[pool.results[rank]] = rank
        for rank in start_order(pool.nranks, self.model.first_rank):
            try:
                pool.jobs[rank].send_bytes(job)
            except OSError as exc:  # it died after the check: its status names how
                status = None
                try:
                    got, st = os.waitpid(pool.pids[rank], os.WNOHANG)
                    status = st if got else None
                except ChildProcessError:
                    pass
                self.exited.add(rank)
                raise PoolError(f"Pool.run: pool rank {rank} (pid {pool.pids[rank]}) "
                                f"{_how(status)}: its job could not be sent ({exc.strerror}); "
                                "the pool was replaced") from None

    def _processes(self) -> RunProcesses:
        assert self.pool.procs is not None
        return self.pool.procs

    def _end_processes(self) -> None:
        pool = self.pool
        if pool.procs is not None and pool.pids:  # the pool lives on: all but its ranks go
            pool.procs.sweep(keep=pool.pids.values())

    def _receive(self, conn: Connection) -> None:
        super()._receive(conn)
        rank = self.conns.get(conn)
        if rank is not None and rank in self.results:
            self.conns.pop(conn)  # done with this run; the pipe stays open for the next
            got = self.results[rank]
            if isinstance(got, Leftover):  # it passed, but its process must not serve again
                self.results[rank] = got.result
                self.pool._retire = True

    def _stop_all(self) -> None:
        if self.conns or self.failures or (self.ctl is not None and self.ctl.aborted()):
            self.pool._kill()  # a failed run: no process of it serves another
            self.exited.update(self.pids)
            self.conns.clear()

    def _release(self) -> None:
        if self.ctl is not None:
            self._collect_model()  # before a failed run's memory is unmapped
        if not self.pool.pids:
            self.pool._discard()


class PoolError(ShmcommError):
    """A pool's rank process died outside a run; the pool was replaced."""


def _how(status: int | None) -> str:
    if status is None:
        return "is gone (no exit status)"
    if os.WIFSIGNALED(status):
        return f"died from signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.WEXITSTATUS(status)}"


class _Forker:
    """A helper thread the pool forks its ranks from. ``PR_SET_PDEATHSIG`` fires when the
    forking *thread* exits: forked from a caller's short-lived worker thread, the ranks would
    die with it."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="shmcomm-pool-forker",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, box, done = job
            try:
                box.append(("ok", fn()))
            except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller
                box.append(("err", exc))
            done.set()

    def call(self, fn: Callable[[], Any]) -> Any:
        box: list = []
        done = threading.Event()
        self._jobs.put((fn, box, done))
        done.wait()
        how, value = box[0]
        if how == "err":
            raise value
        return value

    def stop(self) -> None:
        self._jobs.put(None)


__all__ = ["Pool", "PoolError", "RunError"]
