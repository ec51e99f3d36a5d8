"""Security: segments are exclusive, private (0600), unguessable and gone before ranks start.

What is checked, on real runs:

* every segment a run creates is created with ``O_CREAT | O_EXCL`` and mode 0600 (even under
  umask 0), has at least 64 random bits in its name, and no longer exists in ``/dev/shm`` once
  its creator returns (watched by wrapping the real ``posix_ipc.SharedMemory`` call);
* another process cannot attach to a live run: opening any of its names fails (mappings show
  ``(deleted)``), and no process of the run holds an fd to a segment that could be reopened
  through ``/proc/<pid>/fd`` (Python's ``mmap`` would keep one: shmcomm maps with libc);
* a name that someone else created first is refused, never attached to;
* nothing of a run is world-readable (no fd, no file, no name).

As everywhere in POSIX shared memory, a process of the *same user* with ptrace rights (or root)
can still read a rank's memory through ``/proc/<pid>/mem``: that is outside what a runtime can
prevent, and these tests do not pretend otherwise.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import numpy as np
import posix_ipc
import pytest

import shmcomm
from shmcomm import ShmcommError
from shmcomm.core import control as C
from shmcomm.launch.cleanup import NAME_RE
from shmcomm.transports.shm.segments import Segment

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def created(monkeypatch):
    """Record every segment shmcomm creates: name, flags, requested mode, mode on disk, present."""
    real = posix_ipc.SharedMemory
    seen: list[dict] = []

    def spy(name, flags=0, mode=0o600, size=0, **kw):
        shm = real(name, flags, mode=mode, size=size, **kw)
        st = os.fstat(shm.fd)
        seen.append(dict(name=name, flags=flags, mode=mode, disk_mode=stat.S_IMODE(st.st_mode),
                         uid=st.st_uid, size=st.st_size))
        return shm

    monkeypatch.setattr(posix_ipc, "SharedMemory", spy)
    return seen


def test_run_segments_are_exclusive_0600_random_and_unlinked(created):
    old = os.umask(0)  # the mode must not depend on the caller's umask
    try:
        shmcomm.run(lambda rt: None, nranks=3, window_bytes=1 << 16)
    finally:
        os.umask(old)
    assert len(created) == 4  # three windows and the control segment
    tokens = set()
    for seg in created:
        assert seg["flags"] == posix_ipc.O_CREX, seg
        assert seg["mode"] == 0o600 and seg["disk_mode"] == 0o600, seg  # nothing for group/other
        assert seg["uid"] == os.getuid()
        m = NAME_RE.match(seg["name"].lstrip("/"))
        assert m, seg["name"]
        assert int(m["pid"]) == os.getpid()
        assert len(m["token"]) * 4 >= 64  # 96 random bits
        tokens.add(m["token"])
        assert not os.path.exists("/dev/shm/" + seg["name"].lstrip("/"))
    assert len(tokens) == 4


def test_names_do_not_repeat():
    names = set()
    for _ in range(200):
        s = Segment("probe", 4096)
        names.add(NAME_RE.match(s.name.lstrip("/"))["token"])
        s.close()
    assert len(names) == 200


ATTACKER = r"""
import mmap, os, sys, posix_ipc
names, pids = sys.argv[1].split(","), [int(p) for p in sys.argv[2].split(",")]
opened = []
for name in names:  # by name, as another run (or anyone) would try
    for read_only in (False, True):
        try:
            posix_ipc.SharedMemory(name, read_only=read_only).close_fd()
            opened.append(name)
        except posix_ipc.ExistentialError:
            pass
borrowed = []
for pid in pids:  # through a file descriptor one of the run's processes still holds
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if "/dev/shm/shmcomm" not in os.readlink(path):
                continue
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
                if m[:8] == b"SECRET!!":
                    borrowed.append((pid, fd))
                m.close()
        except OSError:
            pass
print("opened", opened)
print("borrowed", borrowed)
"""


def _attack_live_run():
    def host(rt):
        rt.window(rt.rank)[:8] = np.frombuffer(b"SECRET!!", np.uint8)  # window start: signals
        rt.barrier()  # every rank is up and holds its mappings
        result = None
        if rt.rank == 0:
            names = [s.name for s in rt.windows.transport.segments] + [rt.ctl.segment.name]
            pids = [rt.ctl.rank_field(r, C.R_PID) for r in range(rt.nranks)] + [os.getppid()]
            p = subprocess.run([sys.executable, "-c", ATTACKER, ",".join(names),
                                ",".join(map(str, pids))], capture_output=True, text=True, timeout=30)
            with open("/proc/self/maps") as f:
                maps = [line.split()[-2:] for line in f if "/dev/shm/shmcomm" in line]
            result = (names, p.returncode, p.stdout, p.stderr, maps)
        rt.barrier()  # the run stays live until the attacker is done
        rt.signals[:2] = 0
        return result

    return shmcomm.run(host, nranks=3, window_bytes=1 << 16)[0]


def test_another_process_cannot_open_a_live_runs_names():
    names, code, out, err, maps = _attack_live_run()
    assert code == 0, err
    assert "opened []" in out, out  # no name of the live run can be opened
    assert len(maps) >= 4 and all(m[-1] == "(deleted)" for m in maps), maps
    assert {m[0].rsplit("/", 1)[1] for m in maps} == {n.lstrip("/") for n in names}


def test_another_process_cannot_borrow_a_live_runs_fd():
    """Through /proc/<pid>/fd (allowed to the same user even under Yama ptrace_scope 1)."""
    _names, code, out, err, _maps = _attack_live_run()
    assert code == 0, err
    assert "borrowed []" in out, out


def test_a_name_taken_by_someone_else_is_refused_not_attached(monkeypatch):
    import shmcomm.transports.shm.segments as memory

    name = f"/shmcomm.{os.getpid()}.{'ab' * 12}.win0"
    trap = posix_ipc.SharedMemory(name, posix_ipc.O_CREX, mode=0o666, size=4096)
    try:
        monkeypatch.setattr(memory, "segment_name", lambda tag: name)
        with pytest.raises(ShmcommError, match="already exists; refusing to attach"):
            Segment("win0", 4096)
        with pytest.raises(ShmcommError, match="refusing to attach"):
            shmcomm.run(lambda rt: None, nranks=1, window_bytes=4096)
    finally:
        trap.close_fd()
        trap.unlink()


def test_ranks_keep_no_world_readable_trace():
    def host(rt):
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if "shmcomm" in target:
                found.append((target, stat.S_IMODE(os.stat(f"/proc/self/fd/{fd}").st_mode)))
        return found

    assert shmcomm.run(host, nranks=2, window_bytes=1 << 16) == [[], []]  # no fd at all
    assert not any("shmcomm" in os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd"))
    # this process's segments (another test worker may hold a world-readable trap of its own)
    mine = rf"shmcomm\.{os.getpid()}\."
    assert not [n for n in os.listdir("/dev/shm") if re.match(mine, n)
                and os.stat("/dev/shm/" + n).st_mode & 0o077]
