"""The host runtime users get as ``rt``: the core's rank runtime plus the collectives'
host helpers (``rt.all_reduce``, ``rt.reduce_scatter``, ``rt.all_gather``), which launch the
kernels of :mod:`shmcomm.kernels.collectives`."""

from __future__ import annotations

from typing import Any

from ..core.heap import SymmetricArray
from ..core.runtime import RankRuntime as CoreRuntime
from .collectives import host_all_gather, host_all_reduce, host_reduce_scatter


class RankRuntime(CoreRuntime):
    """``rt`` in ``host(rt)``: allocation, launches, barriers, resets, and the collectives."""

    def all_reduce(self, x: SymmetricArray, op: Any = "sum", out: SymmetricArray | None = None,
                   blocks: int | None = None, tile_elems: int | None = None) -> SymmetricArray:
        """AllReduce ``x`` across the ranks (op "sum" / "max" / "min"), in place unless ``out``.

        Collective: every rank calls it with the same shape; it launches the two-shot kernel.
        """
        return host_all_reduce(self, x, op, out, blocks, tile_elems)

    def reduce_scatter(self, x: SymmetricArray, out: SymmetricArray, op: Any = "sum",
                       blocks: int | None = None, tile_elems: int | None = None) -> SymmetricArray:
        """ReduceScatter ``x``: this rank's share of the reduction lands in ``out``; returns it.

        Shares are ``share_bounds(x.size, nranks, rank)``; ``out`` holds the longest share.
        """
        return host_reduce_scatter(self, x, out, op, blocks, tile_elems)

    def all_gather(self, x: SymmetricArray, out: SymmetricArray, blocks: int | None = None,
                   tile_elems: int | None = None) -> SymmetricArray:
        """AllGather: every rank's share (``x[:hi-lo]``) lands at its place in every ``out``."""
        return host_all_gather(self, x, out, blocks, tile_elems)
