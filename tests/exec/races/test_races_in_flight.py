"""Write-after-read on a copy in flight: a scalar store over GM a queued TLOAD (or an async
copy) has yet to read, or a vector instruction over a tile a queued TSTORE has yet to read, is a
race report in every mode with the detector, naming both accesses and the missing flag; the
correct twins (the flag, the drain, the copy's Wait) pass on every seed."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TPUT_ASYNC, BuildAsyncSession, GetRemotePtr, GlobalTensor, gm_store
from shmcomm.pipe import (
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_S,
    PIPE_V,
    TLOAD,
    TSTORE,
    pipe_barrier,
    set_flag,
    wait_flag,
)
from shmcomm.vector import TADDS

pytestmark = pytest.mark.timeout(300)
MODES = ["eager", "hazard", "schedule"]
SEEDS = range(4)
N = 16


def k_scalar_over_load(ctx, src, out, fixed):
    """TLOAD src, then a scalar store into src: the load may not have read it yet."""
    t = ctx.tile((1, N), np.float32)
    TLOAD(t, GlobalTensor(src, (1, N)))
    if fixed == "flag":
        set_flag(PIPE_MTE2, PIPE_S, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_S, EVENT_ID0)
    elif fixed == "barrier":
        pipe_barrier(PIPE_MTE2)
    gm_store(src + 3, np.float32(99.0))
    pipe_barrier(PIPE_ALL)
    TSTORE(GlobalTensor(out, (1, N)), t)
    pipe_barrier(PIPE_ALL)


def k_vector_over_store(ctx, src, out, fixed):
    """TSTORE a tile, then a vector instruction rewrites it: the store may not have read it."""
    t = ctx.tile((1, N), np.float32)
    TLOAD(t, GlobalTensor(src, (1, N)))
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    TSTORE(GlobalTensor(out, (1, N)), t)
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    if fixed:
        set_flag(PIPE_MTE3, PIPE_V, EVENT_ID0)
        wait_flag(PIPE_MTE3, PIPE_V, EVENT_ID0)
    TADDS(t, t, 100.0)
    pipe_barrier(PIPE_ALL)


def k_scalar_over_async(ctx, src, dst, fixed):
    """TPUT_ASYNC src to the peer, then a scalar store into src: the DMA may not have read it."""
    s = BuildAsyncSession(ctx)
    ev = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, dst, 1 - ctx.rank), (N,)),
                    GlobalTensor(src, (N,)), s)
    if fixed:
        ev.Wait(s)
    gm_store(src + 3, np.float32(99.0))
    ev.Wait(s)


def _host(kernel, nranks=1):
    def host(rt, fixed):
        src, out = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
        src[:] = np.arange(N)
        rt.barrier()
        rt.launch(kernel, blocks=1, args=(src.ptr, out.ptr, fixed))
        rt.barrier()
        return out.tolist()
    return host


CASES = [  # kernel, ranks, the bug's twin(s), the accesses and the flag its report names
    (k_scalar_over_load, 1, ["flag", "barrier"], ("TLOAD on MTE2", "gm_store on S", "MTE2 -> S")),
    (k_vector_over_store, 1, [True], ("TSTORE on MTE3", "TADDS on V", "MTE3 -> V")),
    (k_scalar_over_async, 2, [True], ("TPUT_ASYNC (the DMA copy)", "gm_store on S", "Wait")),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel,nranks,twins,names", CASES, ids=["scalar-over-tload",
                                                                  "vector-over-tstore",
                                                                  "scalar-over-async"])
def test_a_write_over_a_copy_in_flight_is_reported_and_its_twin_passes(mode, kernel, nranks,
                                                                       twins, names):
    host = _host(kernel, nranks)
    for seed in SEEDS:
        with pytest.raises(shmcomm.RaceReport) as info:
            shmcomm.run(host, nranks=nranks, mode=mode, seed=seed, detect_races=True,
                        args=("" if kernel is k_scalar_over_load else False,), timeout=60)
        text = str(info.value)
        for name in names:
            assert name in text, text
        for twin in twins:
            shmcomm.run(host, nranks=nranks, mode=mode, seed=seed, detect_races=True,
                        args=(twin,), timeout=60)
