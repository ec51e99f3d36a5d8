"""Race reports: both sites of a race and the happens-before edge that is missing, in words."""

from __future__ import annotations

from .shadow import ATOMIC, PIPE3, WRITE, Access, Shadow


def _who(a: Access) -> str:
    return f"rank {a.rank} " + ("host" if a.block is None else f"block {a.block}")


def _what(a: Access) -> str:
    verb = "added into" if a.flags & ATOMIC else "wrote" if a.flags & WRITE else "read"
    return f"{_who(a)} {verb} it ({a.op} on {a.pipe}) at {a.site}"


def _where(a: Access) -> str:
    if a.win[0] == "gm":
        return f"rank {a.win[1]}'s window, bytes [{a.lo}, {a.hi})"
    return f"rank {a.win[1]} block {a.win[2]}'s UB tile, bytes [{a.lo}, {a.hi})"


def missing_edge(shadow: Shadow, x: Access, y: Access) -> str:
    """Why ``x`` does not happen before ``y``, in the terms of the kernel API."""
    snap = shadow.snaps[y.snap]
    if x.flags & PIPE3 and int(snap[x.comp]) >= x.epoch:
        return (f"{_who(y)} learned of the store through a notify that followed its drain, but "
                "no dsb(DSB_DDR) came between the drain and that notify, so the data need not "
                f"be visible on rank {y.rank} yet")
    if x.rank == y.rank and x.block == y.block and x.block is not None:
        return (f"the block's own pipes are not ordered: no set_flag / wait_flag ({x.pipe} -> "
                f"{y.pipe}) or pipe_barrier between the two")
    if x.pipe in ("MTE2", "MTE3") and int(snap[x.scomp]) >= x.issue:
        fence = " and a dsb(DSB_DDR)" if x.pipe == "MTE3" else ""
        return (f"{_who(y)} synchronized with {_who(x)} after it issued the {x.op}, but the "
                f"notify it observed did not follow a pipe_barrier / wait_flag on {x.pipe}{fence}, "
                "so that work may still be in flight")
    return (f"no chain of TNOTIFY -> TWAIT / TTEST (or events, launches, rt.barrier) leads from "
            f"{_who(x)}'s access to {_who(y)}'s: {_who(y)} observed no notify that {_who(x)} "
            "made after it")


def describe(shadow: Shadow, x: Access, y: Access) -> str:
    """One race: both accesses, the range, and the missing edge (told in the direction in which
    the later party knew most of the earlier one)."""
    kx, ky = _knows(shadow, x, y), _knows(shadow, y, x)
    if kx < 0 and ky < 0:  # neither heard of the other: tell it from the write
        a, b = (x, y) if x.flags & WRITE else (y, x)
    else:
        a, b = (x, y) if kx >= ky else (y, x)
    return (f"data race on {_where(b)}: {_what(a)}; {_what(b)}; neither happens before the "
            f"other: {missing_edge(shadow, a, b)}")


def _knows(shadow: Shadow, x: Access, y: Access) -> int:
    return int(shadow.snaps[y.snap][x.scomp]) - x.issue


def render(shadow: Shadow) -> str:
    """The report of every race found (the first ``shadow.limit`` in full)."""
    n = shadow.found()
    lines = [f"{n} data race{'s' if n != 1 else ''} found by the race detector:"]
    shown = [text for _, _, text in shadow.direct[:shadow.limit]]
    shown += [describe(shadow, x, y) for x, y in shadow.races[:shadow.limit - len(shown)]]
    lines += ["  " + text for text in shown]
    if n > len(shown):
        lines.append(f"  ... and {n - len(shown)} more")
    return "\n".join(lines)
