"""``shmcomm.run`` under ``mpiexec``: every MPI process is one rank, on the mpi transport.

There is no launcher process: ``mpiexec`` starts the ranks, and each calls ``run`` itself (the
same program as on shm). First every rank checks that all agree on nranks, the program and every
setting that changes what the run means or its shape (``AGREED``: mode, blocks, seed, hazards,
strategy, the race detector, the timeouts, ...): the same ``ArgumentError`` on every rank
otherwise, naming the setting and the ranks that differ; a rank that never comes stops the job
at the run timeout. The ranks may sit on several hosts: each host has its own control
segment, and what crosses hosts goes by RMA (:mod:`shmcomm.launch.mpi_control`). In each rank a
watch thread supervises the run:

* a failing block (or host code) prints one report naming rank, block and traceback, then
  ``MPI_Abort`` stops every rank of the job (exit status 1);
* world rank 0 runs the deadlock watch of the shm launcher over every rank's control lines,
  reading other hosts' by RMA (a hang reported within ``deadlock_grace``);
* at the run timeout every rank sends its pending waits (what each waiting block waits on, the
  value it needs and the value it sees) to rank 0, which waits ``GATHER_S`` for the ranks that can
  still answer, prints one report with all of them and aborts the job (exit status 124).

On success every rank returns every rank's result (an ``allgather``), the trace is merged into
rank 0's file (:mod:`shmcomm.launch.mpi_trace`), and the windows are freed collectively. MPI's
files for the windows (``/dev/shm/mpich_shm_*``) are unlinked as soon as every rank has mapped
them, so a killed rank or ``mpiexec`` leaves nothing behind.
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import stat
import sys
import termios
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..core import control as C
from ..core.gm import Windows
from ..core.runtime import KernelError, report_thread_failures_once
from ..errors import Aborted, ArgumentError
from ..exec.compose import Execution, compose
from ..kernels.host import RankRuntime
from ..transports.mpi import MpiTransport, load_mpi
from .deadlock import WAIT_HEADER, DeadlockWatch, format_table
from .mpi_control import MpiControl, Progress
from .mpi_trace import merge_trace

POLL_S = 0.05
GATHER_S = 5.0  # how long rank 0 waits for the other ranks' pending waits after a timeout
KILL_WAIT_S = 30.0  # a rank stopped by another's failure waits this long for MPI_Abort to come
INTERRUPT_WAIT_S = 2.0  # the same after a forwarded Ctrl-C / SIGTERM, which must end promptly
STDERR_DRAIN_S = 2.0  # how long a report waits for mpiexec to read it before MPI_Abort
EXIT_FAILURE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 1, 124, 130
_TAG_WAITS = 71


def is_root() -> bool:
    """Whether this process is world rank 0 (the one that prints results)."""
    return load_mpi().COMM_WORLD.Get_rank() == 0


def run_mpi(host: Callable[..., Any], config: Config, args: tuple = (),
            nranks: int | None = None) -> list[Any]:
    """Run ``host(rt, *args)`` as this MPI process's rank; return every rank's result (rank
    order) on every rank. ``nranks``, when given, must equal the job's size."""
    MPI = load_mpi()
    world = MPI.COMM_WORLD
    size = world.Get_size()
    _agree(world, config, host, nranks)  # before any collective that could hang on a mismatch
    execution = Execution.of(config)  # what the mpi launcher cannot run stops here
    config = config.replace(nranks=size)  # checks the range of nranks too
    comm = world.Dup()  # the windows' and the results' communicator, apart from the user's
    watch_comm = world.Dup()  # the watch thread's messages never match the main thread's
    rank = comm.Get_rank()
    transport = MpiTransport(comm, config.signal_bytes, config.heap_bytes, config.mpi_peers)
    ctl = MpiControl(size, transport)
    # every rank of each host has mapped MPI's files for the windows: unlink their names now, so
    # that a rank or mpiexec killed later leaves nothing in /dev/shm (the mappings stay)
    mapped = mapped_mpi_segments()
    comm.Barrier()
    unlink_mpi_segments(mapped)
    progress = Progress(watch_comm, rank) if ctl.spans_hosts else None
    if progress is not None:
        progress.start()
    ctl.set_rank(rank, C.R_PID, os.getpid())
    ctl.set_rank(rank, C.R_STATE, C.R_RUNNING)
    sys.setswitchinterval(config.switch_interval)
    report_thread_failures_once()
    if threading.current_thread() is threading.main_thread():
        # mpiexec forwards SIGTERM when it is told to stop: leave as after a Ctrl-C, with MPI's
        # shared-memory files unlinked (Python's default would die at once and leave them)
        signal.signal(signal.SIGTERM, _raise_terminated)
    watch = _Watch(MPI, watch_comm, ctl, transport, config, rank)
    comm.Barrier()  # every rank's control line is set before the watch looks at them
    watch.start()
    result: Any = None
    try:
        rt: RankRuntime | None = RankRuntime(rank, config, Windows(transport), ctl, compose(config))
        result = host(rt, *args)
    except KernelError as exc:
        if isinstance(exc.exc, Aborted):
            _await_abort(world)
        _fail(transport, ctl, config, world, rank, f"rank {rank} block {exc.block}: "
              f"{type(exc.exc).__name__}: {exc.exc}", exc.tb)
    except Aborted:  # stopped by a failure, deadlock or timeout elsewhere: its rank reports
        _await_abort(world)
    except (KeyboardInterrupt, _Terminated) as exc:  # mpiexec forwards these to every rank
        ctl.abort(C.ABORT_INTERRUPT)
        how, code = (("interrupted by SIGINT (Ctrl-C)", EXIT_INTERRUPTED)
                     if isinstance(exc, KeyboardInterrupt) else ("terminated by SIGTERM", 143))
        reporter = _claim_report(transport, ctl, rank)  # one rank says so; every rank stops
        if reporter:
            print(f"shmcomm run {how}; every rank was stopped", file=sys.stderr, flush=True)
            drain_stderr(STDERR_DRAIN_S)
        unlink_mpi_segments()
        if not reporter:  # the signal reached every rank: an Abort from here could kill the
            time.sleep(INTERRUPT_WAIT_S)  # reporter before its line is out; its Abort ends us
        world.Abort(code)
        os._exit(code)
    except BaseException as exc:  # host code failed: one report, then the whole job stops
        _fail(transport, ctl, config, world, rank, f"rank {rank}: {type(exc).__name__}: {exc}",
              traceback.format_exc())
    ctl.set_rank(rank, C.R_STATE, C.R_EXITED)
    try:
        results = comm.allgather(result)
    except Exception as exc:  # a result that does not pickle
        _fail(transport, ctl, config, world, rank, f"rank {rank}: its result could not be sent "
              f"to the other ranks: {exc!r}", "")
    if config.trace:  # every rank's events in rank 0's file, whatever host wrote them
        merge_trace(comm, transport.node, rank, config.trace, {
            "tool": "shmcomm", "host": _program(host), "nranks": size, "blocks": config.blocks,
            **execution.trace_meta(config), "seed": config.seed, "transport": "mpi",
            "result": "ok",
            "failure": None})
    watch.stop()
    rt = None  # the runtime's views die before the windows do
    if progress is not None:
        comm.Barrier()  # no peer needs this rank's progress for its RMA any more
        progress.stop()
    ctl.close()
    transport.close()
    watch_comm.Free()
    comm.Free()
    return results


def _program(host: Callable[..., Any]) -> str:
    """The host program's name, as ranks compare it (``module:qualname``)."""
    return (f"{getattr(host, '__module__', '?')}:"
            f"{getattr(host, '__qualname__', type(host).__name__)}")


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _agree(world: Any, config: Config, host: Callable[..., Any], nranks: int | None) -> None:
    """Check that every rank of the job runs the same program with the same nranks and window
    sizes; raise the same ``ArgumentError`` on every rank if not. A rank that never comes (it
    failed before the run) stops the job after ``config.timeout`` instead of a silent hang."""
    size, rank = world.Get_size(), world.Get_rank()
    req = world.Ibarrier()
    deadline = time.monotonic() + config.timeout
    while not req.Test():
        if time.monotonic() > deadline:
            _die(world, _report("start-up", f"rank {rank}: not every rank of the {size}-rank "
                                f"mpiexec job reached shmcomm.run within timeout="
                                f"{config.timeout:g} s (one failed before it, or runs another "
                                "program)", config.seed), EXIT_TIMEOUT)
        time.sleep(0.01)
    mine = {"nranks": size if nranks is None else nranks, "program": _program(host),
            **{k: _comparable(getattr(config, k, None)) for k in AGREED},
            "trace": bool(config.trace)}  # the trace merge is collective: all trace, or none
    every = world.allgather(mine)
    problems = []
    asked = [r for r, m in enumerate(every) if m["nranks"] != size]
    if asked:
        got = sorted({every[r]["nranks"] for r in asked})
        problems.append(f"nranks={', '.join(map(str, got))} but mpiexec started {size} "
                        f"rank(s) (asked on {_ranks(asked)}); leave nranks out under the mpi "
                        "transport (mpiexec -n sets it)")
    for key in ("program", *AGREED, "trace"):
        values: dict[Any, list[int]] = {}
        for r, m in enumerate(every):
            values.setdefault(m[key], []).append(r)
        if len(values) > 1:
            problems.append(f"the ranks disagree on {key}: " + "; ".join(
                f"{v!r} on {_ranks(rs)}" for v, rs in values.items()))
    if problems:
        unlink_job_topology()  # every rank stops here: the job ends failed
        raise ArgumentError("run: " + "; ".join(problems) + "; every rank of the job must run "
                            "the same program with the same settings")


# every setting that changes what a run means or its shape: the ranks of a job must agree on
# each (the waiting policy, spinning, pinning and the switch interval only change speed)
AGREED = ("signal_bytes", "heap_bytes", "ub_bytes", "blocks", "mode", "seed", "hazards",
          "hazard_delay", "strategy", "replay", "record", "schedule_delay", "turn_timeout",
          "detect_races", "race_exitfirst", "timeout", "wait_timeout", "deadlock_grace",
          "set_semantics", "mpi_peers", "target")


def _comparable(value: Any) -> Any:
    """A setting's value as ranks compare it (hashable; sets and lists in a stable order)."""
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(map(repr, value)))
    if isinstance(value, (list, tuple)):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, repr(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class _Terminated(BaseException):
    """SIGTERM reached this rank (raised by its handler in the main thread)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def _report(kind: str, text: str, seed: int) -> str:
    return f"shmcomm run failed ({kind}) at {text}\nseed: {seed}"


def _die(world: Any, message: str, code: int) -> None:
    """Print ``message`` on stderr and stop every rank of the job with ``MPI_Abort``."""
    sys.stdout.flush()
    print(message, file=sys.stderr, flush=True)
    drain_stderr(STDERR_DRAIN_S)
    try:
        unlink_mpi_segments()
    finally:
        world.Abort(code)
        os._exit(code)  # should Abort ever return, this rank still ends here


def drain_stderr(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until what this process wrote to stderr has been read,
    when stderr is a pipe (mpiexec's proxy forwards a rank's output through one): an
    ``MPI_Abort`` right after the report can end the job before the proxy read it, and the
    user is left with an exit status and no reason. True once read (or not a pipe)."""
    try:
        if not stat.S_ISFIFO(os.fstat(2).st_mode):
            return True
    except OSError:
        return True
    unread = array.array("i", [0])
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.ioctl(2, termios.FIONREAD, unread, True)  # bytes still in the pipe
        except OSError:
            return True
        if unread[0] == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def mapped_mpi_segments() -> list[str]:
    """The paths of MPICH's shared-memory files (``/dev/shm/mpich_shm_*``) this process maps and
    whose names still exist."""
    try:
        with open("/proc/self/maps") as f:
            fields = (line.split(None, 5) for line in f)
            paths = {x[5].strip() for x in fields if len(x) == 6}
    except OSError:
        return []
    return sorted(p for p in paths
                  if p.startswith("/dev/shm/mpich_shm_") and not p.endswith("(deleted)"))


def unlink_mpi_segments(paths: list[str] | None = None) -> list[str]:
    """Remove the names of the shared-memory files this process has mapped from ``/dev/shm`` on
    behalf of MPI (``paths``, default every one mapped now): ``MPI_Abort`` or a kill stops the job
    before MPICH unlinks them, and they would stay behind. The mappings, and so the job, are not
    affected; only unlink a file every rank of the host has mapped already."""
    gone = []
    for path in mapped_mpi_segments() if paths is None else paths:
        try:
            os.unlink(path)
            gone.append(path)
        except OSError:  # another rank of the host was first
            pass
    if paths is None:  # the job is failing: mpiexec will not get to remove its topology file
        gone += unlink_job_topology()
    return gone


HYDRA_TOPOLOGY = "/tmp/hydra_hwloc_xmlfile_"


def unlink_job_topology() -> list[str]:
    """Remove this job's ``/tmp/hydra_hwloc_xmlfile_*``: MPICH's ``mpiexec`` writes the machine's
    topology there and deletes it when the job ends, but not when the job is aborted. The file is
    this job's exactly when this rank's parent (the job's ``hydra_pmi_proxy``) holds it open;
    it is removed only if it is a regular file of this user (the proxy has read it already)."""
    gone: list[str] = []
    fds = f"/proc/{os.getppid()}/fd"
    try:
        names = os.listdir(fds)
    except OSError:  # not a proxy we may look into: leave it to cleanup
        return gone
    for fd in names:
        try:
            path = os.readlink(os.path.join(fds, fd))
            if not path.startswith(HYDRA_TOPOLOGY):
                continue
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(path)
                gone.append(path)
        except OSError:  # closed meanwhile, or another rank of the host was first
            continue
    return gone


def _claim_report(transport: MpiTransport, ctl: C.Control, rank: int) -> bool:
    """Whether this rank reports the run's failure: the first to swap itself into world rank 0's
    reporter word (an MPI atomic, so one rank of the whole job wins)."""
    word = transport.control_word(ctl.reporter_addr)
    return word.exchange(word.handle, rank + 1, 5) == 0


def _fail(transport: MpiTransport, ctl: C.Control, config: Config, world: Any, rank: int,
          where: str, tb: str) -> None:
    """Report a failure of this rank, once for the job, and abort; or let the reporter do it."""
    ctl.abort(C.ABORT_FAILURE)  # this host's waits stop now
    if not _claim_report(transport, ctl, rank):
        _await_abort(world)  # another rank's report (or a deadlock or timeout) is on its way
    msg = _report("exception", where, config.seed)
    if tb:
        msg = msg.replace("\nseed:", "\n" + tb.rstrip() + "\nseed:", 1)
    _die(world, msg, EXIT_FAILURE)


def _await_abort(world: Any) -> None:
    """Another rank reports and aborts the job; should that never come, abort it ourselves."""
    time.sleep(KILL_WAIT_S)
    unlink_mpi_segments()
    world.Abort(EXIT_FAILURE)
    os._exit(EXIT_FAILURE)


class _Watch:
    """The supervision thread of one rank: deadlock watch (rank 0, every host) and timeout."""

    def __init__(self, MPI: Any, comm: Any, ctl: C.Control, transport: MpiTransport,
                 config: Config, rank: int) -> None:
        self.MPI, self.comm, self.ctl, self.transport = MPI, comm, ctl, transport
        self.config, self.rank = config, rank
        self.nranks = config.nranks
        # world rank 0 watches every rank, reading other hosts' control lines by RMA
        self.deadlock = (DeadlockWatch(ctl, transport, config.deadlock_grace)
                         if rank == 0 else None)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._main, name=f"shmcomm-mpi-watch-r{rank}",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _main(self) -> None:
        start = time.monotonic()
        ctl = self.ctl
        while not self.done.wait(POLL_S):
            now = time.monotonic()
            if now - start > self.config.timeout:
                self._timeout()
                return
            if self.deadlock is not None and not ctl.aborted():
                states = [ctl.load_rank(r, C.R_STATE) for r in range(self.nranks)]
                live = [r for r, s in enumerate(states) if s == C.R_RUNNING]
                finished = [r for r, s in enumerate(states) if s == C.R_EXITED]
                report = self.deadlock.check(now, live, finished)
                if report and ctl.abort(C.ABORT_DEADLOCK):
                    if not _claim_report(self.transport, ctl, self.rank):
                        return  # a failure's report came first
                    _die(self.MPI.COMM_WORLD, _report("deadlock", f"rank {self.rank} (watch): "
                                                      + report, self.config.seed), EXIT_FAILURE)

    def _pending(self) -> list[tuple[str, ...]]:
        """This rank's waiting agents as rows of the wait-for table, or one row saying what it
        does instead."""
        ctl, r = self.ctl, self.rank
        agents = ctl.agents_of(r)
        nb = ctl.rank_field(r, C.R_BLOCKS)
        waits: list[tuple[int, int | None, Any]] = [
            (r, b, agents[b]) for b in range(nb) if agents[b][C.A_STATE] == C.WAITING]
        if agents[C.HOST_SLOT][C.A_STATE] == C.WAITING:
            waits.append((r, None, agents[C.HOST_SLOT]))
        if waits:
            try:
                return DeadlockWatch(ctl, self.transport, 0.0).rows(waits)
            except Exception as exc:  # a word that cannot be read: say so, keep the report
                return [(str(r), "-", f"(waits could not be read: {exc})", "", "", "", "")]
        state = ("finished, waiting for the others" if ctl.load_rank(r, C.R_STATE) == C.R_EXITED
                 else "running, no pending wait")
        return [(str(r), "-", state, "", "", "", "")]

    def _timeout(self) -> None:
        rows = self._pending()
        MPI, comm = self.MPI, self.comm
        if self.rank != 0:
            # no abort flag here: on a shared host it would end rank 0's waits before it has
            # read them; rank 0 aborts the job once it has every answer
            req = comm.isend(rows, dest=0, tag=_TAG_WAITS)
            deadline = time.monotonic() + GATHER_S
            while not req.Test() and time.monotonic() < deadline:
                time.sleep(0.01)
            _await_abort(MPI.COMM_WORLD)
            return
        got: dict[int, list] = {0: rows}
        reqs = {r: comm.irecv(source=r, tag=_TAG_WAITS) for r in range(1, self.nranks)}
        deadline = time.monotonic() + GATHER_S
        while reqs and time.monotonic() < deadline:
            for r, req in list(reqs.items()):
                done, msg = req.test()
                if done:
                    got[r] = msg
                    del reqs[r]
            time.sleep(0.01)
        self.ctl.abort(C.ABORT_TIMEOUT)
        if not _claim_report(self.transport, self.ctl, self.rank):
            _await_abort(MPI.COMM_WORLD)  # a failure's report came first
        table = [WAIT_HEADER]
        for r in sorted(got):
            table.extend(got[r])
        silent = f"\n  ranks that did not answer: {', '.join(map(str, sorted(reqs)))}" if reqs else ""
        _die(MPI.COMM_WORLD, _report(
            "timeout", f"rank 0 (watch): the run did not finish within timeout="
            f"{self.config.timeout:g} s; pending waits of every rank that answered within "
            f"{GATHER_S:g} s:\n{format_table(table)}{silent}", self.config.seed), EXIT_TIMEOUT)
