"""POSIX shared-memory segments: created exclusive, mapped, unlinked at once.

Segments are created exclusive with mode 0600 under a random name (96 random bits) that carries
the creating process id, mapped, and unlinked at once, before any rank process starts: the ranks
inherit the mappings through ``fork``, so no name stays in ``/dev/shm`` while a run goes on and
no other process can attach. Should the creator die in the few microseconds between create and
unlink, ``python -m shmcomm.launch.cleanup`` finds the name by its dead pid.
"""

from __future__ import annotations

import ctypes
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
        self.name = segment_name(tag)
        try:
            shm = posix_ipc.SharedMemory(self.name, posix_ipc.O_CREX, mode=0o600, size=size)
        except posix_ipc.ExistentialError:  # exclusive create: never attach to someone else's
            raise ShmcommError(
                f"shared-memory segment {self.name} already exists; refusing to attach to memory "
                "this run did not create (another process took the name)") from None
        except (OSError, posix_ipc.Error) as exc:  # EMFILE, ENOSPC, EACCES on /dev/shm ...
            raise ShmcommError(f"cannot create shared-memory segment {self.name} of {size} "
                               f"bytes: {exc}") from None
        try:
            addr = _c_mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, shm.fd, 0)
            err = ctypes.get_errno()
        finally:
            shm.close_fd()  # the mapping keeps the memory; no fd is left to borrow
            shm.unlink()  # nothing left to attach to: ranks inherit the mapping through fork
        if addr is None or addr == _MAP_FAILED:
            raise ShmcommError(f"cannot map shared-memory segment {self.name} of {size} bytes: "
                               f"{os.strerror(err)}")
        self.base = addr
        # every numpy view of the segment holds a reference to this buffer: close() counts them
        self._buf: Any = (ctypes.c_uint8 * size).from_address(addr)
        self.array = np.frombuffer(self._buf, dtype=np.uint8)

    def close(self) -> None:
        """Unmap. Views of the segment must be gone first (otherwise it stays mapped)."""
        if self._buf is None:
            return
        self.array = None  # type: ignore[assignment]
        buf, self._buf = self._buf, None
        if sys.getrefcount(buf) > 2:  # a user still holds a view: the mapping dies with the process
            return
        del buf
        _c_munmap(self.base, self.size)
