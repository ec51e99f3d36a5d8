"""ReduceScatter, AllGather, AllReduce against numpy: any shape, dtype, op; reuse without reset."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shmcomm
from shmcomm.comm import ReduceOp
from shmcomm.kernels.barrier import EPOCH_BARRIER_OFFSET, EPOCH_BARRIER_WORDS
from shmcomm.kernels.collectives import (
    COLL_END,
    COLL_OFFSET,
    all_gather_kernel,
    all_reduce,
    all_reduce_kernel,
    max_share,
    reduce_op,
    reduce_scatter,
    share_bounds,
)

pytestmark = pytest.mark.timeout(120)

ROOT = str(ROOT)
UFUNC = {ReduceOp.Sum: np.add, ReduceOp.Max: np.maximum, ReduceOp.Min: np.minimum}
SENTINEL = 7
PAD = 16  # sentinel elements after every destination


def inputs(seed: int, nranks: int, n: int, dtype: np.dtype) -> list[np.ndarray]:
    """Every rank's input, the same in every process (a seeded generator per rank)."""
    out = []
    for r in range(nranks):
        rng = np.random.default_rng([seed, r])
        if dtype.kind == "f":
            out.append(rng.uniform(-4, 4, n).astype(dtype))
        else:
            out.append(rng.integers(-60, 60, n).astype(dtype))
    return out


def reference(xs: list[np.ndarray], op: ReduceOp) -> np.ndarray:
    # int sums wrap in the dtype, as the kernels' do; float order differences are within tolerance
    return functools.reduce(lambda a, b: UFUNC[op](a, b, dtype=a.dtype), xs)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    if want.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=1.0, rtol=0.01)
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


def _all_three_host(rt, n, dtype, op, blocks, tile_elems, seed):
    dt = np.dtype(dtype)
    xs = inputs(seed, rt.nranks, n, dt)
    share = max_share(n, rt.nranks)
    lo, hi = share_bounds(n, rt.nranks, rt.rank)
    x = rt.alloc((n + PAD,), dt)
    y = rt.alloc((n + PAD,), dt)
    s = rt.alloc((share + PAD,), dt)
    out = {}
    # AllReduce out of place, then in place
    x[:n], x[n:], y[:] = xs[rt.rank], SENTINEL, SENTINEL
    rt.all_reduce(x[:n], op, out=y[:n], blocks=blocks, tile_elems=tile_elems)
    out["ar"], out["ar_pad"] = y[:n].copy(), y[n:].copy()
    rt.all_reduce(x[:n], op, blocks=blocks, tile_elems=tile_elems)
    out["ar_inplace"], out["x_pad"] = x[:n].copy(), x[n:].copy()
    # ReduceScatter: my share of the reduction in s[:hi-lo]
    x[:n], s[:] = xs[rt.rank], SENTINEL
    got = rt.reduce_scatter(x[:n], s[:share], op, blocks=blocks, tile_elems=tile_elems)
    out["rs"], out["rs_pad"] = got.copy(), s[hi - lo:].copy()
    # AllGather: every rank's own share of its input, gathered
    s[:hi - lo], y[:] = xs[rt.rank][lo:hi], SENTINEL
    rt.all_gather(s[:share], y[:n], blocks=blocks, tile_elems=tile_elems)
    out["ag"], out["ag_pad"] = y[:n].copy(), y[n:].copy()
    return out


def check_all_three(results, nranks, n, dtype, op, seed):
    dt = np.dtype(dtype)
    xs = inputs(seed, nranks, n, dt)
    want = reference(xs, op)
    gathered = np.concatenate([xs[r][slice(*share_bounds(n, nranks, r))] for r in range(nranks)])
    for r, out in enumerate(results):
        lo, hi = share_bounds(n, nranks, r)
        assert_close(out["ar"], want)
        assert_close(out["ar_inplace"], want)
        assert_close(out["rs"], want[lo:hi])
        np.testing.assert_array_equal(out["ag"], gathered)
        for key in ("ar_pad", "x_pad", "rs_pad", "ag_pad"):
            assert (out[key] == SENTINEL).all(), f"rank {r}: {key} overwritten past the end"


@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(nranks=st.sampled_from([1, 2, 3, 5, 8]), blocks=st.integers(1, 4),
       n=st.one_of(st.integers(0, 40), st.integers(41, 3000)),
       dtype=st.sampled_from(["float32", "float16", "int32", "int16", "int8"]),
       op=st.sampled_from(list(ReduceOp)),
       tile_elems=st.one_of(st.none(), st.integers(1, 300)))
def test_collectives_match_numpy_property(nranks, blocks, n, dtype, op, tile_elems):
    seed = n * 31 + nranks
    results = shmcomm.run(_all_three_host, nranks=nranks, blocks=blocks, timeout=90,
                          args=(n, dtype, op, blocks, tile_elems, seed))
    check_all_three(results, nranks, n, dtype, op, seed)


@pytest.mark.parametrize("nranks,blocks,n,dtype,op", [
    (8, 4, 100_003, "float32", ReduceOp.Sum),   # big, not divisible by 8 x 4, default tiles
    (5, 3, 777, "float16", ReduceOp.Max),
    (3, 4, 5, "int32", ReduceOp.Min),           # fewer elements than parts: empty parts
])
def test_collectives_fixed_shapes(nranks, blocks, n, dtype, op):
    results = shmcomm.run(_all_three_host, nranks=nranks, blocks=blocks,
                          args=(n, dtype, op, blocks, None, 11))
    check_all_three(results, nranks, n, dtype, op, 11)


def test_all_reduce_at_64_ranks():
    # the limit of the context (kMaxRankNum): 64 processes on this box, small data, one block
    n = 301

    def host(rt):
        x = rt.alloc((n,), np.int32)
        x[:] = np.arange(n) % 7 + rt.rank
        rt.all_reduce(x, "sum", blocks=1)
        y = rt.alloc((n,), np.int32)
        y[:] = rt.rank
        rt.all_reduce(y, "max", blocks=1)
        return bool((x == 64 * (np.arange(n) % 7) + 64 * 63 // 2).all()) and bool((y == 63).all())

    assert all(shmcomm.run(host, nranks=64, window_bytes=1 << 20, timeout=100))


# --- reuse: many iterations in one launch, many launches, no signal reset ----------------------

def _mixed_kernel(ctx, x, s, y, n, iters, log):
    # AR, RS, AG back to back, several times; each block only reads its own parts afterwards
    for _ in range(iters):
        all_reduce(ctx, x, x, n, ReduceOp.Sum)
        reduce_scatter(ctx, x, s, n, ReduceOp.Max)
        all_gather_kernel(ctx, s, y, n)
    if ctx.block_idx == 0:
        log.append(ctx.block_num)


def test_iterations_and_launches_without_reset():
    n, iters = 1001, 3

    def host(rt):
        N = rt.nranks
        x = rt.alloc((n,), np.int32)
        s = rt.alloc((max_share(n, N),), np.int32)
        y = rt.alloc((n,), np.int32)
        checks = []
        for launch, blocks in enumerate((3, 1, 4, 2)):  # block counts change, counters persist
            base = np.arange(n, dtype=np.int32) % 5 + launch
            x[:] = base + rt.rank
            log: list = []
            rt.launch(_mixed_kernel, blocks=blocks, args=(x.ptr, s.ptr, y.ptr, n, iters, log))
            want = base.astype(np.int64) * N + N * (N - 1) // 2
            for _ in range(iters - 1):
                want = want * N
            # RS(max) of identical vectors is the vector; AG puts the shares back together
            checks.append(bool((x == want).all()) and bool((y == want).all()))
        return checks

    for checks in shmcomm.run(host, nranks=4):
        assert checks == [True] * 4


def test_collective_region_is_clear_of_the_barriers():
    assert COLL_OFFSET >= EPOCH_BARRIER_OFFSET + EPOCH_BARRIER_WORDS
    assert 4 * COLL_END <= shmcomm.Config().signal_bytes
    assert (4 * COLL_OFFSET) % 64 == 0


def test_host_signals_stay_clean_outside_the_region():
    def host(rt):
        x = rt.alloc((64,), np.float32)
        x[:] = 1
        for _ in range(3):
            rt.all_reduce(x, "max", blocks=2)
        sig = rt.signals.copy()
        return sig[:COLL_OFFSET].any() or sig[COLL_END:].any(), sig[COLL_OFFSET:COLL_END].max()

    for outside, inside in shmcomm.run(host, nranks=3):
        assert not outside and inside == 3  # 3 epochs per used block, nothing elsewhere


# --- hazard mode ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("nranks,blocks,n,dtype,op,tile_elems", [
    (3, 2, 301, "float32", ReduceOp.Sum, 50),   # chunked: many TLOAD / TSTORE in flight
    (5, 3, 97, "int16", ReduceOp.Max, 7),
    (8, 1, 64, "int8", ReduceOp.Sum, 5),
])
def test_collectives_correct_in_hazard_mode(seed, nranks, blocks, n, dtype, op, tile_elems):
    # delayed pipes and cross-rank visibility: only the drain + fence + notify ordering saves them
    results = shmcomm.run(_all_three_host, nranks=nranks, blocks=blocks, mode="hazard", seed=seed,
                          timeout=90, args=(n, dtype, op, blocks, tile_elems, seed))
    check_all_three(results, nranks, n, dtype, op, seed)


def test_all_reduce_iterations_in_hazard_mode():
    n = 2000

    def host(rt):
        x = rt.alloc((n,), np.float32)
        x[:] = rt.rank + 1
        rt.launch(all_reduce_kernel, blocks=3, args=(x.ptr, x.ptr, n, ReduceOp.Sum, 3, 96))
        return x.copy()

    for x in shmcomm.run(host, nranks=3, mode="hazard", seed=5):
        assert (x == 6 * 9).all()


# --- argument checks -------------------------------------------------------------------------

def test_bad_arguments_raise_clear_errors():
    with pytest.raises(shmcomm.ArgumentError, match="sum, max, min"):
        reduce_op("avg")
    with pytest.raises(shmcomm.ArgumentError, match="ReduceOp"):
        reduce_op(7)

    def host(rt):
        errs = []
        x = rt.alloc((10,), np.float32)
        for call in (lambda: rt.all_reduce(np.zeros(10, np.float32)),
                     lambda: rt.all_reduce(x, "prod"),
                     lambda: rt.reduce_scatter(x, x[:1]),
                     lambda: rt.all_reduce(x, out=rt.alloc((3,), np.float32))):
            try:
                call()
            except shmcomm.ArgumentError as exc:
                errs.append(str(exc))
        return errs

    errs = shmcomm.run(host, nranks=2)[0]
    assert len(errs) == 4
    assert "rt.alloc" in errs[0] and "prod" in errs[1] and "needs 5 elements" in errs[2]


def test_share_bounds_cover_every_element_once():
    for n in (0, 1, 7, 64, 1001):
        for N in (1, 3, 8, 64):
            spans = [share_bounds(n, N, r) for r in range(N)]
            assert spans[0][0] == 0 and spans[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
            assert max(hi - lo for lo, hi in spans) <= max_share(n, N)


def test_benchmark_quick_smoke(tmp_path):
    out = tmp_path / "coll"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "collectives.py"), "--quick", "--nranks", "2",
         "--blocks", "1", "--max-size", "4K", "--no-plot", "--out", str(out)],
        capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "AllReduce" in proc.stdout and "busbw" in proc.stdout
    doc = json.loads((tmp_path / "coll.json").read_text())
    assert doc["schema"] == "shmcomm.bench.collectives/2" and "loadavg_start" in doc["machine"]
    assert {r["coll"] for r in doc["rows"]} == {"rs", "ag", "ar"}
    assert all(r["wrong"] == 0 for r in doc["rows"])
    assert all(r["busbw_GiBps"] > 0 and r["memcpy_per_rank_GiBps"] > 0 for r in doc["rows"])
