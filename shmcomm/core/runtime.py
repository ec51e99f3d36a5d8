"""The device context a kernel sees, and the host runtime of one rank process.

``DeviceContext`` mirrors pto-isa's ``CommDeviceContext`` plus the block identity: ``rank``,
``nranks``, ``block_idx``, ``block_num``, ``signal_base`` (int32 GM pointer to this rank's signal
matrix) and ``ctx.tile`` for UB buffers.

``RankRuntime`` is the core of the ``rt`` a host function receives: symmetric allocation, kernel
launches (``block`` threads that all start, and a launch that returns when all finish), collective
signal reset and a host barrier. The run's execution model (:mod:`shmcomm.core.model`) is given
to it once and bound to every block of every launch.
"""

from __future__ import annotations

import hashlib
import threading
import traceback
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import MAX_BLOCKS, Config, check_block_threads
from ..errors import Aborted, ArgumentError, ShmcommError
from ..types import WaitCmp
from . import control as C
from .agent import HOOKED, Agent, bind
from .gm import GMPtr, Windows, as_dtype
from .heap import SymmetricArray, SymmetricHeap
from .model import RankModel
from .tile import Tile, tile_shape
from .waiting import KIND_HOST_BARRIER, WaitSite, wait_until


class DeviceContext:
    """What a kernel gets as ``ctx``: identity of the block and access to the windows."""

    __slots__ = ("rank", "nranks", "block_idx", "block_num", "signal_base", "windows", "_agent",
                 "rt")

    def __init__(self, agent: Agent) -> None:
        rt = agent.rt
        self._agent = agent
        self.rt = rt
        self.rank = rt.rank
        self.nranks = rt.nranks
        self.block_idx = agent.block_idx
        self.block_num = agent.block_num
        self.signal_base = rt.signal_base
        self.windows = rt.windows

    def tile(self, shape: Any, dtype: Any) -> Tile:
        """A block-local UB tile; all tiles of a block together fit ``ub_bytes``."""
        rows, cols = tile_shape(shape)
        need = rows * cols * as_dtype(dtype, "tile dtype").itemsize  # checked before allocating
        agent = self._agent
        cap = agent.rt.config.ub_bytes
        if agent.ub_used + need > cap:
            raise ArgumentError(
                f"ctx.tile: {need} bytes requested but only {cap - agent.ub_used} of "
                f"ub_bytes={cap} are left in {agent.where()}'s UB")
        t = Tile((rows, cols), dtype)
        agent.ub_used += t.nbytes
        return t

    def expect_blocks(self, count: int, kernel: str, param: str = "num_blocks") -> None:
        """Declare that ``kernel``'s intra-rank arrival count assumes ``count`` blocks (its
        parameter ``param``): the hazard checker ``arrival-count`` reports a launch whose real
        block count differs (more blocks: arrivals missed; fewer: a hang)."""
        hooks = self._agent.hooks
        if hooks is not None:
            hooks.expect_blocks(kernel, param, count)

    def ptr(self, rank: int, offset: int, dtype: Any = np.int32) -> GMPtr:
        """A GM pointer to byte ``offset`` of ``rank``'s window."""
        return GMPtr(self.windows, rank, offset, dtype)

    @property
    def seed(self) -> int:
        return self.rt.config.seed

    def __repr__(self) -> str:
        return (f"DeviceContext(rank={self.rank}/{self.nranks}, block={self.block_idx}/"
                f"{self.block_num})")


class KernelError(ShmcommError):
    """A block of a launch raised; ``block``, ``exc`` and ``tb`` tell which and where."""

    def __init__(self, rank: int, block: int, exc: BaseException, tb: str) -> None:
        self.rank, self.block, self.exc, self.tb = rank, block, exc, tb
        super().__init__(f"rank {rank} block {block}: {type(exc).__name__}: {exc}")


class RankRuntime:
    """The host runtime of one rank process (``rt`` in ``host(rt)``)."""

    def __init__(self, rank: int, config: Config, windows: Windows, ctl: C.Control,
                 model: Callable[[RankRuntime], RankModel]) -> None:
        self.rank = rank
        self.nranks = config.nranks
        self.config = config
        self.windows = windows
        self.ctl = ctl
        self.heap = SymmetricHeap(windows, rank)
        self.signal_base = GMPtr(windows, rank, 0, np.int32)
        self.launches = 0
        # what library kernels keep across launches of this run (their prepared signals), by name
        self.kernel_state: dict[str, Any] = {}
        self._regions_digest = 0  # of the rt.signal_region calls so far (their symmetry check)
        self.host_agent = Agent(self, C.HOST_SLOT, 0, seed=_seed(config.seed, rank, 0, C.HOST_SLOT))
        self.agents: list[Agent] = []
        # blocks of this rank that failed on their own: the launcher reports them even when the
        # host code caught the KernelError and went on (a run with a failed block never passes)
        self.block_failures: list[KernelError] = []
        self._hostbar = WaitSite((windows.transport.control_word(ctl.hostbar_addr),), -1,
                                 ctl.hostbar_addr - ctl.base, kind=KIND_HOST_BARRIER,
                                 label="rt.barrier")
        self.model = model(self)  # after the fields above: a model may read them
        bind(self.host_agent)
        self.host_agent.start_running()

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def signals(self) -> np.ndarray:
        """This rank's signal matrix as an int32 numpy view (read it; write with TNOTIFY)."""
        arr = self.windows.view(self.rank, 0, (self.config.signal_bytes // 4,),
                                np.dtype(np.int32)).view(SymmetricArray)
        arr._windows = self.windows  # host stores into it are seen as host stores
        return arr

    def window(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s whole window as bytes (for inspection and tests)."""
        return self.windows.transport.window(self.windows.check_rank(rank))

    def alloc(self, shape: Any, dtype: Any = np.float32) -> SymmetricArray:
        """A zeroed symmetric array in this rank's heap; ``x.ptr`` is its GM pointer.

        Collective, like ``nvshmem_malloc``: every rank must make the same allocations in the
        same order, and each call returns only when every rank has zeroed its part, so a fast
        peer's first write into the new array is never wiped. A rank that allocates a different
        size raises ``ArgumentError`` on every rank.
        """
        arr = self.heap.alloc(shape, dtype)
        tops = self._compare(C.R_HEAPTOP, self.heap.top, C.R_HEAPTOP_HI)
        if len(set(tops)) != 1:
            raise ArgumentError(
                f"alloc: allocations are not symmetric (heap tops per rank: {tops}); every "
                "rank must allocate the same shapes and dtypes in the same order")
        return arr

    def _compare(self, field: int, value: int, field_hi: int | None = None) -> list[int]:
        """Collective: publish ``value`` in this rank's control line and return every rank's,
        after every rank has published (what this rank did before is visible to all). ``value``
        is int32, or 64 bits split over ``field`` and ``field_hi`` (heaps reach 16 GiB: a
        31-bit compare would pass heaps that differ by 2 GiB)."""
        ctl = self.ctl
        ctl.set_rank(self.rank, field, _i32(value & 0xFFFFFFFF))
        if field_hi is not None:
            ctl.set_rank(self.rank, field_hi, _i32(value >> 32 & 0xFFFFFFFF))
        self.barrier()
        values = [ctl.rank_field(r, field) & 0xFFFFFFFF for r in range(self.nranks)]
        if field_hi is not None:
            values = [v | (ctl.rank_field(r, field_hi) & 0xFFFFFFFF) << 32
                      for r, v in enumerate(values)]
        self.barrier()  # nobody publishes again before everybody compared
        return values

    def _signal_region(self, name: Any, words: Any, free_start: int) -> GMPtr:
        """``words`` zeroed int32 words named ``name`` of the signal matrix, at or after word
        ``free_start`` (the users' free range, which the kernels' layout knows), 64-byte aligned
        and the same on every rank. Collective; see ``rt.signal_region``."""
        regions = self.windows.regions
        start = regions.reserve(name, words, free_start)
        self.signals[start:start + words] = 0  # before the barrier: no peer has notified yet
        self._regions_digest = zlib.crc32(f"{name}\0{words}".encode(), self._regions_digest)
        digests = self._compare(C.R_SIGREGIONS, self._regions_digest & 0x7FFFFFFF)
        if len(set(digests)) != 1:
            odd = [r for r, d in enumerate(digests) if d != digests[0]]
            raise ArgumentError(
                f"rt.signal_region: signal regions are not symmetric (ranks {odd} differ from rank "
                f"0; this rank's call #{len(regions.named())} asked for {name!r}, words={words}); "
                "every rank must make the same calls, same names and sizes, in the same order")
        return self.signal_base + start

    def launch(self, kernel: Callable[..., Any], blocks: int | None = None, args: tuple = (),
               kwargs: dict | None = None) -> None:
        """Run ``kernel(ctx, *args, **kwargs)`` on ``blocks`` threads; return when all finish.

        If a block raises, the run aborts (every other wait anywhere raises ``Aborted``) and this
        raises :class:`KernelError` for the first block that failed on its own.
        """
        if not callable(kernel):
            raise ArgumentError(f"launch: kernel must be callable, got {type(kernel).__name__}")
        blocks = self.config.blocks if blocks is None else blocks
        if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks <= MAX_BLOCKS:
            raise ArgumentError(f"launch: blocks must be an int in [1, {MAX_BLOCKS}], got {blocks!r}")
        check_block_threads(self.nranks, blocks, "launch")
        if not isinstance(args, tuple):
            raise ArgumentError(f"launch: args must be a tuple, got {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ArgumentError(f"launch: kwargs must be a dict (or None), got {type(kwargs).__name__}")
        kwargs = dict(kwargs or {})
        self.launches += 1
        self.model.launch_start()  # before peers can see this launch's count
        agents = [Agent(self, b, blocks, _seed(self.config.seed, self.rank, self.launches, b))
                  for b in range(blocks)]
        for a in agents:
            a.set_state(C.IDLE)
            a.kernel = kernel
            a.pipes = self.model.block(a)
            a.fences = a.pipes if a.pipes.acts_on_fences else None
            if a.hooks is not None:
                HOOKED[0] = True
        self.agents = agents
        self.ctl.set_rank(self.rank, C.R_BLOCKS, blocks)
        self.ctl.set_rank(self.rank, C.R_LAUNCHES, self.launches)
        self.host_agent.set_state(C.JOINING)
        errors: list[tuple[int, BaseException, str]] = []
        threads = [threading.Thread(target=self._block_main, args=(a, kernel, args, kwargs, errors),
                                    name=f"shmcomm-r{self.rank}-b{a.block_idx}", daemon=True)
                   for a in agents]
        try:
            for t in threads:
                t.start()
            self.model.host_join()
            for t in threads:
                t.join()
        finally:
            self.host_agent.start_running()
            self.agents = []
            self.model.launch_end()
        if errors:
            own = [e for e in errors if not isinstance(e[1], Aborted)]
            block, exc, tb = (own or errors)[0]
            err = KernelError(self.rank, block, exc, tb)
            if own:
                self.block_failures.append(err)
            raise err

    def _block_main(self, agent: Agent, kernel: Callable, args: tuple, kwargs: dict,
                    errors: list) -> None:
        bind(agent)
        agent.start_running()
        agent.set_active(True)
        try:
            agent.pipes.start()
            kernel(DeviceContext(agent), *args, **kwargs)
            agent.pipes.finish()
            agent.set_state(C.DONE)
        except BaseException as exc:  # every failure of a block is reported, then aborts the run
            agent.pipes.stop()
            agent.set_state(C.FAILED)
            if not isinstance(exc, Aborted):
                self.ctl.abort(C.ABORT_FAILURE)
            errors.append((agent.block_idx, exc, traceback.format_exc()))
        finally:
            agent.set_active(False)
            bind(None)

    def barrier(self) -> None:
        """Block until every rank's host has called ``barrier`` as often as this one."""
        n = self.nranks
        self.model.barrier_enter()
        arrived = self._hostbar.words[0].add(1)  # and wakes the sleepers
        target = (arrived // n + 1) * n
        self.model.host_wait(self._hostbar, target, WaitCmp.GE)
        wait_until(self.host_agent, self._hostbar, target, WaitCmp.GE)
        self.model.barrier_exit()

    def reset_signals(self) -> None:
        """Collectively zero the signal matrices: zero this rank's, then wait for every rank.

        Like ``aclrtMemset`` + a host barrier: a fast peer's first signal of the next launch can
        never be wiped (NVSHMEM PR #98), because nobody launches before everybody has zeroed.
        """
        self.barrier()  # nobody may still be reading or writing the old values
        self.signals.fill(0)
        self.barrier()

    def __repr__(self) -> str:
        return f"RankRuntime(rank={self.rank}/{self.nranks}, launches={self.launches})"


def _i32(u32: int) -> int:
    """An unsigned 32-bit value as the int32 a control word stores."""
    return u32 - (1 << 32) if u32 >= 1 << 31 else u32


def _seed(seed: int, rank: int, launch: int, slot: int) -> int:
    """A per-(rank, launch, block) seed derived from the run's seed, stable across runs."""
    h = hashlib.blake2b(f"{seed}:{rank}:{launch}:{slot}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")
