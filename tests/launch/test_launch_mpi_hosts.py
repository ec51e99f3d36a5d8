"""The mpi transport across hosts: (a) every rank its own host as MPICH sees it
(``MPIR_CVAR_NOLOCAL=1``: no shared memory between any two ranks, so the control plane goes
through MPI), and (b) a real multi-host job on one machine: ranks in network namespaces of their
own hostnames, joined by a veth bridge, started by mpiexec through ``scripts/netns-exec`` instead
of ssh, talking over TCP. Also the start-up agreement (nranks, window sizes, program) and what a
killed job leaves in /dev/shm. Every job runs in its own process group with a timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

pytest.importorskip("mpi4py", reason="the mpi transport needs mpi4py: pip install 'shmcomm[mpi]'")

from test_transports_mpi import JOB_TIMEOUT, PROGRAMS, ROOT, TESTS, mpirun  # noqa: E402

from shmcomm.launch.cleanup import MPI_PREFIX  # noqa: E402
from shmcomm.transports.mpi.library import find_mpiexec  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import netns_hosts  # noqa: E402

# MPI jobs in one xdist group: two at once would see (and clean up) each other's MPICH files
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("mpi")]

NOLOCAL = {"MPIR_CVAR_NOLOCAL": "1"}
CASES = os.path.join(TESTS, "mpi_cases.py")


@pytest.fixture
def programs(tmp_path):
    (tmp_path / "mpiprogs.py").write_text(PROGRAMS)
    return str(tmp_path)


def _launch(programs: str, name: str, *extra: str, env: dict | None = None):
    return mpirun(4, ["-m", "shmcomm", "launch", "--transport", "mpi", "--program",
                      f"mpiprogs:{name}", *extra], cwd=programs, env=env)


# -- (a) every rank its own host -----------------------------------------------------------------

def test_nolocal_host_collectives_and_kernels_across_hosts(tmp_path):
    res = mpirun(3, [CASES, "hosts", str(tmp_path / "trace.json")], env=NOLOCAL)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "mpi case hosts: OK (3 ranks)" in res.stdout


def test_nolocal_default_job_passes():
    res = mpirun(4, ["-m", "shmcomm", "launch", "--transport", "mpi", "--iters", "20"],
                 env=NOLOCAL)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("result: OK") == 1, res.stdout


def test_nolocal_missing_fence_is_caught_in_hazard_mode():
    res = mpirun(4, [CASES, "unfenced"], env=NOLOCAL)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "did not hold the previous rank's vector" in res.stderr, res.stderr
    assert "seed: 7" in res.stderr


def test_nolocal_hang_is_a_deadlock_with_every_hosts_waits(programs):
    """Rank 0's watch reads the other hosts' agent lines and signal words by RMA: the report is
    a deadlock (not the timeout, 120 s) naming the waits of ranks 0, 2 and 3."""
    res = _launch(programs, "stuck", "--timeout", "120", env=NOLOCAL)
    assert res.returncode == 1, res.stderr
    assert "shmcomm run failed (deadlock)" in res.stderr, res.stderr
    assert "ranks already finished: 1" in res.stderr
    for r in (0, 2, 3):
        for b in (0, 1):
            assert f"\n  {r}     {b}      signal rank {r} offset 0x9000" in res.stderr, res.stderr


POOL = '''
from shmcomm.launch.pool import Pool

def host(rt):
    x = rt.alloc((10,))
    x[:] = rt.rank + 1
    rt.all_reduce(x)
    return float(x[0])

with Pool() as pool:  # under the mpi transport the pool's runs are mpiexec's ranks, not forks
    results = pool.run(host, transport="mpi")
print(f"POOL {results}", flush=True)
'''


def test_pool_run_under_mpi_uses_the_mpi_launcher(tmp_path):
    (tmp_path / "pooljob.py").write_text(POOL)
    res = mpirun(2, [str(tmp_path / "pooljob.py")], env=NOLOCAL)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("POOL [3.0, 3.0]") == 2, res.stdout


def test_nolocal_timeout_report_gathers_every_hosts_pending_waits(programs):
    res = _launch(programs, "busy", "--timeout", "8", env=NOLOCAL)  # every block waits by then
    assert res.returncode == 124, res.stderr
    assert "the run did not finish within timeout=8 s" in res.stderr
    assert "1     -      running, no pending wait" in res.stderr, res.stderr
    for r in (0, 2, 3):
        assert f"\n  {r}     1      signal rank {r} offset 0x9000" in res.stderr, res.stderr
    assert "did not answer" not in res.stderr


# -- start-up agreement ----------------------------------------------------------------------

def _mpmd(sections: list[tuple[dict, list[str]]], cwd: str) -> subprocess.CompletedProcess:
    """``mpiexec -n 1 [-env K V] python ARGV : ...``, one rank per section, with a timeout."""
    cmd = [find_mpiexec()]
    for i, (env, argv) in enumerate(sections):
        if i:
            cmd.append(":")
        cmd += ["-n", "1"]
        for k, v in env.items():
            cmd += ["-env", k, v]
        cmd += [sys.executable, *argv]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, cwd]))
    env.pop("SHMCOMM_TRANSPORT", None)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the job hung: {out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


LAUNCH = ["-m", "shmcomm", "launch", "--transport", "mpi", "--iters", "2"]


@pytest.mark.parametrize("kind", ["nranks", "heap_bytes", "program"])
def test_ranks_that_disagree_stop_with_one_clear_error(programs, kind):
    """Before: a rank given another nranks raised alone and the others hung in MPI; other
    window sizes failed later with a reshape error. Now every rank raises the same error."""
    if kind == "nranks":
        sections = [({}, LAUNCH + ["--nranks", "3"]), ({}, LAUNCH)]
        want = "nranks=3 but mpiexec started 2 rank(s) (asked on rank 0)"
    elif kind == "heap_bytes":
        sections = [({"SHMCOMM_HEAP_BYTES": "1048576"}, LAUNCH),
                    ({"SHMCOMM_HEAP_BYTES": "2097152"}, LAUNCH)]
        want = "the ranks disagree on heap_bytes: 1048576 on rank 0; 2097152 on rank 1"
    else:
        sections = [({}, LAUNCH[:-2] + ["--program", "mpiprogs:stuck"]),
                    ({}, LAUNCH[:-2] + ["--program", "mpiprogs:boom"])]
        want = "the ranks disagree on program: 'mpiprogs:stuck' on rank 0; 'mpiprogs:boom'"
    res = _mpmd(sections, programs)
    assert res.returncode == 2, res.stdout + res.stderr
    assert want in res.stderr, res.stderr


# -- what a killed job leaves -------------------------------------------------------------------

def test_killed_rank_leaves_no_mpi_files(programs):
    """SIGKILL one rank mid-run: MPICH never gets to unlink its files; the run unlinked their
    names as soon as every rank had mapped them."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, programs]))
    env.pop("SHMCOMM_TRANSPORT", None)
    before = {n for n in os.listdir("/dev/shm") if n.startswith(MPI_PREFIX)}
    proc = subprocess.Popen([find_mpiexec(), "-n", "4", sys.executable, "-m", "shmcomm", "launch",
                             "--transport", "mpi", "--program", "mpiprogs:busy", "--timeout",
                             "120"], cwd=programs, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    out = ""
    try:
        running = 0
        while running < 4:
            line = proc.stdout.readline()
            assert line, "mpiexec ended before every rank started"
            out += line
            running += line.count("RUNNING")
        ranks = [c for c in psutil.Process(proc.pid).children(recursive=True)
                 if "mpiprogs:busy" in " ".join(c.cmdline())]
        assert len(ranks) == 4, ranks
        ranks[-1].send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(0.2)
    mapped = set(re.findall(r"/dev/shm/(mpich_shm_\w+)", out))
    assert mapped, out
    left = {n for n in os.listdir("/dev/shm") if n.startswith(MPI_PREFIX)} - before
    assert not (left & mapped), f"the killed job left MPI's files behind: {left & mapped}"


def test_cleanup_removes_mpich_files_no_process_maps(tmp_path):
    from shmcomm.launch.cleanup import LIVE, cleanup

    stale, live = tmp_path / "mpich_shm_5eed0001_1", tmp_path / "mpich_shm_5eed0001_2"
    for f in (stale, live):
        f.write_bytes(bytes(4096))
        old = time.time() - 3600
        os.utime(f, (old, old))
    mapper = subprocess.Popen([sys.executable, "-c", (
        "import mmap, sys, time\nf = open(sys.argv[1], 'r+b')\nm = mmap.mmap(f.fileno(), 0)\n"
        "print('mapped', flush=True)\ntime.sleep(120)"), str(live)], stdout=subprocess.PIPE,
        text=True)
    try:
        assert mapper.stdout.readline().strip() == "mapped"
        entries = {e.name: e for e in cleanup(shm_dir=str(tmp_path))}
    finally:
        mapper.kill()
        mapper.wait()
    assert entries[stale.name].removed and not stale.exists(), entries[stale.name]
    assert entries[live.name].status == LIVE and live.exists(), entries[live.name]
    assert f"pid {mapper.pid}" in entries[live.name].why


def test_cleanup_removes_mpiexecs_topology_file_once_its_mpiexec_is_gone(tmp_path):
    """An aborted job leaves mpiexec's /tmp/hydra_hwloc_xmlfile_*: cleanup keeps it while an
    mpiexec that started before it runs (it may be that job's) and removes it once none does;
    an mpiexec started later (another job) is no reason to keep it. (An empty shm_dir: the
    real /dev/shm is the other cleanup tests' business.)"""
    from shmcomm.launch.cleanup import HYDRA_DIR, HYDRA_PREFIX, LIVE, cleanup

    job = subprocess.Popen([find_mpiexec(), "-n", "1", sys.executable, "-c",
                            "print('up', flush=True); import time; time.sleep(120)"],
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    fd, path = tempfile.mkstemp(prefix=HYDRA_PREFIX, dir=HYDRA_DIR)
    os.close(fd)
    name = os.path.basename(path)
    try:
        assert job.stdout.readline().strip() == "up"
        made = psutil.Process(job.pid).create_time() + 0.5  # as if this mpiexec made it
        os.utime(path, (made, made))
        time.sleep(max(0.0, made + 1.1 - time.time()))  # past "made just now"
        kept = {e.name: e for e in cleanup(shm_dir=str(tmp_path))}[name]
        assert kept.status == LIVE and os.path.exists(path), kept
        assert "mpiexec pid" in kept.why and str(job.pid) in kept.why, kept
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    deadline = time.time() + 60
    while True:  # another test's mpiexec that started just before ours may still run
        gone = {e.name: e for e in cleanup(shm_dir=str(tmp_path))}[name]
        if gone.removed or gone.status != LIVE or time.time() > deadline:
            break
        time.sleep(0.2)
    assert gone.removed and not os.path.exists(path), gone


# -- (b) a real multi-host job on one machine ----------------------------------------------------

@pytest.fixture(scope="module")
def netns():
    """Three network-namespace hosts on a private veth bridge; deleted at the end, also when
    a test fails (the finalizer)."""
    why = netns_hosts.forbidden()
    if why:
        pytest.skip(f"no multi-host test on this machine: {why}")
    hosts = netns_hosts.Hosts(3)
    yield hosts
    hosts.close()
    left = [n for n in netns_hosts._ip("netns", "list", check=False).stdout.split()
            if n.startswith(hosts.prefix)]
    assert not left, f"namespaces left behind: {left}"


def _across(hosts: netns_hosts.Hosts, argv: list[str], cwd: str = ROOT,
            private: str | None = None) -> subprocess.CompletedProcess:
    env = hosts.env(find_mpiexec(), dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, cwd])))
    if private:  # every host but h0 sees its own empty tmpfs there
        env["NETNS_PRIVATE_DIR"] = private
    env.pop("SHMCOMM_TRANSPORT", None)
    cmd = hosts.mpiexec(hosts.n, [sys.executable, *argv])
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the job across namespaces did not finish: {out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


HOSTNAMES = '''
import socket
from shmcomm.launch.programs import default_job

def where(rt):
    print(f"HOST {rt.rank} {socket.gethostname()}", flush=True)  # one write: lines stay whole
    res = default_job(rt, iters=10)  # both barriers and the AllReduce, checked
    print(f"DEFAULT JOB {rt.rank} {'OK' if res['ok'] else 'FAILED'}", flush=True)
'''


def test_netns_default_job_runs_one_rank_per_host_over_tcp(netns, tmp_path):
    (tmp_path / "netnsprog.py").write_text(HOSTNAMES)
    res = _across(netns, ["-m", "shmcomm", "launch", "--transport", "mpi", "--program",
                          "netnsprog:where"], cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(re.findall(r"HOST (\d) (h\d)", res.stdout)) == {("0", "h0"), ("1", "h1"),
                                                              ("2", "h2")}, res.stdout
    assert sorted(re.findall(r"DEFAULT JOB (\d) OK", res.stdout)) == ["0", "1", "2"], res.stdout


def test_netns_deadlock_is_reported_across_hosts(netns, programs):
    res = _across(netns, ["-m", "shmcomm", "launch", "--transport", "mpi", "--program",
                          "mpiprogs:stuck", "--timeout", "120"], cwd=programs)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "shmcomm run failed (deadlock)" in res.stderr, res.stderr
    assert "ranks already finished: 1" in res.stderr
    for r in (0, 2):
        assert f"\n  {r}     0      signal rank {r} offset 0x9000" in res.stderr, res.stderr


def test_netns_trace_is_merged_from_hosts_with_their_own_file_system(netns, tmp_path):
    """Hosts h1 and h2 write the trace into their own file systems (a private tmpfs over the
    trace's directory): rank 0's file gets their events, with arrows across ranks."""
    folder = tmp_path / "trace"
    folder.mkdir()
    res = _across(netns, [CASES, "trace", str(folder / "t.json")], private=str(folder))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "mpi case trace: OK (3 ranks)" in res.stdout
    assert os.listdir(folder) == ["t.json"]  # h1's and h2's own files stayed on their hosts
