"""pto-isa's own TLOAD / TSTORE (a real checkout's, never part of this project) behind shmcomm's
shadow: a kernel written by shmcomm with the flags a2a3 needs passes in every mode with no
report; its twins without the MTE2 -> V flag or without the MTE3 drain before TNOTIFY go wrong,
or are reported at the kernel's own lines, in hazard and schedule mode. Skipped unless
``SHMCOMM_PTO_ISA`` names the checkout:

    SHMCOMM_PTO_ISA=PATH python -m pytest -m pto_isa tests/native/test_pto_isa_tiles_checkout.py
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

ROOT = os.environ.get("SHMCOMM_PTO_ISA")
HERE = Path(__file__).resolve().parent
SRC = HERE / "pto_isa_tiles.cpp"
N, R = 64, 4
C = N // R
BLOCKS = 2
pytestmark = [pytest.mark.pto_isa, pytest.mark.timeout(600),
              pytest.mark.skipif(not ROOT, reason="set SHMCOMM_PTO_ISA to a pto-isa checkout to run these")]


def _line(marker: str) -> int:
    return next(i for i, ln in enumerate(SRC.read_text().splitlines(), 1) if marker in ln)


@pytest.fixture(scope="module")
def lib():
    return native.load(SRC, pto_isa=True)


def _exchange(rt, kernel, rounds, bug):
    """A fresh row per block every round; whether each round's output held the previous rank's
    row plus that rank (in the even C-element chunks; the odd ones untouched)."""
    src = rt.alloc((BLOCKS * N,), np.float32)
    recv = rt.alloc((BLOCKS * N,), np.float32)
    out = rt.alloc((BLOCKS * 2 * N,), np.float32)
    flags = rt.alloc((BLOCKS * 16,), np.int32)
    out[:] = -1.0
    prev = (rt.rank - 1) % rt.nranks
    ok = []
    for r in range(1, rounds + 1):
        src[:] = np.arange(BLOCKS * N, dtype=np.float32) + 1000.0 * rt.rank + 100.0 * r
        rt.barrier()
        rt.launch(kernel, blocks=BLOCKS,
                  args=(src.ptr, recv.ptr, out.ptr, flags.ptr, rt.device_context, r, bug))
        row = np.arange(BLOCKS * N, dtype=np.float32) + 1000.0 * prev + 100.0 * r + prev
        want = np.full((BLOCKS * 2 * N,), -1.0, np.float32).reshape(BLOCKS * 2 * R, C)
        want[0::2] = row.reshape(BLOCKS * R, C)
        ok.append(bool(np.array_equal(out[:], want.reshape(-1))))
        rt.barrier()
    return ok


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_flagged_kernel_passes_every_mode_with_no_report(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=300,
                          args=(lib.TileExchangeKernel, 3, 0))
        assert res == [[True] * 3] * 2, (mode, seed, res)


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_mte2_to_v_flag_reads_the_tile_before_the_load_lands(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=300, detect_races=False,
                          args=(lib.TileExchangeKernel, 2, 1))
        assert not any(ok for rank in res for ok in rank), (mode, seed, res)


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_drain_before_tnotify_is_reported_at_the_kernel_lines(lib, mode):
    for seed in (0, 1, 2):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=300,
                        args=(lib.TileExchangeKernel, 2, 2))
        text = str(err.value)
        assert f"{SRC}:{_line('REAL_STORE_LINE')}" in text, text
        assert f"{SRC}:{_line('REAL_RELOAD_LINE')}" in text, text
        assert f"{SRC}:{_line('REAL_NOTIFY_LINE')}" in text, text


CM = CK = CN = 16


def _cube(rt, kernel, rounds, bug):
    """Each block multiplies its own A and B; whether every round's C matched numpy's."""
    a = rt.alloc((BLOCKS * CM * CK,), np.float32)
    b = rt.alloc((BLOCKS * CK * CN,), np.float32)
    c = rt.alloc((BLOCKS * CM * CN,), np.float32)
    ok = []
    for r in range(1, rounds + 1):
        rng = np.random.default_rng(100 * rt.rank + r)
        a[:] = rng.integers(-4, 5, a.shape).astype(np.float32)
        b[:] = rng.integers(-4, 5, b.shape).astype(np.float32)
        rt.launch(kernel, blocks=BLOCKS, args=(a.ptr, b.ptr, c.ptr, bug))
        want = np.concatenate([a[i * CM * CK:(i + 1) * CM * CK].reshape(CM, CK)
                               @ b[i * CK * CN:(i + 1) * CK * CN].reshape(CK, CN) for i in range(BLOCKS)])
        ok.append(bool(np.array_equal(c[:].reshape(BLOCKS * CM, CN), want)))
    return ok


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_cube_path_with_its_flags_passes_every_mode(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_cube, nranks=2, mode=mode, seed=seed, timeout=300,
                          args=(lib.CubeKernel, 2, 0))
        assert res == [[True] * 2] * 2, (mode, seed, res)


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_mte2_to_mte1_flag_moves_the_l1_tile_before_the_load_lands(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_cube, nranks=2, mode=mode, seed=seed, timeout=300, detect_races=False,
                          args=(lib.CubeKernel, 2, 1))
        assert not any(ok for rank in res for ok in rank), (mode, seed, res)
