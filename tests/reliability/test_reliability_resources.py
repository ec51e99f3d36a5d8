"""Exhausted resources give a clear ``ShmcommError`` in the caller, who stays alive, with nothing
left behind: a full or shared ``/dev/shm`` (a real small tmpfs, mounted in a private mount
namespace), page rounding, memory limits, too many open files, a failing fork; and a rank the
kernel SIGKILLs gets a hint at the OOM killer."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import shmcomm
from shmcomm import RunError
from shmcomm.errors import ArgumentError, ShmcommError
from shmcomm.transports import shm as shm_transport
from shmcomm.transports.shm import segments

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(shmcomm.__file__)))  # the code under test


def _can_mount_private_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(not _can_mount_private_tmpfs(),
                                 reason="cannot mount a private tmpfs (unshare -rm)")


def _in_small_shm(size: str, body: str) -> subprocess.CompletedProcess:
    """Run ``body`` (Python) with a private ``/dev/shm`` of ``size``, as the only user of it."""
    script = textwrap.dedent(body)
    cmd = ["unshare", "-rm", "sh", "-c",
           f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec \"$0\" -c \"$1\"",
           sys.executable, script]
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=90)


PRELUDE = """
import os, sys
import shmcomm
from shmcomm.errors import ShmcommError

def host(rt):
    x = rt.alloc((rt.config.heap_bytes,), "uint8")  # zeroed: touches every page of the heap
    x[:] = 1
    rt.barrier()
    return rt.rank

def attempt(**kw):
    try:
        shmcomm.run(host, **kw)
    except ShmcommError as exc:
        print("ERROR", type(exc).__name__, str(exc).replace(chr(10), " "))
    else:
        print("RAN")
    left = sorted(n for n in os.listdir("/dev/shm") if "shmcomm" in n)
    print("LEFT", left)
"""


@needs_tmpfs
def test_dev_shm_filled_by_someone_else_is_a_clear_error():
    proc = _in_small_shm("4m", PRELUDE + """
with open("/dev/shm/filler", "wb") as f:
    f.write(b"x" * (3 << 20))
attempt(nranks=2, window_bytes=1 << 20, timeout=20)
""")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERROR ArgumentError" in proc.stdout and "/dev/shm" in proc.stdout, proc.stdout
    assert "LEFT []" in proc.stdout


@needs_tmpfs
def test_dev_shm_race_fails_at_the_reservation_not_with_sigbus():
    """Another process takes the space after the free-space check: posix_fallocate fails, the
    caller gets a ShmcommError (no SIGBUS, exit status 135), and nothing is left."""
    proc = _in_small_shm("4m", PRELUDE + """
from shmcomm.transports import shm as t
t.shm_free_bytes = lambda: 1 << 40  # the check saw room that someone else took since
with open("/dev/shm/filler", "wb") as f:
    f.write(b"x" * (3 << 20))
attempt(nranks=2, window_bytes=1 << 20, timeout=20)
""")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert "ERROR ShmcommError cannot reserve" in proc.stdout, proc.stdout
    assert "lower heap_bytes" in proc.stdout
    assert "LEFT []" in proc.stdout


@needs_tmpfs
def test_page_rounding_is_counted():
    """8 windows of 32,256 bytes each (signal 4 KiB + heap 28,160 + tail) fit the tmpfs in
    bytes, not in pages: a clear error, not a SIGBUS."""
    page = os.sysconf("SC_PAGE_SIZE")
    size = 64 * page  # 8 x 32,256 bytes fit beside the control segment; 8 x 8 pages do not
    proc = _in_small_shm(f"{size}", PRELUDE + f"""
from shmcomm.transports.shm import _TAIL_BYTES
heap = 32256 - 4096 - _TAIL_BYTES
assert 8 * 32256 <= {size}
attempt(nranks=8, signal_bytes=4096, window_bytes=heap, timeout=20)
""")
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert "ERROR" in proc.stdout, proc.stdout
    assert "whole pages" in proc.stdout or "cannot reserve" in proc.stdout, proc.stdout
    assert "LEFT []" in proc.stdout


def test_windows_are_checked_against_memory_and_the_cgroup_limit(monkeypatch):
    monkeypatch.setattr(shm_transport, "memory_room",
                        lambda: (1 << 20, "the cgroup's memory limit (/sys/fs/cgroup/memory.max)"))
    with pytest.raises(ArgumentError) as info:
        shmcomm.run(lambda rt: 1, 2, window_bytes=4 << 20, timeout=20)
    assert "cgroup's memory limit" in str(info.value) and "heap_bytes" in str(info.value)


def test_memory_room_reads_this_box():
    room = segments.memory_room()
    assert room is not None and room[0] > 0 and room[1]


def _sigkilled(rt):
    rt.barrier()
    if rt.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    rt.barrier()


def test_a_sigkilled_rank_gets_an_oom_hint():
    with pytest.raises(RunError) as info:
        shmcomm.run(_sigkilled, 2, window_bytes=1 << 16, timeout=30)
    text = str(info.value)
    assert "died from signal SIGKILL" in text and "OOM killer" in text, text


def test_too_many_open_files_is_a_clear_error():
    body = """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (14, 14))
try:
    shmcomm.run(host, 16, window_bytes=1 << 16, timeout=20)
except ShmcommError as exc:
    print("ERROR", type(exc).__name__, exc)
else:
    print("RAN")
print("LEFT", sorted(n for n in os.listdir("/dev/shm") if "shmcomm" in n and str(os.getpid()) in n))
"""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERROR" in proc.stdout and "open files" in proc.stdout, proc.stdout
    assert "LEFT []" in proc.stdout


def test_fork_failure_is_a_clear_error_and_started_ranks_are_stopped(monkeypatch):
    from shmcomm.launch import rank as supervisor  # (where the rank processes are forked)

    real_fork = os.fork
    calls = [0]
    pids: list[int] = []

    def fork():
        calls[0] += 1
        if calls[0] == 3:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(supervisor.os, "fork", fork)
    with pytest.raises(ShmcommError) as info:
        shmcomm.run(lambda rt: rt.barrier(), 4, window_bytes=1 << 16, timeout=20)
    monkeypatch.undo()
    assert "fork failed" in str(info.value) and "process limit" in str(info.value)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # already reaped by the launcher


def test_guard_pages_surround_every_segment():
    seg = segments.Segment("guardtest", 100)
    try:
        assert seg.mapped == segments.page_round(100)
        maps = open("/proc/self/maps").read()
        after = f"{seg.base + seg.mapped:x}-"
        line = next(ln for ln in maps.splitlines() if ln.startswith(after))
        assert line.split()[1].startswith("---"), line  # PROT_NONE right after the segment
    finally:
        seg.close()
