"""A race report's fix is the whole fix: for every combination of a missing drain and a missing
fence before a notify that publishes a store, following the printed fix alone (and nothing
else) makes the kernel pass in every mode, and the fix asks for the drain before the fence."""

from __future__ import annotations

import itertools
import tempfile

import numpy as np
import pytest

from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.pipe import DSB_DDR, PIPE_ALL, PIPE_MTE3, dsb, pipe_barrier
from shmcomm.testing import SweepFailed, check

pytestmark = pytest.mark.timeout(120)


def _ring(ctx, src, dst, n, drain, fence):
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 1024), np.float32)  # a 3000-float TPUT reuses it: it drains its first chunks
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    if drain:
        pipe_barrier(drain)
    if fence:
        dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def ring(rt, size, drain=0, fence=False):
    src, dst = rt.alloc((size,), np.float32), rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1
    rt.launch(_ring, args=(src.ptr, dst.ptr, size, drain, fence))
    want = (rt.rank - 1) % rt.nranks + 1
    assert np.all(dst == want), f"rank {rt.rank}: dst starts {dst[:3]}, want {want}"


def _fixes(text: str) -> set[str]:
    return {x.strip()[len("fix: "):] for x in text.splitlines() if x.strip().startswith("fix: ")}


def _apply(fix: str, drain: int, fence: bool) -> tuple[int, bool]:
    """What a reader does who follows ``fix`` to the letter."""
    if "pipe_barrier(PIPE_MTE3)" in fix:
        drain = drain or PIPE_MTE3
        assert "dsb(DSB_DDR)" not in fix or fix.index("pipe_barrier") < fix.index("dsb"), fix
    if "dsb(DSB_DDR)" in fix:
        fence = True
    return drain, fence


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("size", [64, 3000], ids=["one-chunk", "three-chunks"])
def test_following_the_fix_alone_makes_every_combination_pass(mode, size, tmp_path,
                                                              monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # failing schedules are kept there
    for drain, fence in itertools.product((0, PIPE_ALL, PIPE_MTE3), (False, True)):
        opts = dict(nranks=2, blocks=1, mode=mode, sizes=size, seeds=1, detect_races=True,
                    timeout=60)
        if drain and fence:
            check(ring, drain=drain, fence=fence, **opts)  # the correct kernel: no report
            continue
        with pytest.raises(SweepFailed) as err:
            check(ring, drain=drain, fence=fence, **opts)
        fixes = _fixes(err.value.report.failures[0].message)
        assert fixes, err.value
        for fix in fixes:
            assert ("pipe_barrier" in fix) == (not drain), (drain, fence, fix)
            assert "dsb(DSB_DDR)" in fix, (drain, fence, fix)
        new = (drain, fence)
        for fix in fixes:
            new = _apply(fix, *new)
        check(ring, drain=new[0], fence=new[1], **opts)
