"""Descendants die with the run: a child a rank forks (even one that calls ``setsid``) is gone
when the run ends, and when the launcher is SIGKILLed; the run's cgroup (where the machine
gives one) is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from _helpers import ROOT

import shmcomm
from shmcomm.launch import descendants

pytestmark = pytest.mark.timeout(180)

ENV = dict(os.environ, PYTHONPATH=str(ROOT))
SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=50.0)


def _gone(pid: int, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _escape(rt):
    """Fork a child that leaves the rank's session and process group, and sleeps."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.write(w, b"x")
        time.sleep(600)
        os._exit(0)
    os.read(r, 1)
    return pid


def _run_and_check(monkeypatch, cgroup: bool) -> None:
    monkeypatch.setattr(descendants, "USE_CGROUP", cgroup)
    pids = shmcomm.run(_escape, 2, **SMALL)
    left = [p for p in pids if not _gone(p, 30)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"setsid children {left} outlived a passing run"


def test_a_setsid_child_is_gone_when_a_passing_run_ends(monkeypatch):
    _run_and_check(monkeypatch, True)


def test_a_setsid_child_is_gone_without_a_cgroup_too(monkeypatch):
    _run_and_check(monkeypatch, False)


def test_a_pool_run_kills_its_setsid_children_and_keeps_its_ranks():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        pids = pool.run(_escape)
        assert all(_gone(p, 30) for p in pids), pids
        assert len(pool.run(_escape)) == 2 and pool.replaced == 0


def test_no_run_cgroup_is_left():
    base = descendants.cgroup2_dir()
    if base is None:
        pytest.skip("no cgroup v2 here: runs use the subreaper sweep")
    shmcomm.run(_escape, 1, **SMALL)
    assert not [n for n in os.listdir(base) if n.startswith(f"shmcomm-{os.getpid()}-")]


@pytest.mark.parametrize("setsid", [False, True])
def test_children_die_with_a_sigkilled_launcher(tmp_path, setsid):
    out = tmp_path / "pids"
    code = f"""
        import os, time, shmcomm
        def kernel(ctx):
            pid = os.fork()
            if pid == 0:
                if {setsid}:
                    os.setsid()
                time.sleep(600)
                os._exit(0)
            with open({str(out)!r}, "a") as f:
                f.write(f"{{pid}}\\n")
            time.sleep(600)
        def host(rt):
            rt.launch(kernel, blocks=1)
        shmcomm.run(host, 2, window_bytes=1 << 16, timeout=600, wait_timeout=590)
        """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=ENV)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().split()) < 2):
        time.sleep(0.2)
    kids = [int(x) for x in out.read_text().split()]
    assert len(kids) == 2
    p.kill()
    p.wait(60)
    left = [k for k in kids if not _gone(k, 60)]
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert not left, f"children {left} outlived the SIGKILLed launcher"
