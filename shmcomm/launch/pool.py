"""A persistent pool of rank processes that serves many runs.

Forking the rank processes and mapping their windows costs most of a small run (tens of ms at 8
ranks). A :class:`Pool` forks them once; each :meth:`Pool.run` sends the host function to every
rank process, supervises the run as :func:`shmcomm.run` does (failures, deadlock watch, timeout,
schedule mode's shared state) and returns the results in rank order. Between runs the launcher
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
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from typing import Any

from ..config import Config
from ..core import control as C
from ..errors import ArgumentError, RunError
from ..exec.schedule import shared_bytes
from ..transports.shm import ShmTransport
from .launchers import external_launcher
from .supervisor import _Launcher, fork_rank, rank_process_setup, serve_run

_FIXED = ("nranks", "signal_bytes", "heap_bytes")


class Pool:
    """Rank processes and windows kept across runs of the same shape (``nranks``,
    ``signal_bytes``, ``heap_bytes``); every other setting may change from run to run.

    Not thread-safe: one run at a time. ``close()`` (or leaving the ``with`` block) stops the
    processes and unmaps the memory; so does the garbage collector, late."""

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
        self._discard()

    def _ensure(self) -> None:
        if self.pids:
            return
        cfg = self.base
        self.ctl = C.Control(cfg.nranks, extra_bytes=shared_bytes(cfg.nranks))
        self.transport = ShmTransport(cfg.nranks, cfg.signal_bytes, cfg.heap_bytes)
        parent = os.getpid()
        for rank in range(cfg.nranks):
            job_r, job_w = Pipe(duplex=False)
            res_r, res_w = Pipe(duplex=False)
            pid = fork_rank(functools.partial(_serve, rank, parent, self.transport, self.ctl, job_r,
                                              res_w),
                            [job_w, res_r, *self.jobs.values(), *self.results.values()])
            job_r.close()
            res_w.close()
            self.pids[rank] = pid
            self.jobs[rank] = job_w
            self.results[rank] = res_r

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

    def run(self, host: Callable[..., Any], *, args: tuple = (), **settings: Any) -> list[Any]:
        """Run ``host(rt, *args)`` once in every rank process of the pool, as
        :func:`shmcomm.run` does; the settings are :class:`Config` fields (``nranks``,
        ``signal_bytes`` and ``window_bytes`` / ``heap_bytes`` must be the pool's)."""
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
            return launcher(host, config, args, None)
        try:
            pickle.dumps((host, args))
        except Exception as exc:
            raise ArgumentError(f"Pool.run: the host function and its args must be picklable "
                                f"(a module-level function): {exc}") from None
        self._ensure()
        self.runs += 1
        launcher = _PoolRun(self, config, host, args)
        try:
            return launcher.run()
        except BaseException:
            self._discard()  # a failed run replaces the pool
            self.replaced += 1
            raise

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


class _PoolRun(_Launcher):
    """One run on a pool's processes: the supervision of :class:`_Launcher`, with jobs sent
    instead of processes forked and the memory kept (and reset) instead of unmapped."""

    def __init__(self, pool: Pool, config: Config, host: Callable, args: tuple) -> None:
        super().__init__(config, host, args)
        self.pool = pool

    def _start(self) -> None:
        pool = self.pool
        self.ctl, self.transport = pool.ctl, pool.transport
        tops = [(self.ctl.rank_field(r, C.R_HEAPTOP) & 0xFFFFFFFF)  # 64 bits in two words
                | (self.ctl.rank_field(r, C.R_HEAPTOP_HI) & 0xFFFFFFFF) << 32
                for r in range(pool.nranks)]
        pool._reset(tops)
        self._prepare_model()
        job = (self.config, self.host, self.args, self.model)
        for rank in range(pool.nranks):
            self.pids[rank] = pool.pids[rank]
            self.conns[pool.results[rank]] = rank
        for rank in range(pool.nranks):
            pool.jobs[rank].send(job)

    def _receive(self, conn: Connection) -> None:
        super()._receive(conn)
        rank = self.conns.get(conn)
        if rank is not None and rank in self.results:
            self.conns.pop(conn)  # done with this run; the pipe stays open for the next

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
           results: Connection) -> int:
    """A pool's rank process: serve runs until the pipe closes."""
    if not rank_process_setup(parent):
        return 1
    while True:
        try:
            config, host, args, model = jobs.recv()
        except (EOFError, OSError):
            return 0
        except Exception as exc:  # a host that does not unpickle here
            results.send(("error", dict(rank=rank, block=None, kind="exception",
                                        message=f"the job could not be received: {exc!r}")))
            return 1
        if serve_run(rank, config, transport, ctl, results, host, args, model) != 0:
            return 1  # a failed run: the launcher replaces the pool


__all__ = ["Pool", "RunError"]
