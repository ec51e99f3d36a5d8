"""Agents: the thread-local execution state behind every kernel instruction.

An agent is one thread that may issue instructions: a block thread of a launch, or a rank's
host thread (for ``rt.barrier()`` and signal access from host code). Kernel instructions such as
``TWAIT`` take no context argument, as in PTO, so they find their agent through a thread-local.
The agent carries the block's identity, its control-segment line, its wait policy, its
execution model (``pipes``, and ``hooks`` when the model observes scalar instructions) and its
UB budget.
"""

from __future__ import annotations

import hashlib
import random
import threading
from typing import TYPE_CHECKING, Any

from ..errors import ShmcommError
from ..transports import host_atomics as at
from . import control as C

if TYPE_CHECKING:
    from .runtime import RankRuntime

_tls = threading.local()


class ProcessFlags:
    """What the instructions' fast paths ask before they look any further, one object per
    process, owned by the rank runtime: it resets them when a run starts in the process (a
    pool's rank serves many) and sets them as the run's model binds its agents.

    ``hooked``: some agent of this run has scalar hooks (until then TNOTIFY / TWAIT skip the
    thread-local lookup entirely); ``fenced``: some block acts on fences (until then TNOTIFY's
    internal ``pipe_barrier(PIPE_ALL)`` is skipped); ``read_add``: ``Config.set_semantics`` is
    ``read-add``."""

    __slots__ = ("hooked", "fenced", "read_add")

    def __init__(self) -> None:
        self.reset()

    def reset(self, read_add: bool = False) -> None:
        """A run starts in this process: no agent is bound yet."""
        self.hooked = False
        self.fenced = False
        self.read_add = read_add


FLAGS = ProcessFlags()


def _int32(word: int) -> int:
    """An unsigned 32-bit word as the signed int32 a control-segment field stores."""
    return word - (1 << 32) if word >= 1 << 31 else word


class Agent:
    """Execution state of one block thread (``slot`` = block index) or host thread."""

    __slots__ = ("rt", "rank", "slot", "block_idx", "block_num", "ctl", "line", "state_addr", "state_cp",
                 "seq", "policy", "spin_s", "wait_timeout", "pipes", "hooks", "fences", "seed", "_rng",
                 "ub_used", "is_host", "active", "kernel", "wait_fields", "since_cell", "poll_cell",
                 "polling", "stall_s", "ub", "first_slot", "tracer", "scalar_cache", "__weakref__")

    def __init__(self, rt: RankRuntime, slot: int, block_num: int,
                 seed: int | tuple[int, int, int, int],
                 block_idx: int | None = None) -> None:
        self.rt = rt
        self.rank = rt.rank
        self.slot = slot
        self.is_host = slot == C.HOST_SLOT
        # a launch's blocks take consecutive free slots: block_idx counts from 0 in its launch
        self.block_idx = -1 if self.is_host else (slot if block_idx is None else block_idx)
        self.block_num = block_num
        self.ctl = rt.ctl
        # its control line: the state word (c_void_p: the unchecked store of every wait), the
        # wait fields (A_SEQ .. A_KIND, written at every registered wait), and the plain stores
        # the launcher reads to tell a stuck agent from a waiting one
        self.line, self.state_cp, self.wait_fields, self.since_cell, self.poll_cell = (
            rt.ctl.agent_views(rt.rank, slot))
        self.state_addr = self.line + 4 * C.A_STATE
        at.store(self.line + 4 * C.A_BLOCK, self.block_idx)
        if self.block_idx == 0:
            at.store(self.line + 4 * C.A_SYNCALL, 0)  # a fresh launch's SYNCALL rounds
        self.polling: Any = None  # what its last failed TTEST tested (see waiting.note_poll)
        self.stall_s = 0.0  # seconds the current wait spent stopped (not counted as waiting)
        self.seq = 0
        cfg = rt.config
        self.policy = cfg.wait_policy
        self.spin_s = cfg.spin_us * 1e-6
        self.wait_timeout = cfg.wait_timeout
        # of the block's own stream (rng), made at its first use; a (run seed, rank, launch,
        # slot) key is hashed into one then (most blocks never draw)
        self.seed = seed
        self._rng: random.Random | None = None
        self.ub_used = 0
        self.ub: Any = None  # the block's UB as bytes, made at the first TASSIGN
        self.first_slot = slot - max(self.block_idx, 0)  # the launch's block 0 (SYNCALL counter)
        self.active = False
        self.pipes: Any = None  # the block's BlockModel (shmcomm.core.model)
        self.hooks: Any = None  # the same model when it observes scalar instructions, else None
        self.tracer: Any = None  # the block's trace writer when the run writes a trace
        self.fences: Any = None  # the same model when pipe_barrier / dsb do anything in it
        self.kernel: Any = None  # the kernel function of the launch (reports point at it)
        # the block's scalar data cache when its model keeps one (hazard's ``cache``): gm_load
        # reads through it
        self.scalar_cache: Any = None

    @property
    def rng(self) -> random.Random:
        """The block's seeded stream (made when first asked for: seeding one costs 4 us, and
        only a hazard model draws from it)."""
        rng = self._rng
        if rng is None:
            seed = self.seed
            rng = self._rng = random.Random(block_seed(*seed) if isinstance(seed, tuple) else seed)
        return rng

    def set_state(self, state: int) -> None:
        at.store(self.state_addr, state)

    def start_running(self) -> None:
        """Publish that this thread now runs this agent: its thread id, since when, RUNNING."""
        at.store(self.line + 4 * C.A_TID, threading.get_native_id())
        ident = threading.get_ident()
        at.store(self.line + 4 * C.A_IDENT_LO, _int32(ident & 0xFFFFFFFF))
        at.store(self.line + 4 * C.A_IDENT_HI, _int32(ident >> 32 & 0xFFFFFFFF))
        self.since_cell.value = self.ctl.now_ms()
        self.polling = None
        self.set_state(C.RUNNING)

    def set_pending(self, pending: bool) -> None:
        """Publish whether queued pipe work of a deferring model is still to retire (the deadlock
        watch waits for it instead of reporting)."""
        at.store(self.line + 4 * C.A_PENDING, int(pending))

    def set_active(self, active: bool) -> None:
        """Count this agent among the run's runnable agents (a block not in a futex sleep), or not."""
        if active != self.active:
            at.fetch_add(self.ctl.active_addr, 1 if active else -1)
            self.active = active

    def where(self) -> str:
        return f"rank {self.rank} " + ("host" if self.is_host else f"block {self.block_idx}")

    def __repr__(self) -> str:
        return f"<Agent {self.where()} of {self.block_num} blocks>"


def block_seed(seed: int, rank: int, launch: int, slot: int) -> int:
    """A per-(rank, launch, block) seed derived from the run's seed, stable across runs."""
    h = hashlib.blake2b(f"{seed}:{rank}:{launch}:{slot}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def current() -> Agent:
    """The calling thread's agent; raises if the thread is not a shmcomm block or host."""
    try:
        return _tls.agent
    except AttributeError:
        raise ShmcommError(
            "this instruction runs only inside a shmcomm rank (a kernel launched with "
            "rt.launch, or host code run by shmcomm.run)"
        ) from None


def bind(agent: Agent | None) -> None:
    """Make ``agent`` the calling thread's agent (``None`` unbinds)."""
    if agent is None:
        _tls.__dict__.pop("agent", None)
    else:
        _tls.agent = agent
