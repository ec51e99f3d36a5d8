"""The stress harness: classification, the summary, exit codes, JSON, a user's --program, and
the promise that the printed repro command reruns the failure."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap

import pytest

from shmcomm.errors import DeadlockError, Failure, RunError, RunTimeout
from shmcomm.stress.cli import main
from shmcomm.stress.harness import RunSpec, Settings, classify, configs, specs
from shmcomm.stress.report import repro_command

pytestmark = pytest.mark.timeout(90)

USER_PROGRAM = '''
import numpy as np

def host(rt, size):
    """Fails with a wrong result exactly when the run's seed is 2 mod 3 (a deterministic 'race')."""
    x = rt.alloc((size,), np.float32)
    x[:] = rt.rank
    rt.all_reduce(x)
    if rt.config.seed % 3 == 2:
        assert False, f"seed {rt.config.seed}: sum is off"
    return float(x[0])  # the sum of ranks

def host_plain(rt):
    rt.barrier()
'''


def _stress(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shmcomm.stress", *args, "--no-progress",
                           "--trace-dir", ""],
                          capture_output=True, text=True, timeout=80, env=env)


def _repro(stdout: str) -> list[str]:
    lines = [line for line in stdout.splitlines() if line.startswith("reproduce: ")]
    assert lines, stdout
    argv = shlex.split(lines[0][len("reproduce: "):])
    assert argv[:3] == ["python", "-m", "shmcomm.stress"]
    return argv[3:]


@pytest.fixture
def user_env(tmp_path):
    (tmp_path / "my_stress_prog.py").write_text(textwrap.dedent(USER_PROGRAM))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return env


def test_classify_by_exception_type():
    def err(kind, message, cls=RunError):
        return cls([Failure(0, 1, kind, message)], seed=3)

    assert classify(err("exception", "AssertionError: wrong"))[0] == "wrong result"
    assert classify(err("exception", "ValueError: bad sum"))[0] == "wrong result"
    assert classify(err("deadlock", "deadlock: ...", DeadlockError))[0] == "deadlock"
    assert classify(err("timeout", "did not finish", RunTimeout))[0] == "deadlock"
    assert classify(err("exception", "WaitTimeout: TWAIT: timed out"))[0] == "deadlock"
    assert classify(err("crash", "rank process died from signal SIGSEGV"))[0] == "crash"
    assert classify(err("exception", "ShmcommError: wait_flag(...): no set_flag"))[0] == "checker"
    assert classify(err("exception", "ArgumentError: TWAIT: bad"))[0] == "error"
    assert classify(err("exception", "KeyError: 'x'"))[0] == "error"


def test_specs_sweep_configurations_then_seeds():
    cfgs = configs((2, 4), (1,), (8,), ("eager",))
    got = [s for s, _ in zip(specs(cfgs, 10), range(5), strict=False)]
    assert [(s.nranks, s.seed) for s in got] == [(2, 10), (4, 11), (2, 12), (4, 13), (2, 14)]
    cmd = repro_command("x:y", RunSpec(4, 2, 1000, "eager", 1234), Settings())
    assert cmd == ("python -m shmcomm.stress --program x:y --nranks 4 --blocks 2 --seed 1234 "
                   "--mode eager --runs 1")  # x:y cannot be found: no --size
    assert "--deadlock-grace 0.5" in repro_command("x:y", RunSpec(2, 1, 1, "eager", 0),
                                                   Settings(deadlock_grace=0.5))


def test_correct_program_exits_zero_with_histogram():
    p = _stress("--program", "epoch_barrier", "--nranks", "2,3", "--blocks", "2", "--size", "16",
                "--runs", "4")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 runs" in p.stdout and "failures: 0" in p.stdout
    assert "nranks=2 blocks=2 size=16 mode=eager" in p.stdout
    assert "nranks=3 blocks=2 size=16 mode=eager" in p.stdout
    assert "reproduce:" not in p.stdout


def test_deadlock_repro_command_reruns_the_same_failure():
    p = _stress("--program", "arrival_count_mismatch", "--nranks", "2", "--blocks", "1,2",
                "--runs", "2", "--seed", "40")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "deadlock 2" in p.stdout and "waits on" in p.stdout
    argv = _repro(p.stdout)
    assert argv[argv.index("--seed") + 1] == "40"
    again = _stress(*argv)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "1 runs" in again.stdout and "deadlock 1" in again.stdout
    assert _repro(again.stdout) == argv


def test_user_program_failure_is_reproduced_by_seed(user_env, tmp_path):
    out = tmp_path / "results" / "stress.json"
    p = _stress("--program", "my_stress_prog:host", "--nranks", "2", "--blocks", "1",
                "--size", "32", "--seed", "0", "--runs", "6", "--json", str(out), env=user_env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "failures: 2  (wrong result 2," in p.stdout
    argv = _repro(p.stdout)
    assert argv[argv.index("--seed") + 1] == "2"  # seeds 0..5: the first failing one is 2
    again = _stress(*argv, env=user_env)
    assert again.returncode == 1 and "wrong result 1" in again.stdout, again.stdout + again.stderr
    assert "seed 2: sum is off" in again.stdout
    doc = json.loads(out.read_text())
    assert doc["version"] == 1 and "loadavg" in doc["machine"]
    kinds = [o["kind"] for o in doc["reports"][0]["outcomes"]]
    assert kinds == ["ok", "ok", "wrong result", "ok", "ok", "wrong result"]


def _main_status(*argv: str) -> int:
    try:
        return main([*argv, "--no-progress"])
    except SystemExit as exc:  # argparse usage errors
        return int(exc.code)


def test_user_program_without_size_and_usage_errors(user_env, monkeypatch, capsys):
    monkeypatch.syspath_prepend(user_env["PYTHONPATH"].split(os.pathsep)[0])
    assert _main_status("--program", "my_stress_prog:host_plain", "--nranks", "2", "--runs", "2",
                        "--mode", "eager") == 0
    assert "failures: 0" in capsys.readouterr().out
    assert _main_status("--program", "no_such_program") == 2
    assert _main_status("--program", "my_stress_prog:missing") == 2
    assert _main_status("--program", "epoch_barrier", "--catalogue") == 2
    assert _main_status("--program", "epoch_barrier", "--runs", "0") == 2
    assert _main_status("--program", "epoch_barrier", "--nranks", "two") == 2
    assert "--nranks" in capsys.readouterr().err


def test_catalogue_cli_prints_kill_matrix():
    p = _stress("--catalogue", "--only", "eq_transient,event_id_clash,ring_put", "--runs", "3",
                "--seconds", "20")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "kill matrix" in p.stdout
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines()[2:4]}
    assert rows["eq_transient"][2:4] == ["yes", "deadlock"]
    assert rows["event_id_clash"][2:4] == ["yes", "checker"]
    assert "caught 2 of 2 bugs" in p.stdout
    assert "ring_put" in p.stdout and "0 alarms" in p.stdout


def test_progress_bar_on_a_tty_only():
    import fcntl
    import select
    import struct
    import termios

    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        p = subprocess.Popen([sys.executable, "-m", "shmcomm.stress", "--program", "epoch_barrier",
                              "--runs", "2", "--mode", "eager", "--nranks", "2"],
                             stdout=subprocess.PIPE, stderr=slave)
        out, _ = p.communicate(timeout=80)
        os.close(slave)
        slave = -1
        err = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert b"2/2" in err and b"run/s" in err and b"failures=0" in err, err[-300:]
    assert b"run/s," not in out  # the bar goes to stderr, never into the summary
    piped = subprocess.run([sys.executable, "-m", "shmcomm.stress", "--program", "epoch_barrier",
                            "--runs", "1", "--mode", "eager", "--nranks", "2"],
                           capture_output=True, text=True, timeout=80)
    assert piped.returncode == 0 and "run/s," not in piped.stderr  # no bar when not a tty


UNSIZED = '''
def flaky(rt, dtype=None):
    """No size parameter; fails on seed 1 only."""
    if rt.config.seed == 1:
        raise AssertionError(f"seed 1 fails ({dtype.__name__})")
'''


def test_both_repro_lines_of_a_host_without_size_rerun_the_failure(tmp_path):
    from _helpers import line_after, rerun, run_cli

    (tmp_path / "unsized.py").write_text(UNSIZED)
    p = run_cli("stress", "--program", "unsized.py:flaky", "-n", "2", "-b", "1", "--mode",
                "eager", "--runs", "2", "--arg", "dtype=@numpy:float32", "--no-progress",
                cwd=tmp_path)
    assert p.returncode == 1 and "seed 1 fails (float32)" in p.stdout, p.stdout + p.stderr
    assert not list(tmp_path.glob("results"))  # nothing written to the working directory
    for prefix in ("reproduce: ", "under launch: "):
        argv = line_after(p.stdout, prefix)
        assert "--size" not in argv and "size=64" not in " ".join(argv), argv
        again = rerun(argv, cwd=tmp_path)
        assert again.returncode == 1, (argv, again.stdout, again.stderr)
        assert "seed 1 fails (float32)" in again.stdout + again.stderr
