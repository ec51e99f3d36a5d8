"""The launcher never trusts what ranks wrote: a corrupted agent line gives a clear report (never
an IndexError, a segfault or a hang), waited offsets and heap tops keep all 64 bits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import shmcomm
from shmcomm import RunError
from shmcomm.core import control as C
from shmcomm.core.waiting import WaitSite, _register
from shmcomm.launch.deadlock import CorruptControl, DeadlockWatch
from shmcomm.transports.shm import ShmTransport

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(shmcomm.__file__)))  # the code under test

# A rank that scribbles over its own agent line, then sleeps: every other agent waits on it.
SCRIBBLE = textwrap.dedent("""
    import sys, time
    import shmcomm
    from shmcomm.core import control as C
    from shmcomm.errors import RunError

    FIELDS = dict({fields})

    def host(rt):
        if rt.rank == 1:
            ctl = rt.ctl
            w = ctl.agent_word(1, C.HOST_SLOT)
            for name, value in FIELDS.items():
                if name == "R_BLOCKS":
                    ctl.words[ctl.rank_word(1, C.R_BLOCKS)] = value
                else:
                    ctl.words[w + getattr(C, name)] = value
            ctl.words[w + C.A_STATE] = FIELDS.get("A_STATE", C.WAITING)
            time.sleep(60)
        rt.barrier()

    try:
        shmcomm.run(host, 3, window_bytes=1 << 16, timeout=40, wait_timeout=30)
    except RunError as exc:
        print("REPORT", str(exc).replace(chr(10), " | "))
""")

GOOD_WAIT = dict(A_SIG_RANK=0, A_SIG_OFF=256, A_ROWS=1, A_COLS=1, A_STRIDE=1, A_CMP=3,
                 A_VALUE=1, A_KIND=0)

CORRUPTIONS = {
    "offset past 2 GiB": dict(GOOD_WAIT, A_SIG_OFF=-64),  # 0xFFFFFFC0 as the low half
    "offset high half": dict(GOOD_WAIT, A_SIG_OFF_HI=7),
    "huge rows": dict(GOOD_WAIT, A_ROWS=1 << 30, A_COLS=1000, A_STRIDE=1000),
    "negative rank": dict(GOOD_WAIT, A_SIG_RANK=-5),
    "rank too big": dict(GOOD_WAIT, A_SIG_RANK=1 << 20),
    "bad comparison": dict(GOOD_WAIT, A_CMP=77),
    "bad state": dict(GOOD_WAIT, A_STATE=99),
    "bad block count": dict(GOOD_WAIT, R_BLOCKS=100000),
    "bad kind": dict(GOOD_WAIT, A_KIND=9),
    "stride below cols": dict(GOOD_WAIT, A_COLS=4, A_STRIDE=2),
}


@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_a_corrupted_agent_line_gives_a_clear_report(what):
    fields = ", ".join(f"{k}={v}" for k, v in CORRUPTIONS[what].items())
    proc = subprocess.run([sys.executable, "-c", SCRIBBLE.replace("{fields}", fields)],
                          capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])  # no crash (139), no raw
    report = proc.stdout                                                # traceback
    assert "REPORT" in report and "corrupted control segment" in report, (report, proc.stderr)
    assert "rank 1" in report


def test_offsets_keep_64_bits_in_the_control_line():
    """A wait registered at an offset past 2 GiB (and past 4 GiB) reads back unchanged."""
    ctl = C.Control(1)
    try:
        class _Agent:  # the fields _register uses
            seq = 0
            polling = None

        agent = _Agent()
        agent.ctl = ctl
        line = ctl.agent_addr(0, 0)
        import ctypes
        agent.wait_fields = (ctypes.c_int32 * (C.A_KIND - C.A_SEQ + 1)).from_address(
            line + 4 * C.A_SEQ)
        agent.state_addr = line
        agent.state_cp = ctypes.c_void_p(line)
        for off in (0x80000040, 0x1_0000_0100, 0x3_FFFF_FFC0):
            _register(agent, WaitSite((), 0, off), 1, 3)
            assert ctl.offset_of(ctl.agents_of(0)[0]) == off
        del agent
    finally:
        ctl.close()


def test_the_watch_reports_a_stable_corruption_and_forgives_a_torn_read():
    ctl = C.Control(2)
    tr = ShmTransport(2, 4096, 4096)
    try:
        watch = DeadlockWatch(ctl, tr, 0.05)
        w = ctl.agent_word(0, C.HOST_SLOT)
        ctl.words[w + C.A_STATE] = C.WAITING
        ctl.words[w + C.A_SIG_RANK] = 0
        ctl.words[w + C.A_ROWS: w + C.A_STRIDE + 1] = (1, 1, 1)
        ctl.words[w + C.A_SIG_OFF] = 1 << 30  # far outside an 8 KiB window
        assert watch.check(0.0, [0], []) is None  # once: maybe a line being rewritten
        ctl.words[w + C.A_SIG_OFF] = 64  # it was: now valid
        assert watch.check(0.01, [0], []) is None
        ctl.words[w + C.A_SIG_OFF] = 1 << 30
        watch.check(0.02, [0], [])
        with pytest.raises(CorruptControl, match="signal offset=1073741824"):
            watch.check(0.03, [0], [])
    finally:
        tr.close()
        ctl.close()


def _heap_tops(rt):
    """The symmetry check's compare with heap tops 2 GiB apart (as rt.alloc publishes them)."""
    top = 1 << 20 if rt.rank == 0 else (1 << 20) + (1 << 31)
    return rt._compare(C.R_HEAPTOP, top, C.R_HEAPTOP_HI)


def test_heap_symmetry_compares_all_64_bits():
    res = shmcomm.run(_heap_tops, 2, window_bytes=1 << 16, timeout=30)
    assert res[0] == res[1] == [1 << 20, (1 << 20) + (1 << 31)]


def _asymmetric_alloc(rt):
    rt.alloc((1000 if rt.rank == 0 else 1001,), np.uint8)


def test_asymmetric_alloc_still_raises():
    with pytest.raises(RunError, match="not symmetric"):
        shmcomm.run(_asymmetric_alloc, 2, window_bytes=1 << 16, timeout=30)
