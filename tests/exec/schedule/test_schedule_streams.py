"""Stream launches in schedule mode: each starts on the host thread while it holds the turn
(so every block registers in a deterministic order), a later launch on the same stream starts
once the earlier one ended, and the host joins one launch at a time (``host_join_launch``), so
two kernels on two streams interleave under the scheduler as they run concurrently on the NPU."""

from __future__ import annotations

import pytest
import test_pto_allgather_gemm as agg

import shmcomm
from shmcomm import DeadlockError, RunError
from shmcomm.comm import TNOTIFY, TWAIT, NotifyOp, Signal, WaitCmp, get_block_idx, get_block_num

pytestmark = pytest.mark.timeout(240)


def _compute(ctx, base):
    TNOTIFY(Signal(base + ctx.block_idx), 1, NotifyOp.AtomicAdd)


def _comm(ctx, base, log):
    TWAIT(Signal(base + ctx.block_idx), 1, WaitCmp.GE)  # waits for the other stream's kernel
    log.append(("comm", get_block_idx(), get_block_num()))


def _ident(ctx, log, name):
    log.append((name, ctx.block_idx, ctx.block_num))


def _host_streams(rt):
    base = rt.signal_region("cc", 16)
    comm_s, compute_s = rt.stream(), rt.stream()
    log: list = []
    h1 = rt.launch(_comm, blocks=3, args=(base, log), stream=comm_s)  # returns at once
    h2 = rt.launch(_compute, blocks=3, args=(base,), stream=compute_s)
    rt.launch(_ident, blocks=2, args=(log, "after-compute"), stream=compute_s)  # stream order
    compute_s.synchronize()
    comm_s.synchronize()
    assert h1.done and h2.done
    return log


def test_stream_launches_interleave_deterministically():
    runs = [shmcomm.run(_host_streams, nranks=2, mode="schedule", seed=s, timeout=120)
            for s in (5, 5, 6)]
    want = sorted([("comm", b, 3) for b in range(3)] + [("after-compute", b, 2) for b in range(2)])
    for res in runs:
        assert [sorted(r) for r in res] == [want, want]
    assert runs[0] == runs[1]  # the same seed: the same interleaving


@pytest.mark.parametrize("seed", [21, 22])
def test_allgather_gemm_two_streams_in_schedule_mode(seed):
    assert shmcomm.run(agg.host, nranks=2, args=(256, 128, 64, 4, 2, 3), mode="schedule",
                       seed=seed, timeout=200) == [0, 0]


def test_a_deadlock_between_stream_launches_is_reported():
    def waits_forever(ctx, base):
        TWAIT(Signal(base + 5), 1, WaitCmp.GE)  # nobody ever notifies word 5

    def host(rt):
        base = rt.signal_region("cc", 16)
        s1, s2 = rt.stream(), rt.stream()
        rt.launch(waits_forever, blocks=2, args=(base,), stream=s1)
        rt.launch(waits_forever, blocks=1, args=(base,), stream=s2)
        rt.synchronize()

    with pytest.raises(DeadlockError, match="schedule mode"):
        shmcomm.run(host, nranks=2, mode="schedule", seed=1, timeout=60)


def test_a_failing_stream_launch_fails_the_run():
    def boom(ctx):
        raise ValueError("boom in a stream kernel")

    def host(rt):
        s = rt.stream()
        rt.launch(boom, blocks=1, stream=s)
        s.synchronize()

    with pytest.raises(RunError, match="boom in a stream kernel"):
        shmcomm.run(host, nranks=2, mode="schedule", seed=1, timeout=60)



def _nested(ctx, rt, got):
    try:
        rt.launch(_ident, blocks=1, args=([], "nested"))
    except shmcomm.errors.ArgumentError as exc:
        got.append(str(exc))


def _launch_inside(rt):
    """A launch made while the rank's launch runs (from its kernel: no stream, another thread)."""
    got: list[str] = []
    rt.launch(_nested, blocks=1, args=(rt, got))
    return got


@pytest.mark.parametrize("detect", [False, True])
def test_a_second_launch_beside_a_running_one_is_refused_with_or_without_the_detector(detect):
    # one agent at a time: the host registers each launch's blocks holding the turn; the race
    # detector wraps the schedule models and must say so too (it is on by default here)
    got = shmcomm.run(_launch_inside, nranks=1, mode="schedule", seed=0, detect_races=detect,
                      timeout=60)
    assert len(got[0]) == 1 and "one launch of a rank at a time" in got[0][0], got
