"""The CI subset of the kill matrix: every catalogued bug is still caught, with fixed seeds and a
small run budget, by the kind of failure it must cause; the correct programs raise no alarm."""

from __future__ import annotations

import dataclasses
import os

import pytest

from shmcomm.exec.hazard import ADVISORY
from shmcomm.stress import catalogue
from shmcomm.stress.harness import CATCH_KINDS, RunSpec, Settings, run_one, sweep
from shmcomm.stress.killmatrix import entry_configs

pytestmark = pytest.mark.timeout(60)

SETTINGS = Settings(wait_timeout=10.0, deadlock_grace=0.3, run_timeout=30.0, trace_dir="")
MAX_RUNS = 24  # per bug (stops at the first catch); eager bugs take 1-3 runs here, so a miss is ~1e-7
CORRECT_RUNS = 6  # per correct program and mode (the full soak is the slow test below)

# How each bug must show up: what it does on hardware, not merely "something failed".
EXPECTED = {
    "set_flag_reuse": {"wrong result"},
    "phase_blind_slot": {"wrong result"},
    "no_reset_between_launches": {"wrong result"},
    "arrival_count_mismatch": {"deadlock"},
    "nonatomic_atomicadd": {"wrong result"},
    "cumulative_counter": {"wrong result"},
    "host_reset_race": {"deadlock", "checker"},
    "eq_transient": {"deadlock"},
    "event_id_clash": {"checker"},
    "missing_intra_barrier": {"wrong result"},
    # hazard-mode bugs: the stale data itself, the checker that sees the missing edge, or the
    # race detector (on by default in hazard mode) that reports it
    "notify_before_drain": {"wrong result", "checker", "race"},
    "drain_without_dsb": {"wrong result", "checker", "race"},
    "packed_set_slots": {"deadlock", "wrong result", "checker", "race"},
    "missing_wait_flag": {"wrong result", "checker", "race"},
}


def test_every_bug_has_an_expectation_and_a_cited_source():
    assert set(EXPECTED) == {e.name for e in catalogue.BUGS}
    for e in catalogue.BUGS:
        assert e.mode in ("eager", "hazard")
        # where the bug comes from, in words a user can follow: an issue or PR, or the seed barrier
        assert any(w in e.summary for w in ("#", "seed", "TPUT", "pto-isa")), \
            f"{e.name}: cite the real bug in its docstring"
        assert "§" not in e.summary and e.summary.rstrip(".").endswith(")"), e.summary


@pytest.mark.parametrize("entry", catalogue.BUGS, ids=lambda e: e.name)
def test_bug_is_caught(entry):
    rep = sweep(entry.host, entry_configs(entry, ("eager",)), seed=0, runs=MAX_RUNS,
                settings=SETTINGS, stop_at_first=True, program=entry.name)
    caught = [o for o in rep.outcomes if o.kind in CATCH_KINDS]
    assert caught, (f"{entry.name} was not caught in {len(rep.outcomes)} runs: "
                    f"{[(o.kind, o.message[:200]) for o in rep.outcomes]}")
    assert caught[0].kind in EXPECTED[entry.name], caught[0].message


@pytest.mark.parametrize("entry", [e for e in catalogue.BUGS if e.mode == "hazard"],
                         ids=lambda e: e.name)
def test_hazard_bug_is_caught_with_the_race_detector_on(entry):
    """With the detector on (the precise judge) the hazard-mode bugs are still caught, and an
    advisory checker's finding never is the catch itself, only its likely cause."""
    settings = dataclasses.replace(SETTINGS, detect_races=True)
    rep = sweep(entry.host, entry_configs(entry, ("hazard",)), seed=0, runs=MAX_RUNS,
                settings=settings, stop_at_first=True, program=entry.name)
    caught = [o for o in rep.outcomes if o.kind in CATCH_KINDS]
    assert caught, [(o.kind, o.message[:200]) for o in rep.outcomes]
    assert caught[0].kind in EXPECTED[entry.name] | {"race"}, caught[0].message
    assert not any(f"hazard [{name}]" in caught[0].message.splitlines()[0] for name in ADVISORY), \
        caught[0].message


@pytest.mark.parametrize("entry", catalogue.CORRECT, ids=lambda e: e.name)
def test_correct_program_raises_no_alarm(entry):
    modes = ("eager", "hazard")
    cfgs = [c for c in entry_configs(entry, modes) if c[0] <= 4]
    rep = sweep(entry.host, cfgs, seed=1000, runs=CORRECT_RUNS * len(modes), settings=SETTINGS,
                program=entry.name)
    assert not rep.failures, [(o.spec, o.kind, o.message[:500]) for o in rep.failures]


def test_failing_hazard_run_keeps_its_trace_and_a_passing_one_leaves_none(tmp_path):
    settings = Settings(trace_dir=str(tmp_path / "traces"))
    bad = run_one(catalogue.get("notify_before_drain").host, RunSpec(2, 1, 64, "hazard", 0),
                  settings, "notify_before_drain")
    assert bad.kind in CATCH_KINDS and bad.trace and os.path.isfile(bad.trace)
    # the advisory checker that saw the unfenced notify travels with the failure it explains
    assert any("hazard [notify-unfenced]" in a for a in bad.advice), (bad.kind, bad.advice)
    assert os.path.dirname(bad.trace) == str(tmp_path / "traces")
    good = run_one(catalogue.get("ring_put").host, RunSpec(2, 1, 64, "hazard", 0), settings,
                   "ring_put")
    assert good.kind == "ok" and good.trace is None
    assert os.listdir(tmp_path / "traces") == [os.path.basename(bad.trace)]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_correct_programs_10000_runs_no_alarm():
    """The issue's soak: 10,000 runs of the correct programs across modes and configurations."""
    modes = ("eager", "hazard")
    per = -(-10_000 // len(catalogue.CORRECT))
    for entry in catalogue.CORRECT:
        rep = sweep(entry.host, entry_configs(entry, modes), seed=0, runs=per, settings=SETTINGS,
                    program=entry.name)
        assert not rep.failures, [(o.spec, o.kind, o.message[:500]) for o in rep.failures[:3]]
