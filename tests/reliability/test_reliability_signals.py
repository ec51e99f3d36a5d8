"""Signals and kills around a run: a rank's death is reported even when the launcher inherited
SIGCHLD ignored, a stopped rank is named early, a killed creator leaves no segment name, and
the stress command exits as ``launch`` does on SIGTERM / SIGINT."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _helpers import ROOT

pytestmark = pytest.mark.timeout(180)

ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _python(code: str, timeout: float = 150, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=ENV, **kw)


def test_a_rank_sigsegv_is_reported_with_sigchld_ignored():
    code = """
        import os, signal, shmcomm
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN
        def host(rt):
            if rt.rank == 1:
                os.kill(os.getpid(), signal.SIGSEGV)
            rt.barrier()
        try:
            shmcomm.run(host, 2, window_bytes=1 << 16, timeout=60, wait_timeout=50)
        except shmcomm.RunError as e:
            print("REPORT", e)
            raise SystemExit(1)
        print("PASSED")
        """
    p = _python(code, preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "SIGSEGV" in p.stdout and "rank 1" in p.stdout, p.stdout + p.stderr


def test_a_creator_killed_while_reserving_a_segment_leaves_no_name():
    code = """
        import os, signal
        from shmcomm.transports.shm import segments
        def killed(fd, offset, length):  # SIGKILL while posix_fallocate runs (a big segment)
            os.kill(os.getpid(), signal.SIGKILL)
        os.posix_fallocate = killed
        segments.Segment("probe", 1 << 20)
        """
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=ENV)
    p.wait(150)
    assert p.returncode == -signal.SIGKILL
    left = [n for n in os.listdir("/dev/shm") if n.startswith(f"shmcomm.{p.pid}.")]
    for n in left:
        os.unlink(os.path.join("/dev/shm", n))
    assert not left, f"the killed creator left {left} in /dev/shm"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stress_exits_128_plus_the_signal_with_a_partial_summary(tmp_path, sig):
    prog = tmp_path / "slowprog.py"
    prog.write_text(textwrap.dedent("""
        import time
        def host(rt):
            time.sleep(0.2)
            rt.barrier()
        """))
    p = subprocess.Popen([sys.executable, "-m", "shmcomm", "stress", "--program",
                          f"{prog}:host", "--nranks", "2", "--blocks", "1", "--runs", "100000",
                          "--no-progress", "--mode", "eager"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until at least one run finished
        time.sleep(2.0)
        if p.poll() is not None:
            break
        if _children_ran(p.pid):
            break
    time.sleep(3.0)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + sig, (p.returncode, out[-2000:], err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    assert f"interrupted by {signal.Signals(sig).name}" in err, err[-2000:]
    assert "runs in" in out and "outcomes per configuration" in out, out[-2000:]  # partial summary


def _children_ran(pid: int) -> bool:
    import psutil

    try:
        return len(psutil.Process(pid).children(recursive=True)) > 0
    except psutil.Error:
        return False


def test_a_sigstopped_rank_is_named_long_before_the_run_timeout():
    import shmcomm

    def host(rt):
        if rt.rank == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        rt.barrier()

    t0 = time.monotonic()
    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(host, 2, window_bytes=1 << 16, timeout=120, wait_timeout=110)
    took = time.monotonic() - t0
    text = str(info.value)
    assert "rank 1" in text and "stopped" in text, text
    assert "timeout" not in info.value.failures[0].kind, text
    assert took < 100, took  # named by the state watch, not at the 120 s run timeout


def _big_result(rt):
    return b"x" * (2 << 20)


def test_a_result_over_the_report_limit_names_the_limit(monkeypatch):
    import shmcomm
    from shmcomm.launch import wire

    monkeypatch.setattr(wire, "MAX_REPORT_BYTES", 1 << 20)  # the ranks fork with it
    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(_big_result, 1, window_bytes=1 << 16, timeout=60, wait_timeout=50)
    text = str(info.value)
    assert f"{1 << 20}-byte limit" in text and "rank 0" in text, text


def _huge_message(rt):
    raise ValueError("m" * 50_000_000)


def test_a_huge_exception_message_is_cut_in_the_report():
    import shmcomm

    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(_huge_message, 1, window_bytes=1 << 16, timeout=60, wait_timeout=50)
    text = str(info.value)
    assert len(text) < 1_000_000 and "characters cut" in text, len(text)
    assert "ValueError: mmm" in text


def _quick_host(rt):
    return rt.rank


def test_a_run_that_outlasts_its_timeout_in_the_end_checks_never_passes():
    import shmcomm
    from shmcomm.config import Config
    from shmcomm.core.model import RunModel
    from shmcomm.exec import compose
    from shmcomm.launch.supervisor import Launcher

    cfg = Config.from_kwargs(nranks=1, heap_bytes=1 << 16, timeout=1.0, wait_timeout=0.9)
    base = compose(cfg)

    class Slow(RunModel):  # called with rt in the rank; finish() in the launcher
        def __call__(self, rt):
            return base(rt)

        def finish(self):
            time.sleep(2.5)  # judging that takes longer than the whole timeout
            return []

    with pytest.raises(shmcomm.RunTimeout):
        Launcher(cfg, _quick_host, (), model=Slow(cfg)).run()


def test_ctrl_c_while_the_command_starts_prints_no_traceback(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("def host(rt):\n    return rt.rank\n")
    p = subprocess.Popen([sys.executable, "-m", "shmcomm", "launch", "--program", f"{prog}:host",
                          "--nranks", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # numpy is loading: shmcomm's own imports have begun
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                if "_multiarray_umath" in f.read():
                    break
        except OSError:
            break
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert "Traceback" not in err, err[-3000:]


SHRINKING_PROG = """
import os, time

def host(rt, mark=""):
    if rt.rank == 0:
        with open(mark, "a") as f:  # one line per run: a second line means shrinking began
            f.write("run\\n")
    rt.barrier()
    time.sleep(1.0)  # every replay of the shrink is slow: the signal lands inside it
    if rt.rank == 0:
        raise AssertionError("boom: the failure the sweep found")
    rt.barrier()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stress_interrupted_while_shrinking_keeps_the_failure(tmp_path, sig):
    """The first run fails; the signal arrives while its schedule is being shrunk. The summary
    still shows the failure with its reproduce and replay lines, --json is written, the kept
    schedule is named and exists, and the exit status is 128 + the signal."""
    prog = tmp_path / "shrinkprog.py"
    prog.write_text(SHRINKING_PROG)
    mark, out_json = tmp_path / "runs.txt", tmp_path / "out.json"
    p = subprocess.Popen([sys.executable, "-m", "shmcomm", "stress", "--program",
                          f"{prog}:host", "--arg", f"mark={mark}", "--nranks", "2", "--blocks",
                          "1", "--runs", "1", "--mode", "schedule", "--no-progress",
                          "--no-pool", "--json", str(out_json)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and p.poll() is None:
        if mark.exists() and len(mark.read_text().splitlines()) >= 2:
            break  # the first replay of the shrink has started
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + sig, (p.returncode, out[-2000:], err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    assert "after 1 complete run(s)" in err, err[-2000:]
    assert "first failure:" in out and "boom" in out, out[-2000:]
    assert "reproduce: " in out and "replay: " in out, out[-2000:]
    kept = re.search(r"schedule is kept at (\S+)", err)
    assert kept and os.path.isfile(kept.group(1)), err[-2000:]
    assert kept.group(1) in out  # the replay line names the same file
    doc = json.loads(out_json.read_text())
    assert [o["kind"] for o in doc["reports"][0]["outcomes"]] == ["wrong result"], doc
    shutil.rmtree(os.path.dirname(kept.group(1)), ignore_errors=True)
