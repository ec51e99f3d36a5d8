"""Fault injection: every fault stops the whole run fast, with one report and nothing left behind.

Each fault is injected into a real run, in process (``shmcomm.run``, to check the report's
fields) and through the CLI (to check the exit status and what a user sees). After each one:
every rank process is gone within ``GONE_S`` of the fault (checked by pid with psutil), the
report names what failed where that can be known, and nothing of shmcomm's is in ``/dev/shm``.
Ranks write their pid (and, for faults they inject themselves, the fault's time) into a
per-test directory, so the test knows exactly which processes must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import shmcomm
from shmcomm import RunError

pytestmark = pytest.mark.timeout(60)

GONE_S = 2.0  # every process of the run is gone this long after the fault at the latest
NRANKS = 4

# The faulty host programs, as a module the CLI can import (--program faultprog:<name>) and the
# in-process tests import too. Ranks that are not at fault wait on the faulty one.
FAULTPROG = textwrap.dedent('''
    import faulthandler, os, resource, time
    from pathlib import Path
    from shmcomm.comm import TWAIT, Signal, WaitCmp
    from shmcomm.kernels import EpochBarrier

    OUT = Path(os.environ["FAULT_DIR"])

    def _hello(rt):
        (OUT / f"pid{rt.rank}").write_text(str(os.getpid()))

    def _fault_time():
        (OUT / "fault_at").write_text(repr(time.time()))

    def _all_started(rt):
        rt.barrier()  # every pid file exists once this returns

    def raise_mid_barrier(rt):
        """Rank 2's host raises while every other rank waits in rt.barrier()."""
        _hello(rt); _all_started(rt)
        if rt.rank == 2:
            time.sleep(0.2)
            _fault_time()
            raise RuntimeError("injected fault in rank 2's host, mid-barrier")
        rt.barrier()

    def _block_kernel(ctx):
        EpochBarrier(ctx)
        if ctx.rank == 1 and ctx.block_idx == 2:
            _fault_time()
            raise ValueError("injected fault in rank 1 block 2")
        EpochBarrier(ctx)  # its siblings (and every other rank) wait for block 2 here

    def block_raises(rt):
        _hello(rt); _all_started(rt)
        rt.launch(_block_kernel, blocks=3)

    def abort_rank(rt):
        """Rank 1 calls os.abort() while the others wait for it."""
        _hello(rt); _all_started(rt)
        if rt.rank == 1:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
            faulthandler.disable()  # pytest's would print a stack for the expected abort
            time.sleep(0.2)
            _fault_time()
            os.abort()
        rt.barrier()

    def _wait_kernel(ctx):
        TWAIT(Signal(ctx.signal_base + 7), 1, WaitCmp.GE)  # nobody sends it: killed while waiting

    def victim(rt):
        """Rank 3 sleeps (the test SIGKILLs it); every other rank's blocks wait on it."""
        _hello(rt); _all_started(rt)
        if rt.rank == 3:
            time.sleep(300)
        rt.launch(_wait_kernel, blocks=2)

    def hang(rt):
        """Every rank waits forever (rank 0 sleeps, the others wait for it): the launcher is killed."""
        _hello(rt); _all_started(rt)
        if rt.rank == 0:
            time.sleep(300)
        rt.launch(_wait_kernel, blocks=2)
''')


@pytest.fixture
def faultprog(tmp_path, monkeypatch):
    """The fault module importable here and in CLI subprocesses; returns (module, out dir, env)."""
    (tmp_path / "faultprog.py").write_text(FAULTPROG)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("FAULT_DIR", str(out))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("faultprog", None)
    import faultprog as mod

    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    yield mod, out, env
    sys.modules.pop("faultprog", None)


def _rank_pids(out: Path, nranks: int = NRANKS) -> list[int]:
    return [int((out / f"pid{r}").read_text()) for r in range(nranks)]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, parent not reaped yet
    except psutil.NoSuchProcess:
        return True


def _assert_all_gone_by(pids: list[int], deadline: float, what: str) -> None:
    while time.time() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.01)
    alive = [p for p in pids if not _gone(p)]
    assert not alive, f"{what}: rank processes {alive} still alive {GONE_S} s after the fault"


def _no_shm(creator: int | None = None) -> list[str]:
    """shmcomm names in /dev/shm made by ``creator`` (default: this process). Only the launcher
    creates segments; other runs on the machine may be making theirs meanwhile."""
    mine = f"shmcomm.{creator or os.getpid()}."
    return [n for n in os.listdir("/dev/shm") if n.startswith(mine)]


def _wait_for_pids(out: Path, nranks: int = NRANKS, timeout: float = 30.0) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            return _rank_pids(out, nranks)
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise AssertionError(f"the ranks did not all start within {timeout} s")


def _kill_when_started(out: Path, rank: int, stamp: list[float]) -> threading.Thread:
    def killer() -> None:
        pid = _wait_for_pids(out)[rank]
        time.sleep(0.3)  # let the others block on it
        stamp.append(time.time())
        os.kill(pid, signal.SIGKILL)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    return t


# --- in process: the report's fields --------------------------------------------------------------

@pytest.mark.parametrize("fault, rank, block, kind, text", [
    ("raise_mid_barrier", 2, None, "exception", "RuntimeError: injected fault in rank 2's host"),
    ("block_raises", 1, 2, "exception", "ValueError: injected fault in rank 1 block 2"),
    ("abort_rank", 1, None, "crash", "died from signal SIGABRT"),
])
def test_fault_in_a_rank_stops_the_run_with_one_report(faultprog, fault, rank, block, kind, text):
    mod, out, _env = faultprog
    with pytest.raises(RunError) as info:
        shmcomm.run(getattr(mod, fault), nranks=NRANKS, wait_timeout=60, timeout=60)
    ended = time.time()
    fault_at = float((out / "fault_at").read_text())
    assert ended - fault_at < GONE_S, f"the run took {ended - fault_at:.2f} s to stop"
    _assert_all_gone_by(_rank_pids(out), fault_at + GONE_S, fault)
    assert psutil.Process().children(recursive=True) == []
    err = info.value
    assert len(err.failures) == 1, str(err)  # the root cause only; the rest were stopped by it
    first = err.failures[0]
    assert (first.rank, first.block, first.kind) == (rank, block, kind)
    assert text in str(err)
    assert _no_shm() == []


def test_rank_sigkilled_while_others_wait_on_it(faultprog):
    mod, out, _env = faultprog
    stamp: list[float] = []
    killer = _kill_when_started(out, 3, stamp)
    with pytest.raises(RunError) as info:
        shmcomm.run(mod.victim, nranks=NRANKS, wait_timeout=60, timeout=60)
    ended = time.time()
    killer.join(5)
    assert ended - stamp[0] < GONE_S
    _assert_all_gone_by(_rank_pids(out), stamp[0] + GONE_S, "SIGKILLed rank")
    first = info.value.failures[0]
    assert (first.rank, first.kind) == (3, "crash") and "SIGKILL" in first.message
    assert len(info.value.failures) == 1
    assert _no_shm() == []


# --- through the CLI: exit status, what the user sees, ranks outliving a dead launcher -------------

def _launch(env: dict, program: str, nranks: int = NRANKS) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "shmcomm.launch", "--nranks", str(nranks), "--program",
         f"faultprog:{program}", "--timeout", "60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.parametrize("fault, expect", [
    ("raise_mid_barrier", "at rank 2: RuntimeError: injected fault"),
    ("block_raises", "at rank 1 block 2: ValueError: injected fault"),
    ("abort_rank", "(crash) at rank 1: rank process (pid"),
])
def test_cli_reports_a_rank_fault_and_exits_1(faultprog, fault, expect):
    _mod, out, env = faultprog
    p = _launch(env, fault)
    _stdout, stderr = p.communicate(timeout=60)
    ended = time.time()
    fault_at = float((out / "fault_at").read_text())
    assert p.returncode == 1, stderr
    assert stderr.count("shmcomm run failed") == 1 and expect in stderr, stderr
    if fault == "abort_rank":
        assert "SIGABRT" in stderr and "Traceback" not in stderr
    assert ended - fault_at < GONE_S + 0.5  # + the CLI's own exit
    _assert_all_gone_by(_rank_pids(out), fault_at + GONE_S, fault)
    assert _no_shm(p.pid) == []


def _start(env: dict, out: Path, program: str) -> tuple[subprocess.Popen, list[int], float]:
    """Launch, wait until every rank runs and the others block, return (launcher, pids, now)."""
    p = _launch(env, program)
    pids = _wait_for_pids(out)
    time.sleep(0.3)
    return p, pids, time.time()


def test_cli_rank_sigkilled_from_outside(faultprog):
    _mod, out, env = faultprog
    p, pids, killed_at = _start(env, out, "victim")
    os.kill(pids[3], signal.SIGKILL)
    _stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 1
    assert f"(crash) at rank 3: rank process (pid {pids[3]}) died from signal SIGKILL" in stderr
    assert "Traceback" not in stderr
    _assert_all_gone_by(pids, killed_at + GONE_S, "SIGKILLed rank (CLI)")
    assert _no_shm(p.pid) == []


def test_launcher_sigkilled_its_ranks_die_with_it(faultprog):
    _mod, out, env = faultprog
    p, pids, killed_at = _start(env, out, "hang")
    p.kill()  # SIGKILL: no handler runs, only PR_SET_PDEATHSIG can stop the ranks
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    _assert_all_gone_by(pids, killed_at + GONE_S, "launcher SIGKILLed")
    assert _no_shm(p.pid) == []  # names were unlinked before the ranks started


@pytest.mark.parametrize("sig, code, text", [
    (signal.SIGINT, 130, "interrupted by SIGINT (Ctrl-C)"),
    (signal.SIGTERM, 143, "terminated by SIGTERM"),
])
def test_launcher_interrupted_exits_nonzero_with_a_short_report(faultprog, sig, code, text):
    _mod, out, env = faultprog
    p, pids, sent_at = _start(env, out, "hang")
    os.killpg(p.pid, sig)  # as Ctrl-C does: the whole foreground process group gets it
    stdout, stderr = p.communicate(timeout=30)
    ended = time.time()
    assert p.returncode == code, stderr
    assert text in stderr and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) <= 3, stderr  # the report, the seed: short
    assert ended - sent_at < GONE_S + 0.5
    _assert_all_gone_by(pids, sent_at + GONE_S, f"launcher got {sig.name}")
    assert _no_shm(p.pid) == []


def test_second_ctrl_c_does_not_cut_the_teardown_short(faultprog):
    _mod, out, env = faultprog
    p, pids, sent_at = _start(env, out, "hang")
    for _ in range(3):  # an impatient user
        os.killpg(p.pid, signal.SIGINT)
        time.sleep(0.05)
    _stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 130 and "Traceback" not in stderr, stderr
    _assert_all_gone_by(pids, sent_at + GONE_S, "repeated SIGINT")
    assert _no_shm(p.pid) == []


# --- the leftovers of a creator killed between create and unlink: python -m shmcomm cleanup -------

CREATE_AND_HANG = (
    "import posix_ipc, sys, time\n"
    "from shmcomm.transports.shm.segments import segment_name\n"
    "name = segment_name(sys.argv[1])\n"
    "posix_ipc.SharedMemory(name, posix_ipc.O_CREX, mode=0o600, size=8192).close_fd()\n"
    "print(name, flush=True)\n"
    "time.sleep(300)\n"  # killed here, before it could unlink: what Segment() would leave
)


def _creator(tag: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", CREATE_AND_HANG, tag], stdout=subprocess.PIPE, text=True)
    return p, p.stdout.readline().strip()  # type: ignore[union-attr]


def _cleanup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shmcomm", "cleanup", *args], capture_output=True,
                          text=True, timeout=60)


def _line(out: str, name: str) -> str:
    return next((ln for ln in out.splitlines() if name.lstrip("/") in ln), "")


def test_cleanup_removes_segments_of_dead_runs_only():
    import posix_ipc

    from shmcomm.transports.shm.segments import segment_name

    dead, dead_name = _creator("win0")
    dead.kill()  # SIGKILL between create and unlink
    dead.wait()
    live, live_name = _creator("win1")  # its creator is alive: a live run's segment
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    # a dead run's segment whose pid now belongs to a younger process (pid reuse)
    reused_name = segment_name("win2").replace(f".{os.getpid()}.", f".{sleeper.pid}.", 1)
    posix_ipc.SharedMemory(reused_name, posix_ipc.O_CREX, mode=0o600, size=4096).close_fd()
    old = time.time() - 3600
    os.utime("/dev/shm" + reused_name, (old, old))
    odd_name = "/shmcomm.not-a-run-name"
    posix_ipc.SharedMemory(odd_name, posix_ipc.O_CREX, mode=0o600, size=64).close_fd()
    try:
        p = _cleanup("--dry-run")
        assert p.returncode == 0, p.stderr
        assert _line(p.stdout, dead_name).startswith("would remove"), p.stdout
        assert "is gone" in _line(p.stdout, dead_name)
        assert _line(p.stdout, reused_name).startswith("would remove"), p.stdout
        assert "reused" in _line(p.stdout, reused_name)
        assert _line(p.stdout, live_name).startswith("kept") and "is running" in _line(p.stdout, live_name)
        assert _line(p.stdout, odd_name).startswith("kept")
        assert all(os.path.exists("/dev/shm" + n) for n in (dead_name, reused_name, live_name))

        p = _cleanup()
        assert p.returncode == 0, p.stderr
        assert _line(p.stdout, dead_name).startswith("removed")
        assert _line(p.stdout, reused_name).startswith("removed")
        assert _line(p.stdout, live_name).startswith("kept")
        assert not os.path.exists("/dev/shm" + dead_name)
        assert not os.path.exists("/dev/shm" + reused_name)
        assert os.path.exists("/dev/shm" + live_name) and os.path.exists("/dev/shm" + odd_name)
        assert "removed" in p.stdout.splitlines()[-1]

        live.kill()  # now the live run's creator dies too: its segment becomes stale and goes
        live.wait()
        p = _cleanup()
        assert _line(p.stdout, live_name).startswith("removed"), p.stdout
        assert not os.path.exists("/dev/shm" + live_name)
    finally:
        for proc in (live, sleeper):
            proc.kill()
            proc.wait()
        for n in (dead_name, reused_name, live_name, odd_name):
            try:
                posix_ipc.unlink_shared_memory(n)
            except posix_ipc.ExistentialError:
                pass
