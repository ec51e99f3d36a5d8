"""The stress harness in schedule mode: a failure prints a replay command that replays it, and
a program that returns a value gets an outcome histogram with the first seed of each outcome."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from shmcomm.stress.harness import Settings, sweep
from shmcomm.stress.report import format_report

pytestmark = pytest.mark.timeout(900)  # several CLI runs, each bounded below


def _stress(args, cwd):
    return subprocess.run([sys.executable, "-m", "shmcomm.stress", "--no-progress"] + args,
                          capture_output=True, text=True, timeout=150, cwd=cwd)


def test_a_failure_prints_a_replay_command_that_replays_it(tmp_path):
    out = _stress(["--program", "set_flag_reuse", "--nranks", "2", "--blocks", "1", "--size",
                   "64", "--mode", "schedule", "--strategy", "pct:2", "--runs", "2"], tmp_path)
    assert out.returncode == 1, out.stderr
    first = re.search(r"first failure: .*: (.*)\n  (.*)", out.stdout)
    replay = re.search(r"^replay: (.*)$", out.stdout, re.M)
    repro = re.search(r"^reproduce: (.*)$", out.stdout, re.M)
    assert first and replay and repro, out.stdout
    assert "--replay" in replay.group(1) and "--strategy pct:2" in repro.group(1)
    # the seed reproduces the very failure
    again = _stress(shlex.split(repro.group(1))[3:], tmp_path)
    line = re.search(r"first failure: .*: (.*)\n  (.*)", again.stdout)
    assert again.returncode == 1 and line and line.groups() == first.groups(), again.stdout
    # the kept schedule (shrunk to fewer preemptions) fails the same way, every time
    seen = []
    for _ in range(2):
        again = _stress(shlex.split(replay.group(1))[3:], tmp_path)
        line = re.search(r"first failure: .*: (.*)\n  (.*)", again.stdout)
        assert again.returncode == 1 and line, again.stdout
        assert line.group(1) == first.group(1) and "AssertionError" in line.group(2)
        seen.append(line.groups())
    assert seen[0] == seen[1]


def litmus(rt):
    """Message passing without a fence: what the reader sees of (flag, data)."""
    import numpy as np

    from shmcomm.comm import TNOTIFY, TTEST, NotifyOp, Signal, WaitCmp
    from shmcomm.stress.catalogue._common import FLAG_SLOT, slot

    data = rt.alloc((1,), np.int32)

    def kernel(ctx, data):
        if ctx.rank == 0:
            TNOTIFY(Signal(data.on_rank(1).cast(np.int32)), 1, NotifyOp.Set)
            TNOTIFY(Signal(slot(ctx, FLAG_SLOT, 1)), 1, NotifyOp.Set)
        else:
            flag = TTEST(Signal(slot(ctx, FLAG_SLOT)), 1, WaitCmp.EQ)
            ctx.rt.kernel_state["seen"] = (int(flag), int(TTEST(Signal(data), 1, WaitCmp.EQ)))

    rt.launch(kernel, blocks=1, args=(data.ptr,))
    return rt.kernel_state.get("seen")


def test_outcome_histogram_counts_values_with_their_first_seed():
    rep = sweep(litmus, [(2, 1, 1, "schedule")], seed=0, runs=12, settings=Settings(),
                program="litmus")
    text = format_report(rep, Settings())
    assert "outcome histogram (outcome, runs, first seed):" in text
    rows = re.findall(r"^  ok (.*?)\s+(\d+)  seed (\d+)$", text, re.M)
    assert sum(int(n) for _, n, _ in rows) == 12
    assert len(rows) >= 2, text  # the reader ran before and after the writer in some schedules
    for value, _n, seed in rows:
        first = next(o for o in rep.outcomes if f"ok {o.value}" == f"ok {value}")
        assert first.spec.seed == int(seed)


def test_the_first_failing_schedule_is_shrunk_and_still_fails(tmp_path):
    from shmcomm.exec.schedule import load
    from shmcomm.stress import catalogue

    entry = catalogue.get("missing_intra_barrier")
    # the schedule's wrong data, not the race detector's report of it
    settings = Settings(trace_dir="", schedule_dir=str(tmp_path), detect_races=False)
    # seed 5: its first schedule exposes the bug
    rep = sweep(entry.host, [(2, 4, 64, "schedule")], seed=5, runs=1, settings=settings,
                program=entry.name)
    out = rep.outcomes[0]
    assert out.kind == "wrong result" and out.shrunk is not None, out.message
    before, after = out.shrunk
    assert after < before
    assert load(out.schedule).preemptions == after
    again = sweep(entry.host, [(2, 4, 64, "schedule")], seed=5, runs=1, program=entry.name,
                  settings=Settings(trace_dir="", schedule_dir="", replay=out.schedule,
                                    detect_races=False))
    assert again.outcomes[0].kind == "wrong result"


def test_bounded_exhaustive_search_completes_on_a_correct_kernel_and_finds_a_bug(tmp_path):
    import shmcomm
    from shmcomm.config import Config
    from shmcomm.stress import catalogue
    from shmcomm.stress.explore import explore

    cfg = Config(nranks=2, blocks=1, timeout=60, wait_timeout=30, hazards="pipes,visibility,lines")
    ok = explore(catalogue.get("ring_put").host, cfg, args=(64,), max_preemptions=0, max_runs=200)
    assert ok.failure is None and ok.complete and ok.runs > 1
    bad = explore(catalogue.get("set_flag_reuse").host, cfg, args=(64,), max_preemptions=1)
    assert bad.failure is not None and bad.schedule is not None
    path = tmp_path / "s.json"
    bad.schedule.save(str(path))
    with pytest.raises(shmcomm.RunError) as again:
        shmcomm.run(catalogue.get("set_flag_reuse").host, nranks=2, blocks=1, args=(64,),
                    mode="schedule", replay=str(path), timeout=60, wait_timeout=30,
                    hazards="pipes,visibility,lines")
    assert again.value.failures[0].message.splitlines()[0] == \
        bad.failure.failures[0].message.splitlines()[0]


def test_stress_cli_runs_the_exhaustive_search(tmp_path):
    out = _stress(["--program", "set_flag_reuse", "--nranks", "2", "--blocks", "1", "--size", "64",
                   "--strategy", "exhaustive:1", "--hazards", "pipes,visibility,lines"], tmp_path)
    assert out.returncode == 1 and "AssertionError" in out.stdout, out.stdout + out.stderr
    replay = re.search(r"^replay: (.*)$", out.stdout, re.M)
    again = _stress(shlex.split(replay.group(1))[3:], tmp_path)
    assert again.returncode == 1 and "wrong result 1" in again.stdout
    ok = _stress(["--program", "ring_put", "--nranks", "2", "--blocks", "1", "--size", "64",
                  "--strategy", "exhaustive:0"], tmp_path)
    assert ok.returncode == 0 and "no failure" in ok.stdout, ok.stdout + ok.stderr
