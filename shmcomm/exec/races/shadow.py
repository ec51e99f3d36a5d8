"""The detector's shadow state: byte ranges of windows and who accessed them, FastTrack-style.

An access record is one range of one window with the accessing agent's epoch (its own clock
component) and a reference to its whole clock at the time (a snapshot shared by every access
between two synchronizations of that agent, so records stay small). Ranks stream their records to
the launcher, which keeps them here and checks every new one against the overlapping ones:
records ``x`` and ``y`` race when they conflict (at least one writes, not both atomic) and
neither happens before the other. ``x`` happens before ``y`` when ``y``'s clock holds ``x``'s
epoch, so the check does not depend on the order records arrive in.

Forgetting. With its records, each agent sends a frontier: a clock that its later accesses will
hold (a block's scalar clock, which its pipes join before they issue; the host's at a launch's
start and end and at each host barrier, which a later launch's blocks start from). A record that
every live agent's frontier holds can race with nothing still to come (each rank's records
arrive in order), so it is dropped, with the snapshots no kept record uses: a long run keeps
only what is still unordered.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .clocks import G3, MTE3, Layout

WRITE, ATOMIC, PIPE3 = 1, 2, 4  # record flags; PIPE3: a store on MTE3 (visibility is per reader)
WAITED = 8  # not an access: words a TWAIT / TTEST read (kept for the reports only)
_WAITS_KEPT = 64  # per window: the latest waits a report may name
_BUCKET = 1 << 20  # bytes of a window per index bucket (a collective's chunk fits one)
_PRUNE_EVERY = 1024  # records added between two prunings


class Access(NamedTuple):
    """One access record (see the module docstring)."""

    win: tuple  # ("gm", rank) or ("ub", rank, block, tile uid)
    lo: int
    hi: int
    flags: int
    comp: int  # the agent's clock component
    epoch: int
    snap: int  # the agent's clock snapshot
    scomp: int  # the component of the issuing block's scalar unit (the host's: comp)
    issue: int  # the scalar unit's epoch when it issued the access
    site: str  # the user's file:line
    rank: int
    block: int | None
    pipe: str  # "S", "MTE2", "MTE3", "host"
    op: str  # "TLOAD", "TSTORE", "TPUT (its TSTORE)", ...
    digest: int = 0  # a store's bytes (crc32 + 1; 0: not known): a report says when two match


def visible_comp(x: Access, y: Access) -> int:
    """The component of ``y``'s clock that says whether ``x`` is done for ``y``: an MTE3 store is
    done once drained for its own block, and for its own rank reading its own window; for
    anyone else once fenced."""
    if x.flags & PIPE3 and not (x.rank == y.rank and (x.scomp == y.scomp or x.win[1] == x.rank)):
        return x.comp - MTE3 + G3
    return x.comp


def _at(site: str, place: str) -> bool:
    """Whether ``site`` (a report's ``/path/file.py:LINE ...``) is at ``place`` (the end of
    its path and its line)."""
    first = site.split(" ", 1)[0]
    return first == place or first.endswith("/" + place)


def _rule_matches(rule: tuple[str, str | None], a: str, b: str) -> bool:
    one, two = rule
    if two is None:
        return _at(a, one) or _at(b, one)
    return (_at(a, one) and _at(b, two)) or (_at(a, two) and _at(b, one))


class Shadow:
    """Every record of a run, by window and bucket, and the races found among them."""

    def __init__(self, layout: Layout, limit: int = 20,
                 suppress: tuple[tuple[str, str | None], ...] = ()) -> None:
        self.layout = layout
        # race suppressions (``race_suppressions``), and what each pair of sites they matched
        # was: (site, site, window) -> [the rule, how many times]
        self.suppress = suppress
        self.suppressed: dict[tuple, list] = {}
        self.snaps: dict[int, np.ndarray] = {}
        self.buckets: dict[tuple, dict[int, list[Access]]] = {}
        self.races: list[tuple[Access, Access]] = []
        # (rank, block, text) of races a rank found itself: a plain host store into a signal
        # word against a notify, judged on the word's clock
        self.direct: list[tuple[int, int | None, str]] = []
        self.pairs: set[tuple] = set()  # (site, site, window) of races already reported
        self.shown: dict[tuple, int] = {}  # such a key -> its pair's index in races
        self.limit = limit
        # (rank, block or None for the host) -> a clock the agent's later accesses hold
        self.frontiers: dict[tuple[int, int | None], np.ndarray] = {}
        self.hosts: set[int] = set()  # ranks whose host sent a frontier
        self.added = 0  # records added since the last pruning
        self.waits: dict[tuple, list[Access]] = {}  # window -> the latest WAITED records

    def waited_inside(self, x: Access, y: Access) -> Access | None:
        """A wait of ``y``'s agent on a word that ``x`` wrote (data used as its own flag)."""
        for w in self.waits.get(x.win, ()):
            if w.rank == y.rank and w.block == y.block and x.lo <= w.lo and w.hi <= x.hi:
                return w
        return None

    def _suppressed(self, key: tuple) -> bool:
        """Whether a rule accepts the race between the sites of ``key`` (then counted)."""
        got = self.suppressed.get(key)
        if got is None:
            rule = next((r for r in self.suppress if _rule_matches(r, key[0], key[1])), None)
            if rule is None:
                return False
            got = self.suppressed[key] = [rule, 0]
        got[1] += 1
        return True

    def found(self) -> int:
        """How many races were found."""
        return len(self.pairs) + len(self.direct)

    def add(self, snaps: dict[int, np.ndarray], records: list[Access]) -> int:
        """Take a batch of one rank's records; returns how many new races they showed."""
        self.snaps.update(snaps)
        found = 0
        for y in records:
            if y.flags & WAITED:
                kept = self.waits.setdefault(y.win, [])
                kept.append(y)
                if len(kept) > _WAITS_KEPT:
                    del kept[0]
                continue
            found += self._check(y)
            self._insert(y)
        self.added += len(records)
        return found

    def advance(self, agent: tuple[int, int | str | None], frontier: np.ndarray) -> None:
        """Every later access of ``agent`` (``(rank, block)``, ``(rank, None)`` for the host,
        ``(rank, "launch end")`` for the host when the launch's blocks are done) holds
        ``frontier``; prune when enough was added."""
        rank, block = agent
        if block == "launch end":
            for key in [k for k in self.frontiers if k[0] == rank and k[1] is not None]:
                del self.frontiers[key]
            block = None
        self.frontiers[(rank, block)] = frontier  # type: ignore[index]
        if block is None:
            self.hosts.add(rank)
        if self.added >= _PRUNE_EVERY and len(self.hosts) == self.layout.nranks:
            self.prune()

    def low(self) -> np.ndarray:
        """A clock every later access of every agent holds. While a rank's blocks run, its
        host's later accesses come after their end, so its blocks' frontiers bound it."""
        running = {k[0] for k in self.frontiers if k[1] is not None}
        return np.minimum.reduce([v for k, v in self.frontiers.items()
                                  if k[1] is not None or k[0] not in running])

    def prune(self) -> int:
        """Drop the records every agent's frontier holds; returns how many."""
        low = self.low()
        dropped = 0
        keep_snaps: set[int] = {a.snap for race in self.races for a in race}
        for win in self.buckets.values():
            for b, recs in list(win.items()):
                kept = [x for x in recs
                        if int(low[x.comp - MTE3 + G3 if x.flags & PIPE3 else x.comp]) < x.epoch]
                dropped += len(recs) - len(kept)
                if kept:
                    win[b] = kept
                    keep_snaps.update(x.snap for x in kept)
                else:
                    del win[b]
        self.snaps = {k: v for k, v in self.snaps.items() if k in keep_snaps}
        self.added = 0
        return dropped

    def _check(self, y: Access) -> int:
        win = self.buckets.get(y.win)
        if not win:
            return 0
        found = 0
        ylo, yhi, ycomp, yflags = y.lo, y.hi, y.comp, y.flags
        snaps = self.snaps
        first, last = ylo // _BUCKET, (yhi - 1) // _BUCKET
        seen: set[int] = set()
        for b in range(first, last + 1):
            for x in win.get(b, ()):
                if first != last:  # a record spanning buckets is in each of them
                    if id(x) in seen:
                        continue
                    seen.add(id(x))
                # a race: the ranges overlap, two agents, a conflict (a write, and not two
                # atomics), and neither happens before the other (x before y: y's snapshot
                # holds x's epoch in the component that makes x visible to y). Cheapest first:
                # every record of a run passes here against those it may overlap
                if x.hi <= ylo or yhi <= x.lo or x.comp == ycomp:
                    continue
                xflags = x.flags
                if not (xflags | yflags) & WRITE or xflags & yflags & ATOMIC:
                    continue
                if (int(snaps[y.snap][visible_comp(x, y)]) >= x.epoch
                        or int(snaps[x.snap][visible_comp(y, x)]) >= y.epoch):
                    continue
                key = (x.site, y.site, x.win[:2]) if x.site <= y.site else (y.site, x.site, x.win[:2])
                if key in self.pairs:
                    self._keep_worse(key, x, y)
                    continue
                if self.suppress and self._suppressed(key):
                    continue
                self.pairs.add(key)
                if len(self.races) < self.limit:
                    self.shown[key] = len(self.races)
                    self.races.append((x, y))
                found += 1
        return found

    def _missing(self, x: Access, y: Access) -> int:
        """How much of the ordering a race lacks, for its fix: 2 when the MTE3 store was not even
        drained for the reader, 1 when it was drained but not fenced, 0 otherwise."""
        if y.flags & PIPE3 and not x.flags & PIPE3:
            x, y = y, x
        if not x.flags & PIPE3:
            return 0
        return 1 if int(self.snaps[y.snap][x.comp]) >= x.epoch else 2

    def _keep_worse(self, key: tuple, x: Access, y: Access) -> None:
        """Another record pair of a race already found: the report keeps the pair that lacks
        most, so its fix is the whole fix (a TPUT drains its first chunks itself, to reuse its
        tile, but not its last: the first chunk's pair would ask only for the fence)."""
        i = self.shown.get(key)
        if i is not None and self._missing(x, y) > self._missing(*self.races[i]):
            self.races[i] = (x, y)

    def _insert(self, y: Access) -> None:
        win = self.buckets.setdefault(y.win, {})
        for b in range(y.lo // _BUCKET, (y.hi - 1) // _BUCKET + 1):
            win.setdefault(b, []).append(y)
