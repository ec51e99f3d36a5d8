"""Expected failures: ``expect=`` passes a buggy kernel's sweep only when every run fails that way
and fails, with the report, when one passes or fails otherwise; the fixture, the marker and
``check`` take one set of keywords; a failing item's summary names the cause first at 80
columns, and its id does not change when only the number of seeds does."""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_testing_plugin import _plugin_args, readme_test_file

from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.errors import ArgumentError
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier
from shmcomm.testing import CAUSES, SweepFailed, check

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(150)


def _ring(ctx, src, dst, n, fenced):
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 1024), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    if fenced:
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def ring(rt, size, fenced=True):
    src, dst = rt.alloc((size,), np.float32), rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1
    rt.launch(_ring, args=(src.ptr, dst.ptr, size, fenced))
    want = (rt.rank - 1) % rt.nranks + 1
    assert np.all(dst == want), f"rank {rt.rank}: dst starts {dst[:3]}, want {want}"


def off_by_one(rt):
    assert rt.rank < 0, f"rank {rt.rank}: the sum is off by one"


def _hang(ctx):
    if ctx.rank != 0:  # rank 0 never notifies
        TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def hang(rt):
    rt.launch(_hang)


def spin(rt):
    end = time.monotonic() + 60
    while time.monotonic() < end:  # busy, not waiting: only the run timeout ends it
        pass


ONE = dict(nranks=2, blocks=1, mode="hazard", seeds=1, timeout=60)


def test_expect_race_passes_on_the_buggy_twin_and_fails_on_the_correct_kernel():
    report = check(ring, expect="race", sizes=3000, fenced=False, **ONE)
    assert [o.cause for o in report.outcomes] == ["race"]
    with pytest.raises(SweepFailed) as err:
        check(ring, expect="race", sizes=3000, **ONE)
    text = str(err.value)
    assert text.startswith("not caught: expected race in every run; 1 of 1 did otherwise"), text
    assert "passed" in text.splitlines()[0]
    assert err.value.report.outcomes[0].kind == "ok"


def test_expect_fails_when_the_kernel_fails_another_way_and_takes_a_callable():
    with pytest.raises(SweepFailed) as err:
        check(off_by_one, expect="race", **ONE)
    first = str(err.value).splitlines()[0]
    assert first.startswith("wrong result, not race: "), first
    assert "the sum is off by one" in str(err.value)  # the report of the failure follows
    assert check(off_by_one, expect="wrong-result", **ONE).outcomes[0].cause == "wrong result"

    def one_wrong(report):
        return [o.cause for o in report.outcomes] == ["wrong result"]

    check(off_by_one, expect=one_wrong, **ONE)
    with pytest.raises(SweepFailed, match=r"^not as expected: one_wrong\(report\) returned False"):
        check(ring, expect=one_wrong, sizes=64, **ONE)


def test_expect_deadlock_and_timeout_tell_the_detector_from_the_clock():
    assert check(hang, expect="deadlock", nranks=3, blocks=1, mode="eager", seeds=1,
                 timeout=60).outcomes[0].cause == "deadlock"
    report = check(spin, expect="timeout", nranks=2, blocks=1, mode="eager", seeds=1, timeout=2)
    assert report.outcomes[0].cause == "timeout" and report.outcomes[0].kind == "deadlock"
    first = report.outcomes[0].message.splitlines()[0]
    assert "timeout=2 s" in first, first


def test_one_keyword_set_with_the_old_spellings_deprecated():
    with pytest.raises(ArgumentError, match="expect must be one of race, deadlock, wrong-result"):
        check(off_by_one, expect="races", **ONE)
    with pytest.warns(DeprecationWarning, match="run_timeout= is deprecated; use timeout="):
        check(off_by_one, expect="wrong-result", nranks=2, blocks=1, mode="eager", seeds=1,
              run_timeout=60)
    with pytest.raises(ArgumentError, match="give modes or mode"):
        check(off_by_one, modes=["eager"], mode="hazard")
    assert set(CAUSES.values()) >= {"race", "deadlock", "wrong result", "timeout"}


MARKED = readme_test_file().split("@shmcomm.testing.sweep")[0] + '''
import shmcomm.testing

ONE = dict(nranks=[2], blocks=[1], modes=["hazard"], sizes=[3000], seeds=SEEDS)


@shmcomm.testing.sweep(host, expect="race", **ONE)
def test_twin_is_caught(shmcomm_sweep):
    shmcomm_sweep()


@shmcomm.testing.sweep(host, **ONE)
def test_the_twin_expected_by_the_call(shmcomm_sweep):
    shmcomm_sweep(expect="race")


@shmcomm.testing.sweep(host, **ONE)
def test_plain(shmcomm_sweep):
    shmcomm_sweep()
'''


def _marked(pytester, fenced: bool, seeds: int = 1, *args: str):
    src = MARKED.replace("SEEDS", str(seeds))
    if not fenced:
        src = src.replace("    pipe_barrier(PIPE_ALL)\n", "").replace("    dsb(DSB_DDR)\n", "")
    pytester.makepyfile(test_a2a_twin_with_a_rather_long_file_name=src)
    pytester._monkeypatch.setenv("COLUMNS", "80")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *_plugin_args(), *args)


def _summary(res) -> list[str]:
    return [x for x in res.stdout.lines if x.startswith("FAILED ")]


def test_the_marker_and_the_call_take_expect_and_the_summary_names_the_cause_at_80_columns(
        pytester):
    res = _marked(pytester, fenced=False)
    res.assert_outcomes(passed=2, failed=1)
    (line,) = _summary(res)
    assert line.startswith("FAILED race "), line
    assert "test_plain[hazard-n2-b1-s3000]" in line, line
    res = _marked(pytester, fenced=True)
    res.assert_outcomes(passed=1, failed=2)
    lines = _summary(res)
    assert all(x.startswith("FAILED not caught ") for x in lines), lines


def test_item_ids_do_not_change_with_the_number_of_seeds(pytester):
    ids = []
    for seeds in (1, 3):
        res = _marked(pytester, True, seeds, "--collect-only", "-q")
        ids.append([x for x in res.stdout.lines if "::" in x])
    assert ids[0] == ids[1] and len(ids[0]) == 3, ids


@pytest.mark.parametrize("var, value, words", [
    ("SHMCOMM_MODE", "bogus", "SHMCOMM_MODE must be one of eager, hazard, schedule; got 'bogus'"),
    ("SHMCOMM_NRANK", "3", "unknown environment variable SHMCOMM_NRANK: did you mean "
                           "SHMCOMM_NRANKS?"),
], ids=["bad-value", "misspelt"])
def test_an_environment_problem_is_one_usage_error_line(pytester, var, value, words):
    pytester.makepyfile(test_env="def test_nothing():\n    pass\n")
    pytester._monkeypatch.setenv(var, value)
    res = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider",
                                        *_plugin_args())
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    errors = [x for x in res.errlines + res.outlines if x.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: shmcomm: "), errors
    assert words in errors[0], errors


VOCAB = '''
import shmcomm.testing


def _kernel(ctx):
    pass


def host(rt):
    rt.launch(_kernel)  # (a traced launch: the failing run's trace has events)
    assert rt.config.seed != 1, "seed 1 fails"


@shmcomm.testing.sweep(host, nranks=[2], blocks=[1], seeds=1)  # the default modes: ini may say
def test_h(shmcomm_sweep):
    shmcomm_sweep()
'''


def test_one_vocabulary_with_the_older_option_and_ini_spellings_deprecated(pytester):
    """``--shmcomm-mode`` as launch and stress say it, ``--shmcomm-runs`` (each item's runs),
    ``--shmcomm-trace-dir`` as stress's; ``--shmcomm-modes`` / ``--shmcomm-seeds`` and their
    ini keys still work, with a deprecation warning."""
    pytester.makepyfile(test_vocab=VOCAB)
    args = ("--collect-only", "-q", "-p", "no:cacheprovider", *_plugin_args())
    new = pytester.runpytest_inprocess(*args, "--shmcomm-mode", "eager,hazard", "--shmcomm-runs", "3")
    old = pytester.runpytest_inprocess(*args, "--shmcomm-modes", "eager,hazard", "--shmcomm-seeds", "3")
    items = [x for x in new.outlines if "::" in x]
    assert items == ["test_vocab.py::test_h[eager-n2-b1]", "test_vocab.py::test_h[hazard-n2-b1]"]
    assert [x for x in old.outlines if "::" in x] == items
    text = old.stdout.str()
    assert "--shmcomm-modes is deprecated; use --shmcomm-mode" in text, text
    assert "--shmcomm-seeds is deprecated; use --shmcomm-runs" in text, text
    assert "deprecated" not in new.stdout.str()
    pytester.makeini("[pytest]\nshmcomm_modes = hazard\n")
    res = pytester.runpytest_inprocess(*args)
    assert [x for x in res.outlines if "::" in x] == ["test_vocab.py::test_h[hazard-n2-b1]"]
    assert "the ini key shmcomm_modes is deprecated; use shmcomm_mode" in res.stdout.str()
    traces = pytester.path / "kept"
    res = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *_plugin_args(),
                                        "--shmcomm-runs", "2", "--shmcomm-mode", "eager",
                                        "--shmcomm-trace-dir", str(traces))
    res.assert_outcomes(failed=1)
    assert len(list(traces.rglob("*.json"))) == 1 and len(list(traces.rglob("*.svg"))) == 1
