"""benchmarks/_bench.py: the statistics are right, an unstable comparison whose spread crosses 1
is not printed as a ratio, and the small benchmarks' command lines still parse. No timing."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import pytest
from _helpers import ROOT
from test_launch_cli import assert_every_option_documented

BENCH = os.path.join(str(ROOT), "benchmarks")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = _load("_bench")


def test_stats_median_quartiles_and_spread():
    s = bench.Stats.of([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.n, s.median, s.min, s.max) == (5, 3.0, 1.0, 5.0)
    assert (s.q1, s.q3, s.iqr) == (2.0, 4.0, 2.0)
    assert s.rel_stdev == pytest.approx(s.stdev / 3.0)
    one = bench.Stats.of([7.0])
    assert one.stdev == 0.0 and one.iqr == 0.0 and one.rel_stdev == 0.0
    with pytest.raises(ValueError, match="samples"):
        bench.Stats.of([])


def test_stability_rules():
    steady = bench.Stats.of([100.0, 101.0, 99.0, 100.0])
    noisy = bench.Stats.of([50.0, 150.0, 100.0, 60.0])
    assert bench.stability(steady, load=0.5, ncores=2).stable
    judged = bench.stability(noisy, load=0.5, ncores=2)
    assert not judged.stable and "relative stdev" in str(judged)
    judged = bench.stability(steady, load=5.0, ncores=2)
    assert not judged.stable and "load average 5.0 before the run > 2 cores" in str(judged)


def test_an_unstable_ratio_that_may_reverse_is_not_printed_as_a_ratio():
    text = bench.describe_ratio(1.1, 0.8, 1.4, bench.Stability(["relative stdev 30% > 10%"]))
    assert text.startswith("no clear difference") and "1.10x" not in text
    warned = bench.describe_ratio(2.0, 1.6, 2.4, bench.Stability(["load average 9.0 > 2 cores"]))
    assert warned.startswith("2.00x") and "WARNING" in warned
    assert bench.describe_ratio(2.0, 1.9, 2.1, bench.Stability()) == "2.00x (1.90..2.10)"
    assert bench.paired([1.0, 1.0, 1.0], load=0.0).startswith("1.00x")


def test_compare_uses_both_samples_spread():
    lo, hi = bench.ratio_bounds(bench.Stats.of([10.0, 12.0]), bench.Stats.of([4.0, 5.0]))
    # quartiles (inclusive) of [10, 12] are 10.5 and 11.5, of [4, 5] 4.25 and 4.75
    assert lo == pytest.approx(10.5 / 4.75) and hi == pytest.approx(11.5 / 4.25)


def test_machine_metadata():
    m = bench.machine()
    assert m["date"].endswith("UTC") and m["python"] and m["affinity"] >= 1
    assert len(m["loadavg_start"]) == 3
    assert "cores, load average" in bench.machine_line(m)


@pytest.mark.parametrize("make, text, ok", [
    (lambda: bench.int_range(1, 64), "8", 8), (lambda: bench.int_range(1), "0", None),
    (lambda: bench.int_range(1, 64), "x", None), (lambda: bench.int_list(2, 8), "2,4", [2, 4]),
    (lambda: bench.int_list(2, 8), "2,9", None),
    (lambda: bench.choice_list(("a", "b"), "all"), "all", ["a", "b"]),
    (lambda: bench.choice_list(("a", "b")), "a,c", None),
])
def test_argument_types(make, text, ok):
    parse = make()
    if ok is None:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    else:
        assert parse(text) == ok


@pytest.mark.parametrize("name", ["race_overhead", "runs_per_second", "schedule_strategies",
                                  "hazard_overhead", "handoff_latency"])
def test_small_benchmarks_document_every_option(name):
    assert_every_option_documented(_load(name).build_parser())


@pytest.mark.parametrize("name, argv", [("race_overhead", ["--reps", "0"]),
                                        ("runs_per_second", ["--modes", "fast"]),
                                        ("hazard_overhead", ["--nranks", "65"]),
                                        ("handoff_latency", ["--iters", "5"])])
def test_small_benchmarks_refuse_bad_arguments(name, argv, capsys):
    with pytest.raises(SystemExit) as exc:
        _load(name).build_parser().parse_args(argv)
    assert exc.value.code == 2 and argv[0] in capsys.readouterr().err


def test_runs_per_second_cases_name_their_settings():
    rps = _load("runs_per_second")
    assert rps._settings("schedule-eager", "pct:3") == {
        "mode": "schedule", "strategy": "pct:3", "hazards": "none", "detect_races": False}
    assert rps._settings("schedule+races", "random") == {
        "mode": "schedule", "strategy": "random", "detect_races": True}
    assert rps._settings("pool", "random") == {"mode": "eager", "detect_races": False}
    assert [c for c in rps.CASES if rps._mode(c) == "schedule"] == [
        "schedule", "schedule-eager", "schedule+races"]


@pytest.mark.timeout(120)
def test_runs_per_second_profile_counts_the_ranks_host_and_kernels(capsys):
    """--profile: every rank returns its host's and blocks' stats, the scheduler's own work
    among them in schedule mode, and the merged table names functions per run."""
    import shmcomm

    rps = _load("runs_per_second")
    stats = shmcomm.run(rps.profiled_host, nranks=2, blocks=2, mode="schedule", seed=1)
    assert len(stats) == 2
    for per_rank in stats:
        names = {(os.path.basename(f), fn) for f, _line, fn in per_rank}
        assert ("runs_per_second.py", "ring_kernel") in names  # the blocks' kernels
        assert ("runtime.py", "launch") in names  # the host function
        assert ("scheduler.py", "switch") in names  # schedule mode's points
    rps.print_profile(stats, runs=1, top=5)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("profiled CPU over all ranks: ") and "calls per run" in out[0]
    assert len(out) == 2 + 5 and all("us/run" not in row for row in out[2:])


@pytest.mark.timeout(120)
def test_handoff_latency_prints_every_figure(capsys):
    """The futex hand-off on one CPU, on two and left to the kernel, and a scheduled run's cost
    per point: each printed as a number (none asserted: the box is shared)."""
    import re

    assert _load("handoff_latency").main(["--iters", "50", "--repeats", "2", "--points", "3",
                                          "--runs", "2", "--nranks", "2", "--blocks", "2"]) == 0
    out = capsys.readouterr().out
    names = ["both on one CPU", "left to the kernel", "ranks on one CPU: a run with no points",
             "ranks left to the kernel: a run with no points"]
    points = ["ranks on one CPU: one scheduling point", "ranks left to the kernel: one scheduling point"]
    if len(os.sched_getaffinity(0)) > 1:
        names.append("on two different CPUs")
    for name in names + points:
        m = re.search(re.escape(name) + r" +(-?[0-9.]+) (us|ms)", out)
        assert m, (name, out)
        if name in names:  # (a point's cost is a difference of two runs: it may be noise)
            assert float(m.group(1)) > 0, (name, out)
