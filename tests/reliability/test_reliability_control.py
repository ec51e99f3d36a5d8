"""The control area is shmcomm's, not the kernel's: one that a kernel or host overwrites (zeroed,
filled with 0xFF, one guard word changed) fails the run naming the offset, never passes; a
launch's failure raised in a host thread of the user's is reported once, by shmcomm."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _helpers import ROOT as _ROOT

import shmcomm
from shmcomm.core import control as C

pytestmark = pytest.mark.timeout(120)

SMALL = dict(window_bytes=1 << 16, timeout=30.0, wait_timeout=20.0)
ROOT = str(_ROOT)


def _kernel(ctx) -> None:
    pass


def _scribble(rt, how: str):
    rt.launch(_kernel, blocks=1)
    rt.barrier()
    if rt.rank == 1:
        words = rt.ctl.words
        if how == "zero":
            words[:] = 0
        elif how == "ff":
            words[:] = -1
        elif how == "guard":  # one guard word of an agent line, nothing else
            words[rt.ctl.agent_word(0, 3) + C.GUARD] ^= 0x100
    return rt.rank


@pytest.mark.parametrize("how", ["zero", "ff", "guard"])
def test_an_overwritten_control_area_fails_the_run_naming_it(how):
    with pytest.raises(shmcomm.RunError) as info:
        shmcomm.run(_scribble, 2, args=(how,), **SMALL)
    first = str(info.value.failures[0])
    assert "overwrote shmcomm's control area at offset 0x" in first, str(info.value)


def test_an_overwritten_control_area_fails_a_pool_run_and_the_next_run_passes():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        with pytest.raises(shmcomm.RunError, match="control area at offset"):
            pool.run(_scribble, args=("guard",), timeout=30.0)
        assert pool.run(_scribble, args=("none",), timeout=30.0) == [0, 1]


def test_check_names_the_first_changed_word_and_a_reseal_clears_it():
    ctl = C.Control(2)
    try:
        assert ctl.check() is None
        ctl.words[C.LINE * 7 + C.GUARD] = 0
        assert f"offset {4 * (C.LINE * 7 + C.GUARD):#x}" in ctl.check()
        ctl.seal()
        assert ctl.check() is None
        ctl.words[3] += 1  # ncores: line 0 is checked word by word and by its checksum
        assert "offset 0xc" in ctl.check()
        assert np.count_nonzero(ctl.words[C.GUARD::C.LINE][:3]) == 3
    finally:
        ctl.close()


def test_a_launch_failing_in_a_host_thread_is_reported_once_by_shmcomm(tmp_path):
    prog = tmp_path / "threadlaunch.py"
    prog.write_text(textwrap.dedent("""
        import threading
        import shmcomm

        def k(ctx):
            raise ValueError("boom in block")

        def host(rt):
            t = threading.Thread(target=lambda: rt.launch(k, blocks=1))
            t.start()
            t.join()
            rt.barrier()

        if __name__ == "__main__":
            try:
                shmcomm.run(host, nranks=2, timeout=30)
            except shmcomm.RunError as e:
                print("REPORT", str(e).splitlines()[0])
        """))
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=90,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert "REPORT" in p.stdout and "boom in block" in p.stdout, p.stdout + p.stderr
    assert "Exception in thread" not in p.stderr, p.stderr
