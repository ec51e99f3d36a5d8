"""Hardware atomics, futexes and ``prctl`` through ctypes: the lowest layer of shmcomm.

Signal words live in POSIX shared memory mapped by several processes. Python gives no ordering
guarantee for ``memoryview`` writes, so every signal update goes through ``libatomic.so.1``
(``__atomic_*_4``, sequentially consistent), which compiles to ``lock xadd`` / ``lock cmpxchg`` /
``xchg`` on x86-64 and to LSE or LL/SC on aarch64.

Binding choices (measured, see DESIGN.md): the short operations are bound through ``PyDLL`` so
they keep the GIL (``CDLL`` drops and retakes the GIL and costs up to 1.4 us under contention).
Only blocking calls (``futex`` wait) go through ``CDLL``; the futex calls given a prebuilt
``c_void_p`` skip argument conversion too. There are two sets of bindings:

* the checked functions below (``fetch_add`` ...) have ``argtypes``, so a Python ``int`` address
  is passed as a full 64-bit pointer; they cost about 0.9 us a call here;
* the ``fast_*`` bindings have no ``argtypes`` (argument conversion was most of that cost:
  0.26 us a call) and must be given a prebuilt ``ctypes.c_void_p`` address, an int32-range
  value and the memory order. Every :class:`~shmcomm.transports.shm.ShmWord` keeps one.

These functions do no bounds checking: callers (``shmcomm.core.gm``) check every address
first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import threading

from ...errors import LibraryError

SEQ_CST = 5  # __ATOMIC_SEQ_CST

_FUTEX_WAIT = 0  # shared (no FUTEX_PRIVATE_FLAG): the word is in memory several processes map
_FUTEX_WAKE = 1
_PR_SET_PDEATHSIG = 1
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}


def _load_libatomic() -> tuple[ctypes.PyDLL, str]:
    name = ctypes.util.find_library("atomic") or "libatomic.so.1"
    try:
        return ctypes.PyDLL(name), name
    except OSError as exc:
        raise LibraryError(
            f"shmcomm needs libatomic.so.1 for its signal atomics and could not load it ({exc}); "
            "install it with `apt-get install libatomic1` (Debian/Ubuntu) or your system's "
            "libatomic package"
        ) from None


_lib, LIBATOMIC_NAME = _load_libatomic()
# Fetched once with getattr: inside a class body Python would mangle the leading underscores.
_fetch_add = getattr(_lib, "__atomic_fetch_add_4")
_load = getattr(_lib, "__atomic_load_4")
_store = getattr(_lib, "__atomic_store_4")
_exchange = getattr(_lib, "__atomic_exchange_4")
_cas = getattr(_lib, "__atomic_compare_exchange_4")
_is_lock_free = getattr(_lib, "__atomic_is_lock_free")

_vp, _i32, _int = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int
for _f, _args, _res in (
    (_fetch_add, [_vp, _i32, _int], _i32),
    (_load, [_vp, _int], _i32),
    (_store, [_vp, _i32, _int], None),
    (_exchange, [_vp, _i32, _int], _i32),
    (_cas, [_vp, _vp, _i32, ctypes.c_bool, _int, _int], ctypes.c_bool),
    (_is_lock_free, [ctypes.c_size_t, _vp], ctypes.c_bool),
):
    _f.argtypes, _f.restype = _args, _res


def _check_lock_free() -> None:
    probe = (ctypes.c_int64 * 1)()
    for size in (4,):  # signals are int32; shmcomm uses no wider atomics
        if not _is_lock_free(size, ctypes.addressof(probe)):
            raise LibraryError(
                f"{LIBATOMIC_NAME}: {size}-byte atomics are not lock-free on this machine "
                f"({platform.machine()}); cross-process signals would silently use a "
                "process-local lock"
            )


_check_lock_free()


def fetch_add(addr: int, value: int) -> int:
    """Atomically add ``value`` to the int32 at ``addr``; return the old value."""
    return _fetch_add(addr, value, SEQ_CST)


def load(addr: int) -> int:
    """Atomically load the int32 at ``addr``."""
    return _load(addr, SEQ_CST)


def store(addr: int, value: int) -> None:
    """Atomically store ``value`` into the int32 at ``addr``."""
    _store(addr, value, SEQ_CST)


def exchange(addr: int, value: int) -> int:
    """Atomically swap ``value`` into the int32 at ``addr``; return the old value."""
    return _exchange(addr, value, SEQ_CST)


def compare_exchange(addr: int, expected: int, desired: int) -> tuple[bool, int]:
    """Atomically replace ``expected`` by ``desired`` at ``addr``.

    Returns ``(swapped, observed)``; ``observed`` is the value found (``expected`` on success).
    """
    exp = ctypes.c_int32(expected)
    ok = _cas(addr, ctypes.addressof(exp), desired, False, SEQ_CST, SEQ_CST)
    return bool(ok), exp.value


# Unchecked bindings for the hot paths (TNOTIFY, TWAIT): a second handle of the library, so
# that these function objects carry no argtypes. Callers pass c_void_p addresses only.
_fast = ctypes.PyDLL(LIBATOMIC_NAME)
fast_fetch_add = getattr(_fast, "__atomic_fetch_add_4")
fast_load = getattr(_fast, "__atomic_load_4")
fast_store = getattr(_fast, "__atomic_store_4")
fast_exchange = getattr(_fast, "__atomic_exchange_4")
fast_fetch_add.restype = fast_load.restype = fast_exchange.restype = ctypes.c_int32
fast_store.restype = None


# --- futex and prctl through libc --------------------------------------------------------------

class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_SYS_futex = _SYS_FUTEX.get(platform.machine().lower())
# two bindings of syscall(2), each with argtypes, so a call converts plain ints in C and builds no
# ctypes objects (CDLL: the GIL is released while a waiter sleeps)
_futex_wait = _libc["syscall"]
_futex_wait.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                        ctypes.POINTER(_Timespec), ctypes.c_void_p, ctypes.c_int]
_futex_wait.restype = ctypes.c_long
_futex_wake = _libc["syscall"]
_futex_wake.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
_futex_wake.restype = ctypes.c_long
# The same two calls without argtypes, for the hot paths: converting seven arguments cost ~1.7 us
# a call. Only given a prebuilt c_void_p address (a bare int could be truncated), the syscall
# number as a prebuilt c_long (syscall(2) reads a long) and int32 values. The wake keeps the GIL
# (PyDLL: it never blocks, and dropping the GIL costs more with threads contending); the wait
# drops it (CDLL) while it sleeps.
_fast_wait = _libc["syscall"]
_fast_wait.restype = ctypes.c_long
_fast_wake = ctypes.PyDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)["syscall"]
_fast_wake.restype = ctypes.c_long
_NR_futex = ctypes.c_long(_SYS_futex or 0)
_vp_type = ctypes.c_void_p
_tls = threading.local()  # one timespec per thread (and a pointer to it), reused by every sleep


def futex_wait(addr: int | ctypes.c_void_p, expected: int, timeout: float) -> bool:
    """Sleep while the int32 at ``addr`` still holds ``expected``, at most ``timeout`` seconds.

    Works across processes (shared futex). Returns ``False`` if it timed out, ``True`` if it was
    woken or the value had already changed (or a signal interrupted it: callers re-check anyway).
    The GIL is released while sleeping (``CDLL``).
    """
    if _SYS_futex is None:  # unknown architecture: degrade to a yield, still correct
        os.sched_yield()
        return True
    try:
        ts, tsp = _tls.ts
    except AttributeError:
        ts = _Timespec()
        tsp = ctypes.pointer(ts)
        _tls.ts = ts, tsp
    timeout = max(timeout, 0.0)
    sec = int(timeout)
    ts.tv_sec, ts.tv_nsec = sec, int((timeout - sec) * 1e9)
    if type(addr) is _vp_type and type(expected) is int and -0x80000000 <= expected <= 0x7FFFFFFF:
        rc = _fast_wait(_NR_futex, addr, _FUTEX_WAIT, expected, tsp, None, 0)
    else:
        rc = _futex_wait(_SYS_futex, addr, _FUTEX_WAIT, expected, ts, None, 0)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ETIMEDOUT:
        return False
    if err in (errno.EAGAIN, errno.EINTR):
        return True
    raise LibraryError(f"futex wait failed: {os.strerror(err)} (errno {err})")


def futex_wake(addr: int | ctypes.c_void_p, count: int = 2**31 - 1) -> int:
    """Wake up to ``count`` processes sleeping in :func:`futex_wait` on ``addr``."""
    if _SYS_futex is None:
        return 0
    if type(addr) is _vp_type and type(count) is int and 0 <= count <= 0x7FFFFFFF:
        n = _fast_wake(_NR_futex, addr, _FUTEX_WAKE, count, None, None, 0)
    else:
        n = _futex_wake(_SYS_futex, addr, _FUTEX_WAKE, count, None, None, 0)
    return n if n > 0 else 0


def set_parent_death_signal(signum: int) -> None:
    """Ask the kernel to send ``signum`` to this process when its parent thread dies."""
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if _libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise LibraryError(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}")
