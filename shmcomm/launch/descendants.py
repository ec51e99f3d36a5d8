"""Every process a run's ranks start dies with the run, whatever it does (``setsid``, a double
fork) and however the launcher ends (even SIGKILLed).

Where the machine allows it (cgroup v2 mounted and our cgroup writable: root, or a delegated
subtree), each run gets its own cgroup, ``shmcomm-<pid>-<hex>`` under the launcher's own; every
rank process moves itself into it before it runs user code, so all it forks is in it too and
cannot leave it. At the end of the run whatever is still in it is killed, and the
cgroup is removed. Elsewhere the launcher is a child subreaper for the run's length
(``PR_SET_CHILD_SUBREAPER``): an orphaned descendant of a rank is reparented to the launcher
instead of init, and the end-of-run sweep kills those children (and their process groups).

A launcher that is SIGKILLed runs no sweep of its own: a small **sweeper** process, forked at
the start into its own session, holds the read end of a pipe only the launcher writes to. At
the pipe's EOF without a "done" line (the launcher died), it kills the cgroup's processes and
the ranks' process groups, removes the files the launcher registered (the trace written
aside) and the cgroup, then exits.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterable

USE_CGROUP = True  # tests set False to exercise the subreaper fallback
SWEEP_S = 5.0  # how long a sweep keeps killing what keeps forking
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)
# the sweeper pipes and cgroup member lists of live runs: no forked child may hold one
_RUN_FDS: set[int] = set()
OWNED: set[int] = set()  # rank and sweeper pids of every live run of this process
_lock = threading.Lock()
_subreaper_users = [0]


def _close_run_fds() -> None:
    for fd in list(_RUN_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _RUN_FDS.clear()


os.register_at_fork(after_in_child=_close_run_fds)


def cgroup2_dir() -> str | None:
    """This process's own cgroup v2 directory, or ``None`` (no v2 mount, or not found)."""
    mount = None
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    mount = parts[1]
                    break
        with open("/proc/self/cgroup") as f:
            path = next((ln.strip()[3:] for ln in f if ln.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or path is None:
        return None
    d = os.path.join(mount, path.lstrip("/"))
    return d if os.path.isdir(d) else None


def _new_cgroup() -> str | None:
    base = cgroup2_dir()
    if base is None or not os.access(base, os.W_OK):
        return None
    d = os.path.join(base, f"shmcomm-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.mkdir(d, 0o755)
    except OSError:
        return None
    if not os.access(os.path.join(d, "cgroup.procs"), os.W_OK):
        _rmdir(d)
        return None
    return d


def _members(cgroup: str) -> list[int]:
    try:
        with open(os.path.join(cgroup, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _read_all(fd: int) -> bytes:
    """The whole file open at ``fd``, read from its start (a kernel file: made anew)."""
    data = b""
    while True:
        chunk = os.pread(fd, 1 << 16, len(data))
        if not chunk:
            return data
        data += chunk


def _rmdir(d: str) -> bool:
    for _ in range(50):  # the kernel empties a killed cgroup asynchronously
        try:
            os.rmdir(d)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)
    return False


def _kill_pids(pids: Iterable[int]) -> None:
    for pid in pids:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _children(ppid: int) -> list[int]:
    """Direct children of ``ppid`` (from /proc; orphans a subreaper adopted included)."""
    try:
        with open(f"/proc/{ppid}/task/{ppid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        kids = []
    # other threads of ours adopt too (the kernel files a child under the thread that forked it)
    try:
        tids = os.listdir(f"/proc/{ppid}/task")
    except OSError:
        return kids
    for tid in tids:
        if tid == str(ppid):
            continue
        try:
            with open(f"/proc/{ppid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
    return kids


class RunProcesses:
    """The processes of one run (or one pool): a cgroup or the subreaper sweep, and the sweeper
    that cleans up after a killed launcher."""

    def __init__(self) -> None:
        self.cgroup = _new_cgroup() if USE_CGROUP else None
        self.ranks: set[int] = set()
        self.closed = False
        self.before = set(_children(os.getpid()))  # the caller's own children: never ours
        self.fd = -1
        self.members_fd = -1  # the cgroup's member list, open from the first sweep on
        self.sweeper = 0
        try:
            self._start_sweeper()
        except OSError:  # no fork or pipe left: the run goes on without after-death cleanup
            self.fd = -1
        if self.cgroup is None:
            with _lock:
                _subreaper_users[0] += 1
                _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    # -- the launcher's side ----------------------------------------------------------------

    def _start_sweeper(self) -> None:
        r, w = os.pipe()
        if self.cgroup:
            os.write(w, f"cgroup {self.cgroup}\n".encode())
        pr, pw = os.pipe()  # the sweeper's pid, from the intermediate process
        mid = os.fork()
        if mid == 0:  # forks the sweeper and exits: it is no child of the caller's
            try:
                os.close(w)
                os.close(pr)
                pid = os.fork()
                if pid == 0:  # the sweeper (at-fork closed every other run's write end)
                    os.close(pw)
                    _sweeper_main(r)
                else:
                    os.write(pw, str(pid).encode())
            finally:
                os._exit(0)
        os.close(r)
        os.close(pw)
        try:
            os.waitpid(mid, 0)
        except ChildProcessError:
            pass
        got = os.read(pr, 32)
        os.close(pr)
        self.fd, self.sweeper = w, int(got) if got.isdigit() else 0
        _RUN_FDS.add(w)
        if self.sweeper:
            OWNED.add(self.sweeper)

    def _tell(self, line: str) -> None:
        if self.fd >= 0:
            try:
                os.write(self.fd, (line + "\n").encode())
            except OSError:
                pass

    def note_rank(self, pid: int) -> None:
        """A rank process of the run (its process group dies with the run)."""
        self.ranks.add(pid)
        OWNED.add(pid)
        self._tell(f"pid {pid}")

    def forget_rank(self, pid: int) -> None:
        self.ranks.discard(pid)
        OWNED.discard(pid)

    def note_file(self, path: str) -> None:
        """A file the sweeper removes if the launcher dies (a trace written aside)."""
        self._tell(f"file {path}")

    def enter(self) -> None:
        """In a new rank process, before any user code: join the run's cgroup."""
        if self.cgroup:
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass  # the process-group kill and the sweeper still cover it

    def sweep(self, keep: Iterable[int] = ()) -> int:
        """Kill every process of the run but ``keep`` (a pool's live ranks); returns how many
        were killed. Waits (bounded) until they are gone."""
        keep = set(keep)
        killed = 0
        deadline = time.monotonic() + SWEEP_S
        while time.monotonic() < deadline:
            if self.cgroup:
                left = [p for p in self._cgroup_members() if p not in keep]
            else:
                left = [p for p in _children(os.getpid())
                        if p not in keep and p not in OWNED and p not in self.before]
            if not left:
                break
            killed += len(left)
            _kill_pids(left)
            if not self.cgroup:
                for p in left:  # adopted: ours to reap
                    try:
                        os.waitpid(p, 0)
                    except ChildProcessError:
                        pass
            else:
                time.sleep(0.01)
        return killed

    def _cgroup_members(self) -> list[int]:
        """The processes in the run's cgroup: its member list is kept open (a pool sweeps after
        every run, and an open, a read and a close cost it 70 us there)."""
        assert self.cgroup is not None
        if self.members_fd < 0:
            try:
                self.members_fd = os.open(os.path.join(self.cgroup, "cgroup.procs"),
                                          os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return _members(self.cgroup)
            _RUN_FDS.add(self.members_fd)
        try:
            return [int(x) for x in _read_all(self.members_fd).split()]
        except (OSError, ValueError):
            return []

    def close(self) -> None:
        """End of the run: kill what is left, remove the cgroup, stop the sweeper."""
        if self.closed:
            return
        self.closed = True
        self.sweep()
        if self.cgroup:
            _rmdir(self.cgroup)
        else:
            with _lock:
                _subreaper_users[0] -= 1
                if not _subreaper_users[0]:
                    _libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in self.ranks:
            OWNED.discard(pid)
        if self.members_fd >= 0:
            _RUN_FDS.discard(self.members_fd)
            os.close(self.members_fd)
            self.members_fd = -1
        if self.fd >= 0:
            self._tell("done")
            _RUN_FDS.discard(self.fd)
            os.close(self.fd)
            self.fd = -1
            OWNED.discard(self.sweeper)  # it exits on its own (not our child: init reaps it)


def _sweeper_main(r: int) -> None:
    """Wait for the launcher's pipe to close; if it did not say "done", clean up after it."""
    os.setsid()  # out of the launcher's process group: a kill of that group spares us
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP):
        signal.signal(s, signal.SIG_IGN)
    os.closerange(0, r)
    os.closerange(r + 1, min(os.sysconf("SC_OPEN_MAX"), 1 << 20))
    buf = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    lines = buf.decode(errors="replace").splitlines()
    if "done" in lines:
        return
    cgroup, pids, files = None, [], []
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "cgroup":
            cgroup = value
        elif key == "pid" and value.isdigit():
            pids.append(int(value))
        elif key == "file":
            files.append(value)
    _kill_pids(pids)
    if cgroup:
        deadline = time.monotonic() + SWEEP_S
        while time.monotonic() < deadline:
            left = _members(cgroup)
            if not left:
                break
            _kill_pids(left)
            time.sleep(0.02)
        _rmdir(cgroup)
    for path in files:
        try:
            os.unlink(path)
        except OSError:
            pass
