"""The tile vector instructions (TADD ... TCOLSUM) on PIPE_V: pto-isa's names, argument order and
valid-region rules, in eager and hazard mode; ordered against TLOAD / TSTORE only by set_flag /
wait_flag with PIPE_V; seen by the race detector (a vector write racing an in-flight TSTORE)."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import GlobalTensor
from shmcomm.pipe import (
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TLOAD,
    TSTORE,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import (
    TABS,
    TADD,
    TADDS,
    TCOLSUM,
    TCVT,
    TDIV,
    TDIVS,
    TEXP,
    TEXPANDS,
    TLOG,
    TMAX,
    TMAXS,
    TMIN,
    TMINS,
    TMOV,
    TMUL,
    TMULS,
    TROWSUM,
    TSQRT,
    TSUB,
    TSUBS,
    RoundMode,
)

pytestmark = pytest.mark.timeout(120)
R, C = 4, 16
MODES = ["eager", "hazard"]


def _sync(src, dst):
    set_flag(src, dst, EVENT_ID0)
    wait_flag(src, dst, EVENT_ID0)


# pto-isa's instruction, its numpy meaning (a, b: the two source tiles)
BINARY = [(TADD, np.add), (TSUB, np.subtract), (TMUL, np.multiply), (TDIV, np.divide),
          (TMAX, np.maximum), (TMIN, np.minimum)]
SCALAR = [(TADDS, np.add), (TSUBS, np.subtract), (TMULS, np.multiply), (TDIVS, np.divide),
          (TMAXS, np.maximum), (TMINS, np.minimum)]
UNARY = [(TEXP, np.exp), (TLOG, np.log), (TSQRT, np.sqrt), (TABS, np.abs), (TMOV, lambda a: a)]


def k_ops(ctx, a, b, out):
    ta, tb, td = (ctx.tile((R, C), np.float32) for _ in range(3))
    ts = ctx.tile((R, 1), np.float32)
    tc = ctx.tile((1, C), np.float32)
    ti = ctx.tile((R, C), np.int32)
    k = 0

    def emit(t, rows=R, cols=C, dtype=np.float32):
        nonlocal k
        _sync(PIPE_V, PIPE_MTE3)
        TSTORE(GlobalTensor(out + k, (rows, cols)) if dtype == np.float32 else
               GlobalTensor(out.cast(np.int32) + k, (rows, cols)), t)
        _sync(PIPE_MTE3, PIPE_V)  # the tile is free again once the store read it
        k += R * C

    TLOAD(ta, GlobalTensor(a, (R, C)))
    TLOAD(tb, GlobalTensor(b, (R, C)))
    _sync(PIPE_MTE2, PIPE_V)
    for op, _ in BINARY:
        op(td, ta, tb)
        emit(td)
    for op, _ in SCALAR:
        op(td, ta, 3.0)
        emit(td)
    for op, _ in UNARY:
        op(td, tb)
        emit(td)
    TEXPANDS(td, 7.5)
    emit(td)
    TROWSUM(ts, ta, td)
    emit(ts, R, 1)
    TCOLSUM(tc, ta)
    emit(tc, 1, C)
    TCVT(ti, ta, RoundMode.CAST_FLOOR)
    emit(ti, dtype=np.int32)
    TADDS(td, ta, 1.0)  # a chain on V: TMUL reads what TADDS wrote, no flag between
    TMUL(td, td, tb)
    emit(td)


def _expected(a, b):
    want = [f(a, b) for _, f in BINARY] + [f(a, np.float32(3.0)) for _, f in SCALAR]
    want += [f(b) for _, f in UNARY] + [np.full((R, C), 7.5, np.float32)]
    want += [np.pad(a.sum(axis=1, keepdims=True), ((0, 0), (0, C - 1)))]
    want += [np.pad(a.sum(axis=0, keepdims=True), ((0, R - 1), (0, 0)))]
    return want


@pytest.mark.parametrize("mode", MODES)
def test_vector_instructions_compute_as_pto_isa_says(mode):
    n_out = (len(BINARY) + len(SCALAR) + len(UNARY) + 6) * R * C

    def host(rt):
        a, b = rt.alloc((R, C), np.float32), rt.alloc((R, C), np.float32)
        a[:] = np.arange(R * C, dtype=np.float32).reshape(R, C) / 7 - 3
        b[:] = np.arange(R * C, dtype=np.float32).reshape(R, C) / 5 + 1
        out = rt.alloc((n_out,), np.float32)
        rt.launch(k_ops, blocks=1, args=(a.ptr, b.ptr, out.ptr))
        return np.array(a), np.array(b), np.array(out)

    kw = dict(hazard_delay=0.001) if mode == "hazard" else {}
    a, b, out = shmcomm.run(host, nranks=1, mode=mode, seed=3, timeout=90, **kw)[0]
    got = out.reshape(-1, R, C)
    want = _expected(a, b)
    for i, w in enumerate(want[:-2]):
        np.testing.assert_allclose(got[i], w, rtol=1e-6, err_msg=f"op {i}")
    rows = got[len(want) - 2]
    np.testing.assert_allclose(rows.reshape(-1)[:R], a.sum(axis=1), rtol=1e-5)
    cols = got[len(want) - 1]
    np.testing.assert_allclose(cols.reshape(-1)[:C], a.sum(axis=0), rtol=1e-5)
    assert np.array_equal(got[len(want)].view(np.int32), np.floor(a).astype(np.int32))
    np.testing.assert_allclose(got[len(want) + 1], (a + 1) * b, rtol=1e-6)


def k_valid(ctx, out, log):
    t = ctx.tile((R, C), np.float32, valid=(2, 4))
    u = ctx.tile((R, C), np.float32, valid=(2, 4))
    TEXPANDS(t, 1.0)
    TEXPANDS(u, 2.0)
    TADD(t, t, u)  # only the 2x4 valid region: the rest of t stays 0
    _sync(PIPE_V, PIPE_MTE3)
    t.set_valid(R, C)
    TSTORE(GlobalTensor(out, (R, C)), t)
    pipe_barrier(PIPE_ALL)
    bad = ctx.tile((R, C), np.float32, valid=(3, 4))
    for fn in (lambda: TADD(t, bad, u), lambda: TADD(t, u, u, 5),
               lambda: TADDS(ctx.tile((R, C), np.int32), ctx.tile((R, C), np.float32), 1),
               lambda: TEXP(ctx.tile((R, C), np.int32), ctx.tile((R, C), np.int32)),
               lambda: TCVT(t, u), lambda: TCVT(t, u, RoundMode.CAST_ODD),
               lambda: TMULS(t, u, "x")):
        try:
            fn()
        except ArgumentError as exc:
            log.append(str(exc).split(":")[0])


@pytest.mark.parametrize("mode", MODES)
def test_valid_regions_are_honoured_and_bad_calls_name_the_instruction(mode):
    def host(rt):
        out = rt.alloc((R, C), np.float32)
        log: list = []
        rt.launch(k_valid, blocks=1, args=(out.ptr, log))
        return np.array(out), log

    out, log = shmcomm.run(host, nranks=1, mode=mode, seed=1, timeout=60)[0]
    want = np.zeros((R, C), np.float32)
    want[:2, :4] = 3.0
    assert np.array_equal(out, want)
    assert log == ["TADD", "TADD", "TADDS", "TEXP", "TCVT", "TCVT", "TMULS"]


# --- the V pipe in hazard mode: ordered only by flags -------------------------------------------

def k_store_then_overwrite(ctx, out, synced):
    t = ctx.tile((1, C), np.float32)
    TEXPANDS(t, 1.0)
    _sync(PIPE_V, PIPE_MTE3)
    TSTORE(GlobalTensor(out, (1, C)), t)
    if synced:  # the store must read t before the vector pipe rewrites it
        _sync(PIPE_MTE3, PIPE_V)
    TEXPANDS(t, 2.0)
    pipe_barrier(PIPE_ALL)


def _store_then_overwrite(mode, synced, seed=1, **kw):
    kw.setdefault("detect_races", False)  # the hazard model's own effect on the data

    def host(rt):
        out = rt.alloc((C,), np.float32)
        rt.launch(k_store_then_overwrite, blocks=1, args=(out.ptr, synced))
        return np.array(out)

    return shmcomm.run(host, nranks=1, mode=mode, seed=seed, timeout=60, **kw)[0]


def test_a_synced_vector_rewrite_leaves_the_stored_data():
    assert np.array_equal(_store_then_overwrite("eager", True), np.ones(C, np.float32))
    for seed in (1, 2, 3):
        assert np.array_equal(_store_then_overwrite("hazard", True, seed, hazard_delay=0.05),
                              np.ones(C, np.float32)), seed


def test_hazard_mode_queues_vector_work_on_v():
    """Without the MTE3 -> V flag the rewrite is queued on V beside the store on MTE3: for seed
    1 its due time comes first, so the store reads the rewritten tile (eager: the old one)."""
    assert np.array_equal(_store_then_overwrite("eager", False), np.ones(C, np.float32))
    assert np.array_equal(_store_then_overwrite("hazard", False, 1, hazard_delay=2.0,
                                                hazards="pipes"), np.full(C, 2.0, np.float32))


def test_a_vector_write_racing_an_in_flight_tstore_is_reported():
    with pytest.raises(shmcomm.RunError) as info:
        _store_then_overwrite("eager", False, detect_races=True)
    text = str(info.value)
    assert "data race" in text and "UB tile" in text, text
    assert "TEXPANDS" in text and "TSTORE" in text, text
    assert "MTE3 -> V" in text or "V -> MTE3" in text, text


def test_the_synced_rewrite_is_no_race():
    assert np.array_equal(_store_then_overwrite("hazard", True, detect_races=True),
                          np.ones(C, np.float32))
