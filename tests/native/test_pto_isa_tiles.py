"""pto-isa's own TLOAD / TSTORE behind shmcomm's shadow, on the stand-in tree the project writes
itself (pto_isa_standin/): eager runs them at once; hazard mode queues them on MTE2 / MTE3 and
lands them (by the stand-in's own implementation) when the model says, so a missing flag or
drain changes the data or is reported at the user's kernel line; the fixed kernel passes in
every mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
SRC = STANDIN / "kernels" / "tiles_kernel.cpp"
N = 64
BLOCKS = 2
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


def _line(marker: str) -> int:
    return next(i for i, ln in enumerate(SRC.read_text().splitlines(), 1) if marker in ln)


@pytest.fixture(scope="module")
def lib():
    return native.load(SRC, pto_isa=STANDIN)


def _exchange(rt, kernel, rounds, bug):
    """Every round a fresh row per block; returns whether each round's output was the previous
    rank's row plus that rank."""
    src = rt.alloc((BLOCKS * N,), np.float32)
    recv = rt.alloc((BLOCKS * N,), np.float32)
    out = rt.alloc((BLOCKS * N,), np.float32)
    flags = rt.alloc((BLOCKS * 16,), np.int32)
    prev = (rt.rank - 1) % rt.nranks
    ok = []
    for r in range(1, rounds + 1):
        src[:] = np.arange(BLOCKS * N, dtype=np.float32) + 1000.0 * rt.rank + 100.0 * r
        rt.barrier()
        rt.launch(kernel, blocks=BLOCKS,
                  args=(src.ptr, recv.ptr, out.ptr, flags.ptr, rt.device_context, r, bug))
        want = np.arange(BLOCKS * N, dtype=np.float32) + 1000.0 * prev + 100.0 * r + prev
        ok.append(bool(np.array_equal(out[:], want)))
        rt.barrier()
    return ok


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_flagged_kernel_passes_every_mode(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=120,
                          args=(lib.TileExchangeKernel, 3, 0))
        assert res == [[True] * 3] * 2, (mode, seed, res)


def test_eager_runs_the_copies_at_once_even_without_flags(lib):
    res = shmcomm.run(_exchange, nranks=2, mode="eager", seed=0, timeout=120,
                      args=(lib.TileExchangeKernel, 2, 1))
    assert res == [[True] * 2] * 2


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_mte2_to_v_flag_reads_the_tile_before_the_load_lands(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=120, detect_races=False,
                          args=(lib.TileExchangeKernel, 2, 1))
        assert not any(ok for rank in res for ok in rank), (mode, seed, res)


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_drain_before_tnotify_is_reported_at_the_kernel_lines(lib, mode):
    for seed in (0, 1, 2):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_exchange, nranks=2, mode=mode, seed=seed, timeout=120,
                        args=(lib.TileExchangeKernel, 2, 2))
        text = str(err.value)
        assert f"{SRC}:{_line('TILES_STORE_LINE')}" in text, text
        assert f"{SRC}:{_line('TILES_RELOAD_LINE')}" in text, text


@pytest.mark.parametrize("shape, strides", [
    ((1, 1, 1, 4, 16), (64, 64, 64, 16, 1)),      # dense ND: one run
    ((1, 1, 1, 4, 16), (128, 128, 128, 32, 1)),   # rows strided in GM
    ((1, 1, 1, 16, 4), (64, 64, 64, 1, 16)),      # DN: columns contiguous
    ((2, 1, 3, 4, 8), (300, 300, 64, 16, 1)),     # outer dims that do not merge
    ((1, 2, 2, 16, 16), (1024, 512, 256, 16, 1)),  # NZ-like fractals, all contiguous
    ((1, 1, 1, 5, 3), (1, 1, 1, 7, 2)),           # no unit stride at all
])
def test_a_gm_tensor_becomes_pieces_covering_exactly_its_elements(shape, strides):
    from shmcomm.native.tilecopy import pieces
    want = sorted(sum(i * s for i, s in zip(idx, strides, strict=True))
                  for idx in np.ndindex(*shape))
    offs, rows, cols, rs = pieces(shape, strides)
    got = sorted(o + r * rs + c for o in offs for r in range(rows) for c in range(cols))
    assert got == want


def _atomic_sum(rt, kernel, iters):
    ones = rt.alloc((N,), np.float32)
    total = rt.alloc((N,), np.float32)
    ones[:] = 1.0
    total[:] = 0.0
    rt.barrier()
    rt.launch(kernel, blocks=BLOCKS, args=(ones.ptr, total.ptr, rt.device_context, iters))
    rt.barrier()
    return total[:].tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_an_atomicadd_tstore_adds_atomically_across_blocks_and_ranks(lib, mode):
    iters = {"eager": 5000, "hazard": 50, "schedule": 5}[mode]
    res = shmcomm.run(_atomic_sum, nranks=3, mode=mode, seed=0, timeout=120,
                      args=(lib.AtomicStoreKernel, iters))
    assert res[0] == [3.0 * BLOCKS * iters] * N


def _acc_store(rt, kernel):
    src = rt.alloc((BLOCKS * N,), np.float32)
    out = rt.alloc((BLOCKS * N,), np.float32)
    seen = rt.alloc((BLOCKS,), np.int32)
    src[:] = np.arange(BLOCKS * N, dtype=np.float32)
    rt.launch(kernel, blocks=BLOCKS, args=(src.ptr, out.ptr, seen.ptr))
    return out[:].tolist(), seen[:].tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_an_acc_tile_store_on_fix_runs_at_once_in_every_mode(lib, mode):
    out, seen = shmcomm.run(_acc_store, nranks=1, mode=mode, seed=0, timeout=120,
                            args=(lib.AccStoreKernel,))[0]
    assert out == (np.arange(BLOCKS * N, dtype=np.float32) + 1).tolist()
    assert seen == [b * N + 2 for b in range(BLOCKS)]


def test_schedule_mode_reports_the_same_race_for_the_same_seed(lib):
    texts = []
    for _ in range(2):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_exchange, nranks=2, mode="schedule", seed=5, timeout=120,
                        args=(lib.TileExchangeKernel, 2, 2))
        texts.append(str(err.value))
    assert texts[0] == texts[1]


def _uneven(rt, kernel):
    flags = rt.alloc((256,), np.int32)
    flags[:] = 0
    rt.launch(kernel, blocks=1, args=(flags.ptr,))


def test_a_cpp_error_in_a_pto_isa_instruction_names_the_kernel_line(lib):
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_uneven, nranks=1, mode="eager", timeout=60, args=(lib.UnevenWaitKernel,))
    text = str(err.value)
    assert f"{SRC}:{_line('TILES_UNEVEN_LINE')}: TWAIT: the signal's outer dims" in text, text
