"""The detector's records of the tile vector instructions: UB accesses on ``PIPE_V``.

A vector instruction (:mod:`shmcomm.vector`) reads the valid regions of its source tiles and
writes its destination's, on the block's V pipe: its clock is the block's ``V`` component, which
joins the scalar unit's clock before it issues and is ordered against MTE2 / MTE3 only by
``set_flag`` / ``wait_flag`` with ``PIPE_V`` or by ``pipe_barrier`` (see the detector). The
ranges are byte ranges of each tile's UB buffer, keyed as ``TLOAD`` / ``TSTORE`` key theirs, so
a vector write into a tile whose ``TSTORE`` is still in flight is a race on the same key.
"""

from __future__ import annotations

from typing import Any

from .shadow import WRITE
from .sites import cached_site


def _ranges(tile: Any, rows: int, cols: int) -> list[tuple[int, int]]:
    """Byte ranges of the ``rows x cols`` top-left region of ``tile`` (one per row unless whole
    rows)."""
    size = tile.array.itemsize
    row = tile.cols * size
    off = tile.uoff  # (a view's bytes in its tile's)
    if cols >= tile.cols:
        return [(off, off + rows * row)]
    return [(off + r * row, off + r * row + cols * size) for r in range(rows)]


def record_vector(model: Any, op: Any) -> None:
    """Record ``op``'s reads and its write on ``model``'s (a RaceBlockModel) V pipe clock."""
    pc = model.pv
    if not pc.joined:
        pc.join(model.vs)
        pc.joined = True
    if pc.snap is None:
        pc.snap = model._snap(pc.v)
    pc.busy = True
    site = cached_site(model.sites, model.agent)
    key = ("ub", model.rank, model.block_idx)
    accesses = [(t, r, c, 0) for t, (r, c) in op.srcs] + [(op.dst, *op.region, WRITE)]
    for tile, rows, cols, flags in accesses:
        for lo, hi in _ranges(tile, rows, cols):
            model._record((*key, tile.uid), lo, hi, flags, pc.comp, pc.snap, pc.name, op.name,
                          pc.v, site)
    model.flush_some()
