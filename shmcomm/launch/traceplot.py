"""A run's timeline as an SVG picture, written directly (no plotting library needed).

One row per agent (each rank's host, then its blocks), time across. Kernels and launches are
pale bars; waits (``TWAIT``, a ``TTEST`` poll, ``rt.barrier``, ``SYNCALL``) orange spans;
copies green; each ``TNOTIFY`` a tick, with an arrow to every wait it released. A failing run's
story is marked on top: a race's two accesses (purple diamonds joined by a dashed line, each
labelled with its line of code), a deadlock's or a cut run's unreleased waits (red, with a
dashed arrow to the rank whose signal word they wait on), and the point where a run was cut.
``python -m shmcomm trace FILE --plot OUT.svg`` draws it.
"""

from __future__ import annotations

import html
import re
from typing import Any

from ..exec.trace import HOST_TID, PIPE_TID_BASE, flows

WIDTH, LABEL_W, ROW_H, TOP, BOTTOM = 1000, 130, 24, 58, 70
WAITS = ("TWAIT", "TTEST poll", "rt.barrier", "SYNCALL")
COPIES = ("TPUT", "TGET", "TLOAD", "TSTORE", "TPUT_ASYNC", "TGET_ASYNC")
COLOURS = {"kernel": "#dfe7f1", "launch": "#c9dcf5", "wait": "#f5a623", "copy": "#5fb760",
           "other": "#b0b0b0", "flow": "#3b78c4", "race": "#8e2fc0", "stuck": "#d0021b"}
# "data race on WHERE: rank R block B wrote it (OP on PIPE) at SITE; rank R host read it at SITE"
_ACCESS = (r"rank (\d+) (?:block (\d+)|host) (wrote|read|added into) it(?: \((.*?)\))? "
           r"at (\S+?)")
_RACE_RE = re.compile(rf"data race on ([^:]+): {_ACCESS}; {_ACCESS}; neither")


def _row_key(pid: int, tid: int) -> tuple[int, int]:
    return (pid, -1 if tid == HOST_TID else tid)


def _name(tid: int) -> str:
    return "host" if tid == HOST_TID else f"block {tid}"


class _Canvas:
    """The scale and the SVG elements of one picture."""

    def __init__(self, rows: list[tuple[int, int]], t0: float, t1: float) -> None:
        self.rows = {r: i for i, r in enumerate(rows)}
        self.t0, self.span = t0, max(t1 - t0, 1e-9)
        self.height = TOP + ROW_H * len(rows) + BOTTOM
        self.out: list[str] = []

    def x(self, ts: float) -> float:
        return LABEL_W + (WIDTH - LABEL_W - 20) * (ts - self.t0) / self.span

    def y(self, pid: int, tid: int) -> float | None:
        i = self.rows.get(_row_key(pid, tid))
        return None if i is None else TOP + ROW_H * i

    def add(self, text: str) -> None:
        self.out.append(text)

    def text(self, x: float, y: float, s: str, size: int = 11, colour: str = "#222",
             anchor: str = "start", weight: str = "normal") -> None:
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{colour}" '
                 f'text-anchor="{anchor}" font-weight="{weight}">{html.escape(s)}</text>')


def _kind(name: str) -> str:
    if name.startswith("kernel"):
        return "kernel"
    if name == "launch":
        return "launch"
    if name in WAITS:
        return "wait"
    return "copy" if name.split(" ")[0] in COPIES else "other"


def _spans(c: _Canvas, events: list[dict[str, Any]]) -> None:
    """Kernels and launches under everything, then copies and waits."""
    order = {"kernel": 0, "launch": 0, "other": 1, "copy": 2, "wait": 3}
    xs = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    for e in sorted(xs, key=lambda e: order[_kind(str(e.get("name", "")))]):
        y = c.y(e.get("pid", -1), e.get("tid", -1))
        if y is None:
            continue
        kind = _kind(str(e["name"]))
        a = e.get("args", {})
        stuck = kind == "wait" and (a.get("cut") or a.get("unfinished")) and not a.get(
            "released_by")
        pad = 2 if kind in ("kernel", "launch") else 6 if kind == "wait" else 9
        x0, x1 = c.x(e["ts"]), c.x(e["ts"] + e["dur"])
        stroke = f' stroke="{COLOURS["stuck"]}" stroke-width="2"' if stuck else ""
        title = f"{e['name']} {e['dur'] / 1e3:.3f} ms {a}" if kind != "kernel" else e["name"]
        c.add(f'<rect x="{x0:.1f}" y="{y + pad:.1f}" width="{max(x1 - x0, 1.0):.1f}" '
              f'height="{ROW_H - 2 * pad}" fill="{COLOURS[kind]}"{stroke}>'
              f'<title>{html.escape(title)}</title></rect>')
        if stuck:
            _stuck_arrow(c, e, x1, y)


def _stuck_arrow(c: _Canvas, e: dict[str, Any], x1: float, y: float) -> None:
    """An unreleased wait: a dashed arrow to the host row of the rank its word is on."""
    a = e.get("args", {})
    label = f"never released: {e['name']}"
    if "rank" in a:
        label += f" on rank {a['rank']} +{a.get('offset', 0):#x} {a.get('cmp', '')} {a.get('value')}"
        ty = c.y(a["rank"], HOST_TID)
        if ty is not None and ty != y:
            c.add(f'<line x1="{x1:.1f}" y1="{y + ROW_H / 2:.1f}" x2="{x1 - 14:.1f}" '
                  f'y2="{ty + ROW_H / 2:.1f}" stroke="{COLOURS["stuck"]}" stroke-dasharray="4 3" '
                  'marker-end="url(#stuck)"/>')
    c.text(x1 - 4, y + ROW_H - 4, label, 9, COLOURS["stuck"], "end")


def _ticks_and_flows(c: _Canvas, events: list[dict[str, Any]]) -> None:
    for e in events:
        if e.get("name") == "TNOTIFY":
            y = c.y(e.get("pid", -1), e.get("tid", -1))
            if y is not None:
                x = c.x(e["ts"])
                c.add(f'<line x1="{x:.1f}" y1="{y + 3}" x2="{x:.1f}" y2="{y + ROW_H - 3}" '
                      'stroke="#111" stroke-width="1.5"/>')
        elif e.get("name") == "run cut":
            y = c.y(e.get("pid", -1), HOST_TID)
            if y is not None:
                x = c.x(e["ts"])
                c.add(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + ROW_H:.1f}" '
                      f'stroke="{COLOURS["stuck"]}" stroke-width="3"/>')
                c.text(x - 3, y + 10, "run cut", 9, COLOURS["stuck"], "end")
    starts: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.get("ph") == "s":
            starts[e.get("id")] = e
    for e in events:
        s = starts.get(e.get("id")) if e.get("ph") == "f" else None
        if s is None:
            continue
        y0, y1 = c.y(s["pid"], s["tid"]), c.y(e["pid"], e["tid"])
        if y0 is None or y1 is None:
            continue
        c.add(f'<line x1="{c.x(s["ts"]):.1f}" y1="{y0 + ROW_H / 2:.1f}" x2="{c.x(e["ts"]):.1f}" '
              f'y2="{y1 + ROW_H / 2:.1f}" stroke="{COLOURS["flow"]}" stroke-width="1.2" '
              'marker-end="url(#flow)" opacity="0.8"/>')


def race_accesses(text: str) -> list[tuple[tuple[int, int, str, str, str], ...]]:
    """The two accesses of each race a report names: ``(rank, tid, verb, op, site)`` each."""
    out = []
    for m in _RACE_RE.finditer(text):
        g = m.groups()
        acc = []
        for i in (1, 6):
            rank, block, verb, op, site = g[i:i + 5]
            acc.append((int(rank), HOST_TID if block is None else int(block), verb, op or "",
                        site))
        out.append(tuple(acc))
    return out


def _access_time(events: list[dict[str, Any]], rank: int, tid: int, op: str, t1: float) -> float:
    """When an access happened, as near as the trace tells: a block's last span of its op; a
    host's access after its last launch (host loads and stores are not traced)."""
    name = op.split(" ")[0]
    on_row = [e for e in events if e.get("pid") == rank and e.get("tid") == tid
              and e.get("ph") == "X"]
    match = [e for e in on_row if tid != HOST_TID and str(e.get("name", "")).split(" ")[0] == name]
    if match:
        last = max(match, key=lambda e: e["ts"])
        return float(last["ts"] + last.get("dur", 0) / 2)
    launches = [e["ts"] + e.get("dur", 0) for e in on_row if e.get("name") == "launch"]
    return float(max(launches)) if launches else t1


def _races(c: _Canvas, events: list[dict[str, Any]], meta: dict[str, Any], t1: float) -> None:
    for pair in race_accesses(str(meta.get("report") or ""))[:3]:
        points = []
        for rank, tid, verb, op, site in pair:
            y = c.y(rank, tid)
            if y is None:
                continue
            x = c.x(_access_time(events, rank, tid, op, t1))
            ym = y + ROW_H / 2
            base = site.rsplit("/", 1)[-1]  # (a picture names no machine's paths)
            points.append((x, ym))
            c.add(f'<path d="M{x:.1f},{ym - 7:.1f} L{x + 7:.1f},{ym:.1f} L{x:.1f},{ym + 7:.1f} '
                  f'L{x - 7:.1f},{ym:.1f} Z" fill="{COLOURS["race"]}"><title>'
                  f'{html.escape(f"race: rank {rank} {_name(tid)} {verb} it at {base}")}'
                  '</title></path>')
            c.text(x + 9, ym - 3, f"race: {verb} at {base}", 10,
                   COLOURS["race"], weight="bold")
        if len(points) == 2:
            (xa, ya), (xb, yb) = points
            c.add(f'<line x1="{xa:.1f}" y1="{ya:.1f}" x2="{xb:.1f}" y2="{yb:.1f}" '
                  f'stroke="{COLOURS["race"]}" stroke-width="2" stroke-dasharray="6 3"/>')


def _frame(c: _Canvas, rows: list[tuple[int, int]], meta: dict[str, Any], unit: str,
           scale: float) -> None:
    for i, (pid, t) in enumerate(rows):
        y = TOP + ROW_H * i
        if i % 2 == 0:
            c.add(f'<rect x="0" y="{y}" width="{WIDTH}" height="{ROW_H}" fill="#f7f7f7"/>')
        c.text(6, y + ROW_H / 2 + 4, f"rank {pid} {_name(HOST_TID if t < 0 else t)}")
    axis_y = TOP + ROW_H * len(rows) + 4
    c.add(f'<line x1="{LABEL_W}" y1="{axis_y}" x2="{WIDTH - 20}" y2="{axis_y}" stroke="#555"/>')
    for k in range(6):
        ts = c.t0 + c.span * k / 5
        x = c.x(ts)
        c.add(f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="#555"/>')
        c.text(x, axis_y + 16, f"{(ts - c.t0) / scale:.3g}", 10, "#555", "middle")
    c.text(WIDTH - 20, axis_y + 30, f"time ({unit})", 10, "#555", "end")
    title = (f"{meta.get('host', 'run')}: {meta.get('mode', '?')} mode, "
             f"{meta.get('nranks', '?')} ranks x {meta.get('blocks', '?')} blocks, seed "
             f"{meta.get('seed', '?')}, result {meta.get('result', '?')}")
    c.text(6, 18, title, 13, weight="bold")
    if meta.get("failure"):
        c.text(6, 34, str(meta["failure"])[:160], 10, COLOURS["stuck"])
    if meta.get("incomplete"):
        c.text(6, 48, "incomplete: " + str(meta["incomplete"])[:150], 10, COLOURS["stuck"])
    legend = [("wait", "wait"), ("copy", "copy"), ("launch", "launch"), ("flow", "notify -> wait"),
              ("race", "race access"), ("stuck", "never released")]
    x = LABEL_W
    for key, label in legend:
        c.add(f'<rect x="{x}" y="{axis_y + 38}" width="12" height="10" fill="{COLOURS[key]}"/>')
        c.text(x + 16, axis_y + 47, label, 10)
        x += 22 + 7 * len(label)


def plot_svg(events: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The SVG text of a trace's timeline (see the module docstring)."""
    events = [e for e in events if e.get("ph") != "M"]
    if not any(e.get("ph") == "s" for e in events):
        events = events + flows(events)
    timed = [e for e in events if e.get("ph") in ("X", "i", "s", "f") and "ts" in e]
    rows = sorted({_row_key(e["pid"], e["tid"]) for e in timed
                   if "pid" in e and isinstance(e.get("tid"), int) and e["tid"] < PIPE_TID_BASE})
    if not timed or not rows:
        rows = rows or [(0, -1)]
        timed = timed or [{"ts": 0.0}]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0.0) for e in timed)
    steps = meta.get("clock") == "steps"
    c = _Canvas(rows, t0, t1)
    _frame(c, rows, meta, "steps" if steps else "ms", 1.0 if steps else 1e3)
    _spans(c, events)
    _ticks_and_flows(c, events)
    _races(c, events, meta, t1)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{c.height}" '
            f'viewBox="0 0 {WIDTH} {c.height}" font-family="sans-serif">'
            '<defs>'
            f'<marker id="flow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
            f'<path d="M0,0 L8,4 L0,8 Z" fill="{COLOURS["flow"]}"/></marker>'
            f'<marker id="stuck" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
            f'<path d="M0,0 L8,4 L0,8 Z" fill="{COLOURS["stuck"]}"/></marker></defs>'
            f'<rect width="{WIDTH}" height="{c.height}" fill="white"/>')
    return head + "\n".join(c.out) + "</svg>\n"



def plot_beside(trace: str) -> str | None:
    """Draw a kept trace's timeline beside it (``run.json`` -> ``run.svg``); the picture's path,
    or ``None`` when the trace cannot be read or the picture not written."""
    import json
    import os

    from ..exec.trace import load

    out = os.path.splitext(trace)[0] + ".svg"
    try:
        events = load(trace)
        with open(trace) as f:
            doc = json.load(f)
        meta = doc.get("otherData", {}) if isinstance(doc, dict) else {}
        with open(out, "w") as f:
            f.write(plot_svg(events, meta))
    except (OSError, ValueError):
        return None
    return out
