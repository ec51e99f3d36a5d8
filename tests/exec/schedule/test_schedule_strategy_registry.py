"""The strategies' registry owns their names, spec grammar, help and error text; a run takes a
strategy object of the user's too."""

from __future__ import annotations

import pytest

import shmcomm
from shmcomm.config import BY_NAME, Config
from shmcomm.errors import ArgumentError
from shmcomm.exec.schedule.strategies import STRATEGIES, parse_strategy

pytestmark = pytest.mark.timeout(60)


def test_the_setting_speaks_the_registrys_words():
    row = BY_NAME["strategy"]
    for name, cls in STRATEGIES.items():
        assert name in row.help and cls.help in row.help
        assert name in row.range_text()
    assert "replay" not in row.metavar  # (a recorded schedule comes by --replay FILE)


@pytest.mark.parametrize("spec, want", [
    ("random", ("random", ())), ("pct", ("pct", (3, 0))), ("pct:2", ("pct", (2, 0))),
    ("pct:4:900", ("pct", (4, 900))), ("exhaustive", ("exhaustive", (1,))),
    ("exhaustive:0", ("exhaustive", (0,))), ("replay", ("replay", ())),
])
def test_specs_parse_with_their_defaults(spec, want):
    assert parse_strategy(spec) == want


@pytest.mark.parametrize("spec, says", [
    ("bogus", "strategy must be one of random, pct[:D[:K]] (depth D in [1, 16]"),
    ("pct:0", "strategy: pct[:D[:K]] takes depth D in [1, 16] and expected step count K in "
              "[0, 1e8] (0: 400)"),
    ("pct:3:x", "and expected step count K in [0, 1e8]"),
    ("exhaustive:9", "exhaustive[:K] takes preemption bound K in [0, 8]"),
    ("random:1", "strategy must be one of"),
])
def test_a_bad_spec_is_refused_with_the_registrys_text(spec, says):
    with pytest.raises(ArgumentError) as info:
        Config(nranks=2, mode="schedule", strategy=spec)
    assert says in str(info.value), str(info.value)


class LastEnabled:
    """Always the last enabled agent: a strategy of the user's, not registered."""

    name = "last"

    def new_execution(self, sh, seed):
        pass

    def next_agent(self, sh, enabled, current, step):
        return enabled[-1]


class Refuses(LastEnabled):
    def next_agent(self, sh, enabled, current, step):
        return -1


def _host(rt):
    rt.barrier()
    return rt.rank


def test_a_strategy_object_schedules_the_run():
    assert shmcomm.run(_host, nranks=2, mode="schedule", strategy=LastEnabled(),
                       timeout=30) == [0, 1]
    with pytest.raises(shmcomm.ShmcommError, match="strategy .last. chose no agent at step 0"):
        shmcomm.run(_host, nranks=2, mode="schedule", strategy=Refuses(), timeout=30)
    with pytest.raises(ArgumentError, match="strategy: a strategy object schedules mode 'schedule'"):
        shmcomm.run(_host, nranks=2, mode="eager", strategy=LastEnabled())
