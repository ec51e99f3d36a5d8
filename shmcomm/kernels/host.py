"""The host runtime users get as ``rt``: the core's rank runtime plus the collectives'
host helpers (``rt.all_reduce``, ``rt.reduce_scatter``, ``rt.all_gather``), which launch the
kernels of :mod:`shmcomm.kernels.collectives`, and ``rt.signal_region``, which hands out signal
words of the free range of :mod:`shmcomm.kernels.layout`."""

from __future__ import annotations

from typing import Any

from ..core.gm import GMPtr
from ..core.heap import SymmetricArray
from ..core.runtime import RankRuntime as CoreRuntime
from ..native.context import NativeDeviceContext, device_context
from .collectives import host_all_gather, host_all_reduce, host_reduce_scatter
from .layout import USER_FREE_START


class RankRuntime(CoreRuntime):
    """``rt`` in ``host(rt)``: allocation, launches, barriers, resets, and the collectives."""

    @property
    def device_context(self) -> NativeDeviceContext:
        """This rank's C++ ``DeviceContext`` (``rankId``, ``rankNum``, ``windowsIn[]``): the
        argument a native kernel's ``DeviceContext*`` / ``CommDeviceContext*`` takes (see
        :mod:`shmcomm.native`)."""
        return device_context(self)

    def signal_region(self, name: str, words: int) -> GMPtr:
        """``words`` zeroed int32 signal words for your kernels, named ``name``: their GM pointer.

        The words come from the free range of the signal matrix (``layout.USER_FREE_START`` to
        ``signal_bytes // 4``), which no library kernel ever uses, so your signals there can
        never collide with ``EpochBarrier``, the collectives or any other library region. Each
        region starts on a 64-byte line and follows the previous one; the pointer is this rank's
        (``GetRemotePtr(ctx, p, r)`` reaches rank ``r``'s copy, at the same offset).

        Collective, like ``rt.alloc``: every rank must make the same calls (same names and
        sizes) in the same order, and gets the same offsets; the call returns when every rank
        has zeroed its words, so a fast peer's first notify is never wiped. Raises
        ``ArgumentError`` when the free range has fewer than ``words`` words left (raise
        ``signal_bytes``), when ``name`` was used before in this run, or when the ranks' calls
        differ. ``rt.reset_signals()`` zeroes the regions again and keeps them.

        Example::

            flags = rt.signal_region("flags", rt.nranks)    # one word per peer
            rt.launch(kernel, args=(flags,))
            # in the kernel: TNOTIFY(Signal(GetRemotePtr(ctx, flags + ctx.rank, r)), 1, ...)
        """
        return self._signal_region(name, words, USER_FREE_START)

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
