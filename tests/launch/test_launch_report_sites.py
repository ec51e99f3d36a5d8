"""Hang reports point at the user's code: a deadlock names the kernel line each waiting block
waits at and the host line that launched it; a timeout's stacks keep the user's frames and fold
shmcomm's, the test runner's and Python's (``SHMCOMM_FULL_STACKS=1`` shows them all)."""

from __future__ import annotations

import inspect
import os
import re

import pytest

import shmcomm
from shmcomm.comm import TTEST, TWAIT, Signal, WaitCmp
from shmcomm.errors import RunError

pytestmark = pytest.mark.timeout(90)
HERE = os.path.relpath(__file__)


def _hang(ctx):
    if ctx.block_idx != 0 or ctx.rank == 0:  # rank 0 never notifies
        return
    TWAIT(Signal(ctx.signal_base + 1), 1, WaitCmp.GE)  # WAIT LINE


def host_hang(rt):
    rt.launch(_hang)  # LAUNCH LINE


def _spin(ctx):
    while not TTEST(Signal(ctx.signal_base + 0), 1, WaitCmp.GE):  # WAIT LINE
        pass


def host_spin(rt):
    rt.launch(_spin)  # LAUNCH LINE


def _line(fn, mark: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, x in enumerate(lines) if mark in x)


def test_a_deadlock_names_the_kernel_line_and_the_host_line_of_each_waiting_block():
    with pytest.raises(RunError) as err:
        shmcomm.run(host_hang, nranks=3, blocks=2, deadlock_grace=0.3, timeout=60)
    text = str(err.value)
    assert err.value.failures[0].kind == "deadlock", text
    wait, launch = _line(_hang, "WAIT LINE"), _line(host_hang, "LAUNCH LINE")
    for rank in (1, 2):
        assert (f"rank {rank} block 0 waits at {HERE}:{wait} in _hang, launched at "
                f"{HERE}:{launch} in host_hang") in text, text


@pytest.mark.parametrize("full", [False, True], ids=["trimmed", "full"])
def test_a_timeouts_stacks_keep_the_users_frames(full, monkeypatch):
    if full:
        monkeypatch.setenv("SHMCOMM_FULL_STACKS", "1")
    with pytest.raises(RunError) as err:
        shmcomm.run(host_spin, nranks=2, blocks=1, timeout=2)
    text = str(err.value)
    assert err.value.failures[0].kind == "timeout", text
    assert "the run did not finish within timeout=2 s" in text.splitlines()[0], text
    wait, launch = _line(_spin, "WAIT LINE"), _line(host_spin, "LAUNCH LINE")
    assert f"rank 1 block 0 waits at {HERE}:{wait} in _spin, launched at {HERE}:{launch}" in text
    assert f'{os.path.abspath(__file__)}", line {launch} in host_spin' in text, text
    assert ("threading.py" in text) == full, text
    assert ("frames of shmcomm, the test runner or Python folded" in text) != full, text
    if not full:  # two ranks' stacks in a few lines, not ~30 inherited frames a thread
        assert len(text.splitlines()) < 45, text


def _busy(ctx):
    if ctx.rank == 1:
        while True:  # BUSY LINE: not a wait, only the run timeout ends it
            pass
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def host_busy(rt):
    rt.launch(_busy)


def test_a_spinning_block_is_named_where_it_runs():
    with pytest.raises(RunError) as err:
        shmcomm.run(host_busy, nranks=2, blocks=1, timeout=3)
    text = str(err.value)
    busy = _line(_busy, "BUSY LINE")
    assert re.search(rf"rank 1 block 0 runs at {re.escape(HERE)}:({busy}|{busy + 1}) in _busy",
                     text), text  # (the loop's line, or its body's)
    assert "rank 0 block 0 waits at" in text, text


def test_a_deadlock_on_a_pools_processes_names_the_lines_too():
    from shmcomm.testing import SweepFailed, check

    with pytest.raises(SweepFailed) as err:  # check() sweeps on a Pool
        check(host_hang, nranks=3, blocks=1, mode="eager", seeds=1)
    wait, launch = _line(_hang, "WAIT LINE"), _line(host_hang, "LAUNCH LINE")
    assert (f"rank 1 block 0 waits at {HERE}:{wait} in _hang, launched at {HERE}:{launch} in "
            "host_hang") in str(err.value), err.value
