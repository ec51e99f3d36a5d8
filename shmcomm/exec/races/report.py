"""Race reports: both sites of a race and the happens-before edge that is missing, in words."""

from __future__ import annotations

from .shadow import ATOMIC, PIPE3, WRITE, Access, Shadow

_STORES = ("gm_store", "gm_atomic_store")  # word stores: atomic, but no add


def _who(a: Access) -> str:
    return f"rank {a.rank} " + ("host" if a.block is None else f"block {a.block}")


def _what(a: Access) -> str:
    if not a.flags & WRITE:
        verb = "read"
    else:  # an atomic add (scalar, st_atomic, an AtomicAdd copy) adds; a word store writes
        verb = "added into" if a.flags & ATOMIC and a.op not in _STORES else "wrote"
    if a.block is None:  # the host: a plain load or store, on no pipe
        return f"{_who(a)} {verb} it{'' if a.flags & WRITE == 0 else f' ({a.op})'} at {a.site}"
    return f"{_who(a)} {verb} it ({a.op} on {a.pipe}) at {a.site}"


def _where(a: Access) -> str:
    if a.win[0] == "gm":
        return f"rank {a.win[1]}'s window, bytes [{a.lo}, {a.hi})"
    return f"rank {a.win[1]} block {a.win[2]}'s UB tile, bytes [{a.lo}, {a.hi})"


def missing_edge(shadow: Shadow, x: Access, y: Access) -> tuple[str, str]:
    """Why ``x`` does not happen before ``y``, in the terms of the kernel API, and the fix."""
    snap = shadow.snaps[y.snap]
    if x.flags & PIPE3 and int(snap[x.comp]) >= x.epoch:
        via = "" if y.block is not None else (
            f" (which rank {y.rank}'s blocks waited for before their launch ended)")
        waiter = _who(y) if y.block is not None else f"rank {y.rank}'s blocks"
        return (f"{_who(y)} learned of the store through a notify{via} that followed its drain, "
                "but no dsb(DSB_DDR) came between the drain and that notify, so the data need "
                f"not be visible on rank {y.rank} yet",
                f"put dsb(DSB_DDR) after the drain and before the notify that {waiter} wait"
                f"{'s' if y.block is not None else ''} for")
    if x.pipe == "DMA" and int(snap[x.scomp]) >= x.issue:
        return (f"{_who(y)} synchronized with {_who(x)} after it posted the {x.op}, but before "
                "its AsyncEvent.Wait (or a Test that returned True), so the copy may still be in "
                "flight (no pipe_barrier or dsb waits for the DMA engine)",
                f"call ev.Wait(session) on the copy's event before {_who(x)} signals or touches "
                "the copy's source or destination")
    if x.scomp == y.scomp and x.block is not None:  # one block (the same clock slot)
        return (f"the block's own pipes are not ordered: no set_flag / wait_flag ({x.pipe} -> "
                f"{y.pipe}) or pipe_barrier between the two",
                f"set_flag / wait_flag from {x.pipe} to {y.pipe} (or pipe_barrier) between them"
                if x.pipe != "DMA" else "AsyncEvent.Wait on the copy between them")
    if x.pipe in ("MTE2", "MTE3") and int(snap[x.scomp]) >= x.issue:
        fence = " and then a dsb(DSB_DDR)" if x.pipe == "MTE3" else ""
        return (f"{_who(y)} synchronized with {_who(x)} after it issued the {x.op}, but the "
                f"notify it observed did not follow a pipe_barrier / wait_flag on {x.pipe}{fence}, "
                "so that work may still be in flight",
                f"drain {x.pipe} with pipe_barrier({'PIPE_MTE3' if x.pipe == 'MTE3' else 'PIPE_MTE2'})"
                f" (or pipe_barrier(PIPE_ALL)){', then put dsb(DSB_DDR),' if fence else ''} "
                "before that notify")
    same_rank = x.rank == y.rank and x.block is not None and y.block is not None
    # one block index on two clock slots: blocks of two launches running at once (two streams)
    other = " of another launch" if same_rank and x.block == y.block else ""
    return (f"no chain of TNOTIFY -> TWAIT / TTEST (or events, SYNCALL, atomics, launches joined "
            f"by the host, rt.barrier) leads from {_who(x)}'s access to {_who(y)}{other}'s: "
            f"{_who(y)} observed no signal that {_who(x)} made after it",
            ("order them: a SYNCALL between them if they are blocks of one launch, "
             "synchronize() / Launch.wait() before the second launch if they are launches on "
             "different streams, else a notify after the first and a wait before the second"
             if same_rank else
             "order them: synchronize() / Launch.wait() for a launch on a stream, rt.barrier() "
             "between hosts, or a notify after the first access and a wait on it before the "
             "second"))


def describe(shadow: Shadow, x: Access, y: Access) -> str:
    """One race: both accesses, the range, and the missing edge (told in the direction in which
    the later party knew most of the earlier one)."""
    kx, ky = _knows(shadow, x, y), _knows(shadow, y, x)
    if kx < 0 and ky < 0:  # neither heard of the other: tell it from the write
        a, b = (x, y) if x.flags & WRITE else (y, x)
    else:
        a, b = (x, y) if kx >= ky else (y, x)
    why, fix = missing_edge(shadow, a, b)
    if a.flags & WRITE and a.pipe in ("MTE3", "DMA") and b.block is not None:
        w = shadow.waited_inside(a, b)
        if w is not None:  # the reader waited on a word of this very copy (data as flag)
            why = (f"{_who(b)} waited ({w.op} at {w.site}) on a word that this {a.op} wrote "
                   f"itself, and saw it, but a copy publishes nothing: on a2a3 a TSTORE is one "
                   f"DMA burst whose bytes land in no promised order, so the word seen says "
                   f"nothing of the rest of the copy (pto-isa's TSTORE orders none of them, and "
                   f"its memory model makes them visible only after a sync)")
            fix = (f"drain and fence the copy (pipe_barrier(PIPE_ALL), dsb(DSB_DDR)), then "
                   f"TNOTIFY a flag that {_who(b)} waits on instead of the data's own word")
    same = ""
    if a.digest and a.digest == b.digest and (a.lo, a.hi, a.win) == (b.lo, b.hi, b.win):
        same = (f"\n    both stored the same bytes: in this run the race changed no data (to "
                f"accept it as meant, suppress it: race:{_short(a.site)} {_short(b.site)})")
    return (f"data race on {_where(b)}: {_what(a)}; {_what(b)}; neither happens before the "
            f"other: {why}\n    fix: {fix}{same}")


def _short(site: str) -> str:
    """``file.py:LINE`` of a site (its first place, without the directories)."""
    first = site.split(" ", 1)[0]
    return first.rsplit("/", 1)[-1]


def _knows(shadow: Shadow, x: Access, y: Access) -> int:
    return int(shadow.snaps[y.snap][x.scomp]) - x.issue


def render(shadow: Shadow, races: list | None = None, direct: list | None = None) -> str:
    """The report of every race found (the first ``shadow.limit`` in full; ``races`` and
    ``direct``: the shadow's, in the order to show them)."""
    races = shadow.races if races is None else races
    direct = shadow.direct if direct is None else direct
    n = shadow.found()
    lines = [f"{n} data race{'s' if n != 1 else ''} found by the race detector:"]
    shown = [text for _, _, text in direct[:shadow.limit]]
    shown += [describe(shadow, x, y) for x, y in races[:shadow.limit - len(shown)]]
    lines += ["  " + text for text in shown]
    if n > len(shown):
        lines.append(f"  ... and {n - len(shown)} more")
    return "\n".join(lines)
