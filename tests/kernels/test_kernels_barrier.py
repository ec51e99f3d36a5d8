"""The seed's DeviceBarrier and the epoch-safe barrier: ordering and reuse."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import GetRemotePtr
from shmcomm.kernels import DeviceBarrier, EpochBarrier
from shmcomm.kernels.barrier import INTRA_RANK_OFFSET, LOCAL_FLAG_OFFSET

pytestmark = pytest.mark.timeout(120)


def _seed_once(ctx, data, out):
    # every block writes its stamp, the barrier, then block 0 reads every rank's stamps
    view = data.view((ctx.nranks * 4,))
    for r in range(ctx.nranks):
        GetRemotePtr(ctx, data, r).view((ctx.nranks * 4,))[ctx.rank * 4 + ctx.block_idx] = 1 + ctx.rank
    DeviceBarrier(ctx, ctx.signal_base, 0, ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num)
    if ctx.block_idx == 0:
        out.append(view.copy())


@pytest.mark.parametrize("nranks,blocks", [(1, 1), (1, 4), (2, 1), (3, 2), (4, 4)])
def test_seed_device_barrier_orders_one_phase(nranks, blocks):
    def host(rt):
        data = rt.alloc((rt.nranks * 4,), np.int32)
        out = []
        for _ in range(3):
            rt.reset_signals()
            data[:] = 0
            rt.barrier()
            rt.launch(_seed_once, blocks=blocks, args=(data.ptr, out))
        return [o.tolist() for o in out]

    for per_rank in shmcomm.run(host, nranks=nranks):
        for seen in per_rank:
            expect = [1 + r if b < blocks else 0 for r in range(nranks) for b in range(4)]
            assert seen == expect


def test_seed_layout_aliases_phase_slots():
    # the hazard the docstring states: LOCAL_FLAG + phase == INTRA_RANK + phase - 1
    assert LOCAL_FLAG_OFFSET + 1 == INTRA_RANK_OFFSET + 0


def _epoch_many(ctx, iters, data, out):
    n, me = ctx.nranks, ctx.rank
    rounds = []
    for it in range(iters):
        # write my stamp into every rank's slot for me, barrier, check everybody's stamp
        for r in range(n):
            GetRemotePtr(ctx, data, r).view((n * 8,))[me * 8 + ctx.block_idx] = it + 1
        rounds.append(EpochBarrier(ctx))
        mine = data.view((n * 8,))
        ok = all(mine[r * 8 + b] >= it + 1 for r in range(n) for b in range(ctx.block_num))
        rounds.append(ok)
        EpochBarrier(ctx)  # nobody overwrites before everybody checked
    out.append(rounds)


@pytest.mark.parametrize("nranks,blocks", [(1, 3), (2, 2), (4, 4), (8, 1)])
def test_epoch_barrier_many_rounds_and_launches_without_reset(nranks, blocks):
    iters, launches = 25, 3

    def host(rt):
        data = rt.alloc((rt.nranks * 8,), np.int32)
        results = []
        for launch in range(launches):
            out = []
            rt.launch(_epoch_many, blocks=blocks if launch != 1 else max(1, blocks - 1),
                      args=(iters, data.ptr, out))
            results.append(out)
            rt.barrier()
            data[:] = 0
            rt.barrier()
        return results

    for per_rank in shmcomm.run(host, nranks=nranks):
        done = 0
        for out in per_rank:
            for rounds in out:
                assert all(rounds[1::2]), "a barrier let a block through before every stamp landed"
                ks = rounds[0::2]
                assert ks == list(range(done + 1, done + 2 * iters, 2))
            done += 2 * iters
