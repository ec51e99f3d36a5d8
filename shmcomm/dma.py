"""PTO's asynchronous DMA instructions: ``TPUT_ASYNC`` / ``TGET_ASYNC`` posted to a DMA engine
(SDMA on a2a3; URMA where the target has it), sessions, and the ``AsyncEvent`` a kernel waits
on or tests. Re-exported by :mod:`shmcomm.comm`, where kernels import them from.

The engine is outside the AI core: no ``pipe_barrier`` or ``dsb`` drains it; ``Wait`` lands the
copy and every earlier one of its session, and a ``Test`` that returned True has landed it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from .core import agent as _agent
from .core.copy import DmaCopy
from .core.gm import GlobalTensor, GMPtr
from .core.tile import Tile
from .errors import ArgumentError
from .pipe import wait_events as _wait_events
from .types import check_enum

__all__ = ["TPUT_ASYNC", "TGET_ASYNC", "AsyncSession", "AsyncEvent", "BuildAsyncSession",
           "DmaEngine", "SdmaBaseConfig", "SDMA_MAX_CHANNEL", "AUTO_CHANNEL_GROUP",
           "DEFAULT_SDMA_BLOCK_BYTES"]


class DmaEngine(IntEnum):
    """The engine of an asynchronous copy (PTO's ``DmaEngine``). a2a3 has ``SDMA`` only; URMA and
    RDMA are Ascend950 (a5, NPU_ARCH 3510) engines. A run whose ``target`` is ``"a5"`` accepts
    URMA, whose copies behave as SDMA's here (posted, landed at ``Wait``, seen by ``Test``);
    RDMA is not emulated."""

    SDMA = 0
    URMA = 1
    RDMA = 2


SDMA_MAX_CHANNEL = 48  # sdma_types.hpp: kSdmaMaxChannel (queues per device)
AUTO_CHANNEL_GROUP = 0xFFFFFFFF  # sdma::kAutoChannelGroupIdx: the block index
DEFAULT_SDMA_BLOCK_BYTES = 1 << 20  # sdma::kDefaultSdmaBlockBytes


class SdmaBaseConfig:
    """``sdma::SdmaBaseConfig{block_bytes, comm_block_offset, queue_num}``: the SQE block size,
    a byte offset added to both addresses of every copy, and the queues per core."""

    __slots__ = ("block_bytes", "comm_block_offset", "queue_num")

    def __init__(self, block_bytes: int = DEFAULT_SDMA_BLOCK_BYTES, comm_block_offset: int = 0,
                 queue_num: int = 1) -> None:
        for name, v, lo in (("block_bytes", block_bytes, 1), ("comm_block_offset", comm_block_offset, 0),
                            ("queue_num", queue_num, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ArgumentError(f"SdmaBaseConfig: {name} must be an int >= {lo}, got {v!r}")
        self.block_bytes, self.comm_block_offset, self.queue_num = (
            block_bytes, comm_block_offset, queue_num)

    def __repr__(self) -> str:
        return (f"SdmaBaseConfig({self.block_bytes}, {self.comm_block_offset}, "
                f"{self.queue_num})")


class AsyncSession:
    """What ``TPUT_ASYNC`` / ``TGET_ASYNC`` run in (PTO's ``AsyncSession``). ``AsyncSession()``
    is an invalid session (``valid`` False) for :func:`BuildAsyncSession` to fill. It keeps the
    copies posted in it that have not landed (``Wait`` is a quiet: it lands every earlier one)."""

    __slots__ = ("engine", "valid", "rank", "block", "workspace", "sync_id", "channel_group_idx",
                 "block_bytes", "comm_block_offset", "queue_num", "posts", "inflight", "tile")

    def __init__(self) -> None:
        self.engine = DmaEngine.SDMA
        self.valid = False
        self.rank = self.block = -1
        self.workspace: Any = None
        self.sync_id = 0
        self.channel_group_idx = AUTO_CHANNEL_GROUP
        self.block_bytes = DEFAULT_SDMA_BLOCK_BYTES
        self.comm_block_offset = 0
        self.queue_num = 1
        self.posts = 0
        self.inflight: list = []
        self.tile: Any = None

    @property
    def commBlockOffset(self) -> int:
        return self.comm_block_offset

    @property
    def queueNum(self) -> int:
        return self.queue_num

    def land_upto(self, seq: int) -> None:
        """Land every copy of this session up to post ``seq``, in post order."""
        keep = []
        for c in self.inflight:
            if c.seq <= seq:
                c.land()
            else:
                keep.append(c)
        self.inflight = keep

    def __repr__(self) -> str:
        if not self.valid:
            return "AsyncSession(invalid)"
        return (f"AsyncSession({self.engine.name}, rank {self.rank} block {self.block}, "
                f"{len(self.inflight)} in flight)")


def BuildAsyncSession(*args: Any, **kw: Any) -> Any:
    """Build the session of this block's asynchronous copies (PTO's ``BuildAsyncSession``).

    pto-isa's form: ``ok = BuildAsyncSession(scratch_tile, workspace, session, sync_id=0,
    base_config=SdmaBaseConfig(), channel_group_idx=AUTO_CHANNEL_GROUP, engine=DmaEngine.SDMA)``
    fills ``session`` (an ``AsyncSession()``) and returns whether it is valid: as on a2a3 it is
    not for ``sync_id`` outside 0-7, ``queue_num`` outside 1-48, a channel group at or past
    ``48 // queue_num`` or no workspace. ``scratch_tile`` (>= 8 bytes of UB) and ``workspace``
    (a GM pointer or tensor) are checked and otherwise unused. URMA is refused unless the run's
    ``target`` is ``"a5"`` (a2a3 has SDMA only); RDMA always is.

    The short form ``session = BuildAsyncSession(ctx[, engine][, block_bytes])`` returns a valid
    SDMA session.
    """
    if args and not isinstance(args[0], Tile):
        return _short_session(*args, **kw)
    return _build_session(*args, **kw)


def _check_engine(engine: Any) -> DmaEngine:
    engine = DmaEngine(check_enum(DmaEngine, engine, "BuildAsyncSession: engine"))
    if engine is DmaEngine.URMA and _agent.current().rt.config.target == "a5":
        return engine
    if engine is DmaEngine.URMA:
        raise ArgumentError("BuildAsyncSession: DmaEngine.URMA is an Ascend950 (a5, NPU_ARCH 3510) "
                            "engine; a2a3 has DmaEngine.SDMA only: run with target='a5' "
                            "(SHMCOMM_TARGET=a5, --target a5) for a kernel built for a5")
    if engine is not DmaEngine.SDMA:
        raise ArgumentError(f"BuildAsyncSession: DmaEngine.{engine.name} is an Ascend950 (NPU_ARCH "
                            "3510) engine that shmcomm does not emulate; a2a3 has DmaEngine.SDMA only")
    return engine


def _short_session(ctx: Any, engine: DmaEngine = DmaEngine.SDMA,
                   block_bytes: int = DEFAULT_SDMA_BLOCK_BYTES) -> AsyncSession:
    engine = _check_engine(engine)
    if isinstance(block_bytes, bool) or not isinstance(block_bytes, int) or block_bytes < 1:
        raise ArgumentError(f"BuildAsyncSession: block_bytes must be an int >= 1, got {block_bytes!r}")
    s = AsyncSession()
    _fill(s, None, 0, SdmaBaseConfig(block_bytes), AUTO_CHANNEL_GROUP, engine)
    return s


def _build_session(scratch_tile: Tile, workspace: Any, session: AsyncSession, sync_id: int = 0,
                   base_config: SdmaBaseConfig | None = None,
                   channel_group_idx: int = AUTO_CHANNEL_GROUP,
                   engine: DmaEngine = DmaEngine.SDMA) -> bool:
    engine = _check_engine(engine)
    if scratch_tile.nbytes < 8:
        raise ArgumentError(f"BuildAsyncSession: scratch_tile needs at least 8 bytes of UB, got "
                            f"{scratch_tile.nbytes}")
    if not isinstance(session, AsyncSession):
        raise ArgumentError("BuildAsyncSession: session must be an AsyncSession() to fill, got "
                            f"{type(session).__name__}")
    if workspace is not None and not isinstance(workspace, (GMPtr, GlobalTensor)):
        raise ArgumentError("BuildAsyncSession: workspace must be a GM pointer or GlobalTensor, "
                            f"got {type(workspace).__name__}")
    cfg = SdmaBaseConfig() if base_config is None else base_config
    if not isinstance(cfg, SdmaBaseConfig):
        raise ArgumentError("BuildAsyncSession: base_config must be an SdmaBaseConfig, got "
                            f"{type(cfg).__name__}")
    for name, v in (("sync_id", sync_id), ("channel_group_idx", channel_group_idx)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ArgumentError(f"BuildAsyncSession: {name} must be an int >= 0, got {v!r}")
    group = _agent.current().block_idx if channel_group_idx == AUTO_CHANNEL_GROUP else channel_group_idx
    session.valid = False
    if workspace is None or sync_id > 7 or not 1 <= cfg.queue_num <= SDMA_MAX_CHANNEL \
            or group >= SDMA_MAX_CHANNEL // cfg.queue_num:
        return False  # pto-isa's BuildSdmaSession: an invalid session
    _fill(session, workspace, sync_id, cfg, group, engine)
    return True


def _fill(s: AsyncSession, workspace: Any, sync_id: int, cfg: SdmaBaseConfig, group: int,
          engine: DmaEngine = DmaEngine.SDMA) -> None:
    agent = _agent.current()
    s.engine, s.valid, s.rank, s.block = engine, True, agent.rank, agent.block_idx
    s.workspace, s.sync_id = workspace, sync_id
    s.channel_group_idx = agent.block_idx if group == AUTO_CHANNEL_GROUP else group
    s.block_bytes, s.comm_block_offset, s.queue_num = (
        cfg.block_bytes, cfg.comm_block_offset, cfg.queue_num)
    s.posts, s.inflight = 0, []


class AsyncEvent:
    """Handle of an asynchronous copy (PTO's ``AsyncEvent{handle, engine}``).

    ``handle`` 0 (``AsyncEvent()``, or the event of an empty copy) is not ``valid()``, and its
    ``Wait`` / ``Test`` return True at once. Otherwise ``Wait(session)`` blocks until the copy,
    and every earlier copy of the session, has landed in its destination, and returns True;
    ``Test(session)`` says whether it has, without blocking. Only these say so: no
    ``pipe_barrier`` or ``dsb`` completes the DMA engine. As an event argument of another
    instruction it is waited for first.
    """

    __slots__ = ("handle", "engine", "copy", "session", "done")

    def __init__(self, handle: int = 0, engine: DmaEngine = DmaEngine.SDMA) -> None:
        self.handle, self.engine = handle, engine
        self.copy: Any = None
        self.session: AsyncSession | None = None
        self.done = handle == 0

    def valid(self) -> bool:
        """Whether the event names a posted copy (``handle != 0``)."""
        return self.handle != 0

    def Wait(self, session: AsyncSession | None = None) -> bool:
        """Block until the copy has landed; True (as pto-isa's ``Wait``)."""
        if self.done:
            return True
        self._check(session, "AsyncEvent.Wait")
        agent = _agent.current()
        agent.pipes.dma_wait(self.copy)
        self._complete(agent)
        return True

    def Test(self, session: AsyncSession | None = None) -> bool:
        """Whether the copy has landed (never blocks)."""
        if self.done:
            return True
        self._check(session, "AsyncEvent.Test")
        agent = _agent.current()
        if agent.pipes.dma_test(self.copy):
            self._complete(agent)
        return self.done

    def _complete(self, agent: Any) -> None:
        self.done = True
        hooks = agent.hooks
        if hooks is not None:
            hooks.async_complete(self)

    def wait(self) -> None:  # as an event argument of another instruction
        self.Wait()

    def _check(self, session: Any, what: str) -> None:
        if session is not None and session is not self.session:
            raise ArgumentError(f"{what}: session is not the one this copy was issued in")

    def __repr__(self) -> str:
        if not self.handle:
            return "AsyncEvent(handle=0)"
        return f"AsyncEvent(handle={self.handle}, {'done' if self.done else 'in flight'})"


def _flat_1d(op: str, name: str, g: Any) -> GlobalTensor:
    if not isinstance(g, GlobalTensor):
        raise ArgumentError(f"{op}: {name} must be a GlobalTensor, got {type(g).__name__}")
    if g.rows > 1:
        raise ArgumentError(
            f"{op}: {name} must be a flat contiguous 1-D tensor (the SDMA path's only layout, "
            f"as pto-isa); got {g!r}; view contiguous data as GlobalTensor(ptr, (n,))")
    return g


def _async(op: str, dst: Any, src: Any, session: Any, events: tuple) -> AsyncEvent:
    if events:
        _wait_events(events, op)
    if not isinstance(session, AsyncSession):
        raise ArgumentError(f"{op}: session must be an AsyncSession from BuildAsyncSession(), "
                            f"got {type(session).__name__}")
    if not session.valid:
        raise ArgumentError(f"{op}: the session is not valid (BuildAsyncSession returned False or "
                            "was not called)")
    agent = _agent.current()
    if (session.rank, session.block) != (agent.rank, agent.block_idx):
        raise ArgumentError(f"{op}: session belongs to rank {session.rank} block {session.block}, "
                            f"not to the calling {agent.where()}")
    _flat_1d(op, "dst", dst)
    _flat_1d(op, "src", src)
    if dst.dtype != src.dtype:
        raise ArgumentError(f"{op}: dst dtype {dst.dtype} differs from src dtype {src.dtype}")
    if dst.size < src.size:
        raise ArgumentError(f"{op}: dst ({dst.size} elements) is smaller than src ({src.size})")
    hooks = agent.hooks
    if src.size == 0:  # pto-isa: no transfer, the event of handle 0 (Wait returns true)
        ev = AsyncEvent(0, session.engine)
        if hooks is not None:
            hooks.async_issue(ev)
        return ev
    off = session.comm_block_offset
    if off:
        size = src.dtype.itemsize
        if off % size:
            raise ArgumentError(f"{op}: the session's comm_block_offset ({off} bytes) is not a "
                                f"multiple of the {size}-byte {src.dtype}")
        dst = GlobalTensor(dst.ptr + off // size, (dst.size,))
        src = GlobalTensor(src.ptr + off // size, (src.size,))
    session.posts += 1
    copy = DmaCopy(dst, src, session, session.posts)
    if hooks is not None:
        hooks.copy_begin(op, dst, src)
    session.inflight.append(copy)
    agent.pipes.dma_post(copy)
    if copy.landed:
        session.inflight.remove(copy)
    if hooks is not None:
        hooks.copy_end(op)
    ev = AsyncEvent(copy.seq, session.engine)
    ev.copy, ev.session, ev.done = copy, session, False
    if hooks is not None:
        hooks.async_issue(ev)
    return ev


def TPUT_ASYNC(dst: GlobalTensor, src: GlobalTensor, session: AsyncSession,
               *events: Any) -> AsyncEvent:
    """Post a copy of local ``src`` to (usually remote) ``dst`` to the block's DMA engine (GM to
    GM, no UB); returns at once.

    As a2a3's SDMA path: both tensors flat contiguous 1-D, one dtype, ``dst`` at least as long
    as ``src`` (``src``'s elements land in ``dst``'s first ones), the session's
    ``comm_block_offset`` added to both addresses. An empty ``src`` posts nothing and returns
    the event of handle 0. The copy lands when ``ev.Wait(session)`` returns or
    ``ev.Test(session)`` returns True, and at the kernel's end; until then ``dst`` may hold old
    data and ``src`` may still be read (hazard mode keeps it in flight past every
    ``pipe_barrier`` and ``dsb``).
    """
    return _async("TPUT_ASYNC", dst, src, session, events)


def TGET_ASYNC(dst: GlobalTensor, src: GlobalTensor, session: AsyncSession,
               *events: Any) -> AsyncEvent:
    """Post a copy of (usually remote) ``src`` to local ``dst``; see ``TPUT_ASYNC``."""
    return _async("TGET_ASYNC", dst, src, session, events)
