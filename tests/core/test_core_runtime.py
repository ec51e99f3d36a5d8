"""The host runtime and the launcher: results, failures, crashes, deadlocks, timeouts, CLI."""

from __future__ import annotations

import faulthandler
import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import shmcomm
from shmcomm import DeadlockError, RunError, RunTimeout
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.kernels import EpochBarrier

pytestmark = pytest.mark.timeout(120)


def test_results_come_back_in_rank_order():
    assert shmcomm.run(lambda rt: (rt.rank, rt.nranks), nranks=5) == [(r, 5) for r in range(5)]


def test_host_barrier_and_reset_signals():
    def host(rt):
        for _ in range(20):
            rt.barrier()
        TNOTIFY(Signal(GetRemotePtr(None, rt.signal_base + 9, 0)), 1, NotifyOp.AtomicAdd)
        rt.barrier()
        seen = int(rt.signals[9])
        rt.reset_signals()
        return seen, int(rt.signals.any())

    res = shmcomm.run(host, nranks=4)
    assert res[0] == (4, 0) and all(r == (0, 0) for r in res[1:])


def _fail_in_block(ctx):
    if ctx.rank == 2 and ctx.block_idx == 1:
        raise ValueError("boom in block")
    EpochBarrier(ctx)  # everybody else waits for the failed block


def test_exception_in_one_block_stops_every_rank():
    t0 = time.monotonic()
    with pytest.raises(RunError) as info:
        shmcomm.run(lambda rt: rt.launch(_fail_in_block, blocks=3), nranks=4, wait_timeout=60)
    assert time.monotonic() - t0 < 10
    err = info.value
    assert err.failures[0].rank == 2 and err.failures[0].block == 1
    assert "ValueError: boom in block" in str(err) and "_fail_in_block" in str(err)
    assert len(err.failures) == 1  # the others were stopped by the abort, not reported as causes


def _crash_host(how):
    def host(rt):
        if rt.rank == 1:
            time.sleep(0.1)
            if how == "abort":
                faulthandler.disable()  # pytest's would print a stack for the expected abort
                os.abort()
            os.kill(os.getpid(), signal.SIGKILL)
        rt.barrier()  # the others wait for the dead rank forever
    return host


@pytest.mark.parametrize("how,signame", [("abort", "SIGABRT"), ("kill", "SIGKILL")])
def test_crashed_rank_is_reported_and_others_stop(how, signame):
    t0 = time.monotonic()
    with pytest.raises(RunError) as info:
        shmcomm.run(_crash_host(how), nranks=4, wait_timeout=60)
    assert time.monotonic() - t0 < 10
    first = info.value.failures[0]
    assert first.kind == "crash" and first.rank == 1 and signame in first.message


def _deadlock_kernel(ctx):
    # rank 0 waits for a signal that nobody sends; the others wait for rank 0
    if ctx.rank == 0:
        TWAIT(Signal(ctx.signal_base + 100), 1, WaitCmp.EQ)
    EpochBarrier(ctx)


def test_deadlock_is_reported_with_wait_for_table_before_timeout():
    t0 = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        shmcomm.run(lambda rt: rt.launch(_deadlock_kernel, blocks=2), nranks=3, wait_timeout=60,
                    timeout=60, deadlock_grace=0.3)
    assert time.monotonic() - t0 < 15
    msg = str(info.value)
    assert "deadlock" in msg and "waits on" in msg
    assert "signal rank 0 offset 0x190" in msg and "==" in msg  # rank 0's TWAIT(EQ 1) on word 100


def test_run_timeout():
    def host(rt):
        time.sleep(30 if rt.rank == 0 else 0)

    t0 = time.monotonic()
    with pytest.raises(RunTimeout):
        shmcomm.run(host, nranks=2, timeout=0.5)
    assert time.monotonic() - t0 < 5


def test_unpicklable_result_is_a_clear_error():
    with pytest.raises(RunError, match="pickled"):
        shmcomm.run(lambda rt: (lambda: None), nranks=1)


def test_launch_argument_errors():
    def host(rt):
        errors = []
        for kwargs in ({"kernel": 3}, {"kernel": lambda c: None, "blocks": 0},
                       {"kernel": lambda c: None, "blocks": 65}, {"kernel": lambda c: None, "args": [1]}):
            try:
                rt.launch(**kwargs)
            except shmcomm.ArgumentError as exc:
                errors.append(str(exc))
        return errors

    (errors,) = shmcomm.run(host, nranks=1)
    assert len(errors) == 4 and "callable" in errors[0] and "[1, 64]" in errors[1]


def test_get_block_num_is_the_real_launch_count():
    from shmcomm.comm import get_block_idx, get_block_num

    def host(rt):
        seen = []
        rt.launch(lambda ctx: seen.append((get_block_idx(), get_block_num(), ctx.block_num)), blocks=3)
        return sorted(seen)

    assert shmcomm.run(host, nranks=1) == [[(0, 3, 3), (1, 3, 3), (2, 3, 3)]]


def test_segments_are_private_and_unlinked(tmp_path):
    # names exist only between create and unlink: watch /dev/shm while creating windows
    from shmcomm.transports.shm.segments import Segment

    seg = Segment("probe", 4096)
    try:
        assert not any(seg.name.strip("/") == n for n in os.listdir("/dev/shm"))
        token = seg.name.split(".")[2]
        assert len(token) >= 16  # >= 64 random bits
    finally:
        seg.close()
    import posix_ipc

    probe = posix_ipc.SharedMemory("/shmcomm.test.mode", posix_ipc.O_CREX, mode=0o600, size=64)
    try:
        mode = os.stat("/dev/shm/shmcomm.test.mode").st_mode
        assert stat.S_IMODE(mode) == 0o600
    finally:
        probe.close_fd()
        probe.unlink()


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "shmcomm.launch", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_default_job_prints_table():
    p = _cli("--nranks", "3", "--blocks", "2", "--iters", "20")
    assert p.returncode == 0, p.stderr
    assert "EpochBarrier" in p.stdout and "DeviceBarrier" in p.stdout and "result: OK" in p.stdout
    assert "RuntimeWarning" not in p.stderr


def test_cli_usage_errors_exit_2():
    p = _cli("--nranks", "0")
    assert p.returncode == 2 and "--nranks" in p.stderr
    p = _cli("--nranks", "2", "--program", "no_such_module_xyz:host")
    assert p.returncode == 2 and "no_such_module_xyz" in p.stderr
    p = _cli("--help")
    assert p.returncode == 0 and "--nranks" in p.stdout


def test_cli_program_failure_and_timeout_exit_codes(tmp_path):
    (tmp_path / "userprog.py").write_text(
        "import time\n"
        "def ok(rt):\n    return rt.rank * 10\n"
        "def bad(rt):\n    raise RuntimeError('user bug')\n"
        "def slow(rt):\n    time.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = lambda *a: subprocess.run([sys.executable, "-m", "shmcomm.launch", *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=120, env=env)
    p = run("--nranks", "2", "--program", "userprog:ok")
    assert p.returncode == 0 and "rank 1: 10" in p.stdout
    p = run("--nranks", "2", "--program", "userprog:bad")
    assert p.returncode == 1 and "RuntimeError: user bug" in p.stderr
    p = run("--nranks", "2", "--program", "userprog:slow", "--timeout", "0.5")
    assert p.returncode == 124


def test_many_launches_reuse_one_process():
    def host(rt):
        x = rt.alloc((4,), np.int32)
        for _ in range(30):
            rt.launch(lambda ctx: EpochBarrier(ctx), blocks=2)
        return x.ptr.offset

    assert len(set(shmcomm.run(host, nranks=3))) == 1


def _affinities_kernel(ctx, out):
    out[ctx.block_idx] = sorted(os.sched_getaffinity(0))


def _affinities(rt):
    """This rank's host thread's CPUs and each of its blocks' (a launch's threads)."""
    out = [None] * 2
    rt.launch(_affinities_kernel, blocks=2, args=(out,))
    return sorted(os.sched_getaffinity(0)), out


def test_ranks_are_pinned_round_robin_when_they_outnumber_the_cpus():
    """With at least as many ranks as CPUs, rank r and its blocks run on the r-th CPU (round
    robin); with fewer ranks, or pin_ranks=False, on every CPU the launcher may use. A pool
    process follows each run's setting."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to spread")
    n = len(cpus)
    for rank, (host, blocks) in enumerate(shmcomm.run(_affinities, nranks=n, blocks=2)):
        assert host == blocks[0] == blocks[1] == [cpus[rank % n]], (rank, host, blocks)
    for host, blocks in shmcomm.run(_affinities, nranks=n, blocks=2, pin_ranks=False):
        assert host == blocks[0] == blocks[1] == cpus
    for host, blocks in shmcomm.run(_affinities, nranks=n - 1, blocks=2):
        assert host == blocks[0] == blocks[1] == cpus
    with shmcomm.Pool(nranks=n) as pool:
        pinned = pool.run(_affinities, blocks=2)
        free = pool.run(_affinities, blocks=2, pin_ranks=False)
        again = pool.run(_affinities, blocks=2)
    assert [h for h, _ in pinned] == [h for h, _ in again] == [[cpus[r % n]] for r in range(n)]
    assert all(h == b[0] == b[1] == cpus for h, b in free), free


def _one_cpu(affinities):
    """The one CPU every rank and block of a run's ``affinities`` is on (asserted)."""
    cpus = {tuple(c) for host, blocks in affinities for c in (host, *blocks)}
    assert len(cpus) == 1 and len(next(iter(cpus))) == 1, affinities
    return next(iter(cpus))[0]


@pytest.fixture
def private_claims(monkeypatch):
    """CPU claims in a namespace of this test's own: another shmcomm run on the machine (another
    CI job, another test worker) holding a CPU does not change what this test sees."""
    import secrets

    from shmcomm.launch import turncpu

    monkeypatch.setattr(turncpu, "NAMESPACE",
                        f"\0shmcomm-turn-cpu-test-{os.getpid()}-{secrets.token_hex(4)}-")


@pytest.mark.usefixtures("private_claims")
@pytest.mark.xdist_group("cpu-claims")  # (the claims are the box's: not beside each other)
def test_a_scheduled_run_keeps_every_rank_on_one_cpu_no_other_run_holds():
    """One agent at a time runs in schedule mode: every rank and block of the run is on one
    CPU while it takes turns (a hand-off of the turn is then a switch, not a wake of another
    CPU), whatever the number of ranks, and never on a CPU another run holds; with every CPU held, or
    pin_ranks=False, the ranks are placed as in any other run. A pool follows each run."""
    from shmcomm.launch.turncpu import claim_cpu

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to choose")
    n = len(cpus)
    for nranks in (2, n + 1):
        assert _one_cpu(shmcomm.run(_affinities, nranks=nranks, blocks=2, mode="schedule")) in cpus
    free = shmcomm.run(_affinities, nranks=n, blocks=2, mode="schedule", pin_ranks=False)
    assert all(h == b[0] == b[1] == cpus for h, b in free), free
    held = [claim_cpu(cpus)]  # as another run would (another test worker's run may hold one)
    try:
        got = shmcomm.run(_affinities, nranks=2, blocks=2, mode="schedule")
        if held[0] is not None and len({tuple(c) for h, b in got for c in (h, *b)}) == 1:
            assert _one_cpu(got) != held[0].cpu
        while held[-1] is not None:  # now every CPU is held: the ranks are spread
            held.append(claim_cpu(cpus))
        spread = shmcomm.run(_affinities, nranks=n, blocks=2, mode="schedule")
        assert [h for h, _ in spread] == [[c] for c in cpus], spread
    finally:
        for c in held:
            if c is not None:
                c.release()
    with shmcomm.Pool(nranks=n) as pool:
        one = pool.run(_affinities, blocks=2, mode="schedule")
        # between its turns a rank's host thread (its process's main thread) is off the turn's
        # CPU: its setup and its end run beside the turn's holder
        off = [os.sched_getaffinity(pid) for pid in pool.pids.values()]
        spread = pool.run(_affinities, blocks=2)
    turn = _one_cpu(one)
    assert turn in cpus
    # (the host that took the run's last turn may stay: that CPU idles until the next run)
    apart = [o for o in off if o == set(cpus) - {turn}]
    assert len(apart) >= n - 1 and all(o in (set(cpus) - {turn}, {turn}) for o in off), (turn, off)
    assert [h for h, _ in spread] == [[c] for c in cpus], spread


def _policies_kernel(ctx, out):
    out[ctx.block_idx] = os.sched_getscheduler(0)


def _policies(rt):
    """The scheduling policy of this rank's host thread and of each of its blocks."""
    out = [None] * 2
    rt.launch(_policies_kernel, blocks=2, args=(out,))
    return [os.sched_getscheduler(0), *out]


@pytest.mark.xdist_group("cpu-claims")
def test_a_scheduled_runs_agents_do_not_preempt_the_one_passing_the_turn():
    """On the turn's CPU every thread of a rank is in the batch policy (a woken agent does not
    preempt the agent that woke it, which is about to sleep); any other run keeps the policy the
    rank inherited, also in a pool process that served a scheduled run before."""
    if len(os.sched_getaffinity(0)) < 2 or os.sched_getscheduler(0) != os.SCHED_OTHER:
        pytest.skip("one CPU (no turn's CPU to claim), or not in the normal policy")
    batch, normal = os.SCHED_BATCH, os.SCHED_OTHER
    assert {p for r in shmcomm.run(_policies, nranks=2, blocks=2, mode="schedule")
            for p in r} == {batch}
    assert {p for r in shmcomm.run(_policies, nranks=2, blocks=2, mode="schedule",
                                   pin_ranks=False) for p in r} == {normal}
    with shmcomm.Pool(nranks=2) as pool:
        got = [pool.run(_policies, blocks=2, mode=m) for m in ("schedule", "eager", "schedule")]
    assert [{p for r in g for p in r} for g in got] == [{batch}, {normal}, {batch}], got


@pytest.mark.usefixtures("private_claims")
@pytest.mark.xdist_group("cpu-claims")
def test_a_cpu_claim_is_one_runs_and_ends_with_it():
    """A claim holds its CPU against every other claim until released; a forked child does not
    keep its parent's claim."""
    from shmcomm.launch.turncpu import claim_cpu

    cpus = sorted(os.sched_getaffinity(0))
    first = claim_cpu(cpus)
    assert first is not None
    second = claim_cpu(cpus)
    try:
        assert second is None or second.cpu != first.cpu
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child lives on while the parent releases: the claim ends all the same
            os.write(w, b"x")  # (its fork handlers, which drop the claim, have run by now)
            time.sleep(5.0)
            os._exit(0)
        os.close(w)
        try:
            assert os.read(r, 1) == b"x"
            os.close(r)
            first.release()
            first.release()  # twice: nothing more
            again = [claim_cpu(cpus) for _ in cpus]
            assert first.cpu in {c.cpu for c in again if c is not None}
            for c in again:
                if c is not None:
                    c.release()
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        if second is not None:
            second.release()


def test_the_launchers_wait_follows_a_changing_set_of_pipes():
    """The launcher's wait for its pipes (one poll object for the whole run): a pipe with data
    or whose writer closed is ready, one no longer asked about is not reported, and a new pipe
    that got a closed one's descriptor number is watched as itself."""
    from multiprocessing import Pipe

    from shmcomm.launch.polling import Readable

    readable = Readable()
    a, a_w = Pipe(duplex=False)
    b, b_w = Pipe(duplex=False)
    assert readable.wait([a, b], 0.01) == []
    a_w.send("x")
    assert readable.wait([a, b], 1.0) == [a]
    assert readable.wait([b], 0.01) == []  # a still holds data, but is not asked about
    b_w.close()
    assert set(readable.wait([a, b], 1.0)) == {a, b}
    fd = b.fileno()
    b.close()
    c, c_w = Pipe(duplex=False)
    try:
        if c.fileno() == fd:  # (the usual lowest-free descriptor: the reuse under test)
            assert readable.wait([c], 0.01) == []
        c_w.send("y")
        assert set(readable.wait([a, c], 1.0)) == {a, c}
        assert readable.wait([], 0.01) == []
    finally:
        for conn in (a, a_w, c, c_w):
            conn.close()
