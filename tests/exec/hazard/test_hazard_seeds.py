"""Every synchronized kernel of the hazard-model pairs passes in hazard mode under many seeds.

A run's launches are seeded apart (each block's stream is derived from (seed, rank, launch,
block)), so one run of L launches tries L seed streams at the cost of one process start: 1,000
launches per kernel pair; the barriers (3 ranks x 3 blocks, slower) run 100 by default and 1,000
under ``-m slow``.
"""

from __future__ import annotations

import pytest
from test_hazard_barriers import host_epoch, host_seed
from test_hazard_models import host_flags, host_load_scale, host_put_notify, host_rmw, host_set_slots

import shmcomm

pytestmark = pytest.mark.timeout(600)

CASES = {
    "pipes: TLOAD + wait_flag(MTE2, V)": (1, host_load_scale, (True,)),
    "pipes+visibility: TPUT + drain + dsb": (2, host_put_notify, (True, True)),
    "lines: one Set slot per 64-byte line": (3, host_set_slots, (16,)),
    "jitter: AtomicAdd counter": (1, host_rmw, (True,)),
    "checkers: balanced flags": (1, host_flags, ("balanced",)),
}


def _many(name, launches, seed):
    nranks, host, args = CASES[name]
    res = shmcomm.run(host, nranks=nranks, blocks=1, mode="hazard", seed=seed, timeout=550,
                      wait_timeout=30, args=args + (launches,))
    assert res == [0] * nranks, f"{name}: seed {seed}: failed launches per rank {res}"


def _barriers(launches, seed):
    assert shmcomm.run(host_seed, nranks=3, blocks=3, mode="hazard", seed=seed, timeout=550,
                       args=(1, launches, True)) == [0, 0, 0]
    res = shmcomm.run(host_epoch, nranks=3, blocks=3, mode="hazard", seed=seed, timeout=550,
                      args=(3, launches, (3, 2)))
    assert res == [[3 * (i + 1) for i in range(launches)]] * 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_synchronized_kernels_pass_1000_seeds(name):
    _many(name, 1000, seed=11)


def test_barriers_by_contract_pass_many_seeds():
    _barriers(100, seed=11)


@pytest.mark.slow
def test_barriers_by_contract_pass_1000_seeds():
    _barriers(1000, seed=12)
