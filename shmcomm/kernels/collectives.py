"""ReduceScatter, AllGather and AllReduce (two-shot) as PTO kernels, reusable without a reset.

Protocol (every collective, per block ``b``; ranks are ``0..N-1``, ``me`` is this rank)::

    share r   = elements [r*n//N, (r+1)*n//N)            (any n: shares differ by at most one)
    part(r,b) = block b's slice of share r, split the same way over the launch's B blocks

    enter:  pipe_barrier(PIPE_ALL); dsb(DSB_DDR)         release: my earlier stores are visible
            e = READY[b][me] + 1                          my epoch (only I add to that word)
            TNOTIFY(READY[b][me] on every rank, +1)       "my part-b buffers are ready for you"
            TWAIT(READY[b][0..N) >= e)                    everybody's are ready for me
            pipe_barrier(PIPE_ALL); dsb(DSB_DDR)          acquire
    RS:     TREDUCE(group of src_q[part(me,b)] for all q, root me) -> my part(me,b)
    --      pipe_barrier(PIPE_ALL)                        (AllReduce: RS stores retire before AG loads)
    AG:     TBROADCAST(my part(me,b) -> dst_q[part(me,b)] on every q)
    leave:  pipe_barrier(PIPE_ALL); dsb(DSB_DDR)          release: my puts have landed
            TNOTIFY(DONE[b][me] on every rank, +1)        "I read and wrote your buffers for epoch e"
            TWAIT(DONE[b][0..N) >= e)                     nobody touches my buffers any more
            pipe_barrier(PIPE_ALL); dsb(DSB_DDR)          acquire

Why it is safe without any reset. Every count only grows and every wait is ``>= e`` (never
``Set(1)`` / ``wait >= 1`` on a reused slot, the ABA problem of PTOAS #797). Part ``(r, b)`` is only
ever read (RS) and written (AG) by block ``b`` of rank ``r``, so each block synchronizes its own
part: a rank reads a peer's input only after that peer entered epoch ``e`` (READY), and a rank
returns only when every peer has finished reading its input and writing its output (DONE), so
the host or the next collective may overwrite both at once. A peer cannot be a whole epoch ahead:
entering ``e+1`` needs my DONE of ``e``. The seed's RS -> DeviceBarrier -> AG pulls in AG, which
needs the barrier between the phases; this AG pushes (put, drain, fence, notify, the PTO
put-with-signal pattern), so the RS -> AG barrier becomes the DONE round that the exit needs
anyway: two signal rounds per collective instead of three.

Signal-matrix layout (int32 words from ``ctx.signal_base``; the region ``collectives`` of the
table in :mod:`shmcomm.kernels.layout`, clear of every other library region, claimed for the run
when a block first runs a collective)::

    word                                         what                        writer      op / wait
    COLL_OFFSET + b*COLL_BLOCK_WORDS + READY + q  READY[b][q]: q's block b     rank q, b   AtomicAdd / GE e
                                                  entered its e-th collective
    COLL_OFFSET + b*COLL_BLOCK_WORDS + DONE + q   DONE[b][q]: q's block b      rank q, b   AtomicAdd / GE e
                                                  finished with my buffers

    COLL_OFFSET = 1024, READY = 0, DONE = MAX_RANKS (64), COLL_BLOCK_WORDS = 2*MAX_RANKS (128):
    each row starts on a 64-byte line; MAX_BLOCKS rows end at word 1024 + 64*128 = 9216 (36 KiB).

Data layouts: ``reduce_scatter_kernel(src[n] -> dst[share])`` puts my share at ``dst[0:len]``;
``all_gather_kernel(src[share] -> dst[n])`` reads my share from ``src[0:len]`` (``src`` may be
``dst + lo``, in place); ``all_reduce_kernel(src[n] -> dst[n])`` may run in place (``dst is src``).
``share_bounds(n, N, r)`` gives ``(lo, hi)``. Every block of every rank must call the same
collectives in the same order, with the same ``n`` (as with PTO or NCCL).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..comm import (
    TBROADCAST,
    TNOTIFY,
    TREDUCE,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    GMPtr,
    NotifyOp,
    ParallelGroup,
    ReduceOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from ..errors import ArgumentError
from ..pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier
from .layout import COLL_BLOCK_WORDS, COLL_DONE, COLL_END, COLL_OFFSET, COLL_READY, COLLECTIVES, claim

if TYPE_CHECKING:
    from ..core.heap import SymmetricArray
    from ..core.runtime import DeviceContext
    from .host import RankRuntime

TILE_BYTES = 96 * 1024  # per staging tile: big chunks amortize the ~8 us of Python per TLOAD/TSTORE
MIN_TILE_BYTES = 1024

_OPS = {"sum": ReduceOp.Sum, "max": ReduceOp.Max, "min": ReduceOp.Min}


def share_bounds(n: int, nranks: int, rank: int) -> tuple[int, int]:
    """Elements ``[lo, hi)`` of the ``n`` that rank ``rank`` owns in RS / AG (balanced split)."""
    return rank * n // nranks, (rank + 1) * n // nranks


def max_share(n: int, nranks: int) -> int:
    """The longest share: the size of a ReduceScatter output (or AllGather input) buffer."""
    return -(-n // nranks)


def reduce_op(op: Any) -> ReduceOp:
    """``op`` as a ReduceOp: a ReduceOp, its value, or "sum" / "max" / "min"."""
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise ArgumentError(f"collective: op must be one of sum, max, min; got {op!r}") from None
    if isinstance(op, bool) or not isinstance(op, int) or op not in (0, 1, 2):
        raise ArgumentError(f"collective: op must be a ReduceOp (Sum=0, Max=1, Min=2) or a name; got {op!r}")
    return ReduceOp(op)


# --- slots and per-block state ----------------------------------------------------------------

class _BlockState:
    """One block's precomputed signals and staging tiles (hot path: no per-call objects)."""

    __slots__ = ("ready_peers", "ready_all", "ready_mine", "done_peers", "done_all", "tiles")

    def __init__(self, ctx: DeviceContext, caller: str) -> None:
        me, n = ctx.rank, ctx.nranks
        with claim(COLLECTIVES, ctx.signal_base + COLL_OFFSET, caller):
            row = ctx.signal_base + COLL_OFFSET + ctx.block_idx * COLL_BLOCK_WORDS
            self.ready_peers = [Signal(GetRemotePtr(ctx, row + COLL_READY + me, r)) for r in range(n)]
            self.done_peers = [Signal(GetRemotePtr(ctx, row + COLL_DONE + me, r)) for r in range(n)]
            self.ready_all = Signal2D(row + COLL_READY, 1, n)
            self.done_all = Signal2D(row + COLL_DONE, 1, n)
            self.ready_mine = Signal(row + COLL_READY + me)
        self.tiles: dict[tuple[str, int], tuple] = {}


_states: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # agent -> _BlockState


def _state(ctx: DeviceContext, caller: str) -> _BlockState:
    """This block's state, built at its first collective (which claims the region for the run
    and checks that it fits ``signal_bytes``)."""
    agent = ctx._agent
    s = _states.get(agent)
    if s is None:
        s = _states[agent] = _BlockState(ctx, caller)
    return s


def _tiles(ctx: DeviceContext, s: _BlockState, dtype: np.dtype, tile_elems: int | None,
           n: int) -> tuple:
    """Two staging tiles ``(acc, recv)`` of ``1 x cols``, made once per block and dtype. By
    default as large as this call's ``n`` elements need, up to ``TILE_BYTES``: the UB they take
    is gone for the rest of the kernel, so a call on a small vector leaves the user's own tiles
    room (a later call on more data makes larger ones while the UB has room)."""
    key = (dtype.str, tile_elems or 0)
    t = s.tiles.get(key)
    if tile_elems is None:
        need = min(TILE_BYTES, max(64, -(-n * dtype.itemsize // 64) * 64))
        if t is not None and t[0].cols * dtype.itemsize >= need:
            return t
        left = ctx.rt.config.ub_bytes - ctx._agent.ub_used
        nbytes = min(need, left // 2 // 64 * 64)
        if t is not None and nbytes <= t[0].cols * dtype.itemsize:
            return t  # no room for larger ones: the ones made before still work (more chunks)
        if nbytes < min(need, MIN_TILE_BYTES):
            raise ArgumentError(f"collective: only {left} bytes of UB are left in this block "
                                "for the staging tiles; pass tile_elems or free the UB")
        tile_elems = max(1, nbytes // dtype.itemsize)
    elif t is not None:
        return t
    elif isinstance(tile_elems, bool) or not isinstance(tile_elems, int) or tile_elems < 1:
        raise ArgumentError(f"collective: tile_elems must be an int >= 1, got {tile_elems!r}")
    t = s.tiles[key] = (ctx.tile((1, tile_elems), dtype), ctx.tile((1, tile_elems), dtype))
    return t


# --- phases ----------------------------------------------------------------------------------

def sync_enter(s: _BlockState) -> int:
    """Release my stores, announce epoch ``e`` to every rank, wait until all announced it."""
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    e = s.ready_mine.value + 1
    for sig in s.ready_peers:
        TNOTIFY(sig, 1, NotifyOp.AtomicAdd)
    TWAIT(s.ready_all, e, WaitCmp.GE)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    return e


def sync_leave(s: _BlockState, e: int) -> None:
    """Drain and fence my puts, tell every rank I am done with its buffers, wait for all."""
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    for sig in s.done_peers:
        TNOTIFY(sig, 1, NotifyOp.AtomicAdd)
    TWAIT(s.done_all, e, WaitCmp.GE)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


def part_bounds(ctx: DeviceContext, n: int, rank: int) -> tuple[int, int]:
    """Elements ``[lo, hi)`` of part ``(rank, ctx.block_idx)``: this block's slice of a share."""
    lo, hi = share_bounds(n, ctx.nranks, rank)
    b, nb, length = ctx.block_idx, ctx.block_num, hi - lo
    return lo + b * length // nb, lo + (b + 1) * length // nb


def rs_reduce_part(ctx: DeviceContext, src: GMPtr, dst: GMPtr, lo: int, hi: int, op: ReduceOp,
                   tiles: tuple) -> None:
    """RS: reduce elements ``[lo, hi)`` of every rank's ``src`` into my ``dst`` (TREDUCE as root)."""
    if hi <= lo:
        return
    shape = (1, hi - lo)
    group = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, src + lo, r), shape) for r in range(ctx.nranks)],
                          ctx.nranks, ctx.rank)
    TREDUCE(group, GlobalTensor(dst, shape), tiles[0], tiles[1], op)


def ag_push_part(ctx: DeviceContext, src: GMPtr, dst: GMPtr, lo: int, hi: int, tiles: tuple) -> None:
    """AG: put my ``src[0:hi-lo]`` into elements ``[lo, hi)`` of every rank's ``dst`` (TBROADCAST)."""
    if hi <= lo:
        return
    shape = (1, hi - lo)
    group = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, dst + lo, r), shape) for r in range(ctx.nranks)],
                          ctx.nranks, ctx.rank)
    TBROADCAST(group, GlobalTensor(src, shape), tiles[0])


def _check_args(op_name: str, src: Any, dst: Any, n: Any, src_len: int | None = None,
                dst_len: int | None = None) -> None:
    for name, p in (("src", src), ("dst", dst)):
        if not isinstance(p, GMPtr):
            raise ArgumentError(f"{op_name}: {name} must be a GM pointer (x.ptr), got {type(p).__name__}")
    if src.dtype != dst.dtype:
        raise ArgumentError(f"{op_name}: src dtype {src.dtype} differs from dst dtype {dst.dtype}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ArgumentError(f"{op_name}: n must be an int >= 0, got {n!r}")
    for name, p, length in (("src", src, src_len), ("dst", dst, dst_len)):
        length = int(n) if length is None else length
        if length:
            p.windows.check_extent(p.rank, p.offset, length * p.itemsize, f"{op_name}: {name}")


# --- kernels: the entries only forward ---------------------------------------------------------

def reduce_scatter(ctx: DeviceContext, src: GMPtr, dst: GMPtr, n: int, op: Any = ReduceOp.Sum,
                   tile_elems: int | None = None) -> None:
    """ReduceScatter of ``n`` elements: my share of the reduction lands in ``dst[0:hi-lo]``.

    Callable inside a user's kernel (every block of every rank must call it)."""
    op = reduce_op(op)
    _check_args("reduce_scatter", src, dst, n, dst_len=max_share(n, ctx.nranks))
    s = _state(ctx, "reduce_scatter")
    tiles = _tiles(ctx, s, src.dtype, tile_elems, n)
    lo, _ = share_bounds(n, ctx.nranks, ctx.rank)
    plo, phi = part_bounds(ctx, n, ctx.rank)
    e = sync_enter(s)
    rs_reduce_part(ctx, src, dst + (plo - lo), plo, phi, op, tiles)
    sync_leave(s, e)


def all_gather(ctx: DeviceContext, src: GMPtr, dst: GMPtr, n: int, tile_elems: int | None = None) -> None:
    """AllGather into ``n`` elements of ``dst``: my share comes from ``src[0:hi-lo]``."""
    _check_args("all_gather", src, dst, n, src_len=max_share(n, ctx.nranks))
    s = _state(ctx, "all_gather")
    tiles = _tiles(ctx, s, src.dtype, tile_elems, n)
    lo, _ = share_bounds(n, ctx.nranks, ctx.rank)
    plo, phi = part_bounds(ctx, n, ctx.rank)
    e = sync_enter(s)
    ag_push_part(ctx, src + (plo - lo), dst, plo, phi, tiles)
    sync_leave(s, e)


def all_reduce(ctx: DeviceContext, src: GMPtr, dst: GMPtr, n: int, op: Any = ReduceOp.Sum,
               tile_elems: int | None = None) -> None:
    """AllReduce of ``n`` elements, two-shot (RS -> AG); ``dst`` may be ``src`` (in place)."""
    op = reduce_op(op)
    _check_args("all_reduce", src, dst, n)
    if src != dst and src.rank == dst.rank and abs(src.offset - dst.offset) < n * src.itemsize:
        raise ArgumentError("all_reduce: src and dst overlap partially; pass the same pointer "
                            "(in place) or disjoint buffers")
    s = _state(ctx, "all_reduce")
    tiles = _tiles(ctx, s, src.dtype, tile_elems, n)
    plo, phi = part_bounds(ctx, n, ctx.rank)
    e = sync_enter(s)
    rs_reduce_part(ctx, src, dst + plo, plo, phi, op, tiles)
    pipe_barrier(PIPE_ALL)  # phase separator: the RS stores retire before AG loads them
    ag_push_part(ctx, dst + plo, dst, plo, phi, tiles)
    sync_leave(s, e)


def reduce_scatter_kernel(ctx, src, dst, n, op=ReduceOp.Sum, iters=1, tile_elems=None):
    """Kernel entry: ``iters`` ReduceScatters (see :func:`reduce_scatter`)."""
    for _ in range(iters):
        reduce_scatter(ctx, src, dst, n, op, tile_elems)


def all_gather_kernel(ctx, src, dst, n, iters=1, tile_elems=None):
    """Kernel entry: ``iters`` AllGathers (see :func:`all_gather`)."""
    for _ in range(iters):
        all_gather(ctx, src, dst, n, tile_elems)


def all_reduce_kernel(ctx, src, dst, n, op=ReduceOp.Sum, iters=1, tile_elems=None):
    """Kernel entry: ``iters`` AllReduces (see :func:`all_reduce`)."""
    for _ in range(iters):
        all_reduce(ctx, src, dst, n, op, tile_elems)


# --- host helpers (rt.all_reduce and friends delegate here) ------------------------------------

def _host_ptr(what: str, x: Any) -> GMPtr:
    ptr = getattr(x, "ptr", None)
    if not isinstance(ptr, GMPtr):
        raise ArgumentError(f"{what} must be an array from rt.alloc (with .ptr), got {type(x).__name__}")
    return ptr


def host_all_reduce(rt: RankRuntime, x: SymmetricArray, op: Any = "sum",
                    out: SymmetricArray | None = None, blocks: int | None = None,
                    tile_elems: int | None = None) -> SymmetricArray:
    """Launch an AllReduce of ``x`` (every rank, same shape); in place unless ``out`` is given."""
    src = _host_ptr("all_reduce: x", x)
    dst = src if out is None else _host_ptr("all_reduce: out", out)
    if out is not None and out.size != x.size:
        raise ArgumentError(f"all_reduce: out has {out.size} elements, x has {x.size}")
    rt.launch(all_reduce_kernel, blocks=blocks, args=(src, dst, int(x.size), reduce_op(op), 1, tile_elems))
    return x if out is None else out


def host_reduce_scatter(rt: RankRuntime, x: SymmetricArray, out: SymmetricArray, op: Any = "sum",
                        blocks: int | None = None, tile_elems: int | None = None) -> SymmetricArray:
    """Launch a ReduceScatter of ``x``; my share lands in ``out[:hi-lo]`` (``out`` holds
    ``max_share(x.size, nranks)`` elements). Returns the filled view of ``out``."""
    src, dst = _host_ptr("reduce_scatter: x", x), _host_ptr("reduce_scatter: out", out)
    n = int(x.size)
    if out.size < max_share(n, rt.nranks):
        raise ArgumentError(f"reduce_scatter: out needs {max_share(n, rt.nranks)} elements, has {out.size}")
    rt.launch(reduce_scatter_kernel, blocks=blocks, args=(src, dst, n, reduce_op(op), 1, tile_elems))
    lo, hi = share_bounds(n, rt.nranks, rt.rank)
    # a view keeps the SymmetricArray class (numpy's stubs type it as a plain ndarray)
    return cast("SymmetricArray", out.reshape(-1)[: hi - lo])


def host_all_gather(rt: RankRuntime, x: SymmetricArray, out: SymmetricArray,
                    blocks: int | None = None, tile_elems: int | None = None) -> SymmetricArray:
    """Launch an AllGather: my share ``x[:hi-lo]`` of ``out.size`` elements lands in every ``out``."""
    src, dst = _host_ptr("all_gather: x", x), _host_ptr("all_gather: out", out)
    n = int(out.size)
    if x.size < max_share(n, rt.nranks):
        raise ArgumentError(f"all_gather: x needs {max_share(n, rt.nranks)} elements, has {x.size}")
    rt.launch(all_gather_kernel, blocks=blocks, args=(src, dst, n, 1, tile_elems))
    return out


__all__ = [
    "COLL_OFFSET", "COLL_READY", "COLL_DONE", "COLL_BLOCK_WORDS", "COLL_END", "share_bounds",
    "max_share", "part_bounds", "reduce_op", "sync_enter", "sync_leave", "rs_reduce_part",
    "ag_push_part", "reduce_scatter", "all_gather", "all_reduce", "reduce_scatter_kernel",
    "all_gather_kernel", "all_reduce_kernel", "host_all_reduce", "host_reduce_scatter",
    "host_all_gather",
]
