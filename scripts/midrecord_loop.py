"""Kill a rank in the middle of a race-record batch, many times over: no launcher may outlive its
run's timeout. Not part of CI (it takes minutes); the numbers go into the reliability notes.

Each run is ``shmcomm.run`` in a child process with the race detector on: rank 1 writes a random
part of one of its record batches' frames (a random batch, a random cut) and SIGKILLs itself;
rank 2 may still be running, so the launcher reads a dead rank's pipe while others live. A run
that is not over within ``timeout + slack`` seconds is a hang (the child is killed and counted).

    python scripts/midrecord_loop.py --runs 200 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

PROGRAM = '''
import os, random, signal, struct, sys, time
from multiprocessing.reduction import ForkingPickler

import shmcomm
from shmcomm.comm import TNOTIFY, NotifyOp, Signal

MODE, SEED, TIMEOUT = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(SEED)
BATCH, CUT_FRACTION = 1, rng.random()  # its first batch: every run is a kill


class DieMidRecord:
    def __init__(self, conn):
        self.conn, self.sent = conn, 0

    def send(self, batch):
        self.sent += 1
        body = bytes(ForkingPickler.dumps(batch))
        frame = struct.pack("!i", len(body)) + body
        if self.sent < BATCH:
            os.write(self.conn.fileno(), frame)
            return
        cut = max(1, min(len(frame) - 1, int(len(frame) * CUT_FRACTION)))
        os.write(self.conn.fileno(), frame[:cut])
        os.kill(os.getpid(), signal.SIGKILL)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def kernel(ctx, sig):
    for _ in range(50):
        TNOTIFY(Signal(sig), 1, NotifyOp.AtomicAdd)


def host(rt):
    if rt.rank == 1:
        races = next(o for o in (rt.model, *getattr(rt.model, "obs", ())) if hasattr(o, "conn"))
        races.conn = DieMidRecord(races.conn)
    hits = rt.signal_region("hits", 1)
    for _ in range(3):
        rt.launch(kernel, blocks=2, args=(hits,))
        rt.barrier()
    if rt.rank == 2:
        time.sleep(rng.random() * 2)
    return rt.rank


try:
    shmcomm.run(host, nranks=3, mode=MODE, detect_races=True, timeout=TIMEOUT)
    print("RESULT ok")
except shmcomm.RunError as exc:
    kinds = sorted({f"{f.kind} {f.where()}" for f in exc.failures})
    print("RESULT failed", kinds)
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--timeout", type=float, default=20.0, help="each run's timeout (s)")
    p.add_argument("--slack", type=float, default=10.0, help="beyond it: a hang (s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default="")
    ns = p.parse_args()
    rng = random.Random(ns.seed)
    fd, prog = tempfile.mkstemp(prefix="midrecord-", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(PROGRAM)
    rows, hangs, crash_named = [], 0, 0
    try:
        for i in range(ns.runs):
            mode = rng.choice(["eager", "hazard", "schedule"])
            seed = rng.randrange(1 << 30)
            t0 = time.monotonic()
            child = subprocess.Popen([sys.executable, prog, mode, str(seed), str(ns.timeout)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
            try:
                out, err = child.communicate(timeout=ns.timeout + ns.slack)
                hung = False
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                out, err = child.communicate()
                hung = True
            took = time.monotonic() - t0
            hangs += hung
            named = "crash rank 1" in out
            crash_named += named
            rows.append(dict(run=i, mode=mode, seed=seed, seconds=round(took, 3), hung=hung,
                             rank1_crash_reported=named, result=out.strip()[-300:]))
            print(f"{i:4d} {mode:8s} seed {seed:10d} {took:6.2f} s "
                  f"{'HUNG' if hung else ('crash rank 1' if named else out.strip()[-80:])}",
                  flush=True)
    finally:
        os.unlink(prog)
    secs = sorted(r["seconds"] for r in rows)
    summary = dict(runs=len(rows), hangs=hangs, rank1_crash_reported=crash_named,
                   max_seconds=secs[-1] if secs else None,
                   median_seconds=secs[len(secs) // 2] if secs else None,
                   run_timeout=ns.timeout, loadavg=os.getloadavg())
    print(json.dumps(summary))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(dict(summary=summary, runs=rows), f, indent=1)
    return 1 if hangs else 0


if __name__ == "__main__":
    sys.exit(main())
