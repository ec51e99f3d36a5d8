"""Waiting until one of the run's pipes has something to read.

``multiprocessing.connection.wait`` makes a selector and registers every pipe at each call;
the launcher waits that way several times a run over a dozen pipes (the ranks' reports, the
race detector's records), and a pool's run is short. :class:`Readable` keeps one ``poll``
object and changes its registrations only when the set of pipes changes.
"""

from __future__ import annotations

import select
from collections.abc import Iterable
from typing import Any


class Readable:
    """Wait for any of a changing set of connections (anything with ``fileno()``) to be
    readable, or closed by the other end (their ``recv`` then tells which)."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._by_fd: dict[int, Any] = {}

    def wait(self, conns: Iterable[Any], timeout: float) -> list[Any]:
        """The ones of ``conns`` ready within ``timeout`` seconds (``[]`` when none)."""
        want = {c.fileno(): c for c in conns}
        by_fd = self._by_fd
        if want.keys() != by_fd.keys():
            for fd in by_fd.keys() - want.keys():
                self._poll.unregister(fd)
            for fd in want.keys() - by_fd.keys():
                self._poll.register(fd, select.POLLIN)
        self._by_fd = want
        if not want:
            return []
        return [want[fd] for fd, _events in self._poll.poll(max(0, int(timeout * 1000)))
                if fd in want]
