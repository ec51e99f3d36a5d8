"""Smaller holes: a kernel that forks, immutable pointers and guard pages between windows, the
trace file's safety, the largest shape's limit."""

from __future__ import annotations

import faulthandler
import os
import time

import numpy as np
import psutil
import pytest

import shmcomm
from shmcomm import RunError
from shmcomm.comm import Signal

pytestmark = pytest.mark.timeout(120)

SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=30.0)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _forking_kernel(ctx, out):
    if ctx.block_idx == 0:
        pid = os.fork()
        if pid == 0:  # the child: holds the windows (and would hold the report pipe)
            time.sleep(100)
            os._exit(0)
        out.append(pid)


def _forks(rt):
    out: list[int] = []
    rt.launch(_forking_kernel, blocks=2, args=(out,))
    return out[0]


def test_a_kernel_that_forks_neither_hangs_the_run_nor_outlives_it():
    t0 = time.monotonic()
    children = shmcomm.run(_forks, 2, **SMALL)
    assert time.monotonic() - t0 < 20  # not the run timeout
    deadline = time.monotonic() + 10
    while not all(_gone(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(c) for c in children), children


# --- pointers and windows ------------------------------------------------------------------


def _mutate(rt):
    p = rt.signal_base + 4
    errors = []
    for attr, value in (("offset", 10**12), ("kind", None), ("_sig", None), ("addr", 0)):
        try:
            setattr(p, attr, value)
        except AttributeError:
            errors.append(attr)
    sig = Signal(p)
    for attr, value in (("addr", 0), ("offset", 8), ("rank", 1)):
        try:
            setattr(sig.word, attr, value)
        except AttributeError:
            errors.append("word." + attr)
    return errors, p.offset, sig.word.addr == rt.windows.transport.bases[rt.rank] + 16


def test_pointers_and_words_are_immutable():
    errors, offset, addr_ok = shmcomm.run(_mutate, 1, **SMALL)[0]
    assert errors == ["offset", "kind", "_sig", "addr", "word.addr", "word.offset", "word.rank"]
    assert offset == 16 and addr_ok


def _overrun(rt):
    """The last rank writes one byte just past its segment (window, tail, page rounding) with
    as_strided: the guard page stops it; without one it lands in the segment mapped next."""
    from shmcomm.transports.shm import _TAIL_BYTES

    rt.barrier()
    if rt.rank == rt.nranks - 1:
        win = rt.window(rt.rank)
        page = os.sysconf("SC_PAGE_SIZE")
        end = -(-(len(win) + _TAIL_BYTES) // page) * page
        faulthandler.disable()  # pytest's would print a stack for the expected fault
        np.lib.stride_tricks.as_strided(win, (end + 1,), (1,))[end] = 0xAB
    rt.barrier()
    return 1


def test_an_overrun_past_a_window_faults_instead_of_writing_the_next_one():
    with pytest.raises(RunError) as info:
        shmcomm.run(_overrun, 3, **SMALL)
    text = str(info.value)
    assert "rank 2" in text and "SIGSEGV" in text and "guard pages" in text, text


# --- the trace file -------------------------------------------------------------------------

TRACE = dict(nranks=1, blocks=1, mode="hazard", window_bytes=1 << 16, timeout=60.0)


def _notify_kernel(ctx, flag):
    from shmcomm.comm import TNOTIFY, TWAIT, NotifyOp, WaitCmp

    TNOTIFY(Signal(flag), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(flag), 1, WaitCmp.GE)


def _traced(rt):
    rt.launch(_notify_kernel, args=(rt.signal_region("traced", 1),))
    return 1


def _is_trace(path) -> bool:
    import json

    with open(path) as f:
        doc = json.load(f)
    return doc.get("otherData", {}).get("tool") == "shmcomm" and bool(doc["traceEvents"])


def test_trace_refuses_a_symlink_without_following_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "trace.json"
    link.symlink_to(victim)
    with pytest.raises(shmcomm.ArgumentError, match="symbolic link"):
        shmcomm.run(_traced, trace=str(link), **TRACE)
    assert victim.read_text() == "precious" and link.is_symlink()


def test_trace_never_truncates_an_existing_file_in_place(tmp_path):
    old = tmp_path / "trace.json"
    old.write_text("earlier")
    other_name = tmp_path / "hardlink"
    os.link(old, other_name)  # another name of the same file: its content must survive
    shmcomm.run(_traced, trace=str(old), **TRACE)
    assert other_name.read_text() == "earlier"
    assert _is_trace(old)
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_a_bad_trace_path_is_found_before_the_run(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(shmcomm.ArgumentError, match="trace: cannot create"):
        shmcomm.run(lambda rt: time.sleep(30), trace=str(tmp_path / "missing" / "t.json"),
                    **TRACE)
    assert time.monotonic() - t0 < 10


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's file")
def test_another_users_trace_file_is_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("theirs")
    os.chown(path, 12345, 12345)
    with pytest.raises(shmcomm.ArgumentError, match="another user"):
        shmcomm.run(_traced, trace=str(path), **TRACE)
    assert path.read_text() == "theirs"


# --- the largest shape ----------------------------------------------------------------------


def test_64_ranks_by_64_blocks_is_refused_with_the_reason():
    with pytest.raises(shmcomm.ArgumentError) as info:
        shmcomm.run(lambda rt: 1, 64, blocks=64, window_bytes=1 << 16)
    text = str(info.value)
    assert "4096 block threads" in text and "OS thread" in text and "lower blocks" in text


def _big_launch(rt):
    rt.launch(lambda ctx: None, blocks=64)


def test_a_launch_past_the_thread_limit_is_refused():
    with pytest.raises(RunError, match="launch: nranks x blocks = 17 x 64"):
        shmcomm.run(_big_launch, 17, blocks=1, window_bytes=1 << 16, timeout=60)
