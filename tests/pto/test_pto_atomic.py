"""AtomicAdd (TPUT's and TSTORE's) accumulates only the dtypes pto-isa's ``SetAtomicAdd<T>``
allows: half, float, int16, int32, int8 and bfloat16; any other is refused with an error naming
the instruction."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import TPUT, AtomicType, GlobalTensor
from shmcomm.pipe import PIPE_ALL, TLOAD, TSTORE, pipe_barrier

pytestmark = pytest.mark.timeout(120)
ALLOWED = ["float16", "float32", "int16", "int32", "int8", "bfloat16"]
REFUSED = ["uint8", "float64", "int64", "uint16"]


def k_accumulate(ctx, src, dst, log):
    n = 8
    tile = ctx.tile((1, n), src.dtype)
    try:
        TPUT(GlobalTensor(dst, (n,)), GlobalTensor(src, (n,)), tile, AtomicType.AtomicAdd)
        TLOAD(tile, GlobalTensor(src, (1, n)))
        pipe_barrier(PIPE_ALL)
        TSTORE(GlobalTensor(dst, (1, n)), tile, AtomicType.AtomicAdd)
        pipe_barrier(PIPE_ALL)
        log.append("ok")
    except ArgumentError as exc:
        log.append(str(exc))
    try:
        TSTORE(GlobalTensor(dst, (1, n)), tile, AtomicType.AtomicAdd)
    except ArgumentError as exc:
        log.append(str(exc))


def _run(dtype, mode="eager"):
    def host(rt):
        src, dst = rt.alloc((8,), dtype), rt.alloc((8,), dtype)
        src[:] = np.arange(8)
        log: list = []
        rt.launch(k_accumulate, blocks=1, args=(src.ptr, dst.ptr, log))
        return log, np.array(dst).astype(np.float64)

    return shmcomm.run(host, nranks=1, mode=mode, seed=1, timeout=60)[0]


@pytest.mark.parametrize("dtype", ALLOWED)
def test_allowed_dtypes_accumulate(dtype):
    log, dst = _run(dtype)
    assert log == ["ok"]
    assert np.array_equal(dst, 3 * np.arange(8))  # TPUT, TSTORE, TSTORE


@pytest.mark.parametrize("dtype", REFUSED)
def test_other_dtypes_are_refused_naming_the_instruction(dtype):
    log, dst = _run(dtype, "hazard")
    assert log[0].startswith("TPUT: AtomicAdd accumulates only") and dtype in log[0], log
    assert log[1].startswith("TSTORE: AtomicAdd accumulates only") and dtype in log[1], log
    assert not dst.any()
