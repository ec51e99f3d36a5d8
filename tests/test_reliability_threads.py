"""Host threads and pools: no false success from a launch a host helper thread made, and a pool
that isolates its runs (one caller at a time, no leftover thread or patch, a dead rank named)."""

from __future__ import annotations

import threading
import time

import pytest

import shmcomm
from shmcomm import RunError

pytestmark = pytest.mark.timeout(180)

SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=50.0)


def _late_failure(ctx, started) -> None:
    started.set()
    time.sleep(0.3)  # the host has returned by now
    raise ValueError("late failure in a helper thread's launch")


def _host_helper_launch(rt):
    started = threading.Event()

    def helper() -> None:
        try:
            rt.launch(_late_failure, blocks=1, args=(started,))
        except shmcomm.errors.ShmcommError:
            pass  # the helper swallows it: the run must fail all the same

    threading.Thread(target=helper, daemon=True).start()
    started.wait(30)
    return "ok"


def test_launch_from_a_host_helper_thread_is_joined_before_the_rank_reports():
    with pytest.raises(RunError) as info:
        shmcomm.run(_host_helper_launch, 2, **SMALL)
    first = info.value.failures[0]
    assert "late failure" in first.message, str(info.value)
    assert first.rank in (0, 1)


def _host_helper_launch_passes(rt):
    started = threading.Event()

    def kernel(ctx) -> None:
        started.set()
        time.sleep(0.2)
        ctx.rt.kernel_state["done"] = True

    threading.Thread(target=lambda: rt.launch(kernel, blocks=1), daemon=True).start()
    started.wait(30)
    return rt.rank


def test_a_passing_helper_launch_still_passes():
    assert shmcomm.run(_host_helper_launch_passes, 2, **SMALL) == [0, 1]
