"""pto-isa's TGET suite (``tests/npu/a2a3/comm/st/testcase/tget``), case by case.

Same shapes, tiles, dtypes, rank counts and checks as the C++ cases (see :mod:`pto_ring`); each
case passes in eager and in hazard mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from pto_ring import CHUNKED_CASES, case_errors

# every case of one rank count and mode runs in one shmcomm.run, cached per worker: one worker
# runs the whole file, so that run is not repeated on each
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("pto-tget")]

f32, i32, u8 = np.float32, np.int32, np.uint8
# (name, dtype, shape, tile, form, nranks) exactly as main.cpp's TEST(TGet, ...) list
CASES = [
    ("Vec_FloatSmall", f32, (1, 256), (1, 256), "single", 2),
    ("Vec_Int32Large", i32, (1, 4096), (1, 4096), "single", 2),
    ("Vec_Uint8Small", u8, (1, 512), (1, 512), "single", 2),
    ("Shape2D_Float16x16", f32, (16, 16), (16, 16), "single", 2),
    ("Shape2D_Float8x32", f32, (8, 32), (8, 32), "single", 2),
    ("Shape2D_Int32_4x64", i32, (4, 64), (4, 64), "single", 2),
    *CHUNKED_CASES,
    ("PingPong_Float_7x10_tile5x7_PyptoAllReduceShape", f32, (7, 10), (5, 7), "pingpong", 2),
]


@pytest.mark.parametrize("mode", ["eager", "hazard"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tget(case, mode):
    errors = case_errors("TGET", CASES, case, mode)
    assert not errors, errors
