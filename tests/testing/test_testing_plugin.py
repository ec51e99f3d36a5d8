"""The pytest plugin: the README's example test file passes for a correct kernel, fails with the
report and repro commands for a buggy one, and both repro commands rerun the failure; a marked
sweep is one test item per configuration (-k picks one, xdist splits them, the short summary
names the cause), honours its options and SHMCOMM_* settings, and reports a hang with every
rank's stack before pytest-timeout fires."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from _helpers import ROOT, line_after, rerun

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(150)

ROOT = ROOT


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
    res.assert_outcomes(passed=8)  # one item per configuration


def test_readme_test_file_fails_with_report_and_repro_for_a_buggy_kernel(pytester):
    # every hazard-mode run fails, whatever the timing: the race detector (on by default there)
    # sees the host read dst, which the peer's store has no fence to reach in time
    src = readme_test_file()
    buggy = src.replace("    pipe_barrier(PIPE_ALL)\n", "").replace("    dsb(DSB_DDR)\n", "")
    assert buggy != src
    pytester.makepyfile(test_ring=buggy)
    # tracing is asked for: every run is traced, only the failing runs' traces are kept
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--shmcomm-trace",
                                        *_plugin_args())
    res.assert_outcomes(passed=4, failed=4)  # the hazard-mode items
    out = res.stdout.str()
    assert "data race" in out and "host read it at" in out and "test_ring.py:" in out, out
    assert "likely cause: hazard [notify-unfenced] at" in out, out
    assert "trace kept: " in out and "shmcomm-traces" in out, out
    kept = list(pytester.path.rglob("shmcomm-traces/*.json"))
    assert len(kept) == 8, kept  # the 8 failing hazard-mode runs; the passing runs' are gone
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
        assert "data race" in p.stdout + p.stderr, (cmd, p.stdout, p.stderr)


def test_exitfirst_stops_the_sweep_at_its_first_failure(pytester):
    buggy = readme_test_file().replace("    dsb(DSB_DDR)\n", "").replace(
        "    pipe_barrier(PIPE_ALL)\n", "")
    pytester.makepyfile(test_ring=buggy)
    res = pytester.runpytest_subprocess("-q", "-x", "-p", "no:cacheprovider", *_plugin_args())
    res.assert_outcomes(passed=1, failed=1)
    # the eager item passes; the hazard item's first run fails: it stops there, and so does pytest
    assert "shmcomm stress: test_ring.py:host: 1 runs in" in res.stdout.str()


KEYWORD_FOR_SIZE = """
import shmcomm.testing


def double(x):
    return 2 * x


def host(rt, n, fn):
    \"\"\"Its second parameter looks like the older host(rt, size), but the sweep fills it.\"\"\"
    if rt.config.seed == 1:
        raise AssertionError(f"seed 1 fails (n={fn(n)})")


@shmcomm.testing.sweep(host, nranks=[2], blocks=[1], modes=["eager"], n=100, fn=double, seeds=2)
def test_host(shmcomm_sweep):
    shmcomm_sweep()
"""


def test_a_keyword_in_the_size_parameters_place_gets_no_size(pytester):
    """A host ``host(rt, n, fn)`` swept with ``n=...`` takes no size: no ``size`` in its item
    id, and both printed repro lines rerun the failure (the launch line once passed ``size=64``
    as well, which the host cannot take). The module-level function ``fn`` is passed by name:
    writing the report must not load the test file again (that replaced the module the
    function is looked up in, and the lines said fn could not be passed)."""
    pytester.makepyfile(test_kw=KEYWORD_FOR_SIZE)
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *_plugin_args())
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "test_host[eager-n2-b1]" in out, out
    for prefix in ("reproduce: ", "under launch: "):
        argv = line_after(out, prefix)
        assert "--size" not in argv and "size=64" not in " ".join(argv), argv
        assert "fn=@test_kw:double" in argv, argv
        again = rerun(argv, cwd=pytester.path)
        assert again.returncode == 1, (argv, again.stdout, again.stderr)
        assert "seed 1 fails (n=200)" in again.stdout + again.stderr


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


def test_one_mode_is_the_modes_axis_of_one_mode():
    """``mode="hazard"`` (the run setting's name) is a sweep of that one mode, not a host
    keyword; giving both names is refused."""
    from shmcomm.errors import ArgumentError
    from shmcomm.testing import plan

    cases, _ = plan(dict(mode="schedule", nranks=2, blocks=1, seeds=1))
    assert [c.mode for c in cases] == ["schedule"]
    with pytest.raises(ArgumentError, match="modes or mode"):
        plan(dict(mode="hazard", modes=["eager"]))


def idle_host(rt):
    """A host that does nothing (module-level: a sweep's repro command imports its host)."""


def test_check_passes_hazards_to_the_hazard_model():
    """``hazards`` reaches the runs' configuration (not the schedule strategy beside it): an
    unknown sub-model is refused before any run, naming ``hazards``."""
    from shmcomm.errors import ArgumentError
    from shmcomm.testing import check

    with pytest.raises(ArgumentError, match="hazards must be"):
        check(idle_host, nranks=2, blocks=1, modes="hazard", seeds=1, hazards="bogus")


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
    # shmcomm's own run timeout fires first (cut to end before pytest-timeout's), with stacks
    assert "did not finish within" in res.stdout.str(), res.stdout.str()
    # every rank process of the run is gone: none still has the test file's host on its stack
    out = subprocess.run(["pgrep", "-f", str(pytester.path)], capture_output=True, text=True)
    assert out.stdout.strip() == ""


# --- a marked sweep: one item per configuration ---------------------------------------------------

USER_TEST = '''
import time

import numpy as np

import shmcomm.testing


def host(rt, size, scale=1):
    """Right on 2 ranks; on 4 ranks seed 1 gives a wrong sum (a deterministic bug)."""
    x = rt.alloc((size,), np.float32)
    x[:] = rt.rank * scale
    rt.barrier()
    if rt.nranks == 4 and rt.config.seed == 1:
        raise AssertionError(f"sum is off on rank {rt.rank} (seed {rt.config.seed})")
    return rt.config.mode


def sleeper(rt):
    time.sleep(120)  # never returns


@shmcomm.testing.sweep(host, nranks=[2, 4], blocks=[1], modes=["eager"], sizes=[16], seeds=2,
                       scale=2)
def test_ring(shmcomm_sweep):
    shmcomm_sweep()


@shmcomm.testing.sweep(sleeper, nranks=[2], blocks=[1], modes=["eager"], seeds=1)
@pytest_timeout_mark
def test_hang(shmcomm_sweep):
    shmcomm_sweep()
'''.replace("@pytest_timeout_mark", "@__import__('pytest').mark.timeout(9)")


def _user(pytester, *args, env=None, **kw):
    pytester.makepyfile(test_user=USER_TEST)
    if env:
        for k, v in env.items():
            pytester._monkeypatch.setenv(k, v)
    pytester._monkeypatch.setenv("COLUMNS", "250")  # the short summary is not cut
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *_plugin_args(), *args, **kw)


def _ids(res) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in res.outlines if "::test_ring[" in line]


def test_marked_sweep_items_have_readable_ids_and_options_replace_axes(pytester, monkeypatch):
    pytester.makepyfile(test_user=USER_TEST)
    # collection only, in this process: nothing runs
    res = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert _ids(res) == ["eager-n2-b1-s16", "eager-n4-b1-s16"], res.outlines
    res = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider",
                                       "--shmcomm-mode", "eager,hazard", "--shmcomm-runs", "3",
                                       "--shmcomm-chunk", "2", "--shmcomm-nranks", "2")
    assert _ids(res) == ["eager-n2-b1-s16-seed0", "eager-n2-b1-s16-seed2",
                         "hazard-n2-b1-s16-seed0", "hazard-n2-b1-s16-seed2"], res.outlines
    pytester.makeini("[pytest]\nshmcomm_runs = 1\n")
    res = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert _ids(res) == ["eager-n2-b1-s16", "eager-n4-b1-s16"]  # the test's own
    monkeypatch.setenv("SHMCOMM_MODE", "schedule")
    res = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert "schedule-n2-b1-s16" in _ids(res)
    monkeypatch.delenv("SHMCOMM_MODE")
    res = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider",
                                       "--shmcomm-nranks", "2,,4")
    assert res.ret == 4 and "without empty items" in "\n".join(res.errlines)


def test_k_selects_one_configuration_and_the_summary_names_the_cause(pytester, tmp_path):
    res = _user(pytester, "-k", "test_ring and n4", "-rf")
    res.assert_outcomes(failed=1, deselected=2)
    out = res.stdout.str()
    summary = next(x for x in res.stdout.lines if x.startswith("FAILED "))
    assert re.search(r"FAILED wrong result test_user.py::test_ring\[eager-n4-b1-s16\] - "
                     r"Failed: wrong result: rank \d: "
                     r"AssertionError: sum is off on rank \d \(seed 1\)", summary), summary
    # the printed commands rerun the failure, as printed
    for prefix in ("reproduce: ", "under launch: "):
        argv = line_after(out, prefix)
        p = rerun(argv, cwd=pytester.path)
        assert p.returncode == 1, (argv, p.stdout, p.stderr)
        assert "sum is off" in p.stdout + p.stderr, (argv, p.stdout, p.stderr)
    assert "--arg scale=2" in out and not list(pytester.path.glob("results"))


def test_xdist_splits_the_items(pytester):
    pytest.importorskip("xdist")
    res = _user(pytester, "-n", "2", "-k", "test_ring")
    res.assert_outcomes(passed=1, failed=1)
    assert "2 workers" in res.stdout.str()


def test_xdist_loadgroup_keeps_a_group_on_one_worker(pytester):
    """The suite's own ``--dist loadgroup`` (the MPI tests share one worker, the PTO suites
    their cached runs) works with the pytest that is installed: xdist renames a grouped item
    through a private attribute, which some pytest releases no longer read."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_grouped="""
        import pytest
        pytestmark = pytest.mark.xdist_group("one")

        @pytest.mark.parametrize("i", range(6))
        def test_item(i):
            pass
    """)
    res = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v", "-p", "no:randomly")
    res.assert_outcomes(passed=6)
    workers = set(re.findall(r"\[(gw\d+)\] .*PASSED", res.stdout.str()))
    assert len(workers) == 1, res.stdout.str()


def test_a_hang_is_reported_with_every_ranks_stack_before_pytest_timeout(pytester):
    res = _user(pytester, "-k", "test_hang", timeout=90)
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "Python stacks of every live rank" in out and "in sleeper" in out, out
    assert "no stack dump" not in out
    assert "Timeout" not in out.split("short test summary")[0].split("test_hang")[0]
    assert "selectors.py" not in out  # not pytest-timeout's traceback into the wait


def test_bad_environment_settings_are_refused():
    from shmcomm.errors import ArgumentError
    from shmcomm.testing import refuse_env, run_settings

    with pytest.raises(ArgumentError, match="SHMCOMM_TRACE"):
        refuse_env({"SHMCOMM_TRACE": "x.json"})
    s = run_settings({}, env={"SHMCOMM_DETECT_RACES": "1", "SHMCOMM_WAIT_TIMEOUT": "3"})
    assert s.detect_races is True and s.wait_timeout == 3.0
    s = run_settings({"wait_timeout": 5.0}, cli={"wait_timeout": 7.0}, env={})
    assert s.wait_timeout == 7.0
