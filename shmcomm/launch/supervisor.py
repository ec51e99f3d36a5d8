"""``shmcomm.run``: start the rank processes, supervise them, clean up.

The launcher creates the control segment and every rank's window (exclusive, 0600, unlinked at
once), then forks one process per rank, which inherits the mappings. Each rank runs
``host(rt)`` and sends back its result or its failure through a pipe. Meanwhile the launcher
watches:

* a failure report or a rank that dies (signal, ``os.abort``, ``os._exit``) sets the abort flag,
  so every wait in every rank raises ``Aborted`` within a poll;
* "every live agent waits, no wait can be satisfied by what memory holds, and nothing changed
  for ``deadlock_grace``" is a deadlock: abort, with the wait-for table in the report;
* the run timeout aborts too (the CLI then exits 124).

Ranks that do not stop within ``STOP_GRACE_S`` of an abort are killed. Ranks get
``PR_SET_PDEATHSIG``, so they die with the launcher even when it is SIGKILLed.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any

from ..config import Config
from ..core import control as C
from ..core.gm import Windows
from ..core.model import RankModel
from ..core.runtime import KernelError
from ..errors import (
    Aborted,
    ArgumentError,
    DeadlockError,
    Failure,
    RaceReport,
    RunError,
    RunTimeout,
)
from ..exec import model_for
from ..exec.trace import finalize
from ..kernels.host import RankRuntime
from ..transports.shm import ShmTransport
from ..transports.shm import atomics as at
from .deadlock import DeadlockWatch

POLL_S = 0.02
STOP_GRACE_S = 1.0


def run(host: Callable[..., Any], nranks: int | None = None, *, blocks: int | None = None,
        window_bytes: int | None = None, timeout: float | None = None, seed: int | None = None,
        mode: str | None = None, args: tuple = (), config: Config | None = None,
        **settings: Any) -> list[Any]:
    """Run ``host(rt, *args)`` once in each of ``nranks`` rank processes; return their results.

    ``window_bytes`` sizes each rank's data heap; any other :class:`Config` field may be given by
    name (unknown names raise). Raises :class:`RunError` (``DeadlockError``, ``RunTimeout``) with
    one report naming the failing rank, block and traceback.
    """
    if not callable(host):
        raise ArgumentError(f"run: host must be callable, got {type(host).__name__}")
    if "heap_bytes" in settings:  # the Config name of window_bytes
        if window_bytes is not None:
            raise ArgumentError("run: give window_bytes or heap_bytes, not both")
        window_bytes = settings.pop("heap_bytes")
    if config is None:
        config = Config.from_kwargs(nranks=nranks, blocks=blocks, heap_bytes=window_bytes,
                                    timeout=timeout, seed=seed, mode=mode, **settings)
    elif any(v is not None for v in (nranks, blocks, window_bytes, timeout, seed, mode)) or settings:
        raise ArgumentError("run: pass either config= or individual settings, not both")
    if config.transport == "mpi":  # this process is one rank of an mpiexec job
        from .mpi import run_mpi

        return run_mpi(host, config, args, nranks)
    return _Launcher(config, host, args).run()


class _Interrupted(BaseException):
    """SIGINT or SIGTERM reached the launcher (raised by its handler, caught by ``run``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Launcher:
    """One run. ``model`` is the factory of the run's execution model (a
    :class:`~shmcomm.core.model.RankModel` subclass, called with each rank's ``rt`` in the rank
    process); ``None`` takes the one :func:`shmcomm.exec.model_for` picks from ``config``. It is
    the execution-model seam's plug for models that are not (yet) a ``mode``: tests and tools
    construct ``_Launcher(config, host, args, model=MyRankModel).run()``; ``run()`` never passes
    it, so ``config.mode`` alone decides there."""

    def __init__(self, config: Config, host: Callable, args: tuple,
                 model: Callable[[RankRuntime], RankModel] | None = None) -> None:
        self.config = config
        self.host = host
        self.args = args
        self.model = model_for(config) if model is None else model  # chosen once, here
        self.config = getattr(self.model, "config", config)  # a replay brings its recorded seed
        self.pids: dict[int, int] = {}
        self.conns: dict[Connection, int] = {}
        self.results: dict[int, Any] = {}
        self.failures: list[Failure] = []
        self.secondary = 0
        self.exited: set[int] = set()
        self.ctl: C.Control | None = None
        self.transport: ShmTransport | None = None
        self.stopping = False  # set once teardown starts: signals then wait for it to finish
        self.signum: int | None = None  # the signal that interrupted the run, if any

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> list[Any]:
        cfg = self.config
        restore = self._catch_signals()
        try:
            try:
                self._start()
                self._supervise()
            except (_Interrupted, KeyboardInterrupt) as exc:
                self.stopping = True
                self.signum = getattr(exc, "signum", signal.SIGINT)
                how = ("interrupted by SIGINT (Ctrl-C)" if self.signum == signal.SIGINT
                       else f"terminated by {signal.Signals(self.signum).name}")
                self.failures.append(Failure(None, None, "interrupt",
                                             f"{how}; every rank process was stopped"))
            finally:
                self.stopping = True  # a second Ctrl-C must not cut the teardown short
                self._stop_all()
                self._observed_end()
                self._release()
        finally:
            restore()
            if cfg.trace and cfg.mode != "schedule":  # schedule mode writes its own trace
                self._finish_trace()
        if self.failures:
            first = self.failures[0].kind
            cls = {"deadlock": DeadlockError, "timeout": RunTimeout,
                   "race": RaceReport}.get(first, RunError)
            err = cls(self.failures, cfg.seed, self.secondary)
            err.signum = self.signum  # type: ignore[attr-defined]  # the CLI's exit status 128+n
            err.schedule = getattr(self.model, "schedule", None)  # type: ignore[attr-defined]
            hint = getattr(self.model, "hint", None)  # how to replay it (schedule mode)
            if hint is not None:
                err.hint = hint(self.host, self.args)  # type: ignore[attr-defined]
            raise err
        return [self.results[r] for r in range(cfg.nranks)]

    def _finish_trace(self) -> None:
        """The ranks are gone: rewrite their trace once, with metadata and flow arrows."""
        cfg = self.config
        host = getattr(self.host, "func", self.host)  # a functools.partial's function
        finalize(cfg.trace, {
            "tool": "shmcomm", "host": f"{getattr(host, '__module__', '?')}:"
                                      f"{getattr(host, '__qualname__', repr(host))}",
            "nranks": cfg.nranks, "blocks": cfg.blocks, "mode": cfg.mode, "seed": cfg.seed,
            "hazards": cfg.hazards if cfg.mode == "hazard" else None,
            "result": self.failures[0].kind if self.failures else "ok",
            "failure": str(self.failures[0]).splitlines()[0] if self.failures else None})

    def _start(self) -> None:
        """Map the run's memory and start its rank processes."""
        cfg = self.config
        # a model that coordinates across processes keeps its shared state in the control
        # segment (``shared_bytes``), set up by ``prepare`` before the ranks start
        self.ctl = C.Control(cfg.nranks, extra_bytes=getattr(self.model, "shared_bytes", 0))
        self._prepare_model()
        self.transport = ShmTransport(cfg.nranks, cfg.signal_bytes, cfg.heap_bytes)
        for rank in range(cfg.nranks):
            self._spawn(rank)

    def _prepare_model(self) -> None:
        prepare = getattr(self.model, "prepare", None)
        if prepare is not None:
            prepare(self.ctl)

    def _collect_model(self) -> None:
        collect = getattr(self.model, "collect", None)
        if collect is not None and self.ctl is not None:  # what the model learnt (the schedule)
            collect(self.ctl, self.failures)

    def _release(self) -> None:
        """Unmap the run's memory (after the model has read what it needs from it)."""
        if self.transport is not None:
            self.transport.close()
        if self.ctl is not None:
            self._collect_model()
            self.ctl.close()

    def _catch_signals(self) -> Callable[[], None]:
        """Turn SIGINT / SIGTERM into one clean teardown; returns the function restoring the old
        handlers. Only the main thread may set handlers: elsewhere Ctrl-C stays KeyboardInterrupt."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def handler(signum: int, frame: Any) -> None:
            if self.stopping:
                return  # already tearing down: finish that first
            self.stopping = True
            raise _Interrupted(signum)

        for s in old:
            signal.signal(s, handler)

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)

        return restore

    def _spawn(self, rank: int) -> None:
        reader, writer = Pipe(duplex=False)
        parent = os.getpid()
        pid = fork_rank(lambda: _rank_main(rank, parent, self.config, self.transport, self.ctl,
                                           writer, self.host, self.args, self.model),
                        [reader, *self.conns])
        writer.close()
        self.pids[rank] = pid
        self.conns[reader] = rank

    def _supervise(self) -> None:
        cfg = self.config
        start = time.monotonic()
        abort_at: float | None = None
        deadlock = DeadlockWatch(self.ctl, self.transport, cfg.deadlock_grace)
        while self.conns:
            # a model that reports from the launcher (the race detector) has its own pipes
            observed = list(getattr(self.model, "conns", ()))
            for conn in wait(list(self.conns) + observed, timeout=POLL_S):
                if conn in self.conns:
                    self._receive(conn)  # type: ignore[arg-type]
                else:
                    self.failures.extend(self.model.receive(conn))  # type: ignore[attr-defined]
            now = time.monotonic()
            if abort_at is None:
                if self.failures:
                    self.ctl.abort(C.ABORT_FAILURE)
                    abort_at = now
                elif now - start > cfg.timeout:
                    self.ctl.abort(C.ABORT_TIMEOUT)
                    self.failures.append(Failure(
                        None, None, "timeout",
                        f"the run did not finish within timeout={cfg.timeout:g} s"
                        + self._still_running()))
                    abort_at = now
                else:
                    live = [r for r in self.conns.values() if r not in self.results]
                    report = deadlock.check(now, live, sorted(self.results))
                    if report:
                        self.ctl.abort(C.ABORT_DEADLOCK)
                        self.failures.insert(0, Failure(None, None, "deadlock", report))
                        abort_at = now
            elif now - abort_at > STOP_GRACE_S:
                for conn, rank in list(self.conns.items()):
                    self._kill(rank)
                    self.secondary += 1
                    self._close(conn)

    def _observed_end(self) -> None:
        """A model that reports from the launcher reports what it found at the end of the run:
        before any other failure, which it may explain (a race behind a wrong result)."""
        finish = getattr(self.model, "finish", None)
        if finish is not None:
            found = finish()
            if self.signum is None:
                self.failures[:0] = found

    def _receive(self, conn: Connection) -> None:
        rank = self.conns[conn]
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            status = self._reap(rank, block=True)
            if rank not in self.results:
                self._record_death(rank, status)
            self._close(conn)
            return
        except Exception as exc:  # a result that does not unpickle here
            self.failures.append(Failure(rank, None, "exception",
                                         f"its result could not be received: {exc!r}"))
            return
        kind, payload = msg
        if kind == "ok":
            self.results[rank] = payload
        elif kind == "aborted":
            self.secondary += 1
            self.results[rank] = None
        else:
            self.failures.append(Failure(**payload))
            self.results[rank] = None

    def _record_death(self, rank: int, status: int | None) -> None:
        if self.ctl.aborted() and self.failures:
            self.secondary += 1
            self.results[rank] = None
            return
        if status is None:
            why = "exited without a report"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            why = f"died from signal {signal.Signals(sig).name}"
        else:
            why = f"exited with status {os.WEXITSTATUS(status)} without a report"
        self.failures.append(Failure(rank, None, "crash", f"rank process (pid {self.pids[rank]}) {why}"))
        self.results[rank] = None

    def _still_running(self) -> str:
        return "; ranks still running: " + ", ".join(str(r) for r in sorted(self.conns.values()))

    def _reap(self, rank: int, block: bool) -> int | None:
        if rank in self.exited:
            return None
        try:
            pid, status = os.waitpid(self.pids[rank], 0 if block else os.WNOHANG)
        except ChildProcessError:
            self.exited.add(rank)
            return None
        if pid == 0:
            return None
        self.exited.add(rank)
        return status

    def _kill(self, rank: int) -> None:
        if rank not in self.exited:
            try:
                os.kill(self.pids[rank], signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _close(self, conn: Connection) -> None:
        self.conns.pop(conn, None)
        conn.close()

    def _stop_all(self) -> None:
        """Whatever happened: no rank process outlives the launcher's return."""
        if any(r not in self.exited for r in self.pids):
            self.ctl.abort(C.ABORT_INTERRUPT)
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and any(
                    self._reap(r, block=False) is None and r not in self.exited for r in self.pids):
                time.sleep(0.01)
            for r in self.pids:
                self._kill(r)
            for r in self.pids:
                self._reap(r, block=True)
        for conn in list(self.conns):
            self._close(conn)


# --- the rank process ---------------------------------------------------------------------------

def fork_rank(body: Callable[[], int], close: list[Connection]) -> int:
    """Fork a rank process that closes ``close`` (the parent's ends) and exits with ``body()``'s
    status; returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the rank process; never returns
        code = 1
        try:
            for c in close:
                c.close()
            code = body()
        finally:
            os._exit(code)
    return pid


def _rank_main(rank: int, parent: int, config: Config, transport: ShmTransport, ctl: C.Control,
               conn: Connection, host: Callable, args: tuple,
               model: Callable[[RankRuntime], RankModel]) -> int:
    """Body of one rank process. Returns its exit status."""
    if not rank_process_setup(parent):
        return 1
    return serve_run(rank, config, transport, ctl, conn, host, args, model)


def rank_process_setup(parent: int) -> bool:
    """A new rank process: die with the launcher, leave Ctrl-C to it. False if it is gone."""
    at.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the launcher died before prctl took effect
        return False
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher handles Ctrl-C for everyone
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return True


def serve_run(rank: int, config: Config, transport: ShmTransport, ctl: C.Control,
              conn: Connection, host: Callable, args: tuple,
              model: Callable[[RankRuntime], RankModel]) -> int:
    """One run's work in a rank process: ``host(rt, *args)``, its result or failure sent to the
    launcher. Returns the rank's exit status."""
    sys.setswitchinterval(config.switch_interval)
    ctl.set_rank(rank, C.R_PID, os.getpid())
    ctl.set_rank(rank, C.R_STATE, C.R_RUNNING)
    msg: tuple[str, Any]
    rt: RankRuntime | None = None
    try:
        transport.attach(rank)
        rt = RankRuntime(rank, config, Windows(transport), ctl, model)
        result = host(rt, *args)
        rt.synchronize()  # launches left running on streams finish (and report) before we exit
        msg = ("ok", result)
    except KernelError as exc:
        msg = _failure_msg(rank, exc.block, exc.exc, exc.tb)
    except BaseException as exc:
        msg = _failure_msg(rank, None, exc, traceback.format_exc())
    if msg[0] == "error":
        ctl.abort(C.ABORT_FAILURE)
    if rt is not None:
        rt.model.close()
    try:
        conn.send(msg)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        conn.send(_failure_msg(rank, None, exc, f"host() returned an object that cannot be "
                               f"pickled back to the launcher: {exc!r}"))
        ctl.abort(C.ABORT_FAILURE)
        return 1
    except (BrokenPipeError, OSError):
        return 1
    at.store(ctl.rank_addr(rank, C.R_STATE), C.R_EXITED if msg[0] == "ok" else C.R_FAILED)
    return 0 if msg[0] == "ok" else 1


def _failure_msg(rank: int, block: int | None, exc: BaseException, tb: str) -> tuple[str, Any]:
    if isinstance(exc, Aborted):
        return ("aborted", str(exc))
    return ("error", dict(rank=rank, block=block, kind="exception",
                          message=f"{type(exc).__name__}: {exc}", traceback=tb))


