"""No false pass: ``shmcomm.run`` never returns normally from a run in which a block or a rank
failed, whatever the host code caught; and a failure's cause is never swallowed.

The property test draws where the failure happens (which rank, which block, in a kernel or in
host code) and what the host does about it (nothing, catch the ``KernelError`` and return,
catch it and go on into a barrier, catch everything including the ``Aborted`` that follows),
runs it for real, and requires a ``RunError`` naming the failing rank.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shmcomm
from shmcomm import RunError
from shmcomm.comm import TWAIT, Signal, WaitCmp
from shmcomm.errors import ShmcommError

pytestmark = pytest.mark.timeout(240)

SMALL = dict(window_bytes=1 << 16, timeout=30.0, wait_timeout=20.0)


def _kernel(ctx, bad_rank: int, bad_block: int) -> None:
    if ctx.rank == bad_rank and ctx.block_idx == bad_block:
        raise ValueError(f"injected failure at rank {bad_rank} block {bad_block}")


def _host(rt, bad_rank: int, bad_block: int, where: str, handling: str):
    try:
        if where == "host" and rt.rank == bad_rank:
            raise KeyError("injected host failure")
        rt.launch(_kernel, blocks=2, args=(bad_rank, bad_block))
    except ShmcommError:
        if handling == "raise":
            raise
    if handling == "continue":  # go on as if nothing happened: the next wait sees the abort
        try:
            rt.barrier()
            rt.launch(_kernel, blocks=1, args=(-1, -1))
        except ShmcommError:
            pass  # swallow the Aborted too
    return "done"


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(nranks=st.integers(1, 3), data=st.data(),
       where=st.sampled_from(["block", "host"]),
       handling=st.sampled_from(["raise", "return", "continue"]))
def test_run_never_passes_when_anything_failed(nranks, data, where, handling):
    bad_rank = data.draw(st.integers(0, nranks - 1), label="bad_rank")
    bad_block = data.draw(st.integers(0, 1), label="bad_block")
    if where == "host" and handling != "raise":
        handling = "raise"  # a host failure the host itself swallows is no failure at all
    with pytest.raises(RunError) as info:
        shmcomm.run(_host, nranks, args=(bad_rank, bad_block, where, handling), **SMALL)
    first = info.value.failures[0]
    assert first.rank == bad_rank, str(info.value)
    assert "injected" in first.message, str(info.value)


def test_caught_kernel_error_still_fails_and_says_it_was_caught():
    with pytest.raises(RunError) as info:
        shmcomm.run(_host, 2, args=(1, 0, "block", "return"), **SMALL)
    text = str(info.value)
    assert "rank 1 block 0" in text and "caught" in text


def _host_waits_then_swallows(rt):
    """Rank 0 fails; the others swallow the Aborted their wait raises and return normally."""
    if rt.rank == 0:
        raise RuntimeError("injected: rank 0 fails")
    try:
        TWAIT(Signal(rt.signal_base + 100), 1, WaitCmp.GE)
    except ShmcommError:
        pass
    return "pretends success"


def test_swallowed_abort_on_other_ranks_does_not_pass():
    with pytest.raises(RunError) as info:
        shmcomm.run(_host_waits_then_swallows, 3, **SMALL)
    assert info.value.failures[0].rank == 0


# --- swallowed causes ----------------------------------------------------------------------


class _PickleRaises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __reduce__(self):
        raise self.exc


def _returns_unpicklable(rt, kind: str):
    if rt.rank == 1:
        return _PickleRaises(ValueError("no pickling today") if kind == "value"
                             else RecursionError("too deep"))
    return 1


@pytest.mark.parametrize("kind,name", [("value", "ValueError"), ("recursion", "RecursionError")])
def test_result_whose_pickling_raises_is_reported_with_its_cause(kind, name):
    with pytest.raises(RunError) as info:
        shmcomm.run(_returns_unpicklable, 2, args=(kind,), **SMALL)
    text = str(info.value)
    assert info.value.failures[0].rank == 1
    assert "cannot be pickled" in text and name in text, text


class _SlowToUnpickle:
    """Unpickles instantly in a rank, stalls in the launcher (as a bad __setstate__ would)."""

    def __init__(self, launcher_pid: int) -> None:
        self.launcher_pid = launcher_pid

    def __setstate__(self, state):
        self.__dict__.update(state)
        if os.getpid() == self.launcher_pid:
            time.sleep(3600)


def _returns_slow(rt, launcher_pid):
    return _SlowToUnpickle(launcher_pid) if rt.rank == 0 else 1


def test_result_whose_unpickling_stalls_is_bounded_by_the_timeout():
    t0 = time.monotonic()
    with pytest.raises(RunError) as info:
        shmcomm.run(_returns_slow, 2, args=(os.getpid(),), window_bytes=1 << 16, timeout=2.0)
    assert time.monotonic() - t0 < 30
    assert "unpickling it did not finish" in str(info.value)


def test_program_calling_sys_exit_at_import_says_so(tmp_path):
    (tmp_path / "exitprog.py").write_text(textwrap.dedent("""
        import sys
        sys.exit(3)
        def main(rt):
            return 1
    """))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "shmcomm.launch", "-n", "2",
                           "--program", "exitprog:main"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 3, proc  # the exit status of a module that failed to import
    assert "exitprog" in proc.stderr and "called sys.exit(3)" in proc.stderr, proc.stderr


def test_plain_data_is_read_without_a_thread_and_code_still_goes_through_one(monkeypatch):
    import pickle
    import threading

    from shmcomm.launch import wire

    started: list[str] = []
    real = threading.Thread.start

    def counting(self):
        started.append(self.name)
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    plain = ("ok", {"a": [1, 2.5, "x", b"y", None, (True,)]})
    assert wire.loads_bounded(pickle.dumps(plain), 5.0) == plain
    assert started == []
    assert wire.loads_bounded(pickle.dumps(("ok", os.stat_result(range(10)))), 5.0)[0] == "ok"
    assert started == ["shmcomm-unpickle"]
    with pytest.raises(shmcomm.ShmcommError, match="unpickling it raised"):
        wire.loads_bounded(b"\x80\x04garbage", 5.0)
