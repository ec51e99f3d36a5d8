"""Stuck but alive: a stopped rank, a spinning block and a ``TTEST`` poll loop are each named in
the stuck-agent report, with the others' wait-for table and every rank's Python stacks, before the run
timeout; a whole job suspended for longer than ``wait_timeout`` still succeeds on resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from _helpers import ROOT

import shmcomm
from shmcomm import RunError
from shmcomm.comm import TTEST, TWAIT, Signal, WaitCmp

pytestmark = pytest.mark.timeout(120)

RUN_TIMEOUT = 90.0  # every report below must come well before it
SMALL = dict(window_bytes=1 << 16, timeout=RUN_TIMEOUT, wait_timeout=4.0)


def _run_failing(host, nranks, **kw) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(RunError) as info:
        shmcomm.run(host, nranks, **{**SMALL, **kw})
    return str(info.value), time.monotonic() - t0


def _stopped_rank(rt):
    rt.barrier()
    if rt.rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)  # stays stopped: nobody sends SIGCONT
    rt.barrier()


def test_a_stopped_rank_is_named_as_stopped():
    text, took = _run_failing(_stopped_rank, 3)
    assert took < RUN_TIMEOUT / 2, took
    # named by the supervisor's look at /proc, or by the peers' wait timeout if that came first
    assert "WaitTimeout" in text or "process state T" in text, text
    assert "stuck-agent report" in text
    assert "rank 1 host" in text and "stopped (SIGSTOP" in text, text
    assert "the whole process is stopped" in text
    assert "wait-for table" in text and "host barrier" in text, text  # ranks 0 and 2 wait
    assert "--- rank 1" in text and "cannot dump its stacks" in text


def _spin_kernel(ctx):
    if ctx.rank == 1:
        while True:
            pass
    TWAIT(Signal(ctx.signal_base + 200), 1, WaitCmp.GE)  # waits for rank 1, forever


def _spinning_block(rt):
    rt.launch(_spin_kernel, blocks=1)


def test_a_spinning_block_is_named_with_its_stack():
    text, took = _run_failing(_spinning_block, 2)
    assert took < RUN_TIMEOUT / 2, took
    assert "rank 1 block 0" in text and "no wait for" in text, text
    # spinning, or merely runnable on a box too busy to give it the CPU: never stopped/blocked
    line = next(ln for ln in text.splitlines() if "rank 1 block 0 (pid" in ln)
    assert "spinning" in line or "runnable" in line, line
    assert "wait-for table" in text and "signal rank 0 offset 0x320" in text, text
    assert "_spin_kernel" in text.split("Python stacks")[1], text  # where it spins


def _poll_kernel(ctx):
    if ctx.rank == 1:  # polls a word nobody notifies: a TTEST loop, in effect a wait
        while not TTEST(Signal(ctx.signal_base + 300), 1, WaitCmp.GE):
            pass
    else:
        TWAIT(Signal(ctx.signal_base + 200), 1, WaitCmp.GE)  # waits for rank 1


def _polling(rt):
    rt.launch(_poll_kernel, blocks=1)


def test_a_ttest_poll_loop_is_named_at_the_wait_timeout():
    """One agent polls with TTEST forever, the other waits for it: a TTEST loop may give up, so
    it is no deadlock; the wait timeout's stuck-agent report names the poller."""
    text, took = _run_failing(_polling, 3)
    assert took < RUN_TIMEOUT / 2, took
    assert "deadlock" not in text.split("\n")[0], text
    assert "WaitTimeout" in text and "stuck-agent report" in text, text
    row = next(ln for ln in text.splitlines() if "TTEST poll" in ln)
    assert row.split()[:2] == ["1", "0"], row


def test_a_poll_stamped_after_the_reports_clock_still_counts_as_waiting():
    """The report reads its clock, then each agent's line: a poller that tested again in
    between stamped a later millisecond, and is still waiting; a stale stamp is not."""
    import numpy as np

    from shmcomm.core import control as C
    from shmcomm.launch.deadlock import POLL_FRESH_MS, is_waiting

    line = np.zeros(C.LINE, np.int32)
    line[C.A_STATE] = C.POLLING
    now = 10_000
    for stamp, waiting in ((now, True), (now + 7, True), (now - POLL_FRESH_MS, True),
                           (now - POLL_FRESH_MS - 1, False), (now + 10 * POLL_FRESH_MS, False)):
        line[C.A_POLL] = stamp
        assert is_waiting(line, now) is waiting, stamp
    line[C.A_STATE] = C.RUNNING
    line[C.A_POLL] = now
    assert not is_waiting(line, now)


# --- a whole job suspended -----------------------------------------------------------------

JOB = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import shmcomm

    OUT = Path(sys.argv[1])

    def host(rt):
        (OUT / f"pid{rt.rank}").write_text(str(os.getpid()))
        for _ in range(30):  # 9 s at least: the test stops the job meanwhile
            if rt.rank == 1:
                time.sleep(0.3)  # ranks 0 and 2 spend their time waiting for rank 1
            rt.barrier()
        return rt.rank

    res = shmcomm.run(host, 3, window_bytes=1 << 16, wait_timeout=2.0, timeout=60.0)
    print("OK", res)
""")


def _job(tmp_path: Path, act) -> None:
    """Run JOB in a subprocess, call ``act(launcher pid, rank pids)`` once every rank started,
    and require the job to succeed."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(shmcomm.__file__)))
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("pid*"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(tmp_path.glob("pid*"))) == 3, proc.stderr
        time.sleep(1.0)
        act(proc.pid, [int((tmp_path / f"pid{r}").read_text()) for r in range(3)])
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert out.startswith("OK"), out


def test_a_suspended_job_survives_a_stop_longer_than_wait_timeout(tmp_path: Path):
    def suspend(launcher: int, ranks: list[int]) -> None:
        job = [launcher, *ranks]
        for pid in job:  # what the shell's Ctrl-Z does to a job, then fg
            os.kill(pid, signal.SIGSTOP)
        time.sleep(5.0)  # longer than wait_timeout=2
        for pid in sorted(job, key=lambda p: p == ranks[1]):  # rank 1, that the others wait
            os.kill(pid, signal.SIGCONT)                       # for, last
            if pid != ranks[1]:
                time.sleep(0.1)

    _job(tmp_path, suspend)


def test_launch_into_a_closed_pipe_exits_cleanly():
    """``python -m shmcomm.launch ... | head -1``: no BrokenPipeError traceback, status 0."""
    prog = ROOT / "tests" / "_longprint_prog.py"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from shmcomm.launch.cli import main;"
            " sys.exit(main(['-n', '4', '--program', 'tests._longprint_prog:host']))")
    root = os.path.dirname(os.path.dirname(shmcomm.__file__))
    proc = subprocess.Popen([sys.executable, "-c", code, root], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=prog.parent.parent,
                            env=dict(os.environ, PYTHONPATH=root))
    first = proc.stdout.readline()
    proc.stdout.close()  # as head -1 does after its line
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert first.startswith(b"rank 0:")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 0, err


def test_ctrl_z_stops_the_ranks_too_and_fg_continues_them(tmp_path: Path):
    """Ranks lead their own process groups, so the launcher forwards SIGTSTP (Ctrl-Z) as a stop
    of every rank and continues them when it is continued itself."""
    def ctrl_z(launcher: int, ranks: list[int]) -> None:
        os.kill(launcher, signal.SIGTSTP)
        deadline = time.monotonic() + 10
        states: list[str] = []
        while time.monotonic() < deadline:
            states = [psutil.Process(p).status() for p in [launcher, *ranks]]
            if all(s == psutil.STATUS_STOPPED for s in states):
                break
            time.sleep(0.05)
        assert all(s == psutil.STATUS_STOPPED for s in states), states
        time.sleep(3.0)  # longer than wait_timeout=2
        os.kill(launcher, signal.SIGCONT)

    _job(tmp_path, ctrl_z)


def test_the_run_timeout_names_the_spinning_block_too():
    text, took = _run_failing(_spinning_block, 2, timeout=6.0, wait_timeout=60.0)
    assert took < 30, took
    assert "did not finish within timeout=6 s" in text
    assert "stuck-agent report (the run timed out)" in text
    assert "rank 1 block 0" in text and "_spin_kernel" in text, text
    assert "wait-for table" in text and "signal rank 0 offset 0x320" in text, text
