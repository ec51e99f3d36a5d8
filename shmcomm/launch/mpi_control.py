"""The control plane of an MPI job whose ranks may sit on several hosts.

Each host keeps its own control segment (memory its ranks share, driven by CPU atomics): its
ranks write their rank and agent lines there, and their waits poll its abort flag, at no MPI
cost. What crosses hosts goes through the segment's MPI window:

* **reads** of another host's rank and agent lines (the host collectives' symmetry checks, the
  deadlock watch and the stuck report on world rank 0) are ``Get`` + ``Flush`` from the memory of
  that host's first rank;
* **abort**: world rank 0's flag decides (``Compare_and_swap``: the first reason wins for the
  whole job), and the winner copies it into every other host's flag, so every wait of the job
  stops at its next look;
* the host barrier's counter is world rank 0's already (``MpiTransport.control_word``).

MPICH completes an atomic aimed at another host only when the target process calls into MPI; a
rank blocked in a futex would stall its peers' notifies. :class:`Progress` is a thread that
calls into MPI every ``PROGRESS_S`` while the job spans hosts.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from ..core import control as C
from ..transports.mpi import MpiTransport, NodeSegment

PROGRESS_S = 0.0005  # how often a rank of a job across hosts lets MPI serve its peers' RMA


class MpiControl(C.Control):
    """:class:`~shmcomm.core.control.Control` over every host's segment (collective)."""

    segment: NodeSegment  # the transport's control segment, never a local shm Segment

    def __init__(self, nranks: int, transport: MpiTransport) -> None:
        super().__init__(nranks, segment=transport.control_segment)
        seg = self.segment
        self.leaders: list[int] = seg.leaders  # world rank holding rank r's lines
        self.local = frozenset(r for r in range(nranks) if seg.leaders[r] == seg.leader)
        self.hosts = sorted(set(seg.leaders))
        self._abort_off = self.abort_addr - self.base

    @property
    def spans_hosts(self) -> bool:
        """Whether the job's ranks sit on more than one host."""
        return len(self.hosts) > 1

    def _remote(self, rank: int, word: int, count: int) -> np.ndarray:
        return self.segment.read(rank, 4 * word, 4 * count).view(np.int32)

    def rank_field(self, rank: int, field: int) -> int:
        if rank in self.local:
            return super().rank_field(rank, field)
        return int(self._remote(rank, self.rank_word(rank, field), 1)[0])

    def load_rank(self, rank: int, field: int) -> int:
        if rank in self.local:
            return super().load_rank(rank, field)
        return int(self._remote(rank, self.rank_word(rank, field), 1)[0])

    def agents_of(self, rank: int) -> np.ndarray:
        if rank in self.local:
            return super().agents_of(rank)
        return self._remote(rank, self.agent_word(rank, 0), C.SLOTS * C.LINE).reshape(
            C.SLOTS, C.LINE)

    def control_words(self, rank: int, start: int, count: int) -> np.ndarray:
        # the header (the host barrier's counter) is the job's, in world rank 0's segment; a
        # rank's own lines (a launch's SYNCALL counter) are in its host's
        owner = 0 if start < self.rank_word(0, 0) else rank
        if owner in self.local:
            return super().control_words(owner, start, count)
        return self._remote(owner, start, count)

    def abort(self, reason: int) -> bool:
        """Set the job's abort flag (first reason wins across every host); True if this call
        set it. The winner copies the reason into every other host's flag."""
        seg = self.segment
        root = self.leaders[0]
        if seg.cas(root, self._abort_off, C.ABORT_NONE, reason) != C.ABORT_NONE:
            return False
        for host in self.hosts:
            if host != root:
                seg.cas(host, self._abort_off, C.ABORT_NONE, reason)
        return True


class Progress:
    """A thread that calls into MPI every ``PROGRESS_S`` (``Iprobe`` on its own communicator),
    so that the RMA of peers on other hosts completes while this rank's threads sleep."""

    def __init__(self, comm: Any, rank: int) -> None:
        self.comm = comm
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._main, name=f"shmcomm-mpi-progress-r{rank}",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _main(self) -> None:
        probe, done, sleep = self.comm.Iprobe, self.done.is_set, time.sleep
        while not done():
            probe()
            sleep(PROGRESS_S)
