"""The pytest plugin: the README's example test file passes for a correct kernel, fails with the
report and repro commands for a buggy one, and both repro commands rerun the failure."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(150)

ROOT = Path(__file__).resolve().parents[1]


def readme_test_file() -> str:
    """The example test file of the README's testing section, exactly as a user copies it."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(# test_ring\.py.*?)```", text, re.S)
    assert m, "the README has no example test file starting with '# test_ring.py'"
    return m.group(1)


def _plugin_args() -> list[str]:
    """Load the plugin by name unless the installed package already registers it."""
    installed = any(ep.name == "shmcomm" and ep.value == "shmcomm.testing.plugin"
                    for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "shmcomm.testing.plugin"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_pyproject_registers_the_plugin():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'\[project\.entry-points\.pytest11\]\s*\nshmcomm = "shmcomm\.testing\.plugin"',
                     text)


def test_readme_test_file_passes_for_a_correct_kernel(pytester):
    pytester.makepyfile(test_ring=readme_test_file())
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *_plugin_args())
    res.assert_outcomes(passed=1)


def test_readme_test_file_fails_with_report_and_repro_for_a_buggy_kernel(pytester, monkeypatch):
    # the README's output is the notify-unfenced checker's, which the race detector (on by
    # default in hazard mode) silences; its host reads dst, which the detector does not see
    monkeypatch.setenv("SHMCOMM_DETECT_RACES", "0")
    src = readme_test_file()
    buggy = src.replace("    pipe_barrier(PIPE_ALL)\n", "").replace("    dsb(DSB_DDR)\n", "")
    assert buggy != src
    pytester.makepyfile(test_ring=buggy)
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *_plugin_args())
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "hazard [notify-unfenced] at" in out and "test_ring.py:" in out
    assert "checker" in out and "trace kept: " in out and "shmcomm-traces" in out
    lines = out.splitlines()
    stress = next(x for x in lines if x.startswith("reproduce: ")).split(": ", 1)[1]
    launch = next(x for x in lines if "under launch: " in x).split("under launch: ", 1)[1]
    for cmd, argv0 in ((stress, ["python", "-m", "shmcomm.stress"]),
                       (launch, ["python", "-m", "shmcomm", "launch"])):
        argv = shlex.split(cmd)
        assert argv[:len(argv0)] == argv0, cmd
        extra = ["--no-progress", "--trace-dir", ""] if "shmcomm.stress" in argv else []
        p = subprocess.run([sys.executable, *argv[1:], *extra], cwd=pytester.path, env=_env(),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, (cmd, p.stdout, p.stderr)
        assert "hazard [notify-unfenced]" in p.stdout + p.stderr, (cmd, p.stdout, p.stderr)


def test_exitfirst_stops_the_sweep_at_its_first_failure(pytester, monkeypatch):
    monkeypatch.setenv("SHMCOMM_DETECT_RACES", "0")  # the checker's verdict, as the README shows
    buggy = readme_test_file().replace("    dsb(DSB_DDR)\n", "").replace(
        "    pipe_barrier(PIPE_ALL)\n", "")
    pytester.makepyfile(test_ring=buggy)
    res = pytester.runpytest_subprocess("-q", "-x", "-p", "no:cacheprovider", *_plugin_args())
    res.assert_outcomes(failed=1)
    # the eager run of seed 0 passes, the hazard run of seed 1 fails: two runs, then the stop
    assert "shmcomm stress: test_ring.py:host: 2 runs in" in res.stdout.str()


def test_check_rejects_bad_arguments():
    from shmcomm.errors import ArgumentError
    from shmcomm.testing import check

    def host(rt):
        pass

    for kwargs, word in ((dict(modes=["fast"]), "modes"), (dict(seeds=0), "seeds"),
                         (dict(nranks=[]), "nranks"), (dict(modes="eager", hazards="pipes"), "hazards"),
                         (dict(sizes=[8]), "sizes")):
        with pytest.raises(ArgumentError, match=word):
            check(host, **kwargs)


HANGING_TEST = '''
import time

import pytest


def host(rt):
    time.sleep(120)  # a host that never returns


@pytest.mark.timeout(4)
def test_hangs(shmcomm_sweep):
    shmcomm_sweep(host, nranks=2, blocks=1, modes="eager", seeds=1)
'''


def test_pytest_timeout_stops_the_sweep_and_its_ranks(pytester):
    pytester.makepyfile(test_hang=HANGING_TEST)
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *_plugin_args(),
                                        timeout=90)
    res.assert_outcomes(failed=1)
    assert "Timeout" in res.stdout.str()
    # every rank process of the run is gone: none still has the test file's host on its stack
    out = subprocess.run(["pgrep", "-f", str(pytester.path)], capture_output=True, text=True)
    assert out.stdout.strip() == ""
