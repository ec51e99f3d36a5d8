"""pto-isa's TGET suite (``tests/npu/a2a3/comm/st/testcase/tget``), case by case.

Same shapes, tiles, dtypes, rank counts and checks as the C++ cases (see :mod:`pto_ring`); each
case passes in eager and in hazard mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from pto_ring import run_suite

pytestmark = pytest.mark.timeout(900)

f32, i32, u8 = np.float32, np.int32, np.uint8
# (name, dtype, shape, tile, form, nranks) exactly as main.cpp's TEST(TGet, ...) list
CASES = [
    ("Vec_FloatSmall", f32, (1, 256), (1, 256), "single", 2),
    ("Vec_Int32Large", i32, (1, 4096), (1, 4096), "single", 2),
    ("Vec_Uint8Small", u8, (1, 512), (1, 512), "single", 2),
    ("Shape2D_Float16x16", f32, (16, 16), (16, 16), "single", 2),
    ("Shape2D_Float8x32", f32, (8, 32), (8, 32), "single", 2),
    ("Shape2D_Int32_4x64", i32, (4, 64), (4, 64), "single", 2),
    ("LargeShape_Float_128x64_tile16", f32, (128, 64), (16, 64), "single", 2),
    ("LargeShape_Int32_256x32_tile32", i32, (256, 32), (32, 32), "single", 2),
    ("LargeShape_Float_512x32_tile64", f32, (512, 32), (64, 32), "single", 2),
    ("LargeShape_Float_2048x32_tile64", f32, (2048, 32), (64, 32), "single", 2),
    ("LargeShape_Float_4096x32_tile64", f32, (4096, 32), (64, 32), "single", 2),
    ("LargeShape_Float_2048x64_tile128", f32, (2048, 64), (128, 64), "single", 2),
    ("LargeShape_Int32_4096x64_tile128", i32, (4096, 64), (128, 64), "single", 2),
    ("MultiDim_Float_2x2x1x32x32_tile16", f32, (2, 2, 1, 32, 32), (16, 32), "single", 2),
    ("MultiDim_Int32_4x1x1x32x64_tile16", i32, (4, 1, 1, 32, 64), (16, 64), "single", 2),
    ("Irregular_Float_2047x32_tile64", f32, (2047, 32), (64, 32), "single", 2),
    ("Irregular_Int32_1025x32_tile64", i32, (1025, 32), (64, 32), "single", 2),
    ("Irregular_Float_4095x32_tile128", f32, (4095, 32), (128, 32), "single", 2),
    ("Sliding2D_Float_64x128_tile16x32", f32, (64, 128), (16, 32), "single", 2),
    ("Sliding2D_Int32_128x256_tile32x64", i32, (128, 256), (32, 64), "single", 2),
    ("Sliding2D_Float_256x512_tile64x128", f32, (256, 512), (64, 128), "single", 2),
    ("Sliding2D_IrregRow_Float_65x64_tile16x32", f32, (65, 64), (16, 32), "single", 2),
    ("Sliding2D_IrregCol_Float_64x104_tile16x32", f32, (64, 104), (16, 32), "single", 2),
    ("Sliding2D_IrregBoth_Float_65x104_tile16x32", f32, (65, 104), (16, 32), "single", 2),
    ("PingPong_Float_128x128_tile16x32", f32, (128, 128), (16, 32), "pingpong", 2),
    ("PingPong_Int32_256x256_tile32x64", i32, (256, 256), (32, 64), "pingpong", 2),
    ("PingPong_Irregular_Float_65x104_tile16x32", f32, (65, 104), (16, 32), "pingpong", 2),
    ("PingPong_Float_7x10_tile5x7_PyptoAllReduceShape", f32, (7, 10), (5, 7), "pingpong", 2),
]
_results: dict = {}


def _result(mode: str, nranks: int) -> dict:
    key = (mode, nranks)
    if key not in _results:
        cases = [c[:5] for c in CASES if c[5] == nranks]
        _results[key] = run_suite("TGET", cases, nranks, mode)
    return _results[key]


@pytest.mark.parametrize("mode", ["eager", "hazard"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tget(case, mode):
    errors = [e for e in _result(mode, case[5])[case[0]] if e]
    assert not errors, errors
