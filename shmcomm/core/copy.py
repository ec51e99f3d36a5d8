"""The chunked GM -> UB -> GM pipeline behind ``TPUT``, ``TGET`` and the root collectives.

As pto-isa's a2a3 backend (``include/pto/comm/a2a3/TPut.hpp`` / ``TGet.hpp``):

* chunks come from the staging tile's **valid region** (``GetValidRow`` x ``GetValidCol``), not
  its physical shape; the outer dimensions (DIM_0..DIM_2) are looped and each ``(DIM_3, DIM_4)``
  slab is cut into chunks;
* data that fits the valid region in one piece moves in one ``TLOAD`` / ``TSTORE`` with the
  MTE2 -> MTE3 and MTE3 -> MTE2 events on ``EVENT_ID0``, with no ``pipe_barrier`` for TPUT and
  one before the store for TGET (and for either's ping-pong form);
* a chunked single-tile move runs each chunk the same way with a ``pipe_barrier(PIPE_ALL)``
  before its store, except that a whole-tile chunk of a move of 8-16 chunks (TPUT; 8 or more for
  TGET) splits the tile in two halves and ping-pongs them on ``EVENT_ID0`` / ``EVENT_ID1``;
* with ping / pong tiles the chunks alternate tiles and events, each store preceded by
  ``wait_flag`` and ``pipe_barrier(PIPE_ALL)``, the last one flushed at the end.

The root collectives (``TBROADCAST`` / ``TSCATTER`` / ``TGATHER``, ``a2a3/T*.hpp``) chunk the same
way but issue no ``pipe_barrier`` anywhere and never split a tile.

Nothing drains after the last store. The caller has checked every argument; the work goes
straight to the block's execution model.

``TPUT_ASYNC`` / ``TGET_ASYNC`` use none of this: their :class:`DmaCopy` goes to the block's DMA
engine (``BlockModel.dma_post``), which no pipe instruction drains.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..types import EVENT_ID0, EVENT_ID1, PIPE_ALL, PIPE_MTE2, PIPE_MTE3

if TYPE_CHECKING:
    from .gm import GlobalTensor
    from .model import BlockModel
    from .tile import Tile

# pto-isa switches a single-tile move to intra-tile ping-pong for this many chunks
INTRA_PINGPONG_CHUNKS = {"TPUT": (8, 16), "TGET": (8, 1 << 62)}


def chunks(rows: int, cols: int, trows: int, tcols: int) -> Iterator[tuple[int, int, int, int]]:
    """``(r0, r1, c0, c1)`` of the tile-sized chunks of a ``rows x cols`` region, row-major."""
    for r0 in range(0, rows, trows):
        r1 = min(r0 + trows, rows)
        for c0 in range(0, cols, tcols):
            yield r0, r1, c0, min(c0 + tcols, cols)


def _slab_pairs(dsts: Sequence[GlobalTensor],
                src: GlobalTensor) -> Iterator[tuple[GlobalTensor, list[GlobalTensor]]]:
    """``(src_slab, dst_slabs)`` per outer index: pto-isa's DIM_0..DIM_2 loop (a destination
    of another 5-D shape but the same 2-D form moves as one 2-D slab)."""
    if all(d.shape5 == src.shape5 for d in dsts) and src.shape5[:3] != (1, 1, 1):
        s = src.shape5
        for i0 in range(s[0]):
            for i1 in range(s[1]):
                for i2 in range(s[2]):
                    yield src.slab(i0, i1, i2), [d.slab(i0, i1, i2) for d in dsts]
    else:
        yield _flat(src), [_flat(d) for d in dsts]


def _flat(g: GlobalTensor) -> GlobalTensor:
    return g if g.shape5[:3] == (1, 1, 1) else g.chunk(0, g.rows, 0, g.cols)


def _chunk_list(dsts: Sequence[GlobalTensor], src: GlobalTensor, vr: int, vc: int) -> list:
    return [(s.chunk(r0, r1, c0, c1), [d.chunk(r0, r1, c0, c1) for d in ds], r1 - r0, c1 - c0)
            for s, ds in _slab_pairs(dsts, src)
            for r0, r1, c0, c1 in chunks(s.rows, s.cols, vr, vc)]


def copy_through(pipes: BlockModel, dsts: Sequence[GlobalTensor], src: GlobalTensor,
                 tiles: tuple[Tile, ...], atomic: int = 0, op: str = "TPUT") -> None:
    """Copy ``src`` into every tensor of ``dsts`` through UB: each chunk loaded once, stored to
    all (``atomic``: accumulate). ``op`` picks pto-isa's intra-tile ping-pong threshold."""
    if not dsts or src.rows == 0 or src.cols == 0:
        return
    ping = tiles[0]
    vr, vc = ping.valid_row, ping.valid_col
    p2p = op in INTRA_PINGPONG_CHUNKS  # TPUT / TGET: pto-isa's barriers and intra-tile split
    one_piece = src.rows <= vr and src.cols <= vc and src.row_stride is not None \
        and all(d.row_stride is not None for d in dsts)
    if len(tiles) == 2:
        if one_piece:  # pto-isa: no ping-pong benefit; one transfer, with its barrier
            _once(pipes, dsts, src, ping, atomic, p2p)
            return
        _pingpong(pipes, [(s, ds) for s, ds, _, _ in _chunk_list(dsts, src, vr, vc)], ping,
                  tiles[1], atomic, p2p)
        return
    if one_piece:  # TPUT inlines this path without a barrier; TGET's goes through TransferOnce
        _once(pipes, dsts, src, ping, atomic, op == "TGET")
        return
    work = _chunk_list(dsts, src, vr, vc)
    lo, hi = INTRA_PINGPONG_CHUNKS.get(op, (0, -1))
    intra = p2p and (vr, vc) == (ping.rows, ping.cols) and vr >= 2 and vr % 2 == 0 \
        and lo <= len(work) <= hi
    halves: tuple[Tile, ...] = (ping.rows_view(0, vr // 2), ping.rows_view(vr // 2, vr // 2)) if intra else ()
    for s, ds, r, c in work:
        if intra and r == ping.rows and c == ping.cols:
            h = r // 2
            _pingpong(pipes, [(s.chunk(0, h, 0, c), [d.chunk(0, h, 0, c) for d in ds]),
                              (s.chunk(h, r, 0, c), [d.chunk(h, r, 0, c) for d in ds])],
                      halves[0], halves[1], atomic, True)
        else:
            _once(pipes, ds, s, ping, atomic, p2p)


def _store(pipes: BlockModel, dsts: Sequence[GlobalTensor], tile: Tile, event: int, atomic: int,
           barrier: bool) -> None:
    """Wait for the tile's load (MTE2 -> MTE3 on ``event``), [pipe_barrier], then the TSTOREs."""
    pipes.wait_flag(PIPE_MTE2, PIPE_MTE3, event)
    if barrier:
        pipes.barrier(PIPE_ALL)
    for d in dsts:
        pipes.store(d, tile, atomic)


def _once(pipes: BlockModel, dsts: Sequence[GlobalTensor], src: GlobalTensor, tile: Tile,
          atomic: int, barrier: bool) -> None:
    """One transfer: TLOAD, MTE2 -> MTE3 on EVENT_ID0, [pipe_barrier], TSTOREs, MTE3 -> MTE2."""
    pipes.load(tile, src)
    pipes.set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    _store(pipes, dsts, tile, EVENT_ID0, atomic, barrier)
    pipes.set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    pipes.wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)


def _pingpong(pipes: BlockModel, work: list, ping: Tile, pong: Tile, atomic: int,
              barrier: bool) -> None:
    """pto-isa's double buffering: store chunk k from one tile while loading k+1 into the other
    (``EVENT_ID0`` for ping, ``EVENT_ID1`` for pong)."""
    pending = None  # (dsts, tile, event) loaded and not yet stored
    use_ping = True
    for src, dsts in work:
        tile, ev = (ping, EVENT_ID0) if use_ping else (pong, EVENT_ID1)
        if pending is not None:
            pdsts, ptile, pev = pending
            _store(pipes, pdsts, ptile, pev, atomic, barrier)
            pipes.load(tile, src)
            pipes.set_flag(PIPE_MTE3, PIPE_MTE2, pev)
            pipes.set_flag(PIPE_MTE2, PIPE_MTE3, ev)
            pipes.wait_flag(PIPE_MTE3, PIPE_MTE2, pev)
        else:
            pipes.load(tile, src)
            pipes.set_flag(PIPE_MTE2, PIPE_MTE3, ev)
        pending = (dsts, tile, ev)
        use_ping = not use_ping
    if pending is not None:
        pdsts, ptile, pev = pending
        _store(pipes, pdsts, ptile, pev, atomic, barrier)
        pipes.set_flag(PIPE_MTE3, PIPE_MTE2, pev)
        pipes.wait_flag(PIPE_MTE3, PIPE_MTE2, pev)


# --- the asynchronous DMA engine's copies (TPUT_ASYNC / TGET_ASYNC) ------------------------------

class DmaCopy:
    """One GM -> GM copy posted to a block's DMA engine (SDMA on a2a3), outside the AI core's
    pipes: ``src``'s elements into the first as many of ``dst`` (both flat 1-D). ``seq`` counts
    the posts of its session from 1 (the event's handle); the engine's model decides when it
    lands (:meth:`land`), the last moment its source is read."""

    __slots__ = ("dst", "src", "session", "seq", "due", "landed")

    def __init__(self, dst: GlobalTensor, src: GlobalTensor, session: object, seq: int) -> None:
        self.dst, self.src, self.session, self.seq = dst, src, session, seq
        self.due = 0.0
        self.landed = False

    def land(self) -> None:
        """Move the data now (once): read ``src``, write ``dst``."""
        if self.landed:
            return
        self.landed = True
        src = self.src
        data = np.empty((1, src.cols), src.dtype)
        src.read_into(data)
        self.dst.chunk(0, 1, 0, src.cols).write_from(data)

    def __repr__(self) -> str:
        state = "landed" if self.landed else "in flight"
        return f"DmaCopy(#{self.seq}, {self.src!r} -> {self.dst!r}, {state})"
