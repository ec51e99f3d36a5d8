"""The launcher must be able to reap its rank processes: an inherited ``SIGCHLD`` set to
``SIG_IGN`` makes the kernel reap children itself, and a rank's death by ``SIGSEGV`` would be
lost (``waitpid`` fails with ``ECHILD``, no status). For the run's length the disposition is the
default; it is restored afterwards."""

from __future__ import annotations

import ctypes
import signal
from collections.abc import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.signal.restype = ctypes.c_void_p
_SIG_DFL, _SIG_IGN = 0, 1


def reapable_children() -> Callable[[], None]:
    """Make sure exited children stay waitable; returns the function that restores the old
    disposition (a no-op when nothing was changed). Works from any thread (the C call)."""
    if callable(signal.getsignal(signal.SIGCHLD)):
        return lambda: None  # a Python handler: children are reapable already
    old = _libc.signal(signal.SIGCHLD, _SIG_DFL)
    if old != _SIG_IGN:
        return lambda: None
    return lambda: _libc.signal(signal.SIGCHLD, _SIG_IGN)
