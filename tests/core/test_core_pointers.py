"""Windows, GM pointers, symmetric allocation and their bounds checks."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError, ShmcommError
from shmcomm.comm import GetRemotePtr, GlobalTensor, Signal, Signal2D

pytestmark = pytest.mark.timeout(60)


def _host_pointer_checks(rt):
    base = rt.signal_base
    out = {}
    p = base + 3
    out["offset"] = p.offset
    out["remote"] = GetRemotePtr(None, p, (rt.rank + 1) % rt.nranks).rank
    x = rt.alloc((10,), np.float32)
    out["x_offset"] = x.ptr.offset
    out["x_ptr_plus"] = (x.ptr + 4).offset - x.ptr.offset
    out["slice_ptr"] = x[2:].ptr.offset - x.ptr.offset
    errors = []

    def expect(fn, *words):
        try:
            fn()
        except ArgumentError as exc:
            msg = str(exc)
            errors.append(all(w in msg for w in words) or msg)
        else:
            errors.append(f"no error for {words}")

    win = rt.windows.size
    expect(lambda: base + (win // 4 + 1), "outside", "window")
    expect(lambda: base + (-1), "outside")
    expect(lambda: GetRemotePtr(None, base, rt.nranks), "rank", f"[0, {rt.nranks})")
    expect(lambda: GetRemotePtr(None, base, -1), "rank")
    expect(lambda: Signal(base.cast(np.uint8) + 1), "int32")
    expect(lambda: Signal(x.ptr), "int32", "float32")
    expect(lambda: Signal((base.cast(np.int8) + 2).cast(np.int32)), "aligned")
    expect(lambda: Signal(base + (win // 4)), "outside")
    expect(lambda: Signal2D(base, 0, 4), "rows")
    expect(lambda: Signal2D(base, 2, 4, row_stride=3), "row_stride")
    expect(lambda: GlobalTensor(x.ptr, (10**7,)), "outside")
    expect(lambda: GlobalTensor(x.ptr, (1, 2, 3, 4, 5, 6)), "dimensions")
    expect(lambda: GlobalTensor("nope", (1,)), "GM pointer")
    expect(lambda: rt.alloc((10,), np.complex64), "dtype")
    expect(lambda: rt.alloc((rt.windows.heap_bytes,), np.float64), "heap_bytes")
    expect(lambda: base + 1.5, "int")
    out["errors"] = errors
    out["copy_plain"] = type(x.copy()) is np.ndarray
    try:
        _ = (x + 1).ptr  # arithmetic results live outside the window
    except ShmcommError:
        out["copy_ptr"] = "raises"
    return out


@pytest.mark.parametrize("nranks", [1, 3])
def test_pointers_bounds_and_symmetry(nranks):
    res = shmcomm.run(_host_pointer_checks, nranks=nranks, window_bytes=1 << 20)
    for rank, r in enumerate(res):
        assert r["offset"] == 12
        assert r["remote"] == (rank + 1) % nranks
        assert r["x_ptr_plus"] == 16 and r["slice_ptr"] == 8
        assert r["copy_ptr"] == "raises" and r["copy_plain"]
        assert [e for e in r["errors"] if e is not True] == []
    # symmetric heap: the same offset on every rank
    assert len({r["x_offset"] for r in res}) == 1


def test_config_rejects_bad_values_and_unknown_keys():
    with pytest.raises(ArgumentError, match=r"nranks must be in \[1, 64\]"):
        shmcomm.run(lambda rt: None, nranks=0)
    with pytest.raises(ArgumentError, match="nranks"):
        shmcomm.run(lambda rt: None, nranks=65)
    with pytest.raises(ArgumentError, match="unknown configuration key"):
        shmcomm.run(lambda rt: None, nranks=1, colour="red")
    with pytest.raises(ArgumentError, match="wait_policy must be one of"):
        shmcomm.run(lambda rt: None, nranks=1, wait_policy="sleepy")
    with pytest.raises(ArgumentError, match="host must be callable"):
        shmcomm.run(42, nranks=1)


def test_env_variable_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("SHMCOMM_WAIT_TIMEOUT", "soon")
    with pytest.raises(ArgumentError, match="SHMCOMM_WAIT_TIMEOUT"):
        shmcomm.Config.from_kwargs()
