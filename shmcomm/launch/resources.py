"""What a rank's death by a signal most likely means, for the report: out of memory (SIGKILL
with the kernel's OOM-kill count grown), out of shared memory (SIGBUS), a stray access
(SIGSEGV: the guard pages around every window catch overruns)."""

from __future__ import annotations

import os
import signal

from ..transports.shm.segments import SHM_DIR, memory_room, own_memory_cgroups

_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control",
              "/proc/vmstat")


def oom_kills() -> int | None:
    """How many processes the OOM killer has killed (this process's own cgroup's count where it
    can be read, else the system's); ``None`` when no count is readable. The file that gave it
    stays open in this process and is read again in place (every run asks before its ranks
    start: an open, a read and a close cost it 30 us)."""
    if _OOM_FD:
        count = _count(_OOM_FD[0])
        if count is not None:
            return count
        os.close(_OOM_FD.pop())
    for path in _oom_files():
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        count = _count(fd)
        if count is None:
            os.close(fd)
            continue
        _OOM_FD.append(fd)
        return count
    return None


def _count(fd: int) -> int | None:
    """The ``oom_kill`` count in the file open at ``fd`` (read from its start), or ``None``."""
    try:
        text = os.pread(fd, 1 << 16, 0)
        for line in text.splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


_OOM_FD: list[int] = []  # the open file that gave the count


def _forget_in_child() -> None:
    if _OOM_FD:  # the parent's descriptor: a rank never asks, and a launcher opens its own
        os.close(_OOM_FD.pop())


os.register_at_fork(after_in_child=_forget_in_child)


def _oom_files() -> tuple[str, ...]:
    """The files that may hold the count, best first: this process's cgroups' (found once per
    process: every run reads the count before it starts its ranks, and finding them reads
    /proc/self/cgroup and /proc/self/mounts), then the system's."""
    pid = os.getpid()
    if not _OOM_PATHS or _OOM_PATHS[0][0] != pid:
        own = [os.path.join(d, "memory.events" if limit == "memory.max" else "memory.oom_control")
               for d, limit, _ in own_memory_cgroups()]
        _OOM_PATHS[:] = [(pid, (*own, *_OOM_FILES))]
    return _OOM_PATHS[0][1]


_OOM_PATHS: list[tuple[int, tuple[str, ...]]] = []  # (the process that found them, the files)


def death_hint(sig: int, oom_before: int | None) -> str:
    """A short explanation to append to "died from signal X" (empty when there is none)."""
    if sig == signal.SIGKILL:
        now = oom_kills()
        room = memory_room()
        free = f"; {room[0]} bytes left by {room[1]}" if room else ""
        if now is not None and oom_before is not None and now > oom_before:
            return (" - the kernel's OOM killer ran during this run: the box or its cgroup "
                    f"ran out of memory (lower heap_bytes, nranks or the data of the run{free})")
        return (" (not by shmcomm; if no one else sent it, the likeliest sender is the OOM "
                f"killer: see dmesg{free})")
    if sig == signal.SIGBUS:
        return f" (a shared-memory page could not be supplied: is {SHM_DIR} full?)"
    if sig == signal.SIGSEGV:
        return (" (an access outside the mapped memory: a raw-address or as_strided write past "
                "a window hits the guard pages between windows)")
    return ""
