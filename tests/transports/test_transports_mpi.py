"""The mpi transport under ``mpiexec``: the collectives (1-8 ranks), barriers, root collectives
and hazard mode as on shm, every peer over RMA only (as across hosts), the default job, and the
reports of a failing block, a deadlock and a timeout. Every job runs in its own process group
with a timeout; skipped only without mpi4py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("mpi4py", reason="the mpi transport needs mpi4py: pip install 'shmcomm[mpi]'")

from shmcomm.transports.mpi.library import find_mpiexec  # noqa: E402

# MPI jobs in one xdist group: two at once would see (and clean up) each other's MPICH files
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("mpi")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")
JOB_TIMEOUT = 180  # seconds for one mpiexec job on a loaded 2-core box
PROGRAMS = '''
import time
from shmcomm.comm import Signal, WaitCmp, TWAIT

def _boom(ctx):
    if ctx.rank == 2 and ctx.block_idx == 1:
        raise ValueError("boom in block")
    TWAIT(Signal(ctx.signal_base + 9216), 1, WaitCmp.GE)

def _print_maps():
    with open("/proc/self/maps") as f:  # MPI's shared-memory files, to check they are gone after
        for line in f:
            if "/dev/shm/mpich_shm_" in line:
                print("MAPPED", line.split(None, 5)[5].strip(), flush=True)

def boom(rt):
    _print_maps()
    rt.launch(_boom, blocks=2)

def everyone_fails(rt):
    rt.barrier()
    raise ValueError(f"host code failed on rank {rt.rank}")

def _stuck(ctx):
    if ctx.rank != 1:
        TWAIT(Signal(ctx.signal_base + 9216), 1, WaitCmp.GE)

def stuck(rt):
    rt.launch(_stuck, blocks=2)

def _busy(ctx):
    if ctx.rank == 1:
        time.sleep(60)
    else:
        TWAIT(Signal(ctx.signal_base + 9216), 1, WaitCmp.GE)

def busy(rt):
    _print_maps()
    print("RUNNING", rt.rank, flush=True)
    rt.launch(_busy, blocks=2)

def busy_slow_reporter(rt):
    # the rank that wins the report is held up before it prints (a loaded box deschedules it)
    import shmcomm.launch.mpi as m
    claim = m._claim_report
    def slow_claim(*args):
        won = claim(*args)
        if won:
            time.sleep(1.0)
        return won
    m._claim_report = slow_claim
    busy(rt)
'''


def _mpiexec() -> str:
    found = find_mpiexec()
    assert found, "mpi4py is installed but no mpiexec was found (pip install mpich)"
    return found


def mpirun(n: int, argv: list[str], cwd: str = ROOT, env: dict | None = None,
           ) -> subprocess.CompletedProcess:
    """``mpiexec -n n python argv`` in a new process group, killed whole on timeout."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, cwd])),
                    **(env or {}))
    full_env.pop("SHMCOMM_TRANSPORT", None)
    proc = subprocess.Popen([_mpiexec(), "-n", str(n), sys.executable, *argv], cwd=cwd,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the ranks unlink MPI's files and abort
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"mpiexec -n {n} {' '.join(argv)} did not finish within {JOB_TIMEOUT} s\n"
                    f"{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _case(n: int, case: str, *args: str) -> None:
    res = mpirun(n, [os.path.join(TESTS, "mpi_cases.py"), case, *args])
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"mpi case {case}: OK ({n} ranks)" in res.stdout


@pytest.mark.parametrize("n", [1, 2, 5, 8])  # 4: the suite below
def test_collectives_match_numpy_at_1_to_8_ranks(n):
    _case(n, "collectives")


def test_barriers_root_collectives_and_hazard_mode_at_4_ranks(tmp_path):
    _case(4, "suite", str(tmp_path / "trace.json"))


def test_unfenced_put_shows_stale_data_in_hazard_mode():
    _case(2, "race_pair")


def test_transport_conforms_to_the_seam():
    _case(2, "conformance")


@pytest.mark.parametrize("n", [2, 4])
def test_every_peer_over_rma_as_across_hosts(n):
    """``mpi_peers=rma``: Put / Get / Accumulate / Fetch_and_op to every other rank."""
    _case(n, "rma")


@pytest.mark.parametrize("peers", ["shared", "rma"])
def test_missing_fence_is_reported_in_hazard_mode_and_aborts_the_job(peers):
    res = mpirun(4, [os.path.join(TESTS, "mpi_cases.py"), "unfenced"],
                 env={"SHMCOMM_MPI_PEERS": peers})
    assert res.returncode == 1
    assert "did not hold the previous rank's vector" in res.stderr, res.stderr
    assert res.stderr.count("shmcomm run failed") >= 1
    assert "seed: 7" in res.stderr


def test_default_job_prints_ok_once():
    res = mpirun(4, ["-m", "shmcomm", "launch", "--transport", "mpi", "--iters", "50"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("result: OK") == 1, res.stdout
    assert "4 ranks x 4 blocks" in res.stdout


@pytest.fixture
def programs(tmp_path):
    (tmp_path / "mpiprogs.py").write_text(PROGRAMS)
    return str(tmp_path)


def _launch(programs: str, name: str, *extra: str) -> subprocess.CompletedProcess:
    return mpirun(4, ["-m", "shmcomm", "launch", "--transport", "mpi", "--program",
                      f"mpiprogs:{name}", *extra], cwd=programs)


def test_failing_block_aborts_the_job_with_one_report(programs):
    res = _launch(programs, "boom")
    assert res.returncode == 1
    assert res.stderr.count("shmcomm run failed") == 1, res.stderr
    assert "at rank 2 block 1: ValueError: boom in block" in res.stderr
    assert 'raise ValueError("boom in block")' in res.stderr  # the traceback
    _assert_no_mpi_files_left(res.stdout)


def _assert_no_mpi_files_left(stdout: str) -> None:
    """The MPICH files the job's ranks printed as mapped are gone from /dev/shm."""
    mapped = set(re.findall(r"/dev/shm/mpich_shm_\w+", stdout))
    assert mapped, stdout
    left = [p for p in mapped if os.path.exists(p)]
    assert not left, f"the job left MPI's shared-memory files behind: {left}"


def test_a_failure_on_every_rank_is_reported_once(programs):
    res = _launch(programs, "everyone_fails")
    assert res.returncode == 1
    assert res.stderr.count("shmcomm run failed") == 1, res.stderr
    assert "ValueError: host code failed on rank" in res.stderr


def test_deadlock_on_one_host_is_reported_with_the_wait_for_table(programs):
    res = _launch(programs, "stuck", "--timeout", "60")
    assert res.returncode == 1, res.stderr
    assert "shmcomm run failed (deadlock)" in res.stderr
    assert "ranks already finished: 1" in res.stderr
    for r in (0, 2, 3):
        assert f"\n  {r}     0      signal rank {r} offset 0x9000" in res.stderr, res.stderr


def test_timeout_gathers_every_ranks_pending_waits(programs):
    res = _launch(programs, "busy", "--timeout", "8")  # every block waits well before 8 s
    assert res.returncode == 124, res.stderr
    assert "the run did not finish within timeout=8 s" in res.stderr
    assert "1     -      running, no pending wait" in res.stderr, res.stderr
    for r in (0, 2, 3):
        assert f"\n  {r}     1      signal rank {r} offset 0x9000" in res.stderr, res.stderr
    assert "did not answer" not in res.stderr


def test_stress_harness_under_mpiexec():
    res = mpirun(2, ["-m", "shmcomm", "stress", "--transport", "mpi", "--program", "all_reduce",
                     "--runs", "2", "--blocks", "1,2", "--size", "64", "--mode", "eager",
                     "--no-progress"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("shmcomm stress: all_reduce: 2 runs") == 1, res.stdout
    assert "nranks=2 blocks=2 size=64 mode=eager" in res.stdout
    res = mpirun(2, ["-m", "shmcomm", "stress", "--transport", "mpi", "--program", "all_reduce",
                     "--seconds", "5"])
    assert res.returncode == 2 and "give --runs" in res.stderr, res.stderr


def test_nranks_must_match_mpiexec_and_shm_only_modes_are_refused(programs):
    res = mpirun(2, ["-m", "shmcomm", "launch", "--transport", "mpi", "--nranks", "3"])
    assert res.returncode == 2
    assert res.stderr.count("nranks=3 but mpiexec started 2 rank(s)") == 1, res.stderr
    res = mpirun(2, ["-m", "shmcomm", "launch", "--transport", "mpi", "--mode", "schedule"])
    assert res.returncode == 2
    assert "schedule mode" in res.stderr and "needs transport='shm'" in res.stderr, res.stderr
    res = mpirun(2, ["-m", "shmcomm", "launch", "--transport", "mpi", "--detect-races"])
    assert res.returncode == 2 and "detect_races needs transport='shm'" in res.stderr, res.stderr


def test_thread_level_below_multiple_is_refused():
    code = ("import mpi4py; mpi4py.rc.thread_level = 'serialized'; from mpi4py import MPI\n"
            "from shmcomm.transports.mpi import load_mpi\n"
            "from shmcomm.errors import LibraryError\n"
            "try:\n    load_mpi()\nexcept LibraryError as e:\n    print('refused:', e)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert "refused:" in res.stdout and "needs MPI_THREAD_MULTIPLE" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("signum,status,text", [
    (signal.SIGINT, 130, "interrupted by SIGINT"), (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_ctrl_c_or_sigterm_stops_every_rank(programs, signum, status, text):
    _interrupt(programs, "busy", signum, status, text)


def test_an_interrupt_is_reported_by_a_reporter_held_up_before_it_prints(programs):
    """Every rank gets the forwarded signal; the ones that lost the report must not abort the
    job before the reporter's line is out."""
    _interrupt(programs, "busy_slow_reporter", signal.SIGTERM, 143, "terminated by SIGTERM")


def _interrupt(programs: str, program: str, signum: int, status: int, text: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, programs]))
    env.pop("SHMCOMM_TRANSPORT", None)
    proc = subprocess.Popen([find_mpiexec(), "-n", "4", sys.executable, "-m", "shmcomm", "launch",
                             "--transport", "mpi", "--program", f"mpiprogs:{program}",
                             "--timeout", "120"],
                            cwd=programs, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        running, out = 0, ""
        while running < 4:  # every rank is inside the run (rank 1 then sleeps 60 s in its kernel)
            line = proc.stdout.readline()
            out += line
            assert line, "mpiexec ended before every rank started"
            running += line.count("RUNNING")  # mpiexec may interleave the ranks' lines
        time.sleep(0.5)
        proc.send_signal(signum)  # what a terminal's Ctrl-C, or a batch system, sends mpiexec
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, err
    assert err.count(text) == 1, err
    assert "Traceback" not in err
    _assert_no_mpi_files_left(out)


_DRAINER = """
import sys, time
from shmcomm.launch.mpi import drain_stderr
sys.stderr.write("report\\n"); sys.stderr.flush()
t0 = time.monotonic()
read = drain_stderr(float(sys.argv[1]))
print(read, time.monotonic() - t0, time.monotonic(), flush=True)
"""


def test_a_report_waits_until_its_stderr_pipe_was_read_before_the_abort():
    """A rank's report goes out through a pipe that mpiexec's proxy reads: the rank waits until
    the pipe holds nothing more (bounded) before it aborts the job, or the proxy could miss it."""
    for timeout, reader in ((30.0, True), (0.3, False)):
        p = subprocess.Popen([sys.executable, "-c", _DRAINER, str(timeout)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            if reader:
                time.sleep(0.5)
                read_at = time.monotonic()  # (the clock is the box's: comparable across processes)
                assert p.stderr.readline() == "report\n"
            got, waited, returned_at = p.stdout.readline().split()
            assert got == str(reader)
            if reader:
                assert float(returned_at) >= read_at, (returned_at, read_at)
            else:
                assert float(waited) >= timeout, waited
        finally:
            p.kill()
            p.communicate()
