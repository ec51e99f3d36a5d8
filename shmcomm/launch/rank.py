"""The rank process: how the launcher forks one, what it sets up first (its CPU, its scheduling
policy, its collector), and its body (:func:`serve_run`): make the rank runtime, run the host
function with the run's execution model, and report back through its pipe (:mod:`.wire`).

Only the rank process runs this code (a pool's ranks run :func:`serve_run` once per run); the
launcher's side is :mod:`.supervisor`.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import shmcomm.launch.wire as wire  # (a module: tests patch its MAX_REPORT_BYTES)

from ..config import Config
from ..core import control as C
from ..core.affinity import set_apart
from ..core.gm import Windows
from ..core.model import RankModel, RunModel
from ..core.runtime import KernelError, report_thread_failures_once
from ..errors import ShmcommError
from ..kernels.host import RankRuntime
from ..native import sites
from ..transports.shm import ShmTransport
from ..transports.shm import atomics as at
from .stuck import dump_stacks_on_signal
from .wire import PICKLE_ERROR, failure_msg, pickled


def fork_rank(body: Callable[[], int], close: list[Connection]) -> int:
    """Fork a rank process that closes ``close`` (the parent's ends) and exits with ``body()``'s
    status; returns its pid. The process leads its own process group, so that whatever it forks
    can be killed with it."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:  # EAGAIN: the process limit (ulimit -u, a cgroup's pids.max)
        raise ShmcommError(f"cannot start a rank process: fork failed: {exc} (the user's or the "
                           "cgroup's process limit is reached; lower nranks)") from None
    if pid == 0:  # the rank process; never returns
        code = 1
        try:
            os.setpgid(0, 0)
            for c in close:
                c.close()
            code = body()
        finally:
            sites.close_all()  # (its addr2line helpers, reaped: os._exit runs no atexit)
            os._exit(code)
    try:
        os.setpgid(pid, pid)  # also here: no race with a kill of the group right after fork
    except OSError:
        pass  # it already did (or is gone): either way it is set
    return pid


def rank_main(rank: int, parent: int, config: Config, transport: ShmTransport, ctl: C.Control,
               conn: Connection, host: Callable, args: tuple, model: RunModel,
               stacks: Any) -> int:
    """Body of one rank process. Returns its exit status."""
    if not rank_process_setup(parent):
        return 1
    dump_stacks_on_signal(stacks)
    # a process the kernel or host forks must not hold the report pipe open (the launcher would
    # wait for its EOF) nor report in the rank's name; the launcher kills it with the rank
    os.register_at_fork(after_in_child=conn.close)
    return serve_run(rank, config, transport, ctl, conn, host, args, model)


# the CPUs the launcher may use, as the rank process inherited them (rank_process_setup)
_ALLOWED: list[int] = []
# the scheduling policy the rank process inherited (rank_process_setup)
_POLICY: list[int] = []
# the CPU this rank process is pinned to, and whether its host thread is apart
_pinned: list[tuple[int | None, bool] | None] = [None]


def pin_rank(rank: int, nranks: int, pin: bool, turn_cpu: int | None = None) -> None:
    """With ``pin``, pin this rank process's threads (threads they start later inherit it).

    With ``turn_cpu`` (a run of one agent at a time, on the CPU its launcher claimed): every
    thread but the calling one goes there (the block threads a pool's process keeps, so a turn
    handed to one is a switch on that CPU), and the calling thread, the host, to the other
    CPUs: its setup before its first turn runs beside the turn's holder instead of in its way,
    and the rank model moves it to the turn's CPU for its turns (``ScheduleRankModel``). Else
    to one of the launcher's CPUs, round robin, when the ranks are at least as many as those
    CPUs; else let it run on all of them. Left to itself the kernel often keeps 5 or 6 of 8
    short-waiting ranks on one of 2 cores, and every barrier then waits for that core: at 8 ranks
    x 1 block a barrier took 1.3-1.6x as long. A pool's later runs keep the pin (nothing to do)
    or change it.

    A run on the turn's CPU also puts the rank's threads in the batch policy (when the process
    was in the normal one): an agent woken for its turn then waits the few microseconds until
    the agent that passed it the turn sleeps, instead of preempting it and being preempted back
    (two switches per hand-off instead of one). Other runs get the inherited policy back."""
    cpus = _ALLOWED or sorted(os.sched_getaffinity(0))
    host: list[int] | None = None
    if pin and turn_cpu is not None and turn_cpu in cpus:
        cpu: int | None = turn_cpu
        host = [c for c in cpus if c != turn_cpu] or [turn_cpu]
    else:
        cpu = cpus[rank % len(cpus)] if pin and nranks >= len(cpus) >= 2 else None
    want = (cpu, host is not None)
    set_apart(host)
    if _pinned[0] == want:  # (a host the last run's last turn left on the turn's CPU stays:
        return  # that CPU idles until the run's first turn, a move would wait for the others)
    base = _POLICY[0] if _POLICY else os.SCHED_OTHER
    policy = os.SCHED_BATCH if host is not None and base == os.SCHED_OTHER else base
    me = threading.get_native_id()
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), host if host is not None and int(tid) == me
                                 else cpus if cpu is None else {cpu})
            if os.sched_getscheduler(int(tid)) != policy:
                os.sched_setscheduler(int(tid), policy, _NO_PRIORITY)
        except OSError:  # a thread that ended meanwhile, or a CPU taken away (cgroups)
            pass
    _pinned[0] = want


_NO_PRIORITY = os.sched_param(0)  # (the normal and batch policies have no static priority)


def rank_process_setup(parent: int) -> bool:
    """A new rank process: die with the launcher, leave Ctrl-C to it. False if it is gone."""
    at.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the launcher died before prctl took effect
        return False
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher handles Ctrl-C for everyone
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    report_thread_failures_once()  # before any run: a pool's checks see it as the process's
    _ALLOWED[:] = sorted(os.sched_getaffinity(0))  # the forking thread's: before any pin
    _POLICY[:] = [os.sched_getscheduler(0)]
    _pinned[0] = None
    # what the launcher made before the fork (modules, numpy) never becomes this process's
    # garbage: out of the collector's generations, a collection walks only what the rank makes
    # (a full one walked every inherited object: ~6 ms, and a write to each one's page)
    gc.freeze()
    # a collection every 700 allocations (the default) paused whichever agent allocated, in
    # schedule mode the turn's holder and so every agent: a pool's rank collects after each run
    # instead (collect_after_run), and a long run still every RUN_GC_THRESHOLD allocations
    gc.set_threshold(RUN_GC_THRESHOLD)
    return True


RUN_GC_THRESHOLD = 20_000  # a rank process's first-generation threshold (CPython's is 700)
FULL_GC_RUNS = 1024  # a pool's rank collects every generation once in this many runs


def collect_after_run(runs: int) -> None:
    """A pool's rank, its run reported: collect what the run left (its objects referring to
    each other), off any run's critical path; every generation once in ``FULL_GC_RUNS`` runs
    (what outlived a run's collection and became garbage since)."""
    gc.collect(2 if runs % FULL_GC_RUNS == 0 else 1)


def serve_run(rank: int, config: Config, transport: ShmTransport, ctl: C.Control,
              conn: Connection, host: Callable, args: tuple, model: RunModel,
              checked: Callable[[Any], Any] | None = None, windows: Windows | None = None) -> int:
    """One run's work in a rank process: ``host(rt, *args)``, its result or failure sent to the
    launcher. ``checked``: what a passing result becomes once the model has closed (a pool's
    check of what the run left in the process). Returns the rank's exit status."""
    sys.setswitchinterval(config.switch_interval)
    pin_rank(rank, config.nranks, config.pin_ranks, model.turn_cpu)
    ctl.set_rank(rank, C.R_PID, os.getpid())
    ctl.set_rank(rank, C.R_STATE, C.R_RUNNING)
    msg: tuple[str, Any]
    rt: RankRuntime | None = None
    try:
        transport.attach(rank)
        rt = RankRuntime(rank, config, Windows(transport) if windows is None else
                         windows.next_run(), ctl, model)
        result = host(rt, *args)
        rt.join_launches()  # every launch, from any host thread, finishes before we report
        msg = ("ok", result)
    except KernelError as exc:
        msg = failure_msg(rank, exc.block, exc.exc, exc.tb)
    except BaseException as exc:
        msg = failure_msg(rank, None, exc, traceback.format_exc())
    if rt is not None and rt.block_failures and msg[0] != "error":
        # the host caught a block's failure (and returned, or was aborted later): still a failure
        first = rt.block_failures[0]
        msg = failure_msg(rank, first.block, first.exc, first.tb
                           + "(the host code caught this KernelError; the run still fails)\n")
    if msg[0] == "error":
        ctl.abort(C.ABORT_FAILURE)
    if rt is not None:
        rt.model.close()
        advice = _advice(rt.model)
        if advice:  # before the result: the launcher has read it when the rank is done
            try:
                conn.send_bytes(ForkingPickler.dumps(("advice", advice)))
            except OSError:
                return 1
    if checked is not None and msg[0] == "ok":
        msg = ("ok", checked(msg[1]))
    data = pickled(rank, msg)
    if data is not None and len(data) > wire.MAX_REPORT_BYTES:  # the launcher would not read it
        ctl.abort(C.ABORT_FAILURE)
        data = pickled(rank, ("error", dict(
            rank=rank, block=None, kind="exception",
            message=f"host() returned a result of {len(data)} bytes pickled, over the "
                    f"{wire.MAX_REPORT_BYTES}-byte limit of a rank's report (return less: write "
                    "big results to a file, or keep them in the window)")))
        msg = ("error", None)
    if data is None:  # the result does not pickle: report why instead
        ctl.abort(C.ABORT_FAILURE)
        data = pickled(rank, ("error", dict(
            rank=rank, block=None, kind="exception",
            message=f"host() returned an object that cannot be pickled back to the launcher: "
                    f"{PICKLE_ERROR[0]}")))
        msg = ("error", None)
    try:
        conn.send_bytes(data)  # type: ignore[arg-type]
    except OSError:  # the launcher is gone or closed our pipe
        return 1
    at.store(ctl.rank_addr(rank, C.R_STATE), C.R_EXITED if msg[0] == "ok" else C.R_FAILED)
    return 0 if msg[0] == "ok" else 1




def _advice(model: RankModel) -> list[str]:
    """The advisory checkers' findings of this rank's run (hazard and schedule modes: the
    model's ``advice``, which an observer's model takes from the model it wraps)."""
    advice = model.advice
    return [] if advice is None else [str(a) for a in advice.texts]
