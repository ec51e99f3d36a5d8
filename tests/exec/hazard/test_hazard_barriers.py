"""Hazard mode on the barriers: the seed's DeviceBarrier reused (twice in a launch, or relaunched
without a signal reset) is flagged; used as its contract says, and EpochBarrier in any reuse, not.
"""

from __future__ import annotations

import re

import pytest

import shmcomm
from shmcomm.kernels import DeviceBarrier, EpochBarrier

pytestmark = pytest.mark.timeout(120)


def k_seed(ctx, calls):
    for phase in range(calls):
        DeviceBarrier(ctx, ctx.signal_base, phase, ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num)


def k_epoch(ctx, calls, out):
    for _ in range(calls):
        k = EpochBarrier(ctx)
    if ctx.block_idx == 0:
        out.append(k)


def host_seed(rt, calls, launches, reset):
    rt.reset_signals()
    for _ in range(launches):
        rt.launch(k_seed, args=(calls,))
        if reset:
            rt.reset_signals()
    return 0


def host_epoch(rt, calls, launches, blocks):
    rt.reset_signals()
    out: list = []
    for i in range(launches):  # no reset between launches; the block count may change
        rt.launch(k_epoch, blocks=blocks[i % len(blocks)], args=(calls, out))
    return out


def failing(host):
    """``host`` followed by a failing check of its own: a failure something else proved, beside
    which the advisory checkers' findings are printed as likely causes."""
    def run_then_fail(rt, *args):
        host(rt, *args)
        raise AssertionError("the host's own check failed")
    return run_then_fail


def _run(host, mode="hazard", seed=5, nranks=3, blocks=3, **kw):
    return shmcomm.run(host, nranks=nranks, blocks=blocks, mode=mode, seed=seed, timeout=60,
                       wait_timeout=20, **kw)


@pytest.mark.parametrize("seed", (5, 6))
def test_seed_barrier_twice_in_one_launch_is_flagged(seed):
    assert _run(host_seed, mode="eager", args=(2, 1, True)) == [0, 0, 0]
    # the line model may flag the aliased local-flag / intra-counter line first (exact); the
    # phase-reuse finding is advisory: the likely cause of a failure something else proved
    with pytest.raises(shmcomm.RunError, match=r"hazard \[(phase-reuse|line-shared)\]"):
        _run(failing(host_seed), seed=seed, args=(2, 1, True))
    with pytest.raises(shmcomm.RunError) as ei:
        _run(failing(host_seed), seed=seed, hazards="pipes,visibility,jitter,checkers",
             args=(2, 1, True))
    text = str(ei.value)
    assert "likely cause: hazard [phase-reuse]" in text and "in DeviceBarrier at barrier.py:" in text
    assert "test_hazard_barriers.py:" in text and f"seed: {seed}" in text


@pytest.mark.parametrize("seed", (5, 6))
def test_seed_barrier_relaunch_without_reset_is_flagged(seed):
    """A relaunch without a reset lets the stale barrier pass at once: stale-at-launch only
    advises, so the failure is the early reads' (a race, or the data check), with the advice
    as its likely cause.

    Schedule mode, so the seed fixes the interleaving: with two ranks, a run whose peer had
    already put and notified before the stale wait is correct as it ran (the wait read the
    fresh count), and hazard mode's timing gives such a run about one time in five.
    """
    from shmcomm.stress import catalogue

    entry = catalogue.get("no_reset_between_launches")
    with pytest.raises(shmcomm.RunError) as ei:
        _run(entry.host, mode="schedule", seed=seed, nranks=2, blocks=2,
             args=(entry.sizes[0],))
    assert "likely cause: hazard [stale-at-launch]" in str(ei.value), str(ei.value)


@pytest.mark.parametrize("seed", (5, 6))
def test_seed_barrier_used_by_contract_is_not_flagged(seed):
    assert _run(host_seed, seed=seed, args=(1, 10, True)) == [0, 0, 0]


@pytest.mark.parametrize("seed", (5, 6))
def test_epoch_barrier_reused_without_reset_is_not_flagged(seed):
    res = _run(host_epoch, seed=seed, args=(4, 6, (3, 1, 2)))
    assert res == [[4 * (i + 1) for i in range(6)]] * 3


def k_seed_count(ctx, count):
    DeviceBarrier(ctx, ctx.signal_base, 0, ctx.rank, ctx.nranks, ctx.block_idx, count)


def host_seed_count(rt, count):
    rt.reset_signals()
    rt.launch(k_seed_count, blocks=3, args=(count,))
    return 0


@pytest.mark.parametrize("seed", (5, 6))
def test_seed_barrier_with_fewer_blocks_than_launched_is_flagged(seed):
    # num_comm_blocks=2 in a 3-block launch: block 0 goes on after one arrival (passes eagerly)
    assert _run(host_seed_count, mode="eager", args=(2,)) == [0, 0, 0]
    # advisory (three takers of a count of two): never the failure itself, only the likely
    # cause beside a proven one. The early Set can also cache the line the third block's late
    # arrival writes, which the line model proves when the run's timing orders it so.
    try:
        assert _run(host_seed_count, seed=seed, args=(2,)) == [0, 0, 0]
    except shmcomm.RunError as exc:
        assert re.match(r"shmcomm run failed .*: HazardReport: hazard \[line-shared\]", str(exc)), exc
    with pytest.raises(shmcomm.RunError, match=r"likely cause: hazard \[arrival-takers\].*"
                                               r"num_comm_blocks=2\) in a launch of 3 blocks"):
        _run(failing(host_seed_count), seed=seed, args=(2,))
    assert _run(host_seed_count, seed=seed, args=(3,)) == [0, 0, 0]
