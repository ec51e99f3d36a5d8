"""Root collectives over a ``ParallelGroup``: ``TBROADCAST``, ``TSCATTER``, ``TGATHER``, ``TREDUCE``.

PTO semantics (``docs/isa/comm/T{BROADCAST,SCATTER,GATHER,REDUCE}.md``):

* **Only the root calls them.** The calling rank must own ``group.tensors[group.root]``; the other
  ranks only keep their tensors allocated and (for TREDUCE / TGATHER) ready. A call from any other
  rank raises :class:`ShmcommError` naming the caller and the root (undefined behaviour on
  hardware).
* **No synchronization inside.** Like ``TPUT`` / ``TGET`` they only move data: the kernel signals
  readiness before (the members' data is final) and completion after (drain with
  ``pipe_barrier(PIPE_ALL)`` + ``dsb(DSB_DDR)``, then ``TNOTIFY``). Nothing drains at the end.
* **Row-dimension split.** ``TSCATTER`` / ``TGATHER`` split / concatenate the root's tensor along
  the row dimension (DIM_3, the next-to-last): a root tensor of shape ``(..., N*H, W)`` maps to
  member tensors of shape ``(..., H, W)``, member ``i`` taking rows ``[i*H, (i+1)*H)`` of every
  outer index. ``TBROADCAST`` / ``TREDUCE`` use tensors of one shape.
* **Chunking.** Data larger than the staging tile moves in tile-sized chunks (2-D sliding);
  two tiles (``ping``, ``pong``) alternate with ``EVENT_ID0`` / ``EVENT_ID1`` as PTO's overloads.

``TREDUCE``'s element-wise step (PTO's ``TADD`` / ``TMAX`` / ``TMIN`` on ``PIPE_V``) runs on the
block's thread at issue, so it first completes the loads it reads (``pipe_barrier(PIPE_MTE2)``):
conservative under hazard mode, exact in eager mode.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .config import MAX_RANKS
from .core import agent as _agent
from .core.copy import chunks, copy_through
from .core.gm import GlobalTensor
from .core.tile import Tile
from .errors import ArgumentError, ShmcommError
from .pipe import RECORD, TLOAD, TSTORE, RecordEvent, pipe_barrier, set_flag, wait_events, wait_flag
from .types import EVENT_ID0, PIPE_MTE2, PIPE_MTE3, ReduceOp, check_enum

__all__ = ["ParallelGroup", "TBROADCAST", "TSCATTER", "TGATHER", "TREDUCE"]

_UFUNCS = (np.add, np.maximum, np.minimum)  # by ReduceOp value: Sum, Max, Min


class ParallelGroup:
    """The ranks of a root collective: one ``GlobalTensor`` per member, and the root's index.

    ``tensors[i]`` is member ``i``'s tensor, usually ``GlobalTensor(GetRemotePtr(ctx, p, r), shape)``
    (PTO's ``MakeParallelGroup``); ``root`` indexes ``tensors`` and must be the caller's own.
    """

    __slots__ = ("tensors", "nranks", "root")

    def __init__(self, tensors: Sequence[GlobalTensor], nranks: int | None = None, root: int = 0) -> None:
        tensors = tuple(tensors)
        if nranks is None:
            nranks = len(tensors)
        if isinstance(nranks, bool) or not isinstance(nranks, int) or not 1 <= nranks <= MAX_RANKS:
            raise ArgumentError(f"ParallelGroup: nranks must be an int in [1, {MAX_RANKS}], got {nranks!r}")
        if len(tensors) != nranks:
            raise ArgumentError(f"ParallelGroup: {len(tensors)} tensors given for nranks={nranks}")
        for i, t in enumerate(tensors):
            if not isinstance(t, GlobalTensor):
                raise ArgumentError(
                    f"ParallelGroup: tensors[{i}] must be a GlobalTensor, got {type(t).__name__}")
            if t.dtype != tensors[0].dtype:
                raise ArgumentError(
                    f"ParallelGroup: tensors[{i}] has dtype {t.dtype}, tensors[0] has {tensors[0].dtype}")
            if t.shape != tensors[0].shape:
                raise ArgumentError(
                    f"ParallelGroup: tensors[{i}] has shape {t.shape}, tensors[0] has {tensors[0].shape}")
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < nranks:
            raise ArgumentError(f"ParallelGroup: root must be an int in [0, {nranks}), got {root!r}")
        self.tensors, self.nranks, self.root = tensors, nranks, root

    def GetRootIdx(self) -> int:
        """The root's index in ``tensors`` (PTO's ``GetRootIdx``)."""
        return self.root

    def GetSize(self) -> int:
        """The number of members (PTO's ``GetSize``)."""
        return self.nranks

    def __getitem__(self, i: int) -> GlobalTensor:
        """Member ``i``'s tensor (PTO's ``parallelGroup[i]``)."""
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.nranks:
            raise ArgumentError(f"ParallelGroup[i]: i must be an int in [0, {self.nranks}), got {i!r}")
        return self.tensors[i]

    def __len__(self) -> int:
        return self.nranks

    @property
    def root_rank(self) -> int:
        """The rank whose window holds the root's tensor (the only rank that may call)."""
        return self.tensors[self.root].ptr.rank

    def __repr__(self) -> str:
        t = self.tensors[0]
        return (f"ParallelGroup(nranks={self.nranks}, root={self.root} (rank {self.root_rank}), "
                f"shape={t.shape}, {t.dtype})")


# --- checks -----------------------------------------------------------------------------------

def _check_group(op: str, group: Any) -> ParallelGroup:
    if not isinstance(group, ParallelGroup):
        raise ArgumentError(f"{op}: group must be a ParallelGroup, got {type(group).__name__}")
    me = _agent.current().rank
    if me != group.root_rank:
        raise ShmcommError(
            f"{op}: called on rank {me}, but the group's root is index {group.root} (rank "
            f"{group.root_rank}); only the root calls a root collective, the other members "
            "just keep their tensors ready")
    return group


def _check_tiles(op: str, tiles: tuple, dtype: np.dtype) -> None:
    for t in tiles:
        if not isinstance(t, Tile):
            raise ArgumentError(f"{op}: staging tile must be a Tile from ctx.tile(), got {type(t).__name__}")
        if t.dtype != dtype:
            raise ArgumentError(f"{op}: staging tile dtype {t.dtype} differs from the data's {dtype}")


def _check_local(op: str, name: str, g: Any, group: ParallelGroup) -> GlobalTensor:
    if not isinstance(g, GlobalTensor):
        raise ArgumentError(f"{op}: {name} must be a GlobalTensor, got {type(g).__name__}")
    if g.dtype != group.tensors[0].dtype:
        raise ArgumentError(f"{op}: {name} dtype {g.dtype} differs from the group's {group.tensors[0].dtype}")
    return g


def _check_same_shape(op: str, name: str, g: GlobalTensor, group: ParallelGroup) -> None:
    if (g.rows, g.cols) != (group.tensors[0].rows, group.tensors[0].cols):
        raise ArgumentError(f"{op}: {name} shape {g.shape} differs from the group's {group.tensors[0].shape}")


def _tiles_events(op: str, tile: Tile, more: tuple) -> tuple:
    """The staging tiles (``tile`` and an optional pong) after waiting for the trailing event
    tokens of ``more`` (PTO's ``WaitEvents&...``)."""
    pong = more[0] if more and (isinstance(more[0], Tile) or more[0] is None) else None
    events = more[1:] if more and (isinstance(more[0], Tile) or more[0] is None) else more
    if events:
        wait_events(events, op)
    return (tile,) if pong is None else (tile, pong)


def _split_tiles(op: str, first: Tile, more: tuple) -> tuple[tuple, tuple]:
    """(tiles, rest): ``first`` plus an optional pong tile at the front of ``more``."""
    if more and isinstance(more[0], Tile):
        return (first, more[0]), more[1:]
    return (first,), more


def _row_blocks(op: str, whole: GlobalTensor, member: GlobalTensor,
                n: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(i, whole_rows, member_rows)`` 2-D row ranges of the DIM_3 split."""
    ws = whole.shape if len(whole.shape) > 1 else (1,) + whole.shape
    ms = member.shape if len(member.shape) > 1 else (1,) + member.shape
    if ws[:-2] != ms[:-2] or ws[-1] != ms[-1] or ws[-2] != n * ms[-2]:
        raise ArgumentError(
            f"{op}: the root tensor's shape {whole.shape} must be the members' {member.shape} with "
            f"the row dimension (next-to-last) {n} times as long")
    h = ms[-2]
    outer = whole.rows // ws[-2] if ws[-2] else 0
    for o in range(outer):
        for i in range(n):
            yield i, o * n * h + i * h, o * h, h


def _move(op: str, dsts: Sequence[GlobalTensor], src: GlobalTensor, tiles: tuple) -> None:
    """Copy ``src`` into every tensor of ``dsts`` through UB (TPUT's pipeline, no final drain).
    The model's hooks see one ``copy_begin`` / ``copy_end`` per destination, around the move."""
    agent = _agent.current()
    hooks = agent.hooks
    if hooks is not None:
        for d in dsts:
            hooks.copy_begin(op, d, src)
    copy_through(agent.pipes, dsts, src, tiles, 0, op)
    if hooks is not None:
        for _ in dsts:
            hooks.copy_end(op)


# --- the collectives --------------------------------------------------------------------------

def TBROADCAST(group: ParallelGroup, src: GlobalTensor, tile: Tile, *more: Any) -> RecordEvent:
    """Root copies local ``src`` into every member's tensor (``dst^(k) = src`` for all k).

    Each chunk is loaded once into UB and stored to every member; a member tensor that is
    ``src`` itself is skipped. ``pong`` enables ping-pong staging.
    """
    group = _check_group("TBROADCAST", group)
    _check_local("TBROADCAST", "src", src, group)
    _check_same_shape("TBROADCAST", "src", src, group)
    tiles = _tiles_events("TBROADCAST", tile, more)
    _check_tiles("TBROADCAST", tiles, src.dtype)
    dsts = [g for g in group.tensors if not (g.ptr == src.ptr and g.row_stride == src.row_stride)]
    _move("TBROADCAST", dsts, src, tiles)
    return RECORD


def TSCATTER(group: ParallelGroup, src: GlobalTensor, tile: Tile, *more: Any) -> RecordEvent:
    """Root splits local ``src`` along the row dimension: member ``i`` gets rows ``[i*H, (i+1)*H)``."""
    group = _check_group("TSCATTER", group)
    _check_local("TSCATTER", "src", src, group)
    tiles = _tiles_events("TSCATTER", tile, more)
    _check_tiles("TSCATTER", tiles, src.dtype)
    cols = src.cols
    for i, wr, mr, h in _row_blocks("TSCATTER", src, group.tensors[0], group.nranks):
        _move("TSCATTER", (group.tensors[i].chunk(mr, mr + h, 0, cols),),
              src.chunk(wr, wr + h, 0, cols), tiles)
    return RECORD


def TGATHER(group: ParallelGroup, dst: GlobalTensor, tile: Tile, *more: Any) -> RecordEvent:
    """Root concatenates every member's tensor along the row dimension into local ``dst``."""
    group = _check_group("TGATHER", group)
    _check_local("TGATHER", "dst", dst, group)
    tiles = _tiles_events("TGATHER", tile, more)
    _check_tiles("TGATHER", tiles, dst.dtype)
    cols = dst.cols
    for i, wr, mr, h in _row_blocks("TGATHER", dst, group.tensors[0], group.nranks):
        _move("TGATHER", (dst.chunk(wr, wr + h, 0, cols),),
              group.tensors[i].chunk(mr, mr + h, 0, cols), tiles)
    return RECORD


def TREDUCE(group: ParallelGroup, dst: GlobalTensor, acc: Tile, recv: Tile, *more: Any) -> RecordEvent:
    """Root reduces every member's tensor element-wise into local ``dst``.

    Forms, as PTO's overloads: ``TREDUCE(group, dst, acc, recv, op)`` and the ping-pong form
    ``TREDUCE(group, dst, acc, ping, pong, op)``; ``op`` is a ``ReduceOp`` (Sum, Max, Min). Per
    chunk: load the root's part into ``acc``, then each other member's into ``recv`` and combine
    (members in index order after the root), then store ``acc`` to ``dst``. Integer sums wrap.
    """
    group = _check_group("TREDUCE", group)
    _check_local("TREDUCE", "dst", dst, group)
    k = len(more)
    while k and callable(getattr(more[k - 1], "wait", None)) and not isinstance(more[k - 1], Tile):
        k -= 1  # trailing event tokens (PTO's WaitEvents&...)
    if k < len(more):
        wait_events(more[k:], "TREDUCE")
    recvs, rest = _split_tiles("TREDUCE", recv, more[:k])
    if len(rest) != 1:
        raise ArgumentError("TREDUCE: expected (group, dst, acc, recv, op) or "
                            "(group, dst, acc, ping, pong, op)")
    op = check_enum(ReduceOp, rest[0], "TREDUCE: op")
    _check_same_shape("TREDUCE", "dst", dst, group)
    tiles = (acc,) + recvs
    _check_tiles("TREDUCE", tiles, dst.dtype)
    ufunc = _UFUNCS[op]
    root = group.tensors[group.root]
    others = [g for i, g in enumerate(group.tensors) if i != group.root]
    trows = min(t.valid_row for t in tiles)  # chunks from the tiles' valid region, as pto-isa
    tcols = min(t.valid_col for t in tiles)
    j = 0
    for r0, r1, c0, c1 in chunks(dst.rows, dst.cols, trows, tcols):
        TLOAD(acc, root.chunk(r0, r1, c0, c1))
        a = acc.array[:r1 - r0, :c1 - c0]
        for g in others:
            t = recvs[j & 1] if len(recvs) == 2 else recv
            j += 1
            TLOAD(t, g.chunk(r0, r1, c0, c1))
            pipe_barrier(PIPE_MTE2)  # the vector step below runs at issue: its inputs must be in UB
            ufunc(a, t.array[:r1 - r0, :c1 - c0], out=a)
        if not others:
            pipe_barrier(PIPE_MTE2)
        TSTORE(dst.chunk(r0, r1, c0, c1), acc)
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)  # the next chunk's load into acc waits for it
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    return RECORD
