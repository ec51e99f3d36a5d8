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

import ctypes
import functools
import itertools
import operator
import os
import pickle
import queue
import signal
import sys
import threading
import types
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ..config import Config
from ..core import control as C
from ..core.gm import Windows
from ..core.heap import SymmetricArray
from ..core.observer import PoolStates
from ..core.threads import IDLE_NAME
from ..errors import ArgumentError, RunError, ShmcommError
from ..exec.compose import max_shared_bytes, pool_state
from ..transports.shm import ShmTransport
from .descendants import RunProcesses
from .launchers import external_launcher
from .rank import collect_after_run, fork_rank, rank_process_setup, serve_run
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
            pid = fork_rank(functools.partial(_serve, rank, parent, self.transport, self.ctl, job_r,
                                              res_w, procs, states),
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
            if isinstance(got, _Leftover):  # it passed, but its process must not serve again
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


def _serve(rank: int, parent: int, transport: ShmTransport, ctl: C.Control, jobs: Connection,
           results: Connection, procs: RunProcesses, states: Any) -> int:
    """A pool's rank process: serve runs until the pipe closes."""
    procs.enter()
    if not rank_process_setup(parent):
        return 1
    modules = _ModuleState()
    observers = list(SymmetricArray.observers)
    read_observers = list(SymmetricArray.read_observers)
    windows = Windows(transport)  # kept from run to run, with the pointers and Signals made
    runs = 0
    while True:
        try:
            config, host, args, model = jobs.recv()
        except (EOFError, OSError):
            return 0
        except Exception as exc:  # a host that does not unpickle here
            results.send(("error", dict(rank=rank, block=None, kind="exception",
                                        message=f"the job could not be received: {exc!r}")))
            return 1
        model.use_pool(states, rank)  # the observers' (this rank's end of the detector's pipe)
        if serve_run(rank, config, transport, ctl, results, host, args, model,
                     functools.partial(_checked_result, modules), windows) != 0:
            return 1  # a failed run: the launcher replaces the pool
        # the run's models watched host accesses: the next run's must not see them
        SymmetricArray.observers[:] = observers
        SymmetricArray.read_observers[:] = read_observers
        config = host = args = model = None  # garbage now, for the collection
        runs += 1
        collect_after_run(runs)


class PoolError(ShmcommError):
    """A pool's rank process died outside a run; the pool was replaced."""


class _Leftover:
    """A rank's result from a run that left a thread or a patched module in its process."""

    def __init__(self, result: Any, why: str) -> None:
        self.result, self.why = result, why


def _how(status: int | None) -> str:
    if status is None:
        return "is gone (no exit status)"
    if os.WIFSIGNALED(status):
        return f"died from signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def _dict_version_reader() -> Callable[[dict], Any] | None:
    """A reader of a dict's modification stamp (CPython's ``ma_version_tag``, PEP 509: a new
    value at every change of the dict), or ``None`` where this interpreter's dicts do not show
    one where it is looked for. The reader gives the stamp's cell (its ``value`` reads it;
    made once per dict: a dict object never moves while it lives). Checked on
    sample dicts before it is trusted; without it every check compares every attribute."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return None
    used_at, tag_at = 2 * ctypes.sizeof(ctypes.c_void_p), 3 * ctypes.sizeof(ctypes.c_void_p)

    def stamp(d: dict) -> Any:
        return ctypes.c_uint64.from_address(id(d) + tag_at)

    sample: dict[str, int] = {}
    try:
        cell = stamp(sample)
        for n in range(5):
            before = cell.value
            sample[f"k{n}"] = n
            if ctypes.c_ssize_t.from_address(id(sample) + used_at).value != len(sample):
                return None
            after = cell.value
            sample[f"k{n}"] = n + 1  # a rebinding is a change too
            if not before != after != cell.value or cell.value != cell.value:
                return None
    except Exception:  # noqa: BLE001 -- any surprise: no stamps
        return None
    return stamp


_VERSION = _dict_version_reader()


class _ModuleState:
    """Every loaded module's public attributes (names and values) as the pool's process
    started, with its dict's modification stamp and the stamp's cell (``entries``: name ->
    [module, names, values, stamp, cell, dict]). Private ones (``_name``) do not count:
    libraries rebind their own private state as they run (hypothesis's gc timers, threading's
    counters), which is no patch. ``cells`` and ``stamps``: those of the true module objects
    (whose dict never changes identity), read in one pass first."""

    __slots__ = ("entries", "cells", "stamps", "fast", "others")

    def __init__(self) -> None:
        self.entries: dict[str, list[Any]] = {}
        for name, mod in list(sys.modules.items()):
            d = getattr(mod, "__dict__", None)
            if isinstance(d, dict):
                keys = tuple(k for k in d if isinstance(k, str) and not k.startswith("_"))
                cell = _VERSION(d) if _VERSION else None  # d stays referenced: the cell reads it
                self.entries[name] = [mod, keys, tuple(d[k] for k in keys),
                                      cell.value if cell is not None else None, cell, d]
        # names whose stamps the first pass reads: modules proper (another object in
        # sys.modules may hand out a new __dict__ each time: checked one by one)
        self.fast = tuple(name for name, e in self.entries.items()
                          if e[4] is not None and type(e[0]) is types.ModuleType)
        self.cells = [self.entries[n][4] for n in self.fast]
        self.stamps = [self.entries[n][3] for n in self.fast]
        fast = set(self.fast)
        self.others = tuple(n for n in self.entries if n not in fast)  # checked one by one


_VALUE = operator.attrgetter("value")


def _patched(state: _ModuleState) -> list[str]:
    """``module.attribute`` names whose value is no longer the object it was (a monkeypatch);
    attributes added since (lazy imports) do not count. Every run of a pool pays this check in
    every rank: when no module's dict has changed since the modules were last found clean
    (their stamps, read in one pass) the check ends there; else a module whose stamp has not
    changed is skipped without touching its values."""
    unchanged = bool(state.cells) and list(map(_VALUE, state.cells)) == state.stamps
    out = []
    for name in (state.others if unchanged else state.entries):
        entry = state.entries[name]
        mod, keys, values, stamp, cell, d0 = entry
        d = mod.__dict__
        if cell is not None and d is d0:
            now = cell.value
            if now == stamp:
                continue
        try:
            if tuple(map(d.get, keys, itertools.repeat(_MISSING))) == values:
                if cell is not None and d is d0:
                    entry[3] = now  # clean as of this stamp (only private names changed)
                continue
        except Exception:  # noqa: BLE001,S110 -- a replaced value whose == raises: look closer
            pass
        out += [f"{name}.{k}" for k, v in zip(keys, values, strict=True)
                if d.get(k, _MISSING) is not v]
    if not unchanged:
        state.stamps = [state.entries[n][3] for n in state.fast]
    return out


_MISSING = object()


def _leftover_threads() -> list[str]:
    me = threading.current_thread()
    # schedule mode's turn watch stops when the rank's model closes, right after this check
    alive = [t for t in threading.enumerate()
             if t is not me and not t.name.startswith(("shmcomm-turnwatch", IDLE_NAME))]
    for t in alive:
        if t.name == "shmcomm-stream":  # a stream's worker returns right after its last launch
            t.join(1.0)
    return [t.name for t in alive if t.is_alive()]


def _checked_result(modules: _ModuleState, result: Any) -> Any:
    """A passing run's ``result`` in a pool rank, after the host and every launch ended and the
    model closed (in schedule mode the rank no longer holds the turn: the checks keep no other
    agent waiting): whatever the run left in the process (a thread, a patched module) retires
    the process after this run."""
    why = []
    threads = _leftover_threads()
    if threads:
        why.append(f"threads still running: {', '.join(threads)}")
    patched = _patched(modules)
    if patched:
        why.append(f"module attributes changed: {', '.join(patched[:10])}")
    if why:
        return _Leftover(result, "; ".join(why))
    return result


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
