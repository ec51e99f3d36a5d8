"""The MPI transport: every rank's window as an MPI one-sided (RMA) window, under ``mpiexec``.

The rank processes are MPI's (``mpiexec -n N``), one per MPI rank of ``COMM_WORLD``; blocks stay
threads (``MPI_THREAD_MULTIPLE``). Layout of one rank's window memory, as in the shm transport::

    offset 0                       signal matrix, ``signal_bytes``
    offset signal_bytes            data heap, ``heap_bytes``
    offset signal_bytes+heap_bytes tail: line 0 counts sleepers on this window's words, then
                                   LOCK_STRIPES lock words guarding data AtomicAdd

How the instructions map (one passive-target epoch, ``Lock_all``, for the whole run):

* ``TNOTIFY`` AtomicAdd / Set: ``Fetch_and_op(SUM)`` / ``Fetch_and_op(REPLACE)`` then
  ``Flush(target)``, so the update is complete at the target before ``TNOTIFY`` returns; a
  ``Win_sync`` first makes this rank's earlier stores into shared memory visible.
* ``TWAIT`` / ``TTEST`` poll a word of a rank on the same host as ``Win_sync`` plus a load of the
  shared memory (MPI's unified model), and sleep on it with a futex that the notifier wakes when
  the window's sleeper count says someone sleeps (a notifier on another host cannot: its sleeper
  sees the update at its next look, within the wait loop's longest sleep); a word on another host
  is read with ``Fetch_and_op(NO_OP)`` and waited for with a growing sleep. The wait loop above (spin only
  while the waiters fit on the cores, then yield, then sleep) is the same as on shm.
* Data (``TLOAD`` / ``TSTORE`` inside ``TPUT`` / ``TGET``): ranks on one host reach each other's
  windows as shared memory, so the execution models' copies work unchanged. A window on another
  host (``unmapped``) is reached with ``Get`` / ``Put`` and a ``Flush``: a store is complete at
  the target when the execution model applies it, and hazard mode still decides when that is
  (after the drain and the ``dsb``, or a seeded later time), so a missing fence shows the same
  way. Host views (``rt.window``) of such a window raise a clear error.
* Data AtomicAdd: striped locks in the tail taken with ``Compare_and_swap`` and released with
  ``Fetch_and_op(REPLACE)`` after a ``Win_sync``; under them a mapped region is added to in
  place, an unmapped one with ``Accumulate(SUM)`` (float16, which MPI cannot sum: ``Get``, add,
  ``Put``).

``peers="rma"`` maps no window but this rank's own, as if every other rank ran on another host:
the multi-host paths, tested on one machine.

Why ``Win.Allocate`` on ``COMM_WORLD`` with ``Win.Shared_query`` for the host's peers, and not
``Win.Allocate_shared`` on the host communicator plus ``Win.Create`` over it for the other hosts:
with MPICH, atomics on a ``Win.Create`` window complete only when the target calls into MPI
(measured: a 2 s stall behind a sleeping target), while an allocated window's atomics between
ranks of one host go through shared memory and never wait for the target. MPI 4.1 lets
``Shared_query`` hand out the memory of such a window's peers on the same host.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import Aborted, ArgumentError, LibraryError, ShmcommError, WaitTimeout
from ..seam import Transport, Word
from ..shm import atomics as at
from ..shm.segments import SHM_DIR, shm_free_bytes
from .library import find_mpiexec, load_mpi, mpi_available

LOCK_STRIPES = 256
LOCK_STRIPE_BYTES = 4096
_TAIL_BYTES = 64 + 4 * LOCK_STRIPES
REMOTE_POLL_S = 0.001  # longest sleep between two reads of a word on another host
_ALWAYS = ctypes.c_int32(1)  # a control word has no sleeper count: always wake
_NEVER = ctypes.c_int32(0)  # a word on another host: no futex can reach its sleepers

_tls = threading.local()


def _bufs() -> tuple[np.ndarray, tuple, np.ndarray, tuple, tuple]:
    """This thread's int32 origin, compare and result buffers, and their ``(array, 1, INT)``
    specs, made once: a prebuilt spec saves mpi4py a buffer parse per call (~2 us of ~4)."""
    try:
        return _tls.bufs
    except AttributeError:
        from mpi4py import MPI

        o, c, r = (np.zeros(1, np.int32) for _ in range(3))
        _tls.bufs = (o, (o, 1, MPI.INT), c, (c, 1, MPI.INT), (r, 1, MPI.INT))
        return _tls.bufs


class _SyncCell:
    """``value``: ``Win_sync`` then a load of the shared memory (an acquire read in MPI's
    unified model)."""

    __slots__ = ("sync", "c")

    def __init__(self, win: Any, addr: int) -> None:
        self.sync = win.Sync
        self.c = ctypes.c_int32.from_address(addr)

    @property
    def value(self) -> int:
        self.sync()
        return self.c.value


class _RemoteCell:
    """``value``: an atomic read of a word on another host (``Fetch_and_op(NO_OP)`` + ``Flush``)."""

    __slots__ = ("word",)

    def __init__(self, word: MpiWord) -> None:
        self.word = word

    @property
    def value(self) -> int:
        return self.word.load()


def _rmw(word: MpiWord, value: int, op: Any) -> int:
    o, ospec, _, _, rspec = _bufs()
    o[0] = value
    win = word.win
    win.Sync()  # this rank's earlier stores into shared memory are visible before the update
    win.Fetch_and_op(ospec, rspec, word.rank, word.offset, op)
    win.Flush(word.rank)  # complete at the target before we return
    return int(rspec[0][0])


class MpiWord(Word):
    """One int32 word of an MPI window: ``rank`` is the target rank of ``win`` and ``offset``
    its byte displacement. ``addr`` is its address in this process when the target shares this
    host's memory, else ``None``."""

    __slots__ = ("rank", "offset", "win", "addr", "cell", "handle", "waiters", "count", "cp", "ops")

    def __init__(self, win: Any, ops: Any, rank: int, offset: int, addr: int | None,
                 count: ctypes.c_void_p | None, waiters: Any) -> None:
        self.rank, self.offset, self.win, self.ops, self.addr = rank, offset, win, ops, addr
        self.handle = self  # what fetch_add / exchange take
        # the sleeper count of the target window (None: none kept). Only sleepers change it, and
        # they sleep on their own host's memory: CPU atomics, no MPI call on the sleep path
        self.count = count
        self.waiters = waiters
        if addr is not None:
            self.cp: ctypes.c_void_p | None = ctypes.c_void_p(addr)
            self.cell = _SyncCell(win, addr)
        else:
            self.cp = None
            self.cell = _RemoteCell(self)

    @staticmethod
    def fetch_add(word: MpiWord, value: int, order: int = 5) -> int:
        return _rmw(word, value, word.ops.SUM)

    @staticmethod
    def exchange(word: MpiWord, value: int, order: int = 5) -> int:
        return _rmw(word, value, word.ops.REPLACE)

    def add(self, value: int) -> int:
        old = _rmw(self, value, self.ops.SUM)
        if self.waiters.value:
            self.wake()
        return old

    def set(self, value: int) -> None:
        _rmw(self, value, self.ops.REPLACE)
        if self.waiters.value:
            self.wake()

    def load(self) -> int:
        return _rmw(self, 0, self.ops.NO_OP)

    def wake(self) -> None:
        if self.cp is not None:
            at.futex_wake(self.cp)

    def sleep(self, seen: int, timeout: float, holds: Callable[[int], bool]) -> None:
        if self.cp is None:  # another host: no futex reaches us; poll again soon
            time.sleep(max(min(timeout, REMOTE_POLL_S), 0.0))
            return
        count = self.count
        if count is not None:
            at.fast_fetch_add(count, 1, at.SEQ_CST)
        try:
            # re-check after announcing ourselves: a notifier whose update came first is seen
            # here, one that comes later reads the count after its flushed Fetch_and_op
            now = self.cell.value
            if now == seen and not holds(now):
                at.futex_wait(self.cp, seen, timeout)
        finally:
            if count is not None:
                at.fast_fetch_add(count, -1, at.SEQ_CST)

    def __repr__(self) -> str:
        return f"MpiWord(rank={self.rank}, offset={self.offset:#x}, value={self.load()})"


class NodeSegment:
    """Memory shared by the ranks of one host, allocated by the host's first rank: what the
    control segment lives in under MPI (``array``, ``base``, ``size``, ``close`` as
    :class:`~shmcomm.transports.shm.Segment`). Collective over the transport's communicator.

    Every host's segment is one window of the job: ``read`` / ``cas`` reach another host's
    copy by RMA (``leaders[r]`` is the world rank whose memory holds rank ``r``'s lines)."""

    def __init__(self, transport: MpiTransport, size: int) -> None:
        MPI, node = transport.MPI, transport.node
        self.MPI = MPI
        self.size = size
        self.name = f"mpi.{transport.run_id}.ctl"  # the run's name in reports and traces
        leader = node.Get_rank() == 0
        self.leaders: list[int] = transport.comm.allgather(transport.node_ranks[0])
        self.leader = transport.node_ranks[0]
        self.win = MPI.Win.Allocate(size if leader else 0, 1, comm=transport.comm)
        buf, _ = self.win.Shared_query(transport.node_ranks[0])
        self.array = np.frombuffer(buf, dtype=np.uint8)[:size]
        self.base = self.array.ctypes.data
        if leader:
            self.array[:] = 0
        self.win.Lock_all(MPI.MODE_NOCHECK)
        transport.comm.Barrier()  # zeroed before anyone writes

    def read(self, rank: int, offset: int, nbytes: int) -> np.ndarray:
        """A copy of bytes ``[offset, offset+nbytes)`` of the segment holding ``rank``'s lines
        (this host's: a plain copy; another host's: ``Get`` + ``Flush``, no target call needed)."""
        target = self.leaders[rank]
        if target == self.leader:
            return self.array[offset:offset + nbytes].copy()
        out = np.empty(nbytes, np.uint8)
        self.win.Get((out, nbytes, self.MPI.BYTE), target, (offset, nbytes, self.MPI.BYTE))
        self.win.Flush(target)
        return out

    def cas(self, host: int, offset: int, expect: int, value: int) -> int:
        """``Compare_and_swap`` on the int32 at ``offset`` of world rank ``host``'s segment (a
        host leader); returns the old value. Complete at the target on return."""
        o, ospec, c, cspec, rspec = _bufs()
        o[0], c[0] = value, expect
        self.win.Sync()
        self.win.Compare_and_swap(ospec, cspec, rspec, host, offset)
        self.win.Flush(host)
        return int(rspec[0][0])

    def close(self) -> None:
        """Free the window (collective: every rank closes its segments in the same order)."""
        if self.win is None:
            return
        self.array = None  # type: ignore[assignment]
        win, self.win = self.win, None
        win.Unlock_all()
        win.Free()


class MpiTransport(Transport):
    """Every rank's window of the MPI job: one ``Win.Allocate`` over ``comm`` (collective)."""

    name = "mpi"

    def __init__(self, comm: Any, signal_bytes: int, heap_bytes: int,
                 peers: str = "shared") -> None:
        if peers not in ("shared", "rma"):
            raise ArgumentError(f"mpi transport: peers must be 'shared' or 'rma', got {peers!r}")
        MPI = self.MPI = load_mpi()
        self.comm = comm
        self.me = comm.Get_rank()
        self.nranks = comm.Get_size()
        self.signal_bytes = signal_bytes
        self.heap_bytes = heap_bytes
        self.size = signal_bytes + heap_bytes
        self._ctl: NodeSegment | None = None
        self.win: Any = None  # the MPI.Win (mpi4py has no type information); None once closed
        # the ranks sharing this host's memory (the host's first rank has the lowest world rank)
        # one name for the whole job (traces of every rank land under it)
        self.run_id: str = comm.bcast(secrets.token_hex(12) if self.me == 0 else None, root=0)
        self.node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.me)
        self.node_ranks: list[int] = self.node.allgather(self.me)
        # MPICH backs a host's windows with /dev/shm: past its free space a touch is SIGBUS, so
        # refuse first (the host's first rank decides for all, so every rank takes the same path)
        need = len(self.node_ranks) * (self.size + _TAIL_BYTES)
        free = self.node.bcast(shm_free_bytes() if self.node.Get_rank() == 0 else None, root=0)
        if free is not None and need > free:
            self.node.Free()
            raise ArgumentError(
                f"windows: {len(self.node_ranks)} ranks on this host x (signal_bytes + heap_bytes"
                f" = {self.size}) = {need} bytes exceed the {free} bytes free in {SHM_DIR}; "
                "lower heap_bytes or the ranks per host")
        info = MPI.Info.Create()
        info.Set("same_size", "true")
        info.Set("same_disp_unit", "true")
        try:
            self.win = MPI.Win.Allocate(self.size + _TAIL_BYTES, 1, info, comm)
        except MPI.Exception as exc:
            raise ShmcommError(f"MPI could not allocate a window of {self.size + _TAIL_BYTES} "
                               f"bytes: {exc}") from None
        finally:
            info.Free()
        # windows of this host's ranks, mapped in this process (None: on another host)
        self.arrays: list[np.ndarray | None] = [None] * self.nranks
        self.bases: list[int | None] = [None] * self.nranks
        self.mapped_ranks = []
        for r in self.node_ranks if peers == "shared" else [self.me]:
            try:
                buf, _ = self.win.Shared_query(r)
            except MPI.Exception:  # an MPI before 4.1 may refuse: reach that peer by RMA
                if r == self.me:
                    raise LibraryError(
                        "the mpi transport needs MPI_Win_shared_query on an allocated window "
                        "(MPI 4.1, e.g. MPICH >= 4.2); this MPI library refuses it") from None
                continue
            arr = np.frombuffer(buf, dtype=np.uint8)
            self.arrays[r], self.bases[r] = arr, arr.ctypes.data
            self.mapped_ranks.append(r)
        self.unmapped = frozenset(range(self.nranks)) - frozenset(self.mapped_ranks)
        self.arrays[self.me][:] = 0  # MPI does not zero window memory
        # each mapped window's sleeper count (tail line 0): its address, and a plain-read view
        self._counts = [None if b is None else (ctypes.c_void_p(b + self.size),
                                                ctypes.c_int32.from_address(b + self.size))
                        for b in self.bases]
        self.win.Lock_all(MPI.MODE_NOCHECK)
        comm.Barrier()  # every window zeroed before anyone notifies

    # -- words and views ---------------------------------------------------------------------

    def _word(self, rank: int, offset: int, count: ctypes.c_void_p | None, waiters: Any,
              win: Any = None, base: int | None = None) -> MpiWord:
        if win is None:
            win, base = self.win, self.bases[rank]
        addr = None if base is None else base + offset
        return MpiWord(win, self.MPI, rank, offset, addr, count, waiters)

    def word(self, rank: int, offset: int) -> MpiWord:
        count = self._counts[rank]
        if count is None:
            return self._word(rank, offset, None, _NEVER)
        return self._word(rank, offset, count[0], count[1])

    def control_segment(self, size: int) -> NodeSegment:
        """This host's control segment (collective); its host-barrier words are world rank 0's."""
        self._ctl = NodeSegment(self, size)
        return self._ctl

    def control_word(self, address: int) -> MpiWord:
        """The word at ``address`` of the control segment, as world rank 0 holds it: the host
        barrier counts every rank of the job, whichever host it runs on."""
        ctl = self._ctl
        if ctl is None:
            raise ShmcommError("the mpi transport has no control segment yet")
        offset = address - ctl.base
        base = ctl.base if 0 in self.mapped_ranks else None
        return self._word(0, offset, None, _ALWAYS if base is not None else _NEVER,
                          win=ctl.win, base=base)

    def _mapped(self, rank: int, what: str) -> np.ndarray:
        arr = self.arrays[rank]
        if arr is None:
            raise ArgumentError(
                f"{what}: rank {rank}'s window is on another host; the mpi transport moves data "
                f"only through TPUT / TGET there (this rank maps the windows of ranks "
                f"{self.mapped_ranks}); signals reach every rank")
        return arr

    def view(self, rank: int, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        n = dtype.itemsize
        for d in shape:
            n *= d
        if offset < 0 or offset + n > self.size:
            raise ArgumentError(f"view: bytes [{offset}, {offset + n}) lie outside rank {rank}'s "
                                f"window [0, {self.size})")
        return self._mapped(rank, "view")[offset:offset + n].view(dtype).reshape(shape)

    def window(self, rank: int) -> np.ndarray:
        return self._mapped(rank, "window")[:self.size]

    def locate(self, address: int) -> tuple[int, int] | None:
        for r, base in enumerate(self.bases):
            if base is not None and base <= address < base + self.size:
                return r, address - base
        return None

    # -- data to and from unmapped windows ---------------------------------------------------

    def _target(self, offset: int, stride: int, shape: tuple[int, int], itemsize: int) -> tuple:
        """The target spec of ``rows x cols`` elements ``stride`` bytes apart (a vector type
        when strided; the caller frees a type it got)."""
        rows, cols = shape
        row = cols * itemsize
        if stride == row or rows <= 1:
            return (offset, rows * row, self.MPI.BYTE), None
        vec = self.MPI.BYTE.Create_vector(rows, row, stride).Commit()
        return (offset, 1, vec), vec

    def get(self, rank: int, offset: int, stride: int, out: np.ndarray) -> None:
        buf = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        target, vec = self._target(offset, stride, out.shape, out.itemsize)
        try:
            self.win.Get((buf, buf.nbytes, self.MPI.BYTE), rank, target)
            self.win.Flush(rank)
        finally:
            if vec is not None:
                vec.Free()
        if buf is not out:
            np.copyto(out, buf)

    def put(self, rank: int, offset: int, stride: int, data: np.ndarray) -> None:
        buf = np.ascontiguousarray(data)
        target, vec = self._target(offset, stride, buf.shape, buf.itemsize)
        try:
            self.win.Sync()
            self.win.Put((buf, buf.nbytes, self.MPI.BYTE), rank, target)
            self.win.Flush(rank)
        finally:
            if vec is not None:
                vec.Free()

    def accumulate(self, rank: int, offset: int, stride: int, data: np.ndarray) -> None:
        MPI = self.MPI
        if data.dtype == np.float16:  # no MPI sum for it: read, add, write under the caller's lock
            cur = np.empty(data.shape, data.dtype)
            self.get(rank, offset, stride, cur)
            np.add(cur, data, out=cur, casting="unsafe")
            self.put(rank, offset, stride, cur)
            return
        buf = np.ascontiguousarray(data)
        rows, cols = buf.shape
        etype = MPI.Datatype.fromcode(buf.dtype.char)
        if stride == cols * buf.itemsize or rows <= 1:
            target, vec = (offset, rows * cols, etype), None
        else:
            vec = etype.Create_vector(rows, cols, stride // buf.itemsize).Commit()
            target = (offset, 1, vec)
        try:
            self.win.Accumulate((buf, buf.size, etype), rank, target, MPI.SUM)
            self.win.Flush(rank)
        finally:
            if vec is not None:
                vec.Free()

    # -- data AtomicAdd ----------------------------------------------------------------------

    @contextmanager
    def data_lock(self, rank: int, offset: int, nbytes: int, timeout: float,
                  aborted: Callable[[], Any]) -> Iterator[None]:
        """Striped locks in ``rank``'s tail, one per 4 KiB stripe, taken in ascending order with
        ``Compare_and_swap`` and released with ``Fetch_and_op(REPLACE)`` after a ``Win_sync``
        (the data written under the lock is visible first)."""
        first, last = offset, offset + max(nbytes, 1) - 1
        count = last // LOCK_STRIPE_BYTES - first // LOCK_STRIPE_BYTES + 1
        stripes = sorted({(first // LOCK_STRIPE_BYTES + i) % LOCK_STRIPES
                          for i in range(min(count, LOCK_STRIPES))})
        base = self.size + 64
        taken: list[int] = []
        try:
            for s in stripes:
                disp = base + 4 * s
                self._lock(rank, disp, timeout, aborted)
                taken.append(disp)
            yield
        finally:
            for disp in taken:
                _rmw(self._word(rank, disp, None, _NEVER), 0, self.MPI.REPLACE)

    def _cas(self, rank: int, disp: int) -> int:
        o, ospec, c, cspec, rspec = _bufs()
        o[0], c[0] = 1, 0
        self.win.Compare_and_swap(ospec, cspec, rspec, rank, disp)
        self.win.Flush(rank)
        return int(rspec[0][0])

    def _lock(self, rank: int, disp: int, timeout: float, aborted: Callable[[], Any]) -> None:
        if self._cas(rank, disp) == 0:
            return
        deadline = time.perf_counter() + timeout
        while True:
            os.sched_yield()
            if self._cas(rank, disp) == 0:
                return
            if aborted():
                raise Aborted("stopped by an abort while waiting for a data lock")
            if time.perf_counter() > deadline:
                raise WaitTimeout(f"could not take a data lock within wait_timeout={timeout:g} s")

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, rank: int) -> None:
        """Nothing to do: the window was made collectively by every rank."""

    def close(self) -> None:
        """Free the windows (collective: every rank calls it, after its views are gone)."""
        self.arrays = [None] * self.nranks
        self.bases = [None] * self.nranks
        self._counts = []
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self.win is not None:
            win, self.win = self.win, None
            win.Unlock_all()
            win.Free()
        if self.node is not None:
            self.node.Free()
            self.node = None


__all__ = ["MpiTransport", "MpiWord", "NodeSegment", "find_mpiexec", "load_mpi", "mpi_available"]
