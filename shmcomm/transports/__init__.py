"""Transports: where the windows live and how their words change.

A transport owns every rank's window (signal matrix, then data heap) and offers what the core
needs of memory, nothing more:

* **word handles** (:class:`Word`): one int32 signal word of some rank's window, with an atomic
  ``add``, ``set`` and ``load``, an acquire-read ``cell`` to poll with, and ``sleep`` / wake-up so a waiter
  need not burn a core;
* **window views**: ``view(rank, offset, shape, dtype)`` for the data moves (TLOAD / TSTORE read
  and write through them) and host access to symmetric arrays;
* **data AtomicAdd**: ``data_lock(rank, offset, nbytes, ...)`` makes a ``+=`` on a window region
  atomic with respect to every other one on overlapping memory, from any block of any rank;
* **windows it cannot map** (``unmapped``: ranks whose windows have no view in this process, e.g.
  on another host): ``get`` / ``put`` / ``accumulate`` move data to and from them, complete when
  they return;
* **creation and attach**: built once by the launcher before the rank processes start,
  ``attach(rank)`` in each rank process, ``close()`` at the end.

* **host memory** (``host_atomics``, ``HostSegment``): the CPU atomics, futexes and
  shared-memory segments of one host, whatever carries the windows. The control segment (agent
  lines, the abort flag) lives there on every transport: a transport across hosts adds what
  crosses hosts on top (:mod:`shmcomm.transports.mpi` reads other hosts' lines by RMA).

``shm`` (POSIX shared memory, libatomic through ctypes, futexes, fork inheritance) is the
embedded default and provides host memory; ``mpi`` (MPI one-sided windows under ``mpiexec``)
carries the windows across hosts. A new transport is one package beside them that subclasses
:class:`Transport` and :class:`Word`; nothing above the core changes. The core imports this
module only, never a transport's package (an import-linter contract keeps it so).
"""

from __future__ import annotations

from .seam import SEQ_CST, Transport, Word

# Host memory, as the core reaches it (the shm package implements the seam above).
from .shm import atomics as host_atomics
from .shm.segments import Segment as HostSegment

__all__ = ["SEQ_CST", "HostSegment", "Transport", "Word", "host_atomics"]
