"""Soak: many consecutive default-job runs in one parent; look for anything that leaks.

    python scripts/soak.py                      # 500 runs at 8 ranks x 4 blocks
    python scripts/soak.py --runs 50 --json results/soak-short.json

After every run it samples, in the parent: shmcomm names in /dev/shm, shmcomm segments still
mapped (/proc/self/maps), open file descriptors, threads (Python and OS), child processes (alive
or zombie) and RSS. A leak is any of those above its value after the first (warm-up) run, any
shmcomm name in /dev/shm, or RSS growing by more than ``--rss-limit-mib`` from the warm-up
run to the last one. It prints a summary, writes JSON (default results/soak.json) and exits 1
on a leak or a failed run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from typing import Any

import psutil

import shmcomm
from shmcomm.launch.programs import default_job

SCHEMA = 1


def sample() -> dict[str, int]:
    """The parent's resources right now."""
    me = psutil.Process()
    with open("/proc/self/maps") as f:
        mapped = sum(1 for line in f if "/dev/shm/shmcomm" in line)
    children = me.children(recursive=True)
    mine = f"shmcomm.{os.getpid()}."
    return {
        # names of this parent's runs only: other users' runs may be creating theirs meanwhile
        "shm_names": sum(1 for n in os.listdir("/dev/shm") if n.startswith(mine)),
        "mapped_segments": mapped,
        "fds": len(os.listdir("/proc/self/fd")),
        "py_threads": threading.active_count(),
        "os_threads": me.num_threads(),
        "children": len(children),
        "zombies": sum(1 for c in children if _status(c) == psutil.STATUS_ZOMBIE),
        "rss": me.memory_info().rss,
    }


def _status(p: psutil.Process) -> str:
    try:
        return p.status()
    except psutil.NoSuchProcess:
        return "gone"


def soak(runs: int = 500, nranks: int = 8, blocks: int = 4, iters: int = 200,
         rss_limit_mib: float = 16.0, progress: bool = True) -> dict[str, Any]:
    """Run the default job ``runs`` times; return the per-run samples and the verdict."""
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    t_start = time.perf_counter()
    for i in range(runs):
        t0 = time.perf_counter()
        ok = True
        try:
            results = shmcomm.run(default_job, nranks=nranks, blocks=blocks, args=(iters,))
            ok = all(r["ok"] for r in results)
            if not ok:
                failures.append(f"run {i}: a check of the default job failed")
        except shmcomm.ShmcommError as exc:
            ok = False
            failures.append(f"run {i}: {str(exc).splitlines()[0]}")
        row = {"run": i, "ok": ok, "wall_s": time.perf_counter() - t0, **sample()}
        rows.append(row)
        if progress and (i + 1) % 50 == 0:
            print(f"  {i + 1:>4}/{runs} runs, rss {row['rss'] / 2**20:.1f} MiB, fds {row['fds']}, "
                  f"threads {row['os_threads']}, load {os.getloadavg()[0]:.2f}", flush=True)
    wall = time.perf_counter() - t_start
    base, last = rows[0], rows[-1]
    leaks: dict[str, int] = {}
    for key in ("fds", "py_threads", "os_threads"):
        worst = max(r[key] for r in rows)
        if worst > base[key]:
            leaks[key] = worst - base[key]
    for key in ("shm_names", "mapped_segments", "children", "zombies"):
        worst = max(r[key] for r in rows)
        if worst:
            leaks[key] = worst
    growth_mib = (last["rss"] - base["rss"]) / 2**20
    if growth_mib > rss_limit_mib:
        leaks["rss_mib"] = round(growth_mib, 1)
    half = rows[len(rows) // 2:]
    slope = _slope([r["run"] for r in half], [r["rss"] for r in half]) / 1024 if len(half) > 2 else 0.0
    return {
        "schema": SCHEMA,
        "what": "shmcomm soak: consecutive default-job runs in one parent",
        "params": {"runs": runs, "nranks": nranks, "blocks": blocks, "iters": iters,
                   "rss_limit_mib": rss_limit_mib},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "shmcomm": shmcomm.__version__},
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "wall_s": wall,
        "runs_ok": sum(r["ok"] for r in rows),
        "failures": failures,
        "rss_mib": {"after_first": base["rss"] / 2**20, "last": last["rss"] / 2**20,
                    "max": max(r["rss"] for r in rows) / 2**20, "growth": growth_mib,
                    "slope_kib_per_run_second_half": slope},
        "baseline": {k: base[k] for k in base if k not in ("run", "ok", "wall_s")},
        "leaks": leaks,
        "rows": rows,
    }


def _slope(xs: list[int], ys: list[int]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def format_summary(rep: dict[str, Any]) -> str:
    p, rss, walls = rep["params"], rep["rss_mib"], sorted(r["wall_s"] for r in rep["rows"])
    lines = [
        f"shmcomm soak: {p['runs']} runs of the default job at {p['nranks']} ranks x {p['blocks']} "
        f"blocks ({p['iters']} iterations), {rep['wall_s']:.0f} s, load "
        f"{rep['loadavg_start'][0]:.2f} -> {rep['loadavg_end'][0]:.2f}",
        f"runs ok           {rep['runs_ok']}/{p['runs']}",
        f"run wall s        median {walls[len(walls) // 2]:.2f}, max {walls[-1]:.2f}",
        f"parent rss MiB    {rss['after_first']:.1f} after run 1 -> {rss['last']:.1f} at the end "
        f"(max {rss['max']:.1f}, growth {rss['growth']:+.1f}, second-half slope "
        f"{rss['slope_kib_per_run_second_half']:+.1f} KiB/run)",
    ]
    b = rep["baseline"]
    worst = {k: max(r[k] for r in rep["rows"]) for k in b}
    lines.append("after run 1 / worst: " + ", ".join(
        f"{k} {b[k]}/{worst[k]}" for k in ("fds", "py_threads", "os_threads", "children", "zombies",
                                         "shm_names", "mapped_segments")))
    lines.append("leaks: none" if not rep["leaks"] else
                 "LEAKS: " + ", ".join(f"{k} +{v}" for k, v in rep["leaks"].items()))
    lines += [f"FAILED {f}" for f in rep["failures"][:10]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500,
                    help="default-job runs, >= 2; run 1 is the baseline (default: %(default)s)")
    ap.add_argument("--nranks", type=int, default=8, help="rank processes per run (default: %(default)s)")
    ap.add_argument("--blocks", type=int, default=4, help="blocks per launch (default: %(default)s)")
    ap.add_argument("--iters", type=int, default=200,
                    help="barrier iterations of each default job (default: %(default)s)")
    ap.add_argument("--rss-limit-mib", type=float, default=16.0,
                    help="RSS growth from run 1 to the last run that counts as a leak, MiB "
                         "(default: %(default)s)")
    ap.add_argument("--json", default="results/soak.json",
                    help="where to write the JSON report (default: %(default)s)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    ns = ap.parse_args(argv)
    if ns.runs < 2:
        ap.error("--runs must be >= 2 (run 1 is the baseline)")
    rep = soak(ns.runs, ns.nranks, ns.blocks, ns.iters, ns.rss_limit_mib)
    rep["command"] = "python scripts/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(os.path.dirname(ns.json) or ".", exist_ok=True)
    with open(ns.json, "w") as f:
        json.dump(rep, f, indent=1)
    print(format_summary(rep))
    print(f"JSON: {ns.json}")
    return 1 if rep["leaks"] or rep["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
