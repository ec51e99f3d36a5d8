"""The launcher's read of one record batch from a rank's pipe, bounded in time.

A rank sends its race records as ``multiprocessing`` frames (a 4-byte big-endian length, or -1
and an 8-byte length, then the pickled batch). ``Connection.recv`` waits for a whole frame for
ever: a rank killed after writing part of one leaves the launcher blocked when anything else
still holds the pipe's write end (another rank of a pool, a process the rank forked). Here every
read waits at most until a deadline; a frame that ends early (end of file) or is not complete by
then is *cut*, and the pipe is unusable from there on (its framing is lost).
"""

from __future__ import annotations

import os
import select
import struct
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any


class Closed(Exception):
    """The pipe ended cleanly, between two frames."""


class Cut(Exception):
    """A frame was cut off: ``got`` of ``want`` bytes arrived before end of file or the
    deadline."""

    def __init__(self, got: int, want: int | None, why: str) -> None:
        self.got, self.want, self.why = got, want, why
        of = "" if want is None else f" of {want}"
        super().__init__(f"{why} after {got}{of} bytes of a record batch")


def _read(fd: int, n: int, until: float, got_before: int, want: int | None) -> bytes:
    """Exactly ``n`` bytes from ``fd``, waiting at most until ``until`` (monotonic)."""
    parts: list[bytes] = []
    have = 0
    while have < n:
        if not select.select([fd], [], [], max(until - time.monotonic(), 0.0))[0]:
            raise Cut(got_before + have, want, "the rank sent nothing more before the deadline")
        chunk = os.read(fd, min(n - have, 1 << 20))
        if not chunk:
            if got_before + have == 0:
                raise Closed()
            raise Cut(got_before + have, want, "the pipe ended (the rank died)")
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


def recv_until(conn: Connection, until: float) -> Any:
    """The next object ``conn`` carries, read by :func:`_read` (see the module); raises
    :class:`Closed` at a clean end and :class:`Cut` for a frame cut off."""
    fd = conn.fileno()
    head = _read(fd, 4, until, 0, None)
    size, = struct.unpack("!i", head)
    got = 4
    if size == -1:
        size, = struct.unpack("!Q", _read(fd, 8, until, got, None))
        got += 8
    body = _read(fd, size, until, got, got + size)
    return ForkingPickler.loads(body)
