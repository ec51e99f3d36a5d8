"""The files a run is named by the user (``trace``, ``record``, ``replay``): regular files only.

A run writes its trace and its recorded schedule, and reads a schedule to replay, at paths the
user gives (``--trace``, ``SHMCOMM_TRACE``, ``--record``, ``--replay``). Such a path must name a
regular file, or (for an output) a path that does not exist yet: a device node, a FIFO, a socket
or a directory is refused before any rank starts, so ``--trace /dev/null`` never replaces the
machine's ``/dev/null``, a FIFO never blocks the run, and ``--replay /dev/zero`` is never read.
An output that is a symlink or another user's file is refused too (:mod:`shmcomm.files`); an
input symlink is judged by what it points to. An input is read only up to ``MAX_INPUT_BYTES``.
"""

from __future__ import annotations

import os
import stat

from ..errors import ArgumentError
from ..files import check_target

MAX_INPUT_BYTES = 256 << 20  # a schedule file is a few MB at most; more is not one

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_output(name: str, path: str) -> None:
    """Refuse ``path`` for the output ``name`` unless it does not exist or is a regular file of
    the calling user (a symlink, even to a regular file, is refused: see :mod:`shmcomm.files`)."""
    if path:
        check_target(name, path)


def check_input(name: str, path: str) -> None:
    """Refuse ``path`` for the input ``name`` unless it is a regular file of at most
    ``MAX_INPUT_BYTES``."""
    if not path:
        return
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ArgumentError(f"{name}: cannot read {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ArgumentError(f"{name}: {path!r} is {_kind(st.st_mode)}; {name} reads only a "
                            "regular file (it was not read)")
    if st.st_size > MAX_INPUT_BYTES:
        raise ArgumentError(f"{name}: {path!r} has {st.st_size} bytes, more than the "
                            f"{MAX_INPUT_BYTES} a schedule file may have (it was not read)")


def check_run_paths(trace: str, record: str, replay: str) -> None:
    """Every user-named file of a run, checked before anything is created or read."""
    check_output("trace", trace)
    check_output("record", record)
    check_input("replay", replay)
