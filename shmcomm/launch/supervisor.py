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
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection, Pipe
from typing import Any

import shmcomm.launch.wire as wire  # (a module: tests patch its MAX_REPORT_BYTES)

from ..config import Config
from ..core import control as C
from ..core.model import RankModel, RunModel
from ..errors import (
    ArgumentError,
    DeadlockError,
    Failure,
    RaceReport,
    RunError,
    RunTimeout,
    ShmcommError,
)
from ..exec.compose import Execution, compose, observed
from ..exec.trace import finalize
from ..native import crashnote
from ..transports.shm import ShmTransport
from .cuttrace import annotate, cut_reason, finish_cut
from .deadlock import CorruptControl, DeadlockWatch
from .descendants import RunProcesses
from .launchers import external_launcher
from .paths import check_run_paths
from .polling import Readable
from .rank import fork_rank, rank_main
from .reaping import reapable_children
from .resources import death_hint, oom_kills
from .stuck import StoppedWatch, WaitLog, deadlock_sites, stuck_report
from .tracefile import TraceFile
from .turncpu import CpuClaim, claim_cpu
from .wire import MAX_ADVICE, MAX_MESSAGE_CHARS, clip, failure_from, loads_bounded

POLL_S = 0.02
STOP_GRACE_S = 1.0
REAP_GRACE_S = 5.0  # after the kill: a rank not reaped by then is left to _stop_all
STALLED_S = 1.0  # a supervision poll this late means the launcher itself was stopped
WAITLOG_S = 0.25  # how often the launcher notes who waits on what (for the stuck report)
REPORT_CHARS = 8000  # of the first failure's report kept in a trace's metadata


def run(host: Callable[..., Any], nranks: int | None = None, *, blocks: int | None = None,
        window_bytes: int | None = None, timeout: float | None = None, seed: int | None = None,
        mode: str | None = None, args: tuple = (), config: Config | None = None,
        model: RunModel | type[RankModel] | None = None, observers: Iterable[Any] = (),
        **settings: Any) -> list[Any]:
    """Run ``host(rt, *args)`` once in each of ``nranks`` rank processes; return their results.

    ``window_bytes`` sizes each rank's data heap; any other :class:`Config` field may be given by
    name (unknown names raise). ``model`` runs the ranks under an execution model of your own
    (a :class:`~shmcomm.core.model.RunModel`, or a :class:`~shmcomm.core.model.RankModel`
    subclass) instead of the one the configuration composes. ``observers`` watch the run
    beside the configuration's own (each a name of :data:`shmcomm.exec.observers.OBSERVERS`,
    an :class:`~shmcomm.core.observer.Observer` subclass or an instance, which keeps what it
    found after the run: its ``summary()``, on a passing run too). ``strategy`` (schedule
    mode) is a name spec (``"pct:3"``) or a strategy object of your own (see
    :mod:`shmcomm.exec.schedule.strategies`). Raises :class:`RunError`
    (``DeadlockError``, ``RunTimeout``) with one report naming the failing rank, block and
    traceback.
    """
    if not callable(host):
        raise ArgumentError(f"run: host must be callable, got {type(host).__name__}")
    if "heap_bytes" in settings:  # the Config name of window_bytes
        if window_bytes is not None:
            raise ArgumentError("run: give window_bytes or heap_bytes, not both")
        window_bytes = settings.pop("heap_bytes")
    strategy = settings.get("strategy")
    if strategy is not None and not isinstance(strategy, str):  # a strategy object
        del settings["strategy"]
    else:
        strategy = None
    if config is None:
        config = Config.from_kwargs(nranks=nranks, blocks=blocks, heap_bytes=window_bytes,
                                    timeout=timeout, seed=seed, mode=mode, **settings)
    elif any(v is not None for v in (nranks, blocks, window_bytes, timeout, seed, mode)) or settings:
        raise ArgumentError("run: pass either config= or individual settings, not both")
    launcher = external_launcher(config.transport)  # mpi: this process is one rank of the job
    if launcher is not None:
        if model is not None or observers or strategy is not None:
            raise ArgumentError(f"run: model=, observers= and a strategy object need "
                                f"transport='shm' (ranks "
                                f"started by {config.transport} have no launcher to compose "
                                "them)")
        return launcher(host, config, args, nranks)
    return Launcher(config, host, args, model=model, observers=observers,
                    strategy=strategy).run()


def run_model(config: Config, model: RunModel | type[RankModel]) -> RunModel:
    """``model`` as a :class:`RunModel`: a bare :class:`RankModel` subclass has no
    launcher-side part (every hook the base's no-op)."""
    if isinstance(model, RunModel):
        return model
    if isinstance(model, type) and issubclass(model, RankModel):
        return RunModel(config, model)
    raise ArgumentError(f"model: a RunModel (shmcomm.core.model) or a RankModel subclass, got "
                        f"{type(model).__name__}")


class _Interrupted(BaseException):
    """SIGINT or SIGTERM reached the launcher (raised by its handler, caught by ``run``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Launcher:
    """One run, on the launcher's side: fork the ranks (their body is :mod:`.rank`), supervise
    them, read their reports (:mod:`.wire`), clean up. ``model`` is the run's execution model
    (a :class:`~shmcomm.core.model.RunModel`, or a :class:`~shmcomm.core.model.RankModel`
    subclass for a model with no launcher-side part); ``None`` takes the one
    :func:`shmcomm.exec.compose.compose` builds from ``config``. Tools that run a model that is
    not a ``mode`` (the exhaustive explorer) use ``Launcher(config, host, args,
    model=...).run()`` or ``shmcomm.run(host, ..., model=...)``; the pool subclasses it."""

    def __init__(self, config: Config, host: Callable, args: tuple,
                 model: RunModel | type[RankModel] | None = None,
                 observers: Iterable[Any] = (), strategy: Any = None) -> None:
        execution = Execution.of(config)  # a combination that does not exist stops here
        check_run_paths(config.trace, config.record,  # before the model reads one
                        config.replay if execution.interleaving == "scheduled" else "")
        self.host = host
        self.args = args
        self.model = (compose(config, observers, strategy) if model is None  # once, here
                      else observed(run_model(config, model), observers))
        self.config = self.model.config  # a replay brings its recorded seed
        # what runs, as decided once (a replay's: the recorded run's); a model of the user's
        # without one runs the configuration's
        self.execution = self.model.execution or execution
        self.pids: dict[int, int] = {}
        self.conns: dict[Connection, int] = {}
        self.results: dict[int, Any] = {}
        self.failures: list[Failure] = []
        # advisory checkers' findings, per rank: printed beside a failure in rank order (not in
        # the order they arrived, so a scheduled run's report is the same for the same seed)
        self.advice: dict[int, list[str]] = {}
        self.secondary = 0
        self.exited: set[int] = set()
        self.ctl: C.Control | None = None
        self.transport: ShmTransport | None = None
        self.stopping = False  # set once teardown starts: signals then wait for it to finish
        self.signum: int | None = None  # the signal that interrupted the run, if any
        self.late_signum: int | None = None  # one that came during the teardown
        self.stacks: dict[int, Any] = {}  # rank -> unlinked file its stack dumps go to
        self.waitlog: WaitLog | None = None
        self.oom_before = oom_kills()  # a rank SIGKILLed after this count grew: out of memory
        self.started_at: float | None = None  # when supervision began
        self.stalled_s = 0.0  # time the launcher itself was stopped (not run time)
        self.cpu_claim: CpuClaim | None = None  # the CPU a scheduled run keeps its ranks on
        self.summary = ""  # what the run's observers report (after the run)

    # -- lifecycle -------------------------------------------------------------------------

    def run(self) -> list[Any]:
        trace = TraceFile(self.config.trace) if self.config.trace else None
        try:
            self.procs = self._processes()
        except BaseException:
            if trace is not None:
                trace.discard()
            raise
        if trace is not None:
            self.procs.note_file(trace.aside)  # removed by the sweeper if we are killed
        if trace is not None:  # ranks write beside the path; the file moves there at the end
            self.config = self.config.replace(trace=trace.aside)
            self.model.set_trace(trace.aside)  # a model that writes it itself writes it there
        cfg = self.config
        restore = self._catch_signals()
        reapable = reapable_children()  # a rank's SIGSEGV is lost if SIGCHLD is ignored
        try:
            try:
                self._claim_cpu()
                self._start()
                self._supervise()
                self._check_complete()
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
                self._overran()
                self._control_overwritten()  # (a kernel's last act may have been the scribble)
                self._release()
                self._signal_in_teardown()
        finally:
            if self.cpu_claim is not None:
                self.cpu_claim.release()
            restore()
            reapable()
            if trace is not None:
                if self.execution.trace_writer == "events":  # else the model wrote it
                    self._finish_trace()  # in the file beside the path, before it moves there
                else:
                    annotate(self.config.trace, {"host": self._host_name(),
                                                 "seed": self.config.seed, **self._outcome()})
                problem = trace.finish()
                if problem:
                    self.failures.append(Failure(None, None, "exception", problem))
            self._end_processes()  # what the ranks forked (setsid included) dies here
        self.summary = self.model.summary()  # the observers' report, passed or failed
        if self.failures:
            first = self.failures[0].kind
            cls = {"deadlock": DeadlockError, "timeout": RunTimeout,
                   "race": RaceReport}.get(first, RunError)
            advice = [a for r in sorted(self.advice) for a in self.advice[r]][:MAX_ADVICE]
            err = cls(self.failures, self.config.seed, self.secondary, advice)
            err.signum = self.signum  # type: ignore[attr-defined]  # the CLI's exit status 128+n
            err.schedule = self.model.schedule  # type: ignore[attr-defined]
            hint = self.model.hint(self.host, self.args)  # how to replay it (a scheduled run)
            if hint:
                err.hint = hint  # type: ignore[attr-defined]
            err.summary = self.summary  # type: ignore[attr-defined]
            raise err
        return [self.results[r] for r in range(cfg.nranks)]

    def _host_name(self) -> str:
        host = getattr(self.host, "func", self.host)  # a functools.partial's function
        return f"{getattr(host, '__module__', '?')}:{getattr(host, '__qualname__', repr(host))}"

    def _outcome(self) -> dict[str, Any]:
        """The run's result for a trace's metadata: the first failure's kind, first line and
        report (a race's two accesses: a timeline marks them)."""
        first = self.failures[0] if self.failures else None
        return {"result": first.kind if first else "ok",
                "failure": str(first).splitlines()[0] if first else None,
                "report": str(first)[:REPORT_CHARS] if first else None}

    def _control_overwritten(self) -> bool:
        """Whether the control segment's fixed part was overwritten (then the run fails with
        that first: nothing else read from the segment can be trusted)."""
        problem = self.ctl.check() if self.ctl is not None else None
        if problem is None:
            return False
        if not any(f.kind == "corrupt" and f.rank is None for f in self.failures):
            self.failures.insert(0, Failure(None, None, "corrupt", problem))
        return True

    def _signal_in_teardown(self) -> None:
        """SIGINT / SIGTERM that came while the run was being torn down still ends it as the
        signal asks: the run fails as interrupted (exit status 128 + n) after its report."""
        if self.late_signum is None or self.signum is not None:
            return
        self.signum = self.late_signum
        how = ("interrupted by SIGINT (Ctrl-C)" if self.signum == signal.SIGINT
               else f"terminated by {signal.Signals(self.signum).name}")
        self.failures.append(Failure(None, None, "interrupt",
                                     f"{how} while the run ended; every rank process was stopped"))

    def _finish_trace(self) -> None:
        """The ranks are gone: rewrite their trace once, with metadata and flow arrows."""
        cfg = self.config
        meta = {
            "tool": "shmcomm", "host": self._host_name(),
            "nranks": cfg.nranks, "blocks": cfg.blocks, **self.execution.trace_meta(cfg),
            "seed": cfg.seed, **self._outcome()}
        reason = cut_reason(self.failures)
        if reason:  # hung agents never wrote their events: what the launcher saw of them
            finish_cut(cfg.trace, meta, reason, self.waitlog, self.ctl, cfg.nranks)
        else:
            finalize(cfg.trace, meta)

    def _start(self) -> None:
        """Map the run's memory and start its rank processes."""
        cfg = self.config
        # a model that coordinates across processes keeps its shared state in the control
        # segment (``shared_bytes``), set up by ``prepare`` before the ranks start
        self.ctl = C.Control(cfg.nranks, extra_bytes=self.model.shared_bytes)
        self._prepare_model()
        self.transport = ShmTransport(cfg.nranks, cfg.signal_bytes, cfg.heap_bytes)
        for rank in range(cfg.nranks):
            try:
                self.stacks[rank] = tempfile.TemporaryFile(prefix="shmcomm-stacks-")
            except OSError as exc:  # EMFILE, or no writable temporary directory
                raise ShmcommError(
                    f"cannot start rank {rank}: no file for its stack dumps: {exc} (raise the "
                    "open-files limit, ulimit -n, or lower nranks)") from None
        for rank in start_order(cfg.nranks, self.model.first_rank):
            self._spawn(rank)
        self.model.started()  # the launcher holds no write end of a rank's pipe from here

    def _claim_cpu(self) -> None:
        """A run that executes one agent at a time keeps its ranks on one CPU that no other
        run holds (``pin_ranks``): each hand-off of the turn is then a switch on that CPU, not
        a wake of another (see :mod:`.turncpu`)."""
        self.model.turn_cpu = None
        if not (self.config.pin_ranks and self.model.one_at_a_time):
            return
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            self.cpu_claim = claim_cpu(cpus)
            if self.cpu_claim is not None:
                self.model.turn_cpu = self.cpu_claim.cpu

    def _processes(self) -> RunProcesses:
        """Who tracks the run's processes and their descendants (one per run here)."""
        return RunProcesses()

    def _end_processes(self) -> None:
        self.procs.close()

    def _prepare_model(self) -> None:
        self.model.prepare(self.ctl)

    def _collect_model(self) -> None:
        if self.ctl is not None:  # what the model learnt (the schedule)
            self.model.collect(self.ctl, self.failures)

    def _release(self) -> None:
        """Unmap the run's memory (after the model has read what it needs from it)."""
        if self.transport is not None:
            self.transport.close()
        if self.ctl is not None:
            self._collect_model()
            self.ctl.close()

    def _check_complete(self) -> None:
        """No false pass: a run that was aborted, or in which a rank did not report success,
        fails even when no rank reported a failure (a host that caught everything)."""
        if self.failures:
            return
        assert self.ctl is not None  # set by _start
        reason = self.ctl.aborted()
        missing = [r for r in range(self.config.nranks) if r not in self.results]
        if reason or self.secondary or missing:
            why = (f"the run was aborted ({C.ABORT_NAMES.get(reason, f'reason {reason}')})"
                   if reason else "the run was aborted")
            self.failures.append(Failure(None, None, "exception", (
                f"{why} but no rank reported the cause; {self.secondary} agent(s) stopped by "
                f"the abort{', no report from ranks ' + str(missing) if missing else ''}"),
                cause="unreported-abort"))

    def _catch_signals(self) -> Callable[[], None]:
        """Turn SIGINT / SIGTERM into one clean teardown; returns the function restoring the old
        handlers. Only the main thread may set handlers: elsewhere Ctrl-C stays KeyboardInterrupt."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGTSTP)}

        def handler(signum: int, frame: Any) -> None:
            if self.stopping:  # already tearing down (bounded): finish that first, then end
                self.late_signum = self.late_signum or signum  # as the signal asks (128 + n)
                return
            self.stopping = True
            raise _Interrupted(signum)

        def suspend(signum: int, frame: Any) -> None:
            # Ctrl-Z: the ranks lead their own process groups, so the terminal stops only us;
            # stop them too, then ourselves; on SIGCONT (fg, bg) continue them
            groups = [pid for r, pid in self.pids.items() if r not in self.exited]
            for pid in groups:
                _signal_group(pid, signal.SIGSTOP)
            os.kill(os.getpid(), signal.SIGSTOP)
            for pid in groups:
                _signal_group(pid, signal.SIGCONT)

        for s in old:
            signal.signal(s, suspend if s == signal.SIGTSTP else handler)

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)

        return restore

    def _spawn(self, rank: int) -> None:
        try:
            reader, writer = Pipe(duplex=False)
        except OSError as exc:  # EMFILE / ENFILE: too many open files
            raise ShmcommError(f"cannot start rank {rank}: no pipe for its report: {exc} "
                               "(raise the open-files limit, ulimit -n, or lower nranks)") from None
        parent = os.getpid()
        procs = self.procs

        def body() -> int:
            procs.enter()  # before user code: whatever it forks is tracked
            assert self.transport is not None and self.ctl is not None  # set by _start
            return rank_main(rank, parent, self.config, self.transport, self.ctl, writer,
                              self.host, self.args, self.model, self.stacks[rank])

        try:
            pid = fork_rank(body, [reader, *self.conns])
        except ShmcommError:
            reader.close()
            writer.close()
            raise
        writer.close()
        procs.note_rank(pid)
        self.pids[rank] = pid
        self.conns[reader] = rank

    def _supervise(self) -> None:
        cfg = self.config
        start = last = self.started_at = time.monotonic()
        self.model.read_deadline = start + cfg.timeout  # no read of a rank's pipe waits past it
        abort_at: float | None = None
        assert self.ctl is not None and self.transport is not None  # set by _start
        deadlock = DeadlockWatch(self.ctl, self.transport, cfg.deadlock_grace)
        self.waitlog = WaitLog(self.ctl, self.transport)
        stopped = StoppedWatch()
        readable = Readable()
        logged = start
        while self.conns or any(r not in self.exited and r not in self.results
                                for r in self.pids):
            # a model that reports from the launcher (the race detector) has its own pipes
            observed = list(self.model.conns)
            if self.conns or observed:
                for conn in readable.wait([*self.conns, *observed], POLL_S):
                    if conn in self.conns:
                        self._receive(conn)
                    elif conn in observed:
                        self.failures.extend(self.model.receive(conn))
            else:
                time.sleep(POLL_S)
            self._poll_exits()
            now = time.monotonic()
            if now - last > STALLED_S:  # the launcher was stopped (SIGSTOP, Ctrl-Z): not run time
                start += now - last - POLL_S
                self.stalled_s += now - last - POLL_S
                deadlock.key = None  # judge what the ranks do after the resume, not before
                stopped.reset()
            last = now
            if abort_at is None and now - logged > WAITLOG_S:
                self.waitlog.record([r for r in self.pids if r not in self.exited])
                logged = now
            if abort_at is None:
                if self._control_overwritten():
                    self.ctl.abort(C.ABORT_FAILURE)
                    abort_at = now
                elif self.failures:
                    if self.failures[0].kind == "exception" and "WaitTimeout" in \
                            self.failures[0].message:
                        self.failures[0].traceback += self._diagnose("a wait timed out")
                    self.ctl.abort(C.ABORT_FAILURE)
                    abort_at = now
                elif now - start > cfg.timeout:
                    message = (f"the run did not finish within timeout={cfg.timeout:g} s"
                               + self._still_running())
                    self.failures.append(Failure(None, None, "timeout", message,
                                                 self._diagnose("the run timed out")))
                    self.ctl.abort(C.ABORT_TIMEOUT)
                    abort_at = now
                elif (halted := stopped.check(now, {r: p for r, p in self.pids.items()
                                                     if r not in self.exited})):
                    self.failures.append(Failure(None, None, "crash", halted,
                                                 self._diagnose("a rank process is stopped")))
                    self.ctl.abort(C.ABORT_FAILURE)
                    abort_at = now
                else:
                    live = [r for r in self.pids if r not in self.results and r not in self.exited]
                    try:
                        report = deadlock.check(now, live, sorted(self.results))
                    except CorruptControl as exc:
                        self.failures.append(Failure(exc.rank, exc.block, "corrupt", str(exc)))
                        report = None
                    if report:  # where each waits, read before the abort wakes them
                        sites = self._deadlock_sites(live)
                        self.ctl.abort(C.ABORT_DEADLOCK)
                        self.failures.insert(0, Failure(None, None, "deadlock",
                                                        report + ("\n" + sites if sites else "")))
                        abort_at = now
            elif now - abort_at > STOP_GRACE_S:
                for rank in self.pids:
                    self._kill(rank)
                if now - abort_at > STOP_GRACE_S + REAP_GRACE_S:
                    break  # unkillable (uninterruptible sleep): _stop_all tries once more

    def _deadlock_sites(self, live: list[int]) -> str:
        """The user's lines the deadlocked agents wait at (see :func:`stuck.deadlock_sites`)."""
        if self.ctl is None:
            return ""
        return deadlock_sites(self.ctl, {r: self.pids[r] for r in live if r in self.pids},
                              self.stacks)

    def _diagnose(self, why: str) -> str:
        """The stuck-agent report: wait-for table, agents not waiting and their state, stacks."""
        live = {r: pid for r, pid in self.pids.items() if r not in self.exited}
        try:
            assert self.ctl is not None and self.transport is not None  # set by _start
            return "\n" + stuck_report(self.ctl, self.transport, live, self.stacks, why,
                                        self.waitlog)
        except Exception as exc:  # noqa: BLE001 -- a diagnosis must never hide the failure
            return f"\n(no stuck-agent diagnosis: {type(exc).__name__}: {exc})"

    def _overran(self) -> None:
        """A run that took longer than its timeout never passes, even when the supervisor
        could not stop it in time (a slow judge, a loaded box): it timed out."""
        if self.failures or self.signum is not None or self.started_at is None:
            return
        took = time.monotonic() - self.started_at - self.stalled_s
        if took > self.config.timeout:
            self.failures.append(Failure(None, None, "timeout", (
                f"the run did not finish within timeout={self.config.timeout:g} s (it took "
                f"{took:.1f} s, including the end-of-run checks)")))

    def _observed_end(self) -> None:
        """A model that reports from the launcher reports what it found at the end of the run:
        before any other failure, which it may explain (a race behind a wrong result)."""
        found = self.model.finish()
        if self.signum is None:
            self.failures[:0] = found

    def _receive(self, conn: Connection) -> None:
        rank = self.conns[conn]
        try:
            data = conn.recv_bytes(wire.MAX_REPORT_BYTES)
        except (EOFError, OSError):  # the rank exited (or closed its pipe): _poll_exits reaps it
            self._close(conn)
            return
        try:
            msg = loads_bounded(data, max(1.0, self.config.timeout))
        except Exception as exc:  # noqa: BLE001 -- a result that does not unpickle here
            self.failures.append(Failure(rank, None, "exception",
                                         f"its result could not be received: {exc}"))
            self.results[rank] = None
            return
        kind, payload = msg
        if kind == "advice":  # a passing run drops it; a failing one prints it as likely causes
            if isinstance(payload, list):
                self.advice.setdefault(rank, []).extend(
                    clip(a, MAX_MESSAGE_CHARS // 4) for a in payload[:MAX_ADVICE] if isinstance(a, str))
            return
        if kind == "ok":
            self.results[rank] = payload
        elif kind == "aborted":
            self.secondary += 1
            self.results[rank] = None
        else:
            self.failures.append(failure_from(rank, payload))
            self.results[rank] = None

    def _poll_exits(self) -> None:
        """Reap every rank that exited; kill what it left in its process group first (a rank
        is finished when it is reaped, not when its pipe closes: a forked child may hold it)."""
        for rank, pid in self.pids.items():
            if rank in self.exited:
                continue
            try:
                gone: object = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                gone = True
            if gone is None:
                continue
            _kill_group(pid)  # while the zombie still holds the group's id
            status = self._reap(rank, block=True)
            for conn, r in list(self.conns.items()):
                if r == rank:
                    while conn in self.conns and conn.poll(0):  # what it sent before exiting
                        self._receive(conn)
                    self._close(conn)
            if rank not in self.results:
                self._record_death(rank, status)

    def _record_death(self, rank: int, status: int | None) -> None:
        assert self.ctl is not None  # set by _start
        note = crashnote.take(self.pids[rank])  # a native kernel's crash: its block and line
        if self.ctl.aborted() and self.failures:
            self.secondary += 1
            self.results[rank] = None
            return
        if status is None:
            why = "exited without a report"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            why = f"died from signal {signal.Signals(sig).name}" + death_hint(sig, self.oom_before)
        else:
            why = f"exited with status {os.WEXITSTATUS(status)} without a report"
        block, tb = (note[1], note[0]) if note is not None else (None, "")
        self.failures.append(Failure(rank, block, "crash", f"rank process (pid {self.pids[rank]}) {why}",
                                     tb))
        self.results[rank] = None

    def _still_running(self) -> str:
        live = sorted(r for r in self.pids if r not in self.exited)
        return "; ranks still running: " + ", ".join(str(r) for r in live)

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
        """Whatever happened: no rank process, nor anything it forked, outlives the launcher's
        return."""
        if any(r not in self.exited for r in self.pids):
            if self.ctl is not None:
                self.ctl.abort(C.ABORT_INTERRUPT)
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and any(r not in self.exited for r in self.pids):
                self._poll_exits()  # reaps each exited rank after killing its group
                time.sleep(0.01)
            for r in self.pids:
                if r not in self.exited:
                    _kill_group(self.pids[r])
                self._kill(r)
            for r in self.pids:
                self._reap(r, block=True)
        for conn in list(self.conns):
            self._close(conn)
        for f in self.stacks.values():
            f.close()


def _kill_group(pgid: int) -> None:
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:  # ESRCH: nothing left in it; EPERM: not ours (never joined it)
        pass


# --- the rank process ---------------------------------------------------------------------------

def start_order(nranks: int, first: int | None) -> list[int]:
    """The order the ranks start in: rank ``first`` (the one the run needs first), then the
    others in rank order."""
    if first is None or not 0 <= first < nranks:
        return list(range(nranks))
    return [first, *(r for r in range(nranks) if r != first)]
