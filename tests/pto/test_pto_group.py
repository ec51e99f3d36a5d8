"""Root collectives over a ParallelGroup: TBROADCAST, TSCATTER, TGATHER, TREDUCE (root-only)."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TBROADCAST,
    TGATHER,
    TREDUCE,
    TSCATTER,
    GetRemotePtr,
    GlobalTensor,
    ParallelGroup,
    ReduceOp,
)
from shmcomm.kernels import EpochBarrier

pytestmark = pytest.mark.timeout(120)

SENTINEL = -7


def _group(ctx, ptr, shape, root):
    return ParallelGroup([GlobalTensor(GetRemotePtr(ctx, ptr, r), shape) for r in range(ctx.nranks)],
                         ctx.nranks, root)


def _values(r, shape, dtype):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 23 + 3 * r).astype(dtype)


def _root_kernel(ctx, which, root, a, b, mshape, wshape, tile_shape, pingpong, op):
    # members' tensors are ready (host filled them), the root moves the data, a barrier publishes it
    if ctx.rank == root and ctx.block_idx == 0:
        dt = a.dtype
        tiles = [ctx.tile(tile_shape, dt) for _ in range(3 if pingpong else 2)]
        if which == "broadcast":
            TBROADCAST(_group(ctx, b, mshape, root), GlobalTensor(a, mshape), *tiles[:1 + pingpong])
        elif which == "scatter":
            TSCATTER(_group(ctx, b, mshape, root), GlobalTensor(a, wshape), *tiles[:1 + pingpong])
        elif which == "gather":
            TGATHER(_group(ctx, b, mshape, root), GlobalTensor(a, wshape), *tiles[:1 + pingpong])
        else:
            TREDUCE(_group(ctx, b, mshape, root), GlobalTensor(a, mshape), *tiles, op)
    EpochBarrier(ctx)  # drain + fence + notify: the root's stores are visible everywhere


def _run_root(which, nranks, root, mshape, tile_shape, pingpong=False, op=ReduceOp.Sum,
              dtype=np.int32, blocks=2):
    wshape = mshape[:-2] + (nranks * mshape[-2], mshape[-1])

    def host(rt):
        shape_a = wshape if which in ("scatter", "gather") else mshape
        a = rt.alloc((int(np.prod(shape_a)) + 8,), dtype)
        b = rt.alloc((int(np.prod(mshape)) + 8,), dtype)
        a[:], b[:] = SENTINEL, SENTINEL
        na, nb = int(np.prod(shape_a)), int(np.prod(mshape))
        if which in ("broadcast", "scatter"):
            a[:na] = _values(rt.rank, shape_a, dtype).ravel()
        else:
            b[:nb] = _values(rt.rank, mshape, dtype).ravel()
        rt.barrier()
        rt.launch(_root_kernel, blocks=blocks,
                  args=(which, root, a.ptr, b.ptr, mshape, wshape, tile_shape, pingpong, op))
        return a[:na].reshape(shape_a).copy(), b[:nb].reshape(mshape).copy(), a[na:].copy(), b[nb:].copy()

    return shmcomm.run(host, nranks=nranks), wshape


@pytest.mark.parametrize("nranks,root,mshape,tile,pingpong", [
    (1, 0, (3, 5), (1, 2), False),
    (4, 2, (5, 7), (2, 3), False),
    (3, 1, (2, 4, 6), (3, 4), True),
])
def test_tbroadcast_copies_root_tensor_everywhere(nranks, root, mshape, tile, pingpong):
    results, _ = _run_root("broadcast", nranks, root, mshape, tile, pingpong)
    src = _values(root, mshape, np.int32)
    for _a, b, pad_a, pad_b in results:
        np.testing.assert_array_equal(b, src)
        assert (pad_a == SENTINEL).all() and (pad_b == SENTINEL).all()


@pytest.mark.parametrize("nranks,root,mshape,tile,pingpong", [
    (4, 0, (3, 5), (2, 2), False),
    (3, 2, (2, 2, 3), (1, 3), True),   # 3-D: split along the row dimension of every outer index
    (2, 1, (1, 9), (1, 4), False),
])
def test_tscatter_splits_rows_and_tgather_concatenates_them(nranks, root, mshape, tile, pingpong):
    results, wshape = _run_root("scatter", nranks, root, mshape, tile, pingpong)
    whole = _values(root, wshape, np.int32)
    h = mshape[-2]
    for r, (_, b, _, pad_b) in enumerate(results):
        np.testing.assert_array_equal(b, whole[..., r * h:(r + 1) * h, :])
        assert (pad_b == SENTINEL).all()
    results, wshape = _run_root("gather", nranks, root, mshape, tile, pingpong)
    want = np.concatenate([_values(r, mshape, np.int32) for r in range(nranks)], axis=-2)
    a, _, pad_a, _ = results[root]
    np.testing.assert_array_equal(a, want)
    assert (pad_a == SENTINEL).all()


@pytest.mark.parametrize("op", list(ReduceOp))
@pytest.mark.parametrize("dtype,pingpong", [(np.int32, False), (np.float16, True), (np.float32, False)])
def test_treduce_combines_every_member(op, dtype, pingpong):
    nranks, root, mshape = 5, 3, (4, 9)
    results, _ = _run_root("reduce", nranks, root, mshape, (3, 4), pingpong, op, dtype)
    vals = [_values(r, mshape, dtype) for r in range(nranks)]
    f = {ReduceOp.Sum: np.add, ReduceOp.Max: np.maximum, ReduceOp.Min: np.minimum}[op]
    want = vals[0]
    for v in vals[1:]:
        want = f(want, v)
    a, _, pad_a, _ = results[root]
    np.testing.assert_allclose(a.astype(np.float64), want.astype(np.float64), atol=1.0, rtol=0.01)
    assert (pad_a == SENTINEL).all()


def _non_root_kernel(ctx, ptr, out):
    if ctx.block_idx != 0:
        return
    tile = ctx.tile((1, 4), np.int32)
    group = _group(ctx, ptr, (1, 4), 0)
    errs = []
    for call in (lambda: TBROADCAST(group, GlobalTensor(ptr, (1, 4)), tile),
                 lambda: TSCATTER(group, GlobalTensor(ptr, (1, 4)), tile),
                 lambda: TGATHER(group, GlobalTensor(ptr, (1, 4)), tile),
                 lambda: TREDUCE(group, GlobalTensor(ptr, (1, 4)), tile, tile, ReduceOp.Sum)):
        try:
            call()
        except shmcomm.ShmcommError as exc:
            errs.append(str(exc))
    out.append(errs)


def test_a_non_root_call_raises_naming_rank_and_root():
    def host(rt):
        x = rt.alloc((16,), np.int32)
        out: list = []
        rt.launch(_non_root_kernel, blocks=1, args=(x.ptr, out))
        return out[0]

    results = shmcomm.run(host, nranks=3)
    assert len(results[0]) == 2 and all("row dimension" in e for e in results[0])  # root: shape errors only
    for rank in (1, 2):
        errs = results[rank]
        assert len(errs) == 4
        for e, op in zip(errs, ("TBROADCAST", "TSCATTER", "TGATHER", "TREDUCE"), strict=True):
            assert e.startswith(op) and f"rank {rank}" in e and "root is index 0 (rank 0)" in e


def test_group_and_shape_errors():
    def host(rt):
        x = rt.alloc((64,), np.int32)
        y = rt.alloc((64,), np.float32)
        gx = GlobalTensor(x.ptr, (2, 4))
        errs = []
        for call in (lambda: ParallelGroup([gx, gx], 3, 0),
                     lambda: ParallelGroup([gx, GlobalTensor(y.ptr, (2, 4))], 2, 0),
                     lambda: ParallelGroup([gx, GlobalTensor(x.ptr, (4, 2))], 2, 0),
                     lambda: ParallelGroup([gx], 1, 1),
                     lambda: ParallelGroup([], 0, 0)):
            try:
                call()
            except shmcomm.ArgumentError as exc:
                errs.append(str(exc))
        return errs

    errs = shmcomm.run(host, nranks=1)[0]
    assert len(errs) == 5
    assert "3 tensors" not in errs[0] and "nranks=3" in errs[0]
    assert "dtype" in errs[1] and "shape" in errs[2] and "root" in errs[3] and "nranks" in errs[4]


def _bad_shape_kernel(ctx, ptr, out):
    tile = ctx.tile((1, 4), np.int32)
    group = ParallelGroup([GlobalTensor(ptr, (2, 4))], 1, 0)
    for call in (lambda: TSCATTER(group, GlobalTensor(ptr, (3, 4)), tile),
                 lambda: TREDUCE(group, GlobalTensor(ptr, (2, 4)), tile, tile, 9),
                 lambda: TBROADCAST(group, GlobalTensor(ptr, (2, 4)), ctx.tile((1, 4), np.float32))):
        try:
            call()
        except shmcomm.ArgumentError as exc:
            out.append(str(exc))


def test_bad_shapes_ops_and_tiles_are_argument_errors():
    def host(rt):
        x = rt.alloc((16,), np.int32)
        out: list = []
        rt.launch(_bad_shape_kernel, blocks=1, args=(x.ptr, out))
        return out

    errs = shmcomm.run(host, nranks=1)[0]
    assert len(errs) == 3
    assert errs[0].startswith("TSCATTER") and "row dimension" in errs[0]
    assert errs[1].startswith("TREDUCE: op") and "Sum=0" in errs[1]
    assert errs[2].startswith("TBROADCAST") and "dtype" in errs[2]
