"""pto-isa's CPU comm suites (gtest binaries: main.cpp + <name>_kernel.cpp over the suite's
common.hpp harness) built unchanged behind shmcomm's shadow and harness shim, every rank a
process over shared windows.

CI runs the stand-in suites the project writes itself (pto_isa_standin/tests/cpu/comm/st/
testcase/: a suite with a case that passes only under a sequential harness, a hang, a URMA
suite); the four real suites run against a checkout, skipped unless ``SHMCOMM_PTO_ISA`` names it:

    SHMCOMM_PTO_ISA=PATH python -m pytest -m pto_isa tests/native/test_pto_isa_suites.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import shmcomm
from shmcomm.errors import ArgumentError
from shmcomm.launch.suite import run_suite
from shmcomm.native import ptoisa
from shmcomm.native import suite as S

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
SUITES = STANDIN / S.SUITES_DIR
ROOT = os.environ.get("SHMCOMM_PTO_ISA")
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)"),
              pytest.mark.skipif(not S.have_gtest(), reason="no gtest (apt-get install libgtest-dev)")]
SHORT = {"timeout": 120.0, "wait_timeout": 60.0}


def _by_name(result):
    return {c.name: c for c in result.cases}


def test_every_rank_counts_and_a_case_only_a_sequential_harness_passes_names_its_rank():
    res = run_suite("tstandin", STANDIN, nranks=4, **SHORT)
    cases = _by_name(res)
    assert [c.verdict for c in res.cases] == ["passed", "passed", "skipped", "failed"]
    ring = cases["StandinRing.FourRanks"].calls
    assert [(c.harness, c.ranks) for c in ring] == [("ForkAndRunWithHcclRootInfo", [True] * 4)]
    bad = cases["StandinScatter.Root1_SentToItself"]
    [call] = bad.calls
    assert call.ranks == [False, True] and call.failed == [0] and call.sequential_passes
    assert bad.only_sequential and "rank 0 failed" in bad.note()
    assert "returns true at rank 1, and ignores the failure of rank 0" in bad.note()
    assert "tstandin_kernel.cpp" in call.line
    assert res.exit_code == 1 and res.failed == [bad]
    text = res.summary()
    assert "1 failed (1 of them pass under pto-isa's sequential harness)" in text and "1 skipped" in text


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_the_observed_modes_agree_with_eager(mode):
    # the harness drains and publishes a block's pending work at a host barrier, and reads the
    # ranks' results through the instructions: no stale value decides a verdict
    res = run_suite("tstandin", STANDIN, nranks=2, mode=mode, seed=1, **SHORT)
    assert [(c.name, c.verdict) for c in res.cases] == [
        ("StandinRing.TwoRanks", "passed"), ("StandinRing.FourRanks", "skipped"),
        ("StandinRing.EightRanks", "skipped"), ("StandinScatter.Root1_SentToItself", "failed")]
    assert res.cases[3].calls[0].failed == [0]


def test_the_same_case_passes_under_the_suites_own_sequential_harness(tmp_path):
    # built as pto-isa's CMake builds a CPU suite, with the stand-in's own harness (../common.hpp:
    # the ranks in turn, scratch buffers for remote pointers, the first passing rank decides)
    d = SUITES / "tstandin"
    exe = tmp_path / "tstandin"
    cxx = shutil.which("g++") or shutil.which("c++")
    assert cxx is not None
    subprocess.run([cxx, "-std=c++17", "-D__CPU_SIM", "-I", str(STANDIN / "include"), str(d / "main.cpp"),
                    str(d / "tstandin_kernel.cpp"), "-o", str(exe), "-lgtest", "-pthread"], check=True)
    out = subprocess.run([str(exe), "--gtest_filter=StandinScatter.*"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "[  PASSED  ] 1 test" in out.stdout


def test_a_hang_ends_with_the_deadlock_report_and_leaves_nothing():
    with pytest.raises(shmcomm.DeadlockError) as err:
        run_suite("tstandin", STANDIN, nranks=2,
                  gtest_args=["--gtest_filter=StandinHang.*", "--gtest_also_run_disabled_tests"], **SHORT)
    msg = str(err.value)
    # rank 1 waits for its flag, rank 0 for rank 1 at HcclHostBarrier
    assert "signal rank 1" in msg and "signal rank 0" in msg
    # (the autouse fixture of tests/conftest.py checks that /dev/shm keeps nothing of the run)


def test_a_crash_ends_with_the_rank_and_the_suites_line():
    with pytest.raises(shmcomm.RunError) as err:
        run_suite("tstandin", STANDIN, nranks=3,
                  gtest_args=["--gtest_filter=StandinCrash.*", "--gtest_also_run_disabled_tests"], **SHORT)
    msg = str(err.value)
    assert err.value.kind == "crash" and "SIGSEGV in rank 1 block 0" in msg
    assert "tstandin_kernel.cpp:" in msg and "CrashKernel" in msg


def test_urma_is_refused_on_a2a3_naming_the_setting_and_runs_on_a5():
    with pytest.raises(shmcomm.RunError) as err:
        run_suite("tstandin_urma", STANDIN, nranks=3, **SHORT)
    msg = str(err.value)
    assert "UrmaTestContext::Setup" in msg and "target='a5'" in msg and "SHMCOMM_TARGET=a5" in msg
    assert "tstandin_urma_kernel.cpp:" in msg  # the suite's line that asked for it
    res = run_suite("tstandin_urma", STANDIN, nranks=3, target="a5", **SHORT)
    assert [(c.name, c.verdict) for c in res.cases] == [("StandinUrma.RootPut_2Ranks", "passed"),
                                                        ("StandinUrma.RootPut_3Ranks", "passed")]
    assert res.exit_code == 0 and res.cases[1].calls[0].ranks == [True] * 3


def test_a_window_too_small_names_the_option():
    with pytest.raises(shmcomm.RunError, match=r"WindowAlloc: .*raise --window-bytes"):
        run_suite("tstandin", STANDIN, nranks=2, window_bytes=256,
                  gtest_args=["--gtest_filter=StandinRing.TwoRanks"], **SHORT)


def test_the_files_are_compiled_as_they_are_with_their_harness_swapped():
    d = SUITES / "tstandin_urma"
    kernel = S.treated(d / "tstandin_urma_kernel.cpp", False)
    src = (d / "tstandin_urma_kernel.cpp").read_text()
    assert kernel.startswith(f'#line 1 "{d / "tstandin_urma_kernel.cpp"}"\n')
    body = kernel.split("\n", 1)[1]
    assert body.count("\n") == src.count("\n") + 1  # every line stays where it was
    assert '#include "shmcomm_shadow/cpu_suite_common.hpp"' in body
    assert '#include "shmcomm_shadow/cpu_suite_urma.hpp"' in body and "../common.hpp" not in body
    main = S.treated(d / "main.cpp", True)
    assert "int shmcomm_suite_user_main(int argc" in main and "int main(" not in main


def test_the_summary_says_which_ranks_pto_isas_harness_ignores_or_never_runs():
    c = S.Case("T.x", "failed", [S.Call("ForkAndRunWithHcclRootInfo", [False, True, False, True], "k.cpp:9")])
    assert c.only_sequential and c.note() == (
        "rank 0, 2 failed (ForkAndRunWithHcclRootInfo over 4 ranks); pto-isa's sequential harness "
        "(res = res || perRankFn(i)) passes this case: it returns true at rank 1, and ignores the "
        "failure of rank 0 and never runs rank 2")
    none = S.Case("T.y", "failed", [S.Call("RunUrmaTestMpiLaunch", [False, False], "k.cpp:9")])
    assert not none.only_sequential and none.note() == "rank 0, 1 failed (RunUrmaTestMpiLaunch over 2 ranks)"


def test_a_suite_that_is_not_there_is_named():
    with pytest.raises(ArgumentError, match=r"no suite 'tnope'.*suites: tstandin, tstandin_urma"):
        S.locate("tnope", STANDIN)
    with pytest.raises(ArgumentError, match="--pto-isa"):
        S.locate("tnope", None)
    with pytest.raises(ArgumentError, match="window_bytes must be an int >= 1"):
        run_suite("tstandin", STANDIN, window_bytes=0)
    with pytest.raises(ArgumentError, match="gtest_args must be a list of str"):
        run_suite("tstandin", STANDIN, gtest_args="--gtest_filter=x")


def test_the_command_line_prints_gtest_then_the_summary():
    env = dict(os.environ, PYTHONPATH=str(HERE.parent.parent))
    out = subprocess.run([sys.executable, "-m", "shmcomm", "suite", "--pto-isa", str(STANDIN), "tstandin",
                          "-n", "2", "--timeout", "120", "--gtest_filter=StandinScatter.*"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stderr
    assert "[  FAILED  ] StandinScatter.Root1_SentToItself" in out.stdout
    assert "[shmcomm] ForkAndRunWithHcclRootInfo over 2 ranks: rank(s) 0 failed" in out.stdout
    assert out.stdout.rstrip().endswith("tstandin: 1 tests, 0 passed, 1 failed (1 of them pass under "
                                        "pto-isa's sequential harness), 0 skipped")
    helped = subprocess.run([sys.executable, "-m", "shmcomm", "suite", "--help"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert helped.returncode == 0 and "--target" in helped.stdout and "--window-bytes" in helped.stdout


# -- the real suites --------------------------------------------------------------------------

REAL = {"tscatter": 12, "tgather": 12, "tput_async_urma": 8, "tget_async_urma": 5}


@pytest.mark.pto_isa
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not ROOT, reason="set SHMCOMM_PTO_ISA to a pto-isa checkout to run these")
@pytest.mark.parametrize("name", list(REAL))
def test_pto_isas_cpu_comm_suite_passes_on_every_rank(name):
    assert ROOT is not None
    ptoisa.check(ROOT)
    urma = name.endswith("_urma")
    # the URMA suites are a5 tests; their large-MR cases need a window of ~770 MB
    res = run_suite(name, ROOT, nranks=4, target="a5" if urma else "a2a3",
                    window_bytes=(800 << 20) if urma else (64 << 20))
    assert len(res.cases) == REAL[name]
    assert [c.name for c in res.cases if c.verdict != "passed"] == []
    assert res.exit_code == 0
    for c in res.cases:  # every rank of every harness call ran and passed
        assert all(all(call.ranks) for call in c.calls) and c.calls
