"""The ``trace`` command: a terminal summary of a run's Chrome trace file (who waited on whom,
the longest waits, checker reports), for when opening Perfetto is too much."""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from typing import Any

from .._startup import interrupts_as_usual
from ..errors import ArgumentError
from ..exec.trace import HOST_TID, flows, load
from ..files import load_json, write_file
from . import options as opt
from .traceplot import plot_svg


def summarize(events: list[dict[str, Any]], meta: dict[str, Any], top: int = 10) -> str:
    """The summary text of a trace's events (flow arrows are derived if the file has none).
    Durations are in ms, or in scheduling steps for a schedule-mode trace (``clock: steps``)."""
    steps = meta.get("clock") == "steps"
    unit, scale = ("steps", 1.0) if steps else ("ms", 1e3)
    w1, w2 = (12, 14) if steps else (10, 11)  # the column headers' widths

    def fmt(x: float, width: int) -> str:
        return f"{x / scale:>{width}.0f}" if steps else f"{x / scale:>{width}.3f}"
    if not any(e.get("ph") == "s" for e in events):
        flows(events)  # fills each released TWAIT's args["released_by"]
    waits = [e for e in events if e.get("name") == "TWAIT" and e.get("ph") == "X"]
    counts: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("ph") in ("X", "i") and not (steps and "step" in e.get("args", {})):
            counts[e["name"].split(" ")[0]] += 1  # (a schedule's per-step instants aside)
    lines = []
    if meta:
        lines.append("run: " + ", ".join(f"{k} {v}" for k, v in meta.items()
                                         if v is not None and k not in ("tool", "failure",
                                                                         "first_agent")))
        if meta.get("failure"):
            lines.append(f"failure: {meta['failure']}")
    ranks = sorted({e["pid"] for e in events if "pid" in e and e.get("ph") in ("X", "i")})
    lines.append(f"events: {sum(counts.values())} on {len(ranks)} rank(s): "
                 + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:8]))
    pairs: dict[tuple[int, int], list[float]] = defaultdict(list)
    for w in waits:
        by = w["args"].get("released_by")
        if by is not None:
            pairs[(w["pid"], by["rank"])].append(w.get("dur", 0.0))
    lines.append("who waited on whom (waiting rank <- notifying rank):")
    if not pairs:
        lines.append("  no TWAIT was released by a traced TNOTIFY")
    total, longest = f"total {unit}", f"longest {unit}"
    lines.append(f"  {'rank':>4} <- {'rank':<4} {'waits':>7} {total:>{w1}} {longest:>{w2}}")
    for (wr, nr), durs in sorted(pairs.items(), key=lambda kv: -sum(kv[1]))[:top]:
        lines.append(f"  {wr:>4} <- {nr:<4} {len(durs):>7} {fmt(sum(durs), w1)} {fmt(max(durs), w2)}")
    lines.append(f"longest waits (top {top}):")
    for w in sorted(waits, key=lambda e: -e.get("dur", 0.0))[:top]:
        a = w["args"]
        by = a.get("released_by")
        who = (f"released by rank {by['rank']} block {by['block']} (notify value {by['value']})"
               if by else "no traced notify before it returned")
        lines.append(f"  {fmt(w.get('dur', 0.0), 9)} {unit}  rank {w['pid']} block {w['tid']}: "
                     f"TWAIT(signal rank {a.get('rank')} offset {a.get('offset', 0):#x} "
                     f"{a.get('cmp')} {a.get('value')}) saw {a.get('seen')}; {who}")
    if not waits:
        lines.append("  none")
    for e in events:
        if str(e.get("name", "")).startswith("hazard ["):
            lines.append(f"checker report, rank {e['pid']} block {e['tid']}: "
                         f"{e.get('args', {}).get('message', e['name'])}")
    launches = [e for e in events if e.get("tid") == HOST_TID and e.get("ph") == "X"]
    if launches:
        lines.append(f"launches: {len(launches) // max(len(ranks), 1)} per rank, longest "
                     f"{fmt(max(e.get('dur', 0.0) for e in launches), 0).strip()} {unit}")
    return "\n".join(lines)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = opt.parser(prog or opt.prog_name("trace"),
                   "Summarize a shmcomm Chrome trace file (written by --trace or kept by stress "
                   "for a failing run): who waited on whom and the longest waits.",
                   "exit status: 0 success, 2 usage error or a file that is not a trace, 130 / 143 "
                   "interrupted by SIGINT / SIGTERM")
    p.add_argument("file", metavar="FILE", help="the trace JSON file")
    p.add_argument("--top", type=int, default=10, help="rows of each table (default: %(default)s)")
    p.add_argument("--plot", metavar="OUT.svg", default="",
                   help="also draw the run's timeline into this SVG file: agents as rows, waits "
                        "as spans, notifies as arrows to the waits they released, a race's two "
                        "accesses and a hang's unreleased waits marked (default: no picture)")
    return p


@opt.interruptible
def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``trace``; returns the exit status."""
    interrupts_as_usual()  # from here on a Ctrl-C is this command's to report
    p = build_parser(prog)
    ns = p.parse_args(argv)
    if ns.top < 1:
        return opt.usage_error(p, f"--top must be >= 1, got {ns.top}")
    try:
        doc = load_json("trace", ns.file)
        events = load(ns.file)
    except (OSError, ValueError) as exc:
        return opt.usage_error(p, f"cannot read {ns.file!r} as a Chrome trace: {exc}")
    meta = doc.get("otherData", {}) if isinstance(doc, dict) else {}
    if not isinstance(meta, dict):
        return opt.usage_error(p, f"cannot read {ns.file!r} as a Chrome trace: field "
                                  "'otherData' must be an object")
    try:
        text = summarize(events, meta, ns.top)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a field no check covers
        return opt.usage_error(p, f"cannot summarize {ns.file!r}: an event has a field of the "
                                  f"wrong type or is missing one ({type(exc).__name__}: {exc})")
    print(text)
    if ns.plot:
        problem = write_plot(ns.plot, events, meta)
        if problem:
            return opt.usage_error(p, problem)
        print(f"timeline drawn to {ns.plot}")
    return 0


def write_plot(path: str, events: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Draw the timeline into ``path`` (replaced in one step); an error message or ""."""
    if not path.endswith(".svg"):
        return f"--plot: {path!r}: the picture is an SVG file; name it *.svg"
    try:  # made aside and renamed into place, never through a link (shmcomm.files)
        write_file("--plot", os.path.abspath(path), plot_svg(events, meta))
    except ArgumentError as exc:  # (it names --plot and the path already)
        return str(exc)
    except OSError as exc:
        return f"--plot: cannot write {path!r}: {exc.strerror or exc}"
    return ""


if __name__ == "__main__":
    sys.exit(main())
