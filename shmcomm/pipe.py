"""Pipes, events, tiles and the data moves between GM and UB, in PTO's vocabulary.

An AI core issues work to several pipes that run concurrently: ``PIPE_MTE2`` moves GM -> UB
(``TLOAD``), ``PIPE_MTE3`` moves UB -> GM (``TSTORE``), ``PIPE_V`` computes, ``PIPE_S`` is the
scalar unit (``TNOTIFY``, signal reads). Ordering between pipes exists only where the kernel asks:

* ``set_flag(src, dst, id)`` / ``wait_flag(src, dst, id)``: work issued to ``dst`` after the wait
  starts only once the work issued to ``src`` before the set has completed (1-bit flag per
  ``(src, dst, id)``, ids 0-7; the wait consumes it);
* ``pipe_barrier(pipe)``: all work issued to ``pipe`` (every pipe for ``PIPE_ALL``) completes;
* ``dsb(DSB_DDR)``: completed stores become visible to other ranks (a DDR fence);
* ``dcci``: write back / invalidate data-cache lines (a no-op until the line model is on).

In eager mode everything completes at issue, as pto-isa's CPU simulator does. In hazard mode the
same calls queue work and retire it later, so a missing flag or barrier shows up. The tile vector
instructions on ``PIPE_V`` are in :mod:`shmcomm.vector`.
"""

from __future__ import annotations

from typing import Any

from .core import agent as _agent
from .core.gm import GlobalTensor, GMPtr
from .core.tile import Tile, assign, block_ub
from .errors import ArgumentError
from .types import (
    CACHELINE_OUT,
    DSB_ALL,
    DSB_DDR,
    DSB_UB,
    ENTIRE_DATA_CACHE,
    EVENT_ID0,
    EVENT_ID1,
    EVENT_ID2,
    EVENT_ID3,
    EVENT_ID4,
    EVENT_ID5,
    EVENT_ID6,
    EVENT_ID7,
    NUM_EVENTS,
    PIPE_ALL,
    PIPE_FIX,
    PIPE_M,
    PIPE_MTE1,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_NAMES,
    PIPE_S,
    PIPE_V,
    SINGLE_CACHE_LINE,
    AtomicType,
    check_atomic_dtype,
    check_enum,
)

__all__ = [
    "PIPE_S", "PIPE_V", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3", "PIPE_M", "PIPE_ALL", "PIPE_FIX",
    "EVENT_ID0", "EVENT_ID1", "EVENT_ID2", "EVENT_ID3", "EVENT_ID4", "EVENT_ID5", "EVENT_ID6",
    "EVENT_ID7", "DSB_ALL", "DSB_DDR", "DSB_UB", "SINGLE_CACHE_LINE", "ENTIRE_DATA_CACHE",
    "CACHELINE_OUT", "AtomicType", "Tile", "TLOAD", "TSTORE", "TSTORE_IMPL", "set_flag",
    "wait_flag", "pipe_barrier", "dsb", "dcci", "Event", "RecordEvent", "RECORD",
    "get_subblockid", "get_subblockdim", "TASSIGN",
]
_tls = _agent._tls


def _pipes() -> Any:
    try:
        return _tls.agent.pipes
    except AttributeError:
        return _agent.current().pipes


def _fences() -> Any:
    """The block's model if it acts on pipe_barrier / dsb, else None (eager: they are no-ops)."""
    try:
        return _tls.agent.fences
    except AttributeError:
        return _agent.current().fences


def _check_pipe(pipe: Any, what: str) -> int:
    if isinstance(pipe, bool) or not isinstance(pipe, int) or not 0 <= pipe < len(PIPE_NAMES):
        raise ArgumentError(f"{what} must be a pipe (PIPE_S=0 ... PIPE_FIX=7), got {pipe!r}")
    return pipe


def _check_event(event: Any, what: str) -> int:
    if isinstance(event, bool) or not isinstance(event, int) or not 0 <= event < NUM_EVENTS:
        raise ArgumentError(f"{what} must be an event id in [0, {NUM_EVENTS}), got {event!r}")
    return event


def _as_tensor(g: Any) -> Any:
    """A Signal / Signal2D is a GlobalTensor in PTO: ``TLOAD`` / ``TSTORE`` take its tensor."""
    return g if isinstance(g, GlobalTensor) or not isinstance(
        getattr(type(g), "tensor", None), property) else g.tensor


def _check_fit(op: str, tile: Any, g: Any) -> None:
    if not isinstance(tile, Tile):
        raise ArgumentError(f"{op}: tile must be a Tile from ctx.tile(), got {type(tile).__name__}")
    if not isinstance(g, GlobalTensor):
        raise ArgumentError(f"{op}: expected a GlobalTensor, got {type(g).__name__}")
    if g.dtype != tile.dtype:
        raise ArgumentError(f"{op}: tile dtype {tile.dtype} differs from the tensor's {g.dtype}")
    if g.row_stride is None:
        raise ArgumentError(
            f"{op}: {g!r} is strided in its outer dimensions, so it is not one block of rows; "
            "move it slab by slab (g.slab(i0, i1, i2)), as TPUT / TGET do")
    if g.rows > tile.rows or g.cols > tile.cols:
        raise ArgumentError(
            f"{op}: a {g.rows}x{g.cols} tensor does not fit a {tile.rows}x{tile.cols} tile "
            "(chunk it, or use TPUT/TGET which chunk)")


def TLOAD(tile: Tile, src: GlobalTensor) -> None:
    """Issue a GM -> UB copy of ``src`` into ``tile`` on ``PIPE_MTE2`` (viewed as rows x cols)."""
    src = _as_tensor(src)
    _check_fit("TLOAD", tile, src)
    _pipes().load(tile, src)


def TSTORE(dst: GlobalTensor, tile: Tile, atomic: AtomicType | int = AtomicType.AtomicNone) -> None:
    """Issue a UB -> GM copy of ``tile`` into ``dst`` on ``PIPE_MTE3``.

    ``AtomicType.AtomicAdd`` accumulates (``dst += tile``) atomically against every other
    AtomicAdd on the same memory, from any block or rank.
    """
    dst = _as_tensor(dst)
    _check_fit("TSTORE", tile, dst)
    atomic = check_enum(AtomicType, atomic, "TSTORE: atomic")
    if atomic:
        check_atomic_dtype(tile.dtype, "TSTORE")
    _pipes().store(dst, tile, atomic)


def TSTORE_IMPL(dst: GlobalTensor, tile: Tile, atomic: AtomicType = AtomicType.AtomicNone) -> None:
    """``TSTORE`` as the seed's manual pipeline writes it (``TSTORE_IMPL<..., AtomicType>``)."""
    TSTORE(dst, tile, atomic)


def set_flag(src_pipe: int, dst_pipe: int, event_id: int) -> None:
    """Set event ``event_id`` from ``src_pipe`` to ``dst_pipe`` once src's earlier work is done."""
    src = _check_pipe(src_pipe, "set_flag: src_pipe")
    dst = _check_pipe(dst_pipe, "set_flag: dst_pipe")
    _pipes().set_flag(src, dst, _check_event(event_id, "set_flag: event_id"))


def wait_flag(src_pipe: int, dst_pipe: int, event_id: int) -> None:
    """Make ``dst_pipe`` wait for (and consume) the event set by ``set_flag``."""
    src = _check_pipe(src_pipe, "wait_flag: src_pipe")
    dst = _check_pipe(dst_pipe, "wait_flag: dst_pipe")
    _pipes().wait_flag(src, dst, _check_event(event_id, "wait_flag: event_id"))


def pipe_barrier(pipe: int) -> None:
    """Complete all work issued to ``pipe`` (``PIPE_ALL``: to every pipe) before going on.

    It orders completion inside the block; it does not make stores visible to other ranks
    (that is ``dsb(DSB_DDR)``).
    """
    if type(pipe) is not int or not 0 <= pipe <= 7:  # type first: bool and arrays are rejected
        pipe = _check_pipe(pipe, "pipe_barrier: pipe")
    fences = _fences()
    if fences is not None:
        fences.barrier(pipe)


def dsb(mode: int = DSB_DDR) -> None:
    """Data synchronization barrier: completed stores become visible at the given level."""
    if type(mode) is not int or not DSB_ALL <= mode <= DSB_UB:  # type first: no array truth
        raise ArgumentError(f"dsb: mode must be DSB_ALL=0, DSB_DDR=1 or DSB_UB=2; got {mode!r}")
    fences = _fences()
    if fences is not None:
        fences.dsb(mode)


def dcci(ptr: Any = None, mode: int = SINGLE_CACHE_LINE, dst: int = CACHELINE_OUT) -> None:
    """Data-cache clean and invalidate of the line at ``ptr`` (or the whole cache)."""
    if type(mode) is not int or not SINGLE_CACHE_LINE <= mode <= ENTIRE_DATA_CACHE:
        raise ArgumentError(f"dcci: mode must be SINGLE_CACHE_LINE=0 or ENTIRE_DATA_CACHE=1; got {mode!r}")
    _pipes().dcci(ptr if isinstance(ptr, GMPtr) else None, mode)


# --- event tokens (pto/common/event.hpp) ---------------------------------------------------------

class RecordEvent:
    """What ``TPUT`` / ``TGET`` / the root collectives return (PTO's ``RecordEvent``): assigning it
    to an :class:`Event` records that event (``Event(src, dst, record=TPUT(...))``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "RecordEvent"


RECORD = RecordEvent()


class Event:
    """An event token between two pipes (PTO's ``Event<SrcOp, DstOp>``).

    ``record()`` sets the flag from ``src_pipe`` to ``dst_pipe`` (``set_flag``); ``wait()`` waits
    for and consumes it (``wait_flag``). Pass events as the trailing arguments of an instruction
    (``TNOTIFY(sig, 1, NotifyOp.AtomicAdd, ev)``) to wait for them first, as PTO's
    ``WaitEvents&... events``. ``record=`` records at construction (``Event e = TPUT(...)``).
    """

    __slots__ = ("src", "dst", "event_id")

    def __init__(self, src_pipe: int, dst_pipe: int, event_id: int = EVENT_ID0,
                 record: RecordEvent | None = None) -> None:
        self.src = _check_pipe(src_pipe, "Event: src_pipe")
        self.dst = _check_pipe(dst_pipe, "Event: dst_pipe")
        self.event_id = _check_event(event_id, "Event: event_id")
        if record is not None:
            if not isinstance(record, RecordEvent):
                raise ArgumentError(f"Event: record must be a RecordEvent, got {type(record).__name__}")
            self.record()

    def record(self) -> Event:
        set_flag(self.src, self.dst, self.event_id)
        return self

    def wait(self) -> Event:
        wait_flag(self.src, self.dst, self.event_id)
        return self

    def __repr__(self) -> str:
        return f"Event({PIPE_NAMES[self.src]}, {PIPE_NAMES[self.dst]}, EVENT_ID{self.event_id})"


def wait_events(events: tuple, op: str) -> None:
    """Wait for every event token of ``events`` in order (PTO's ``WaitAllEvents``)."""
    for i, ev in enumerate(events):
        w = getattr(ev, "wait", None)
        if not callable(w) or isinstance(ev, type):
            raise ArgumentError(f"{op}: event argument {i} must be an Event or AsyncEvent token, "
                                f"got {type(ev).__name__}")
        w()


def get_subblockid() -> int:
    """This vector core's index inside its AI core (``get_subblockid``): shmcomm runs one vector
    core per block, so always 0."""
    _agent.current()
    return 0


def get_subblockdim() -> int:
    """Vector cores per block (``get_subblockdim``): 1 in shmcomm (one thread per block)."""
    _agent.current()
    return 1


def TASSIGN(tile: Tile, addr: int) -> None:
    """Place ``tile`` at byte ``addr`` of this block's UB (PTO's ``TASSIGN``).

    Tiles placed over the same bytes share them, as on the NPU: a ``TLOAD`` into one while a
    queued ``TSTORE`` still reads the other is a real UB overlap race (hazard mode shows it).
    """
    if not isinstance(tile, Tile):
        raise ArgumentError(f"TASSIGN: tile must be a Tile from ctx.tile(), got {type(tile).__name__}")
    assign(tile, block_ub(_agent.current()), addr)
