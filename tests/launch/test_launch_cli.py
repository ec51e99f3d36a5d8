"""The command lines: one program signature (module:host, file.py:host, --arg), every option
with help and its default, settings that would be ignored refused or warned about, an import
error shown with its traceback and exit status 3, and the printed formats pinned (golden)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from _helpers import ROOT, run_cli, run_in_process

from shmcomm.config import Config
from shmcomm.errors import ArgumentError, ShmcommWarning
from shmcomm.launch.cleanup import build_parser as cleanup_parser
from shmcomm.launch.cli import build_parser as launch_parser
from shmcomm.launch.options import _key_value, format_arg
from shmcomm.launch.programs import format_default
from shmcomm.launch.suite import build_parser as suite_parser
from shmcomm.launch.tracecli import build_parser as trace_parser
from shmcomm.stress.cli import build_parser as stress_parser
from shmcomm.stress.harness import Outcome, Report, RunSpec, Settings
from shmcomm.stress.report import format_report

pytestmark = pytest.mark.timeout(120)

PROG = '''
import numpy as np

def host(rt, scale=1, label="x"):
    x = rt.alloc((4,), np.float32)
    x[:] = rt.rank * scale
    rt.barrier()
    return f"{label}:{float(x[0])}:{rt.nranks}"

def sized(rt, size):
    return size

def plain(rt):
    return None
'''


_run = run_cli


@pytest.fixture
def prog(tmp_path):
    (tmp_path / "cliprog.py").write_text(textwrap.dedent(PROG))
    return tmp_path


def assert_every_option_documented(p: argparse.ArgumentParser) -> None:
    for action in p._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{p.prog}: {name} has no help"
        if action.option_strings:
            assert "default" in action.help, f"{p.prog}: {name} does not show its default"


@pytest.mark.parametrize("make", [launch_parser, stress_parser, cleanup_parser, trace_parser, suite_parser],
                         ids=["launch", "stress", "cleanup", "trace", "suite"])
def test_every_option_has_help_and_default(make, capsys):
    p = make()
    capsys.readouterr()
    assert_every_option_documented(p)
    assert p.epilog and "exit status" in p.epilog


def test_entry_points_and_version():
    for argv, name in ((["launch", "--help"], "python -m shmcomm launch"),
                       (["stress", "--help"], "python -m shmcomm stress"),
                       (["trace", "--help"], "python -m shmcomm trace"),
                       (["cleanup", "--help"], "python -m shmcomm cleanup"),
                       (["suite", "--help"], "python -m shmcomm suite")):
        p = _run(*argv)
        assert p.returncode == 0 and p.stdout.startswith(f"usage: {name} "), p.stdout
    p = _run("--help", module=("-m", "shmcomm.launch"))
    assert p.returncode == 0 and p.stdout.startswith("usage: python -m shmcomm.launch ")
    p = _run("--version")
    assert p.returncode == 0 and p.stdout.startswith("shmcomm ")
    p = _run("lunch")
    assert p.returncode == 2 and "did you mean 'launch'" in p.stderr
    text = (ROOT / "pyproject.toml").read_text()
    for script in ("shmcomm", "shmcomm-launch", "shmcomm-stress", "shmcomm-trace", "shmcomm-cleanup",
                   "shmcomm-suite"):
        assert f"\n{script} = " in text


def test_program_from_a_file_with_args(prog):
    p = _run("launch", "--nranks", "2", "--blocks", "1", "--program", "cliprog.py:host",
             "--arg", "scale=3", "--arg", "label=hello", cwd=prog)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["rank 0: 'hello:0.0:2'", "rank 1: 'hello:3.0:2'"]
    p = _run("launch", "--nranks", "2", "--program", "cliprog:host", "--arg", "scale=2",
             env=dict(os.environ, PYTHONPATH=str(prog)))
    assert p.returncode == 0 and "rank 1: 'x:2.0:2'" in p.stdout, p.stderr
    p = _run("stress", "--program", "cliprog.py:host", "--arg", "scale=2", "--nranks", "2",
             "--blocks", "1", "--mode", "eager", "--runs", "2", "--no-progress", cwd=prog)
    assert p.returncode == 0 and "failures: 0" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("value", [np.dtype("float16"), np.dtype(">i4"), np.dtype("S5"),
                                   np.float32, 3, "hello", (1, 2.5), "@at"])
def test_an_arg_value_written_for_a_command_line_reads_back_the_same(value):
    key, back = _key_value(format_arg("x", value))
    assert key == "x" and back == value and type(back) is type(value)


def test_an_arg_no_command_line_can_carry_is_named():
    with pytest.raises(ArgumentError, match="--arg x: .*no command line can pass it"):
        format_arg("x", np.dtype([("a", "i4")]))
    with pytest.raises(argparse.ArgumentTypeError, match="@dtype:float7 names no numpy dtype"):
        _key_value("x=@dtype:float7")


def test_import_error_shows_its_traceback_and_exits_3(tmp_path):
    (tmp_path / "broken.py").write_text("import numpy\n\ndef helper():\n    return 1 / 0\n\nhelper()\n"
                                        "def host(rt):\n    pass\n")
    for cmd in ("launch", "stress"):
        p = _run(cmd, "--program", "broken.py:host", cwd=tmp_path)
        assert p.returncode == 3, (cmd, p.stderr)
        assert "Traceback (most recent call last)" in p.stderr and "broken.py\", line 4" in p.stderr
        assert f"python -m shmcomm {cmd}: error: --program: loading 'broken.py' failed: " \
               "ZeroDivisionError" in p.stderr
    p = _run("launch", "--program", "broken:host", env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert p.returncode == 3 and "importing module 'broken' failed" in p.stderr
    p = _run("launch", "--program", "no_such_mod_q:host")
    assert p.returncode == 2 and "no module named 'no_such_mod_q'" in p.stderr


@pytest.mark.parametrize("argv, words", [
    (["launch", "--hazards", "pipes"], "--hazards has no effect without hazard or schedule mode"),
    (["launch", "--arg", "a=1"], "--arg is passed to --program's host"),
    (["launch", "--program", "m:h", "--iters", "5"], "not allowed with argument"),
    (["stress", "--program", "epoch_barrier", "--mode", "eager", "--hazards", "pipes"],
     "--hazards has no effect without hazard or schedule mode"),
    (["stress", "--catalogue", "--nranks", "2"], "--nranks has no effect with --catalogue"),
    (["stress", "--program", "epoch_barrier", "--only", "ring_put"], "--only selects catalogue"),
    (["stress", "--program", "cliprog.py:plain", "--size", "8"], "--size has no effect"),
    (["stress", "--program", "cliprog.py:sized", "--arg", "size=8"], "the sweep gives size"),
    (["stress"], "one of the arguments --program --catalogue is required"),
    (["launch", "--program", "cliprog.py:host", "--arg", "x"], "expected KEY=VALUE"),
])
def test_ineffective_or_bad_options_are_usage_errors(prog, argv, words, capsys, monkeypatch):
    monkeypatch.chdir(prog)  # in this process: argparse and the checks before any run
    status, _out, err = run_in_process(capsys, *argv)
    assert status == 2, (argv, err)
    assert words in err and err.startswith("usage: "), err
    assert "Traceback" not in err


def test_hazards_under_hazard_mode_from_the_environment_are_accepted(prog, capsys, monkeypatch):
    monkeypatch.chdir(prog)
    monkeypatch.setenv("SHMCOMM_MODE", "hazard")
    status, _out, err = run_in_process(capsys, "launch", "--nranks", "2", "--blocks", "1",
                                       "--program", "cliprog.py:plain", "--hazards", "pipes")
    assert status == 0, err


def test_unknown_shmcomm_variable_is_warned_with_the_nearest_name():
    with pytest.warns(ShmcommWarning, match="SHMCOMM_WAIT_TIMOUT is ignored; did you mean "
                                            "SHMCOMM_WAIT_TIMEOUT"):
        Config.from_kwargs(env={"SHMCOMM_WAIT_TIMOUT": "3"})
    with pytest.warns(ShmcommWarning, match="SHMCOMM_HAZARD_DELAY=0.1 has no effect in eager mode"):
        Config.from_kwargs(env={"SHMCOMM_HAZARD_DELAY": "0.1"})
    with pytest.warns(ShmcommWarning, match="hazards='pipes' has no effect in eager mode"):
        Config.from_kwargs(env={}, hazards="pipes")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Config.from_kwargs(env={"SHMCOMM_MODE": "hazard", "SHMCOMM_HAZARDS": "pipes"})
        Config.from_kwargs(env={"SHMCOMM_NRANKS": "3"})


def test_cli_warning_is_one_plain_line(prog, capsys, monkeypatch):
    monkeypatch.chdir(prog)
    monkeypatch.setenv("SHMCOMM_NRANK", "4")
    status, _out, err = run_in_process(capsys, "launch", "--nranks", "2", "--blocks", "1",
                                       "--program", "cliprog.py:plain")
    assert status == 0, err
    assert err.splitlines() == ["python -m shmcomm launch: warning: unknown environment "
                                "variable SHMCOMM_NRANK is ignored; did you mean SHMCOMM_NRANKS?"]


def test_stress_warns_once_over_many_runs_and_before_a_usage_error(prog, capsys, monkeypatch):
    monkeypatch.chdir(prog)
    monkeypatch.setenv("SHMCOMM_SEEED", "4")
    status, _out, err = run_in_process(capsys, "stress", "--program", "cliprog.py:plain",
                                       "--nranks", "2", "--blocks", "1", "--mode", "eager",
                                       "--runs", "3", "--no-progress")
    assert status == 0, err
    assert err.splitlines() == ["python -m shmcomm stress: warning: unknown environment "
                                "variable SHMCOMM_SEEED is ignored; did you mean SHMCOMM_SEED?"]
    status, _out, err = run_in_process(capsys, "stress", "--program", "cliprog.py:plain",
                                       "--mode", "eager", "--hazards", "all")
    assert status == 2 and "SHMCOMM_SEEED" in err.splitlines()[0]


def test_shmcomm_nranks_is_honoured_by_launch(prog, capsys, monkeypatch):
    monkeypatch.chdir(prog)
    monkeypatch.setenv("SHMCOMM_NRANKS", "3")
    monkeypatch.setenv("SHMCOMM_BLOCKS", "1")
    status, out, err = run_in_process(capsys, "launch", "--program", "cliprog.py:host")
    assert status == 0 and "rank 2: 'x:2.0:3'" in out, out + err
    status, out, err = run_in_process(capsys, "launch", "--nranks", "2", "--program",
                                      "cliprog.py:host")
    assert status == 0 and "rank 1: 'x:1.0:2'" in out  # the option wins


# --- golden: the printed formats ------------------------------------------------------------------

GOLDEN_DEFAULT = """\
shmcomm default job: 2 ranks x 4 blocks
barrier          iterations   median us  slowest rank us
--------------------------------------------------------
EpochBarrier            200        15.0             20.0
DeviceBarrier            10        25.0             30.0
AllReduce 1 MiB           3      1500.0           1600.0
check EpochBarrier rounds: OK
check AllReduce 2x4 float32 sum 1 MiB vs numpy: FAILED
result: FAILED   (wall 0.42 s)"""


def test_default_job_format_is_pinned():
    def res(rank, e, s, a, ok):
        return {"rank": rank, "blocks": 4, "iters": 200, "epoch_us": e, "seed_us": s,
                "allreduce_us": a, "ok": ok,
                "checks": [("EpochBarrier rounds", True),
                           ("AllReduce 2x4 float32 sum 1 MiB vs numpy", ok)]}

    out = format_default([res(0, 10.0, 20.0, 1400.0, True), res(1, 20.0, 30.0, 1600.0, False)], 0.421)
    assert out == GOLDEN_DEFAULT


GOLDEN_STRESS = """\
shmcomm stress: cliprog.py:sized: 3 runs in 1.5 s (2.0 runs/s, load 1.00 2.00 3.00)
failures: 1  (wrong result 1, deadlock 0, crash 0, checker 0, race 0, error 0)
first failure: run 1 (nranks=4 blocks=2 size=64 mode=hazard seed=8): wrong result
  rank 1 block 0: AssertionError: bad sum
reproduce: python -m shmcomm.stress --program cliprog.py:sized --nranks 4 --blocks 2 --seed 8 \
--mode hazard --size 64 --runs 1 --arg k=1
  or once, under launch: python -m shmcomm launch --program cliprog.py:sized --nranks 4 --blocks 2 \
--timeout 30 --wait-timeout 10 --deadlock-grace 0.3 --seed 8 --mode hazard --arg size=64 --arg k=1
outcomes per configuration:
  configuration                          ok  wrong result  deadlock  crash  checker  race  error
  nranks=2 blocks=1 size=64 mode=eager    1             0         0      0        0     0      0
  nranks=4 blocks=2 size=64 mode=hazard   1             1         0      0        0     0      0"""


def test_stress_report_format_is_pinned(prog, monkeypatch):
    monkeypatch.chdir(prog)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 2.0, 3.0))
    rep = Report("cliprog.py:sized", seconds=1.5, kwargs={"k": 1})
    rep.outcomes = [Outcome(RunSpec(2, 1, 64, "eager", 7), "ok", 0.5),
                    Outcome(RunSpec(4, 2, 64, "hazard", 8), "wrong result", 0.5,
                            "rank 1 block 0: AssertionError: bad sum"),
                    Outcome(RunSpec(4, 2, 64, "hazard", 10), "ok", 0.5)]
    assert format_report(rep, Settings()) == GOLDEN_STRESS
    assert not (prog / "results").exists()  # nothing is written to the working directory


@pytest.mark.parametrize("script", ["benchmarks/collectives.py", "benchmarks/barrier_latency.py",
                                    "benchmarks/hot_path.py", "benchmarks/hazard_overhead.py",
                                    "scripts/soak.py"])
def test_every_benchmark_option_has_help_and_default(script):
    import importlib.util

    spec = importlib.util.spec_from_file_location("script_" + Path(script).stem, ROOT / script)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    assert_every_option_documented(mod.build_parser())


def test_stress_hazards_and_exitfirst(prog):
    p = _run("stress", "--program", "epoch_barrier", "--nranks", "2", "--blocks", "1",
             "--mode", "hazard", "--hazards", "pipes,checkers", "--runs", "2", "--no-progress",
             "--trace-dir", "", cwd=prog)
    assert p.returncode == 0 and "failures: 0" in p.stdout, p.stdout + p.stderr
    p = _run("stress", "--program", "cumulative_counter", "--nranks", "2", "--blocks", "4",
             "--runs", "50", "-x", "--no-progress", "--trace-dir", "", cwd=prog)
    assert p.returncode == 1, p.stdout + p.stderr
    runs = int(p.stdout.split(": ", 2)[2].split(" runs")[0])
    assert p.stdout.count("wrong result 1,") == 1 and runs < 50, p.stdout


GOLDEN_DISPATCHER = """\
usage: python -m shmcomm {launch,stress,trace,cleanup,suite} [options]   |   python -m shmcomm --version

commands (`python -m shmcomm COMMAND --help` lists a command's options):
  launch   run a host program once on N rank processes
  stress   run a program over many seeds and shapes, report failures and how to rerun them
  trace    summarize a Chrome trace file of a run: who waited on whom, the longest waits
  cleanup  remove segments of dead runs from /dev/shm
  suite    run one of pto-isa's CPU comm suites unchanged, every rank a process
"""


def test_dispatcher_help_is_pinned():
    p = _run("--help")
    assert p.returncode == 0 and p.stdout == GOLDEN_DISPATCHER
    p = _run()
    assert p.returncode == 2 and p.stderr == GOLDEN_DISPATCHER


BAD_ARGS = '''
def host(rt, size, scale=1):
    open(f"started-{rt.rank}", "w").close()  # a rank ran the host
'''


@pytest.mark.parametrize("args, words", [
    (["--arg", "size=300", "--arg", "nokey=1"],
     ["--arg nokey: the host takes no argument 'nokey'", "accepts size, scale"]),
    (["--arg", "size=300", "--arg", "scal=2"], ["(did you mean scale?)"]),
    (["--arg", "scale=2"], ["--arg size=VALUE is missing", "accepts size, scale"]),
], ids=["unknown", "misspelt", "missing"])
def test_a_bad_or_missing_arg_is_a_usage_error_before_any_rank_starts(tmp_path, args, words):
    (tmp_path / "badargs.py").write_text(BAD_ARGS)
    p = _run("launch", "--program", "badargs.py:host", "-n", "2", "-b", "1", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    error = [x for x in p.stderr.splitlines() if "error:" in x]
    assert len(error) == 1 and all(w in error[0] for w in words), p.stderr
    assert "Traceback" not in p.stderr and not list(tmp_path.glob("started-*"))


def test_cleanup_lists_the_kept_schedules_and_leaves_them(tmp_path):
    from shmcomm.launch.cleanup import format_report, kept_schedules

    kept = tmp_path / "shmcomm-stress-abc123"
    kept.mkdir()
    (kept / "run-1.schedule").write_text("x" * 100)
    (tmp_path / "other-dir").mkdir()
    entries = kept_schedules(str(tmp_path))
    assert [e.name for e in entries] == [str(kept)] and entries[0].size == 100
    line = format_report(entries, dry_run=True).splitlines()[0]
    assert line.startswith("kept") and "1 kept schedule(s) of failing schedule-mode runs" in line
