"""The control segment: one per run, shared by the launcher and every rank.

It holds what supervision needs and nothing a kernel touches directly. Layout (int32 words,
each group starting on its own 128-byte line so hot words do not share a cache line)::

    line 0   MAGIC, nranks, slots per rank, ncores, the run's magic, the checksum of the five
    line 1   abort flag (0 = running, else an ABORT_* reason)
    line 2   the reporter: 1 + the rank that reports the run's failure (the mpi launcher's ranks
             swap themselves in on world rank 0's segment; the first one reports)
    line 3   runnable agents: blocks of a launch not in a futex sleep (the adaptive wait reads it)
    line 4   host barrier arrivals (monotonic; rt.barrier() derives its round from it)
    line 5   host barrier: reserved
    ranks    one line per rank: state, pid, launch count, digest of the named signal regions
             (symmetry check of rt.signal_region), blocks of the running launches, heap top (low
             and high 32 bits; symmetry check of rt.alloc), the bit mask of the running
             launches' slots (two words)
    agents   one line per (rank, slot); slot s < MAX_BLOCKS belongs to a block of a running
             launch (a launch's blocks take consecutive free slots), slot MAX_BLOCKS the host
             thread: state, wait sequence number, waited signal (rank, offset as low and high 32
             bits, rows, cols, row stride), comparison, expected value, wait start (ms since the
             run started), wait kind, pending (queued pipe work not yet retired), when it last
             started or ended a wait (ms), its thread id, its last failed TTEST (ms), its block
             index in its launch, and (block 0's line) the launch's SYNCALL arrivals
    every line's last word: the run's magic (a guard)
    extra    ``extra_bytes`` for an execution model that coordinates across processes (schedule
             mode's turn, strategy state and record), 64-byte aligned at ``extra_base``

The fixed part (line 0 and the guard words) never changes during a run: :meth:`Control.check`
compares it with what :meth:`Control.seal` wrote at the start, so a kernel that scribbles over
the segment (zeroes it, fills it) fails the run naming the offset, at every supervision tick and
at the end. Agents write their own line with atomics; the launcher only reads (a torn read costs at most one
poll, since the deadlock verdict needs two identical polls), and never trusts what it reads: a
rank may scribble over the segment, so the launcher range-checks every field it uses. The
segment is node-local shared memory, driven by CPU atomics whatever transport carries the
windows.
"""

from __future__ import annotations

import ctypes
import os
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import MAX_BLOCKS
from ..transports import HostSegment as Segment
from ..transports import host_atomics as at

MAGIC = 0x53484D43  # "SHMC"
LINE = 32  # int32 words in a line: 128 bytes, room for an agent's 18 fields
GUARD = LINE - 1  # the word of every line that holds the run's magic (no field uses it)
_I_RUN_MAGIC, _I_CHECKSUM = 4, 5  # line 0's words after MAGIC, nranks, slots, ncores
HOST_SLOT = MAX_BLOCKS
SLOTS = MAX_BLOCKS + 1


def agent_id(rank: int, slot: int) -> int:
    """The run-wide id of the agent in ``slot`` of ``rank`` (schedule mode's agents, a deferred
    block thread's key)."""
    return rank * SLOTS + slot

# header lines
_H_INFO, _H_ABORT, _H_REPORTER, _H_ACTIVE, _H_HOSTBAR = 0, 1, 2, 3, 4
_HEADER_LINES = 6

# agent states; POLLING: its last instruction was a TTEST that found the condition false (a
# TTEST loop counts as a wait while such tests keep coming, see A_POLL)
IDLE, RUNNING, WAITING, DONE, FAILED, JOINING, POLLING = 0, 1, 2, 3, 4, 5, 6
AGENT_STATES = ("idle", "running", "waiting", "done", "failed", "joining", "polling (TTEST)")
# rank states
R_STARTING, R_RUNNING, R_EXITED, R_FAILED = 0, 1, 2, 3

# abort reasons
ABORT_NONE, ABORT_FAILURE, ABORT_DEADLOCK, ABORT_TIMEOUT, ABORT_INTERRUPT = 0, 1, 2, 3, 4
ABORT_NAMES = {ABORT_FAILURE: "a failure elsewhere in the run", ABORT_DEADLOCK: "a deadlock",
               ABORT_TIMEOUT: "the run timeout", ABORT_INTERRUPT: "an interrupt"}

# fields of an agent line (A_SEQ .. A_KIND are written together at every registered wait)
A_STATE, A_SEQ, A_SIG_RANK, A_SIG_OFF, A_SIG_OFF_HI, A_ROWS, A_COLS, A_STRIDE = range(8)
A_CMP, A_VALUE, A_START = 8, 9, 10
A_KIND = 11  # 0 = signal wait (TWAIT), 1 = host barrier, 2 = TTEST poll, 3 = SYNCALL
A_PENDING = 12  # queued pipe work a deferring model still has to retire (0 in eager mode)
A_SINCE = 13  # ms when the agent last started running or ended a registered wait
A_TID = 14  # the agent's thread id (the launcher reads its /proc state)
A_POLL = 15  # ms of its last TTEST that found the condition false
A_BLOCK = 16  # block index in its launch (a launch's blocks take any free consecutive slots)
A_SYNCALL = 17  # in the line of a launch's block 0: the launch's SYNCALL arrival counter
# the agent's Python thread ident (threading.get_ident(), low and high 32 bits): the name
# faulthandler's stack dumps give a thread, so a report finds each waiting agent's own stack
A_IDENT_LO, A_IDENT_HI = 18, 19
# fields of a rank line
R_STATE, R_PID, R_LAUNCHES, R_SIGREGIONS, R_BLOCKS, R_HEAPTOP, R_HEAPTOP_HI = range(7)
# which slots belong to running launches: bit s of (R_SLOTS_HI << 32 | R_SLOTS_LO)
R_SLOTS_LO, R_SLOTS_HI = 7, 8
R_HELPERS = 9  # host threads not shmcomm's, as the host last joined or waited: they may notify


class Control:
    """The mapped control segment of one run (created by the launcher, inherited by ranks)."""

    def __init__(self, nranks: int, ncores: int | None = None, extra_bytes: int = 0,
                 segment: Callable[[int], Any] | None = None) -> None:
        """``segment(nbytes)`` makes the zeroed memory (default: a new shm :class:`Segment`; the
        mpi launcher passes memory its host's ranks share)."""
        self.nranks = nranks
        # the ranks whose lines this segment holds: every rank, but only this host's in a job
        # across hosts (each host keeps its own segment)
        self.local: frozenset[int] = frozenset(range(nranks))
        self.ncores = ncores or len(os.sched_getaffinity(0))
        self._rank_line = _HEADER_LINES
        self._agent_line = self._rank_line + nranks
        words = (self._agent_line + nranks * SLOTS) * LINE
        self.extra_bytes = -(-extra_bytes // 64) * 64
        size = words * 4 + self.extra_bytes
        self.segment = Segment("ctl", size) if segment is None else segment(size)
        self.extra_base = self.segment.base + words * 4
        self.words = self.segment.array.view(np.int32)
        self.base = self.segment.base
        self.t0 = time.monotonic()
        self.words[0:4] = (MAGIC, nranks, SLOTS, self.ncores)
        self._fixed_words = words  # the lines the fixed part covers (not the models' area)
        self.run_magic = 0
        if segment is None:  # a launcher's own segment: it checks it (mpi ranks share theirs)
            self.seal()
        # absolute addresses of the hot words, computed once
        self.abort_addr = self._addr(_H_ABORT * LINE)
        self.active_addr = self._addr(_H_ACTIVE * LINE)
        self.hostbar_addr = self._addr(_H_HOSTBAR * LINE)
        self.reporter_addr = self._addr(_H_REPORTER * LINE)
        self.abort_cell = ctypes.c_int32.from_address(self.abort_addr)  # plain reads, to poll
        self.active_cp = ctypes.c_void_p(self.active_addr)
        self.active_cell = ctypes.c_int32.from_address(self.active_addr)
        self._views: dict[int, tuple] = {}  # agent id -> its line's views (agent_views)

    def _addr(self, word: int) -> int:
        return self.base + 4 * word

    def extra_words(self, offset: int, count: int) -> np.ndarray:
        """``count`` int32 words of the shared area at byte ``offset`` (a model's or an
        observer's: plain reads and writes, for set-up and read-back while no rank runs)."""
        if offset % 4 or not 0 <= offset <= self.extra_bytes - 4 * count:
            raise ValueError(f"extra_words: [{offset}, {offset + 4 * count}) is outside the "
                             f"shared area of {self.extra_bytes} bytes")
        start = (self.extra_base - self.base + offset) // 4
        return self.words[start:start + count]

    def fetch_add(self, addr: int, value: int) -> int:
        """Atomically add ``value`` to the control word at ``addr`` (seq_cst); its old value."""
        return at.fetch_add(addr, value)

    def close(self) -> None:
        self._views = {}  # (views into the memory that goes now)
        self.words = None
        self.segment.close()

    # -- the fixed part ------------------------------------------------------------------------

    def seal(self) -> None:
        """Write a fresh run magic into line 0 and every line's guard word, and the checksum of
        line 0's fixed words (a run's start; a pool's reset zeroes the guards)."""
        self.run_magic = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF | 1
        self.words[_I_RUN_MAGIC] = self.run_magic
        self.words[GUARD:self._fixed_words:LINE] = self.run_magic
        self.words[_I_CHECKSUM] = self._checksum()

    def _checksum(self) -> int:
        return zlib.crc32(self.words[:_I_CHECKSUM].tobytes()) & 0x7FFFFFFF

    def check(self) -> str | None:
        """Whether the fixed part is as :meth:`seal` left it: ``None``, or the failure message
        naming the first overwritten word's byte offset in the segment."""
        if not self.run_magic or self.words is None:
            return None
        expect = (MAGIC, self.nranks, SLOTS, self.ncores, self.run_magic, self._checksum())
        bad = [i for i, v in enumerate(expect) if int(self.words[i]) != v]
        if not bad:
            guards = self.words[GUARD:self._fixed_words:LINE]
            wrong = np.flatnonzero(guards != self.run_magic)
            if not len(wrong):
                return None
            bad = [GUARD + int(wrong[0]) * LINE]
            expected = self.run_magic
        else:
            expected = expect[bad[0]]
        w = bad[0]
        return (f"the kernel overwrote shmcomm's control area at offset {4 * w:#x} (word {w}: "
                f"{int(self.words[w]) & 0xFFFFFFFF:#010x} where shmcomm wrote "
                f"{expected & 0xFFFFFFFF:#010x}); the run cannot be supervised: a kernel or host "
                "wrote outside its windows (a stray pointer, ctypes, a write to rt.ctl)")

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, reason: int) -> bool:
        """Set the abort flag (first reason wins). Returns True if this call set it."""
        ok, _ = at.compare_exchange(self.abort_addr, ABORT_NONE, reason)
        return ok

    def aborted(self) -> int:
        return at.load(self.abort_addr)

    # -- ranks ---------------------------------------------------------------------------------

    def rank_word(self, rank: int, field: int) -> int:
        return (self._rank_line + rank) * LINE + field

    def rank_addr(self, rank: int, field: int) -> int:
        return self._addr(self.rank_word(rank, field))

    def rank_field(self, rank: int, field: int) -> int:
        return int(self.words[self.rank_word(rank, field)])

    def load_rank(self, rank: int, field: int) -> int:
        """An atomic read of a rank line's field (what another process may be writing)."""
        return at.load(self.rank_addr(rank, field))

    def set_rank(self, rank: int, field: int, value: int) -> None:
        at.store(self.rank_addr(rank, field), value)

    # -- agents --------------------------------------------------------------------------------

    def agent_word(self, rank: int, slot: int) -> int:
        return (self._agent_line + rank * SLOTS + slot) * LINE

    def agent_addr(self, rank: int, slot: int) -> int:
        return self._addr(self.agent_word(rank, slot))

    def agent_views(self, rank: int, slot: int) -> tuple[int, Any, Any, Any, Any]:
        """An agent line's address and its ctypes views: its state word (``c_void_p``), its
        wait fields ``A_SEQ .. A_KIND`` (an int32 array), ``A_SINCE`` and ``A_POLL`` (int32
        cells). Made once per segment: a pool's ranks make agents on the same lines every run,
        and making the views cost more than the rest of an agent."""
        aid = agent_id(rank, slot)
        v = self._views.get(aid)
        if v is None:
            line = self.agent_addr(rank, slot)
            v = self._views[aid] = (
                line, ctypes.c_void_p(line + 4 * A_STATE),
                (ctypes.c_int32 * (A_KIND - A_SEQ + 1)).from_address(line + 4 * A_SEQ),
                ctypes.c_int32.from_address(line + 4 * A_SINCE),
                ctypes.c_int32.from_address(line + 4 * A_POLL))
        return v

    def agents_of(self, rank: int) -> np.ndarray:
        w = self.agent_word(rank, 0)
        return self.words[w:w + SLOTS * LINE].reshape(SLOTS, LINE).copy()

    def offset_of(self, line: np.ndarray) -> int:
        """The waited signal's byte offset of an agent line (stored as two 32-bit halves)."""
        return (int(line[A_SIG_OFF]) & 0xFFFFFFFF) | (int(line[A_SIG_OFF_HI]) & 0xFFFFFFFF) << 32

    def control_words(self, rank: int, start: int, count: int) -> np.ndarray:
        """Words ``[start, start+count)`` of the segment as rank ``rank``'s agents see them (what
        a wait on a control word, a host barrier or SYNCALL, waits on)."""
        return self.words[start:start + count]

    def running_slots(self, rank: int) -> list[int]:
        """The slots of ``rank``'s running launches."""
        m = (self.rank_field(rank, R_SLOTS_HI) & 0xFFFFFFFF) << 32 | (
            self.rank_field(rank, R_SLOTS_LO) & 0xFFFFFFFF)
        return [s for s in range(MAX_BLOCKS) if m >> s & 1]

    def now_ms(self) -> int:
        return int((time.monotonic() - self.t0) * 1000) & 0x7FFFFFFF
