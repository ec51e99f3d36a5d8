"""The ranks of an mpiexec job agree on every setting that changes what the run means or its
shape before anything runs (an MPMD job with different options on each side is refused, naming
the setting and the ranks), and a failing job leaves its mpiexec topology file behind in /tmp no
more than MPI's files in /dev/shm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from _helpers import ROOT as _ROOT

pytest.importorskip("mpi4py", reason="the mpi transport needs mpi4py: pip install 'shmcomm[mpi]'")

from shmcomm.transports.mpi.library import find_mpiexec  # noqa: E402

pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("mpi")]

ROOT = str(_ROOT)
JOB_TIMEOUT = 180

PROGRAM = '''
import os

from shmcomm.comm import TWAIT, Signal, WaitCmp


def _topology():
    """The job's mpiexec topology file: the one this rank's proxy holds open."""
    fds = f"/proc/{os.getppid()}/fd"
    for fd in os.listdir(fds):
        try:
            path = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if path.startswith("/tmp/hydra_hwloc_xmlfile_"):
            return path
    return None


def _boom(ctx):
    if ctx.rank == 1:
        raise ValueError("boom in block")
    TWAIT(Signal(ctx.signal_base + 9216), 1, WaitCmp.GE)


def boom(rt):
    print("TOPOLOGY", _topology(), flush=True)
    rt.launch(_boom, blocks=1)
'''


def _job(sides: list[list[str]], cwd: str) -> subprocess.CompletedProcess:
    """An MPMD job: one rank per side, each ``python -m shmcomm launch --transport mpi`` plus
    that side's options; its own process group, killed whole on timeout."""
    mpiexec = find_mpiexec()
    assert mpiexec, "mpi4py is installed but no mpiexec was found"
    argv = [mpiexec]
    for i, extra in enumerate(sides):
        argv += ([":"] if i else []) + ["-n", "1", sys.executable, "-m", "shmcomm", "launch",
                                        "--transport", "mpi", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, cwd]))
    env.pop("SHMCOMM_TRANSPORT", None)
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{argv} did not finish within {JOB_TIMEOUT} s\n{out}\n{err}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.mark.parametrize("setting,left,right", [
    ("mode", ["--mode", "eager"], ["--mode", "hazard"]),
    ("seed", ["--seed", "1"], ["--seed", "2"]),
    ("blocks", ["--blocks", "1"], ["--blocks", "2"]),
    ("timeout", ["--timeout", "60"], ["--timeout", "90"]),
])
def test_ranks_that_disagree_on_a_setting_are_refused_naming_it(tmp_path, setting, left, right):
    res = _job([left, right], str(tmp_path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"the ranks disagree on {setting}:" in res.stderr, res.stderr
    assert "on rank 0" in res.stderr and "on rank 1" in res.stderr, res.stderr


def test_a_failing_job_leaves_no_topology_file_in_tmp(tmp_path):
    (tmp_path / "mpiagree.py").write_text(PROGRAM)
    res = _job([["--program", "mpiagree:boom"]] * 2, str(tmp_path))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "boom in block" in res.stderr, res.stderr
    paths = {line.split()[1] for line in res.stdout.splitlines() if line.startswith("TOPOLOGY")}
    paths.discard("None")
    if not paths:
        pytest.skip("this mpiexec writes no topology file (no hwloc XML in /tmp)")
    left = [p for p in paths if os.path.exists(p)]
    assert not left, f"the failed job left mpiexec's topology file behind: {left}"
