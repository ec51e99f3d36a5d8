"""The observer seam: observers plug in with no-op hooks, are called only where they override
a hook, and report on passing runs too, in every mode, on a pool and from the command line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.config import Config
from shmcomm.core.observer import BlockObserver, Observer, RankObserver, _block_class
from shmcomm.errors import ArgumentError
from shmcomm.exec.observers import OBSERVERS, NotifyCount
from shmcomm.launch.pool import Pool
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(120)
BOUNDS = dict(timeout=60, wait_timeout=30)
ROUNDS = 3


def _ring(ctx, src, dst, rounds):
    """Every block puts its row into the next rank's ``dst``, then notifies it, ``rounds``
    times (each round waits for the notify of the rank before)."""
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 8), np.float32)
    row = 8 * ctx.block_idx
    for r in range(rounds):
        TPUT(GlobalTensor(GetRemotePtr(ctx, dst + row, peer), (1, 8)),
             GlobalTensor(src + row, (1, 8)), tile)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + ctx.block_idx, peer)), 1,
                NotifyOp.AtomicAdd)
        TWAIT(Signal(ctx.signal_base + ctx.block_idx), r + 1, WaitCmp.GE)


def _host(rt, blocks, rounds):
    src, dst = rt.alloc((8 * blocks,), np.float32), rt.alloc((8 * blocks,), np.float32)
    src[:] = rt.rank
    rt.barrier()
    rt.launch(_ring, blocks=blocks, args=(src.ptr, dst.ptr, rounds))
    return bool(np.all(dst == (rt.rank - 1) % rt.nranks))


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_notify_counter_counts_every_rank_in_every_mode(mode):
    counter = NotifyCount(Config(nranks=3))
    got = shmcomm.run(_host, nranks=3, blocks=2, seed=1, mode=mode, args=(2, ROUNDS),
                      observers=[counter], **BOUNDS)
    assert got == [True] * 3
    assert counter.counts == [2 * ROUNDS] * 3  # a passing run reports too
    assert counter.summary() == "notifies per rank: 0: 6, 1: 6, 2: 6"


def test_observers_by_name_and_beside_the_race_detector():
    got = shmcomm.run(_host, nranks=2, blocks=1, mode="hazard", detect_races=True,
                      args=(1, ROUNDS), observers=["notify-count"], **BOUNDS)
    assert got == [True, True]
    with pytest.raises(ArgumentError, match="observers: each entry must be one of notify-count"):
        shmcomm.run(_host, nranks=2, args=(1, 1), observers=["no-such"])


def test_a_pool_runs_observers_run_after_run():
    with Pool(2, window_bytes=1 << 16) as pool:
        for mode in ("eager", "hazard", "schedule"):
            counter = NotifyCount(pool.base)
            assert pool.run(_host, args=(2, ROUNDS), mode=mode, seed=2, observers=[counter],
                            **BOUNDS) == [True, True]
            assert counter.counts == [2 * ROUNDS] * 2, mode


class _Big(Observer):
    name = "big"
    shared_bytes = 1 << 30  # (over any pool's reserve: the schedule record takes ~20 MiB)


def test_a_pool_refuses_an_observer_it_kept_no_room_for():
    with Pool(2, window_bytes=1 << 16) as pool:
        with pytest.raises(ArgumentError, match="register the observer"):
            pool.run(_host, args=(1, 1), observers=[_Big])


# --- a user's observer: one file, no registration --------------------------------------------

class _Order(BlockObserver):
    """Records what the model had done when each hook came: hazard mode queues the TPUT's
    store, so the bytes land only at the drain, which ``barrier`` sees done."""

    def __init__(self, agent, log):
        super().__init__(agent)
        self.log = log

    def store(self, dst, tile, atomic):
        self.log.append("store issued")

    def barrier(self, pipe):
        self.log.append("barrier done")

    def waited(self, sig, value, cmp):
        self.log.append("waited")


class _OrderRank(RankObserver):
    def __init__(self, rt):
        super().__init__(rt)
        self.log: list[str] = []

    def block(self, agent):
        return _Order(agent, self.log) if agent.block_idx == 0 else None

    def launch_end(self):  # (after the model's: the blocks have ended)
        self.rt.kernel_state["order"] = list(self.log)


class _OrderRun(Observer):
    name = "order"

    def rank(self, rt):
        return _OrderRank(rt)


def _order_host(rt):
    _host(rt, 2, 1)
    return rt.kernel_state.get("order")


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_a_user_observer_sees_its_hooks_in_order_and_only_its_blocks(mode):
    got = shmcomm.run(_order_host, nranks=2, blocks=2, mode=mode, seed=3,
                      observers=[_OrderRun], **BOUNDS)
    for log in got:  # block 0 only: one store, then the drain, then the wait
        assert log == ["store issued", "barrier done", "waited"], (mode, log)


def test_a_hook_nobody_overrides_costs_one_forward_and_no_observer_call():
    """The dispatcher's method for a hook an observer leaves to the base forwards to the model
    and calls no observer (trio's instruments: only the overriding ones)."""
    cls = _block_class((_Order,))
    src = cls.load.__code__.co_names  # (load: _Order leaves it to the base)
    assert "obs" not in src and "inner" in src
    assert "obs" in cls.store.__code__.co_names and "obs" in cls.barrier.__code__.co_names


def test_the_registry_names_the_counter():
    assert OBSERVERS["notify-count"] is NotifyCount


def test_launch_prints_an_observers_report_on_a_passing_run():
    proc = subprocess.run(
        [sys.executable, "-m", "shmcomm.launch", "--nranks", "2", "--blocks", "2", "--iters",
         "3", "--observe", "notify-count", "--timeout", "60"],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr
    assert "notify-count: notifies per rank: 0: " in proc.stdout, proc.stdout
