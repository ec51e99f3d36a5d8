"""CentralBarrier: one monotonic arrival counter in rank 0's window, last arrival releases all."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import RunError
from shmcomm.comm import GetRemotePtr
from shmcomm.kernels import CentralBarrier
from shmcomm.kernels.barrier import CENTRAL_BARRIER_OFFSET, CENTRAL_RELEASE

pytestmark = pytest.mark.timeout(120)


def _central_many(ctx, iters, data, out):
    n, me, b = ctx.nranks, ctx.rank, ctx.block_idx
    rounds = []
    for it in range(iters):
        for r in range(n):  # my stamp into every rank's slot for me, then the barrier
            GetRemotePtr(ctx, data, r).view((n * 8,))[me * 8 + b] = it + 1
        rounds.append(CentralBarrier(ctx))
        mine = data.view((n * 8,))
        rounds.append(all(mine[r * 8 + c] >= it + 1 for r in range(n) for c in range(ctx.block_num)))
        CentralBarrier(ctx)  # nobody overwrites a stamp before everybody checked
    out.append(rounds)


@pytest.mark.parametrize("nranks,blocks,policy", [(1, 3, "adaptive"), (2, 1, "adaptive"),
                                                   (3, 2, "yield"), (4, 4, "futex"), (8, 1, "adaptive")])
def test_central_barrier_orders_many_rounds_and_launches_without_reset(nranks, blocks, policy):
    iters, launches = 20, 3

    def host(rt):
        data = rt.alloc((rt.nranks * 8,), np.int32)
        results = []
        for _ in range(launches):
            out: list = []
            rt.launch(_central_many, blocks=blocks, args=(iters, data.ptr, out))
            results.append(out)
        return results

    for per_rank in shmcomm.run(host, nranks=nranks, wait_policy=policy):
        for launch, out in enumerate(per_rank):
            assert len(out) == blocks
            for rounds in out:
                assert all(rounds[1::2]), "a barrier let a block through before every stamp landed"
                first = launch * 2 * iters + 1
                assert rounds[0::2] == list(range(first, first + 2 * iters, 2))


def _exhausted(rt):
    # the release round 2**31 - 1 rounds leave, set by the host before the barrier's first use:
    # a kernel's Signal on the barrier's own word would be a user signal inside its region
    # (SignalOverlapError), so the test writes the word the way rt.reset_signals() does
    rt.signals[CENTRAL_BARRIER_OFFSET + CENTRAL_RELEASE] = 2**31 - 1
    rt.launch(lambda ctx: CentralBarrier(ctx), blocks=1)


def test_central_barrier_refuses_to_wrap_its_counter():
    with pytest.raises(RunError) as info:
        shmcomm.run(_exhausted, nranks=1)
    assert "CentralBarrier: the arrival counter is exhausted" in str(info.value)
