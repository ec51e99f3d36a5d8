"""The corpus's bug variants (``tests/corpus/bugs.py``: a missing credit, a missing dsb or drain
before the notify a reader acquires, a Set flag reused without a version, a threshold that does
not count launches, a stream read without synchronize, a tile rewritten while its TSTORE is in
flight, a soft SYNCALL over the wrong block count, an async copy never waited, a bounded poll
that gives up and reads anyway, a scalar atomic flag after undrained data, a launch read after
one look at ``done``) are caught in every mode listed with them: a race report, a checker
report, wrong data or a deadlock (any ``RunError``). The race detector's fixes for the correct
programs of the corpus must not cost these their catch."""

from __future__ import annotations

import pytest
from corpus import MODES
from corpus.bugs import BUGS

import shmcomm

pytestmark = pytest.mark.timeout(120)

RUN = dict(detect_races=True, timeout=30, wait_timeout=5, deadlock_grace=0.5)
# a bug is caught when a run of any seed fails; the first failing seed ends the test. Outside
# schedule mode whether a run shows the bug is the OS's timing (a loaded box may start the
# writer's rank well before the reader's): more seeds, so a miss on all of them is rare
SEEDS = (1, 2)
FREE_SEEDS = (1, 2, 3, 4, 5, 6)


def _cells():
    for name, (_host, _n, _b, modes) in BUGS.items():
        for mode in modes:
            yield pytest.param(name, mode, id=f"{name}-{mode}")


def test_there_are_bug_variants():
    assert len(BUGS) >= 10
    for name, (host, _n, _b, modes) in BUGS.items():
        assert (host.__doc__ or "").strip(), name
        assert modes and set(modes) <= set(MODES), name


@pytest.mark.parametrize(("name", "mode"), list(_cells()))
def test_bug_variant_is_caught(name, mode):
    host, nranks, blocks, _ = BUGS[name]
    outcomes = []
    for seed in SEEDS if mode.startswith("schedule") else FREE_SEEDS:
        try:
            shmcomm.run(host, nranks=nranks, blocks=blocks, seed=seed, **MODES[mode], **RUN)
        except shmcomm.RunError:
            return  # caught
        outcomes.append(f"seed {seed}: passed")
    pytest.fail(f"{name} in {mode} mode was not caught: {'; '.join(outcomes)}")
