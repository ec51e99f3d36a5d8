"""The launcher never hangs on a rank that dies in the middle of sending its race records: it
holds no write end of a rank's pipe, every read is bounded by the run's deadline, the cut-off
rank is reported as that rank's crash, and SIGTERM ends it with exit status 143 and its report.

Each case runs the launcher in a child process with a hard timeout, so a hang fails the test
instead of stopping the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _helpers import ROOT as _ROOT

pytestmark = pytest.mark.timeout(180)

ROOT = str(_ROOT)
ENV = dict(os.environ, PYTHONPATH=ROOT)
RUN_TIMEOUT = 20  # the run's own timeout: the launcher must be done well within this + slack

# rank 1's record pipe is wrapped: its next batch is written up to CUT bytes of its frame (the
# 4-byte length, then the pickled batch), then the rank SIGKILLs itself, mid-record
PROGRAM = textwrap.dedent("""
    import os, signal, struct, sys, time
    from multiprocessing.reduction import ForkingPickler

    import shmcomm
    from shmcomm.comm import TNOTIFY, NotifyOp, Signal

    CUT = int(os.environ.get("MIDRECORD_CUT", "5"))


    class DieMidRecord:
        def __init__(self, conn):
            self.conn = conn

        def send(self, batch):
            body = bytes(ForkingPickler.dumps(batch))
            frame = struct.pack("!i", len(body)) + body
            os.write(self.conn.fileno(), frame[:max(1, min(CUT, len(frame) - 1))])
            os.kill(os.getpid(), signal.SIGKILL)

        def __getattr__(self, name):
            return getattr(self.conn, name)


    def kernel(ctx, sig):
        for _ in range(20):
            TNOTIFY(Signal(sig), 1, NotifyOp.AtomicAdd)


    def host(rt):
        if rt.rank == 1:  # the race detector's part of the rank (among the observers)
            races = next(o for o in (rt.model, *getattr(rt.model, "obs", ())) if hasattr(o, "conn"))
            races.conn = DieMidRecord(races.conn)
        rt.launch(kernel, blocks=2, args=(rt.signal_region("hits", 1),))
        if rt.rank == 2:  # still running when rank 1 dies: the run goes on until stopped
            time.sleep(60)
        return rt.rank


    if __name__ == "__main__":
        try:
            shmcomm.run(host, nranks=2, mode=sys.argv[1], detect_races=True, timeout=RUN_TIMEOUT)
            print("RESULT ok")
        except shmcomm.RunError as exc:
            print("RESULT failed:", [f"{f.kind} {f.where()}: {f.message}" for f in exc.failures])
""").replace("RUN_TIMEOUT", str(RUN_TIMEOUT))


def _run(tmp_path, mode: str, cut: int) -> tuple[float, str]:
    prog = tmp_path / "midrecord.py"
    prog.write_text(PROGRAM)
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, str(prog), mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(ENV, MIDRECORD_CUT=str(cut)),
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=RUN_TIMEOUT + 25)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"the launcher hung (cut at {cut} bytes, {mode}): {out[-1500:]}{err[-1500:]}")
    return time.monotonic() - t0, out + err


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_a_rank_killed_mid_record_is_its_crash_and_the_launcher_ends(tmp_path, mode):
    """The kill lands at every part of a batch's frame in turn: in its length, right after it,
    and inside the pickled records."""
    for cut in (1, 3, 4, 5, 40):
        took, text = _run(tmp_path, mode, cut)
        assert "RESULT failed" in text, text[-3000:]
        assert "crash rank 1" in text, text[-3000:]
        assert "Traceback" not in text.split("RESULT")[0], text[-3000:]
        assert took < RUN_TIMEOUT, (cut, took)


def test_sigterm_ends_a_launcher_whose_rank_died_mid_record_with_143(tmp_path):
    """Rank 1 dies mid-record while rank 2 still runs; SIGTERM then ends the launcher as
    ``launch`` promises: its report and exit status 143, within seconds."""
    (tmp_path / "midrecord.py").write_text(PROGRAM)
    p = subprocess.Popen([sys.executable, "-m", "shmcomm", "launch", "--program",
                          "midrecord:host", "--nranks", "3", "--detect-races", "--mode", "hazard",
                          "--timeout", "90"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path, start_new_session=True,
                         env=dict(ENV, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)])))
    time.sleep(4.0)
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("SIGTERM did not end the launcher")
    assert p.returncode in (1, 143), (p.returncode, out[-1500:], err[-1500:])
    if p.returncode == 143:  # (on a slow box the crash may end the run before the signal)
        assert "terminated by SIGTERM" in err, err[-1500:]
    assert "rank 1" in err, err[-1500:]
