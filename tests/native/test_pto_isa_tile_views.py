"""Overlaid tile views behind shmcomm's shadow (stand-in tree): a copy of a tile touches, for
the models, the bytes a2a3 moves (its valid region), not the whole declared tile, so views that
move disjoint bytes of one buffer are no race, and views that overlap still are."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
SRC = STANDIN / "kernels" / "tile_views_kernel.cpp"
V = 8
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


@pytest.fixture(scope="module")
def lib():
    return native.load(SRC, pto_isa=STANDIN)


def _line(marker: str) -> int:
    return next(i for i, ln in enumerate(SRC.read_text().splitlines(), 1) if marker in ln)


def _views(rt, kernel, off):
    a, b, out_a, out_b = (rt.alloc((V,), np.float32) for _ in range(4))
    a[:] = np.arange(V) + 1
    b[:] = np.arange(V) + 100
    rt.launch(kernel, blocks=1, args=(a.ptr, b.ptr, out_a.ptr, out_b.ptr, off))
    return out_a[:].tolist(), out_b[:].tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_views_that_move_disjoint_bytes_are_no_race(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_views, nranks=2, mode=mode, seed=seed, args=(lib.TileViewsKernel, V))
        assert res == [(list(range(1, V + 1)), list(range(100, 100 + V)))] * 2


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_views_that_overlap_are_still_a_race(lib, mode):
    with pytest.raises(shmcomm.RaceReport) as err:
        shmcomm.run(_views, nranks=1, mode=mode, seed=0, args=(lib.TileViewsKernel, V // 2))
    msg = str(err.value)
    assert "UB tile" in msg and f"tile_views_kernel.cpp:{_line('VIEWS_STORE_LINE')}" in msg
    assert f"tile_views_kernel.cpp:{_line('VIEWS_LOAD_LINE')}" in msg
