"""pto-isa's TREDUCE suite (``tests/npu/a2a3/comm/st/testcase/treduce``), case by case.

Rank ``r`` holds ``input[i] = T(i + r * 100)``; the root reduces every member's input into its
``output`` (small cases: root 0 or 1 with a ``1 x count`` tile; large-shape and ping-pong cases:
every rank is the root of its own group, tiles of ``tile_rows x cols``). The root checks every
element against the reduction of ``i + r * 100`` over the ranks; the empty case checks that the
output is untouched. Eager and hazard mode.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TREDUCE as _TREDUCE
from shmcomm.comm import GetRemotePtr, GlobalTensor, ParallelGroup, ReduceOp
from shmcomm.pipe import PIPE_ALL, TASSIGN, pipe_barrier

pytestmark = pytest.mark.timeout(900)

f32, i32 = np.float32, np.int32
S, MX, MN = ReduceOp.Sum, ReduceOp.Max, ReduceOp.Min
# (name, dtype, shape, tile rows (None: 1 x count), op, root ("all": each rank its own), form, nranks)
CASES = [
    ("FloatSmall_Sum_4Ranks", f32, (1, 256), None, S, 0, "single", 4),
    ("FloatSmall_Sum_8Ranks", f32, (1, 256), None, S, 0, "single", 8),
    ("Int32Large_Sum", i32, (1, 4096), None, S, 0, "single", 2),
    ("Int32Large_Sum_8Ranks", i32, (1, 4096), None, S, 0, "single", 8),
    ("Int32Small_Sum", i32, (1, 512), None, S, 0, "single", 2),
    ("Int32Small_Sum_8Ranks", i32, (1, 512), None, S, 0, "single", 8),
    ("Int32Small_Max", i32, (1, 256), None, MX, 0, "single", 2),
    ("Int32Small_Max_8Ranks", i32, (1, 256), None, MX, 0, "single", 8),
    ("Int32Small_Min", i32, (1, 256), None, MN, 0, "single", 2),
    ("Int32Small_Min_8Ranks", i32, (1, 256), None, MN, 0, "single", 8),
    ("Root1_FloatSmall_Sum", f32, (1, 256), None, S, 1, "single", 2),
    ("EmptyRows_FloatSmall_Sum", f32, (1, 1, 1, 0, 256), None, S, 0, "single", 2),
    ("LargeShape_Int32_128x32_tile16_Sum", i32, (128, 32), 16, S, "all", "single", 2),
    ("LargeShape_Int32_128x32_tile16_Sum_4Ranks", i32, (128, 32), 16, S, "all", "single", 4),
    ("LargeShape_Float_256x64_tile32_Sum", f32, (256, 64), 32, S, "all", "single", 2),
    ("LargeShape_Int32_128x32_tile16_Max", i32, (128, 32), 16, MX, "all", "single", 2),
    ("LargeShape_Int32_512x32_tile64_Sum", i32, (512, 32), 64, S, "all", "single", 2),
    ("LargeShape_Int32_512x32_tile64_Sum_8Ranks", i32, (512, 32), 64, S, "all", "single", 8),
    ("PingPong_Int32_128x32_tile16_Sum", i32, (128, 32), 16, S, "all", "pingpong", 2),
    ("PingPong_Int32_128x32_tile16_Sum_4Ranks", i32, (128, 32), 16, S, "all", "pingpong", 4),
    ("PingPong_Float_256x64_tile32_Sum", f32, (256, 64), 32, S, "all", "pingpong", 2),
    ("PingPong_Int32_128x32_tile16_Max", i32, (128, 32), 16, MX, "all", "pingpong", 2),
    ("PingPong_Float_256x64_tile32_Sum_8Ranks", f32, (256, 64), 32, S, "all", "pingpong", 8),
]


def treduce_kernel(ctx, inp, out, shape, tile_rows, op, root, form):
    me = ctx.rank
    g_root = me if root == "all" else root
    tensors = [GlobalTensor(GetRemotePtr(ctx, inp, r), shape) for r in range(ctx.nranks)]
    pg = ParallelGroup(tensors, ctx.nranks, g_root)
    cols = shape[-1]
    tshape = (1, cols) if tile_rows is None else (tile_rows, cols)
    acc, recv = ctx.tile(tshape, inp.dtype), ctx.tile(tshape, inp.dtype)
    TASSIGN(acc, 0x0)
    TASSIGN(recv, 0x10000 if tile_rows is None else acc.nbytes)
    if me == g_root:
        if form == "pingpong":
            pong = ctx.tile(tshape, inp.dtype)
            TASSIGN(pong, 2 * acc.nbytes)
            _TREDUCE(pg, GlobalTensor(out, shape), acc, recv, pong, op)
        else:
            _TREDUCE(pg, GlobalTensor(out, shape), acc, recv, op)
    pipe_barrier(PIPE_ALL)


def _expected(i: np.ndarray, nranks: int, op, dtype) -> np.ndarray:
    vals = np.stack([(i + r * 100).astype(dtype) for r in range(nranks)])
    return {S: vals.sum(axis=0, dtype=dtype), MX: vals.max(axis=0), MN: vals.min(axis=0)}[op]


def host(rt, cases):
    out = {}
    for name, dtype, shape, tile_rows, op, root, form in cases:
        n = int(np.prod(shape))
        cols = shape[-1]
        inp, res = rt.alloc((max(n, cols),), dtype), rt.alloc((max(n, cols),), dtype)
        i = np.arange(inp.size, dtype=np.int64)
        inp[:] = (i + rt.rank * 100).astype(dtype)
        res[:] = np.array(-1).astype(dtype)
        rt.barrier()
        rt.launch(treduce_kernel, blocks=1, args=(inp.ptr, res.ptr, shape, tile_rows, op, root, form))
        rt.barrier()
        if root != "all" and rt.rank != root:
            out[name] = None
            continue
        want = np.full(res.size, -1).astype(dtype) if n == 0 else _expected(i, rt.nranks, op, dtype)
        bad = np.flatnonzero(res != want)
        out[name] = None if not len(bad) else (
            f"rank {rt.rank}: {len(bad)} wrong, first at {bad[0]}: {res[bad[0]]!r} != {want[bad[0]]!r}")
    return out


_results: dict = {}


def _result(mode: str, nranks: int) -> dict:
    key = (mode, nranks)
    if key not in _results:
        cases = [c[:7] for c in CASES if c[7] == nranks]
        res = shmcomm.run(host, nranks=nranks, args=(cases,), mode=mode, seed=13, timeout=600)
        _results[key] = {c[0]: [r[c[0]] for r in res] for c in cases}
    return _results[key]


@pytest.mark.parametrize("mode", ["eager", "hazard"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_treduce(case, mode):
    errors = [e for e in _result(mode, case[7])[case[0]] if e]
    assert not errors, errors
