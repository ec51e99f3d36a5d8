"""POSIX shared-memory segments: created exclusive, reserved, mapped between guard pages,
unlinked at once.

Segments are created exclusive with mode 0600 under a random name (96 random bits) that carries
the creating process id, unlinked at once (before its pages are reserved and mapped through
the open descriptor), before any rank process starts: the ranks
inherit the mappings through ``fork``, so no name stays in ``/dev/shm`` while a run goes on and
no other process can attach. Should the creator die in the few microseconds between create and
unlink, ``python -m shmcomm.launch.cleanup`` finds the name by its dead pid.

Every page of a segment is reserved with ``posix_fallocate`` before it is mapped (as Open MPI
does): a full ``/dev/shm`` (filled by anyone, or by two runs that each fit alone) is an error
here, in the caller, instead of a SIGBUS at the first touch of a page tmpfs cannot supply. Each
mapping sits between two ``PROT_NONE`` guard regions, so a write running off the end of one
window faults instead of landing silently in the next rank's.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import secrets
import sys
from typing import Any

import numpy as np
import posix_ipc

from ...errors import ArgumentError, ShmcommError

PREFIX = "shmcomm."
SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared memory (a tmpfs)

# Segments are mapped with libc's mmap, not Python's: mmap.mmap keeps a dup of the fd (until
# 3.13's trackfd=False), and any process allowed to read /proc/<pid>/fd could reopen a live run's
# window through it. The mapping needs no fd once made.
_libc = ctypes.CDLL(None, use_errno=True)
_c_mmap, _c_munmap = _libc.mmap, _libc.munmap
_c_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                    ctypes.c_long]
_c_mmap.restype = ctypes.c_void_p
_c_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_c_munmap.restype = ctypes.c_int
_MAP_FAILED = ctypes.c_void_p(-1).value
_PROT_NONE, _MAP_FIXED, _MAP_NORESERVE = 0, 0x10, 0x4000
PAGE = mmap.PAGESIZE
GUARD_BYTES = 1 << 20  # PROT_NONE address space (no memory) on each side of every segment


def page_round(n: int) -> int:
    """``n`` rounded up to whole pages: what a segment of ``n`` bytes really takes."""
    return -(-n // PAGE) * PAGE


def memory_room() -> tuple[int, str] | None:
    """``(bytes, what)``: the memory a run's segments may still take, the tighter of the box's
    available memory and the limit minus the usage of this process's own cgroup and of each
    of its ancestors (v2 or v1); ``None`` if unknown."""
    rooms = []
    try:
        import psutil

        rooms.append((psutil.virtual_memory().available, "available memory"))
    except Exception:  # noqa: BLE001 -- psutil missing or /proc unreadable: skip this bound
        pass
    for d, limit_name, usage_name in own_memory_cgroups():
        try:
            with open(os.path.join(d, limit_name)) as f:
                limit = f.read().strip()
            with open(os.path.join(d, usage_name)) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # "max" or a huge v1 value: no limit
            rooms.append((max(int(limit) - usage, 0),
                          f"the memory left in this process's cgroup "
                          f"({os.path.join(d, limit_name)} = {limit}, {usage} used)"))
    return min(rooms) if rooms else None


def own_memory_cgroups() -> list[tuple[str, str, str]]:
    """``(directory, limit file, usage file)`` of this process's memory cgroup and its ancestors
    up to the mount's root, read from ``/proc/self/cgroup`` and ``/proc/self/mounts`` (the
    root cgroup's files say nothing of a limit set on the cgroup a run is in)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mounts") as f:
            mounts = [ln.split() for ln in f]
    except OSError:
        return []
    out = []
    for ln in lines:
        _, controllers, path = ln.split(":", 2) if ln.count(":") >= 2 else ("", "", "")
        if controllers == "":  # v2
            mount = next((m[1] for m in mounts if len(m) > 2 and m[2] == "cgroup2"), None)
            files = ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            mount = next((m[1] for m in mounts if len(m) > 3 and m[2] == "cgroup"
                          and "memory" in m[3].split(",")), None)
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        if mount is None:
            continue
        d = os.path.join(mount, path.lstrip("/"))
        if not os.path.isdir(d):  # a cgroup namespace: the mount's root is our cgroup
            d = mount
        while True:
            out.append((d, *files))
            if os.path.normpath(d) == os.path.normpath(mount):
                break
            d = os.path.dirname(d)
    return out


def shm_free_bytes() -> int | None:
    """Bytes free in the shared-memory file system (``None`` if it cannot be told)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def segment_name(tag: str) -> str:
    """A fresh segment name: prefix, creator pid, 96 random bits, tag."""
    return f"/{PREFIX}{os.getpid()}.{secrets.token_hex(12)}.{tag}"


class Segment:
    """One POSIX shared-memory segment, mapped read-write and already unlinked.

    ``base`` is the address of its first byte; ``array`` a uint8 numpy view of it.
    """

    def __init__(self, tag: str, size: int) -> None:
        if size <= 0:
            raise ArgumentError(f"segment size must be > 0, got {size}")
        self.size = size
        self.mapped = page_round(size)
        self.name = segment_name(tag)
        try:
            shm = posix_ipc.SharedMemory(self.name, posix_ipc.O_CREX, mode=0o600)
        except posix_ipc.ExistentialError:  # exclusive create: never attach to someone else's
            raise ShmcommError(
                f"shared-memory segment {self.name} already exists; refusing to attach to memory "
                "this run did not create (another process took the name)") from None
        except (OSError, posix_ipc.Error) as exc:  # EMFILE, ENOSPC, EACCES on /dev/shm ...
            raise ShmcommError(f"cannot create shared-memory segment {self.name} of {size} "
                               f"bytes: {exc}{_emfile_hint(exc)}") from None
        reserve = addr = None
        err = 0
        try:
            # unlinked before the reservation: the fd keeps the memory, and a creator killed
            # while posix_fallocate runs (as long as the segment is big) leaves no name behind
            shm.unlink()
            _reserve(shm.fd, self.mapped, self.name)
            # address space for the segment and its guards, then the segment in the middle
            reserve = _c_mmap(None, self.mapped + 2 * GUARD_BYTES, _PROT_NONE,
                              mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
            err = ctypes.get_errno()
            if reserve not in (None, _MAP_FAILED):
                addr = _c_mmap(reserve + GUARD_BYTES, self.mapped,
                               mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED,
                               shm.fd, 0)
                err = ctypes.get_errno()
        finally:
            shm.close_fd()  # the mapping keeps the memory; no fd is left to borrow
        if addr is None or addr == _MAP_FAILED:
            if reserve not in (None, _MAP_FAILED):
                _c_munmap(reserve, self.mapped + 2 * GUARD_BYTES)
            raise ShmcommError(f"cannot map shared-memory segment {self.name} of {size} bytes: "
                               f"{os.strerror(err)}")
        self.base = addr
        self._reservation = reserve
        # every numpy view of the segment holds a reference to this buffer: close() counts them
        self._buf: Any = (ctypes.c_uint8 * size).from_address(addr)
        self.array = np.frombuffer(self._buf, dtype=np.uint8)  # type: ignore[call-overload]  # a ctypes buffer

    def close(self) -> None:
        """Unmap. Views of the segment must be gone first (otherwise it stays mapped)."""
        if self._buf is None:
            return
        self.array = None
        buf, self._buf = self._buf, None
        if sys.getrefcount(buf) > 2:  # a user still holds a view: the mapping dies with the process
            return
        del buf
        _c_munmap(self._reservation, self.mapped + 2 * GUARD_BYTES)


def _reserve(fd: int, size: int, name: str) -> None:
    """Give the segment every page it will use now (ENOSPC here, not SIGBUS at first touch)."""
    while True:
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):  # not tmpfs: size it at least
                os.ftruncate(fd, size)
                return
            if exc.errno == errno.EFBIG:  # the file-size limit, not /dev/shm, is what is short
                import resource

                soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
                raise ShmcommError(
                    f"cannot reserve {size} bytes of shared memory for segment {name}: the "
                    f"process's file-size limit (RLIMIT_FSIZE, ulimit -f) is {soft} bytes and a "
                    "segment is a file; raise the limit, or lower heap_bytes") from None
            free = shm_free_bytes()
            raise ShmcommError(
                f"cannot reserve {size} bytes of shared memory for segment {name}: "
                f"{os.strerror(exc.errno or 0)} ({SHM_DIR} has "
                f"{'an unknown number of' if free is None else free} bytes free; another run or "
                "user may be filling it); lower heap_bytes or nranks, or free space in "
                f"{SHM_DIR}") from None


def _emfile_hint(exc: BaseException) -> str:
    if getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE):
        return " (too many open files: raise the limit, ulimit -n)"
    return ""
