"""A pipelined AllGather whose producer's last act is a chunk notify: with and without the fence.

Block 0 of every rank is the producer: chunk by chunk it ``TPUT``s its share into every peer's
``out`` at its place, drains MTE3, fences with ``dsb(DSB_DDR)`` and adds 1 to the peer's
chunk counter for this rank. Block 1 is the consumer: it waits until every peer's counter shows
all chunks, then reads ``out`` and checks it. The producer returns right after its last notify.

Without the fence (the bug, PTOAS #744 / pypto #1826's pattern in a pipelined kernel) the
chunks may still be invisible on the peer when the counter is; in real-time runs the block's
return made them visible at once, so only a checker saw the bug. Schedule mode keeps the stores
pending past the producer's return, so the consumer reads stale data: a wrong result with the
checkers off (``hazards="pipes,visibility,lines"``).
"""

from __future__ import annotations

import numpy as np

from ...comm import TNOTIFY, TWAIT, NotifyOp, Signal, WaitCmp
from ...pipe import DSB_DDR, PIPE_MTE3, dsb, pipe_barrier
from ._common import FLAG_SLOT, expect, put, read, slot, staging

CHUNK = 64  # elements per pipelined chunk


def _ag_kernel(ctx, share, out, size, fence):
    me, n = ctx.rank, ctx.nranks
    chunks = -(-size // CHUNK)
    tile = staging(ctx, min(size, CHUNK))
    if ctx.block_idx == 0:  # producer
        for c in range(chunks):
            lo, hi = c * CHUNK, min((c + 1) * CHUNK, size)
            for peer in range(n):
                put(ctx, (out + me * size + lo).on_rank(peer), share + lo, hi - lo, tile)
            pipe_barrier(PIPE_MTE3)
            if fence:
                dsb(DSB_DDR)
            for peer in range(n):
                TNOTIFY(Signal(slot(ctx, FLAG_SLOT + me, peer)), 1, NotifyOp.AtomicAdd)
    elif ctx.block_idx == 1:  # consumer
        for src in range(n):
            TWAIT(Signal(slot(ctx, FLAG_SLOT + src)), chunks, WaitCmp.GE)
        for src in range(n):
            expect(f"rank {me} chunk data from rank {src}", read(out + src * size, size, tile),
                   np.arange(size, dtype=np.float32) + 1000.0 * src)


def _ag_host(rt, size: int, fence: bool) -> None:
    if rt.nranks > 16:
        raise ValueError("pipelined all-gather: at most 16 ranks (one counter line)")
    share = rt.alloc((size,), np.float32)
    out = rt.alloc((rt.nranks * size,), np.float32)
    share[:] = np.arange(size, dtype=np.float32) + 1000.0 * rt.rank
    rt.barrier()
    rt.launch(_ag_kernel, blocks=2, args=(share.ptr, out.ptr, size, fence))


def ag_pipelined(rt, size: int) -> None:
    """Pipelined AllGather, producer block and consumer block, drain + fence before every chunk
    notify: correct."""
    _ag_host(rt, size, True)


def bug_ag_pipelined_unfenced(rt, size: int) -> None:
    """Pipelined AllGather with the fence before the chunk notify removed (PTOAS #744, §6.B #2),
    the producer's last act being that notify: the consumer reads chunks not yet visible."""
    _ag_host(rt, size, False)
