"""The chunked GM -> UB -> GM pipeline behind ``TPUT``, ``TGET`` and the root collectives.

Per chunk (pto-isa a2d8dd86): ``TLOAD`` on MTE2, an MTE2 -> MTE3 event (plus
``pipe_barrier(PIPE_ALL)`` with a single tile), the ``TSTORE`` calls on MTE3, an MTE3 -> MTE2 event
before the tile is loaded again. With ping / pong tiles the chunks alternate tiles and events
(``EVENT_ID0`` / ``EVENT_ID1``). Nothing drains at the end. The caller has checked every argument;
the work goes straight to the block's execution model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..types import EVENT_ID0, EVENT_ID1, PIPE_ALL, PIPE_MTE2, PIPE_MTE3

if TYPE_CHECKING:
    from .gm import GlobalTensor
    from .model import BlockModel
    from .tile import Tile


def chunks(rows: int, cols: int, trows: int, tcols: int) -> Iterator[tuple[int, int, int, int]]:
    """``(r0, r1, c0, c1)`` of the tile-sized chunks of a ``rows x cols`` region, row-major."""
    for r0 in range(0, rows, trows):
        r1 = min(r0 + trows, rows)
        for c0 in range(0, cols, tcols):
            yield r0, r1, c0, min(c0 + tcols, cols)


def copy_through(pipes: BlockModel, dsts: Sequence[GlobalTensor], src: GlobalTensor,
                 tiles: tuple[Tile, ...], atomic: int = 0) -> None:
    """Copy ``src`` into every tensor of ``dsts`` through UB: each chunk loaded once, stored to
    all (``atomic``: accumulate)."""
    if not dsts:
        return
    pingpong = len(tiles) == 2
    trows = min(t.rows for t in tiles)
    tcols = min(t.cols for t in tiles)
    for k, (r0, r1, c0, c1) in enumerate(chunks(src.rows, src.cols, trows, tcols)):
        tile = tiles[k & 1] if pingpong else tiles[0]
        ev = EVENT_ID1 if pingpong and k & 1 else EVENT_ID0
        pipes.load(tile, src.chunk(r0, r1, c0, c1))
        pipes.set_flag(PIPE_MTE2, PIPE_MTE3, ev)
        pipes.wait_flag(PIPE_MTE2, PIPE_MTE3, ev)
        if not pingpong:
            pipes.barrier(PIPE_ALL)
        for g in dsts:
            pipes.store(g.chunk(r0, r1, c0, c1), tile, atomic)
        pipes.set_flag(PIPE_MTE3, PIPE_MTE2, ev)
        pipes.wait_flag(PIPE_MTE3, PIPE_MTE2, ev)
