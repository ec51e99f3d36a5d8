"""Signals and kills around a run: a rank's death is reported even when the launcher inherited
SIGCHLD ignored, a stopped rank is named early, a killed creator leaves no segment name, and
the stress command exits as ``launch`` does on SIGTERM / SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, timeout: float = 150, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=ENV, **kw)


def test_a_rank_sigsegv_is_reported_with_sigchld_ignored():
    code = """
        import os, signal, shmcomm
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN
        def host(rt):
            if rt.rank == 1:
                os.kill(os.getpid(), signal.SIGSEGV)
            rt.barrier()
        try:
            shmcomm.run(host, 2, window_bytes=1 << 16, timeout=60, wait_timeout=50)
        except shmcomm.RunError as e:
            print("REPORT", e)
            raise SystemExit(1)
        print("PASSED")
        """
    p = _python(code, preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "SIGSEGV" in p.stdout and "rank 1" in p.stdout, p.stdout + p.stderr


def test_a_creator_killed_while_reserving_a_segment_leaves_no_name():
    code = """
        import os, signal
        from shmcomm.transports.shm import segments
        def killed(fd, offset, length):  # SIGKILL while posix_fallocate runs (a big segment)
            os.kill(os.getpid(), signal.SIGKILL)
        os.posix_fallocate = killed
        segments.Segment("probe", 1 << 20)
        """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=ENV)
    p.wait(150)
    assert p.returncode == -signal.SIGKILL
    left = [n for n in os.listdir("/dev/shm") if n.startswith(f"shmcomm.{p.pid}.")]
    for n in left:
        os.unlink(os.path.join("/dev/shm", n))
    assert not left, f"the killed creator left {left} in /dev/shm"
