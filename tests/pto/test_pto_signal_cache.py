"""Signal(ptr) hands back one object per word, and still checks every argument."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import TTEST, GetRemotePtr, Signal, Signal2D, WaitCmp

pytestmark = pytest.mark.timeout(60)


def _kernel(ctx, out):
    a = Signal(ctx.signal_base + 5)
    out["same"] = a is Signal(ctx.signal_base + 5) and a is not Signal(ctx.signal_base + 6)
    out["remote"] = Signal(GetRemotePtr(ctx, ctx.signal_base + 5, 1)).ptr.rank == 1
    errors = []
    for bad in (lambda: Signal((ctx.signal_base + 5).cast(np.float32)),   # cached address, wrong dtype
                lambda: Signal((ctx.signal_base + 5).cast(np.int8) + 1),  # misaligned
                lambda: Signal(5),
                lambda: Signal2D(ctx.signal_base + 5, 0, 1),
                lambda: TTEST(a, 2**31, WaitCmp.EQ),
                lambda: TTEST(a, 1, 9)):
        try:
            bad()
            errors.append(None)
        except ArgumentError as exc:
            errors.append(str(exc).split(":")[0])
    out["errors"] = errors


def test_signal_objects_are_shared_per_word_and_checked():
    def host(rt):
        out: dict = {}
        if rt.rank == 0:
            rt.launch(_kernel, blocks=1, args=(out,))
        return out

    r = shmcomm.run(host, nranks=2)[0]
    assert r["same"] and r["remote"]
    assert r["errors"] == ["Signal", "Signal", "Signal", "Signal2D", "TTEST", "TTEST"]
