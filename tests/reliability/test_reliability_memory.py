"""Memory checks read the run's own cgroup: in a child cgroup with a 400 MiB limit a run that
would not fit is refused up front with a message naming the cgroup, and leaves no segment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from _helpers import ROOT

from shmcomm.transports.shm.segments import own_memory_cgroups

pytestmark = pytest.mark.timeout(180)

ENV = dict(os.environ, PYTHONPATH=str(ROOT))
LIMIT = 400 << 20


def _child_cgroup() -> tuple[str, str]:
    """A new memory cgroup under ours with a 400 MiB limit: (directory, procs file)."""
    own = own_memory_cgroups()
    if not own:
        pytest.skip("no memory cgroup is readable here")
    d, limit_file, _ = own[0]
    child = os.path.join(d, f"shmcomm-test-{os.getpid()}")
    try:
        os.mkdir(child)
        with open(os.path.join(child, limit_file), "w") as f:
            f.write(str(LIMIT))
    except OSError as exc:
        try:
            os.rmdir(child)
        except OSError:
            pass
        pytest.skip(f"cannot make a child memory cgroup with a limit here ({exc.strerror}; "
                    "needs root or a delegated cgroup)")
    return child, os.path.join(child, "cgroup.procs")


def test_a_run_over_the_own_cgroups_limit_is_refused_and_leaves_no_segment():
    child, procs = _child_cgroup()
    code = """
        import shmcomm
        def host(rt):
            return rt.rank
        try:
            shmcomm.run(host, 4, window_bytes=128 << 20, timeout=60, wait_timeout=50)
        except shmcomm.errors.ArgumentError as exc:
            print("REFUSED", exc)
            raise SystemExit(2)
        print("RAN")
        """

    def enter() -> None:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                           text=True, timeout=150, env=ENV, preexec_fn=enter)
    finally:
        left = [n for n in os.listdir("/dev/shm") if n.startswith("shmcomm.")
                and _creator_gone(n)]
        os.rmdir(child)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "REFUSED" in p.stdout and "cgroup" in p.stdout, p.stdout
    assert not left, left


def _creator_gone(name: str) -> bool:
    pid = int(name.split(".")[1])
    if os.path.exists(f"/proc/{pid}"):
        return False
    os.unlink(os.path.join("/dev/shm", name))  # a leak of this test: remove it, and fail
    return True
