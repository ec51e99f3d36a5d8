"""Who uses which signal words in this run: the library's claimed regions and the user's signals.

One :class:`SignalRegions` per rank process and run, reached as ``windows.regions``. Words are
numbered as int32 words from the start of a window (byte offset // 4); the layout is symmetric,
so a region claimed by a kernel is that kernel's in every rank's window.

* A library kernel **claims** the words it uses (:meth:`SignalRegions.claim`) the first time it
  builds its signals in this run, and builds them inside ``with claim:`` (the *owner context* of
  this thread): a ``Signal`` made there on the claimed words is the library's. It is kept by the
  kernel (and in ``PtrKind.lib_signals``), never in the shared Signal cache (``ptr._sig`` /
  ``PtrKind.signals``), and its words never count as a user's. The layout table that says which
  region belongs to which kernel is ``shmcomm.kernels.layout``; this module only keeps score.
* Every other ``Signal`` / ``Signal2D`` made in this process (a user's kernel or host code) is
  **noted** (:meth:`SignalRegions.note_user`) when it is first made: the slow path of ``Signal``
  and ``Signal2D.__init__``. ``Signal(ptr)`` on a word already seen returns the cached Signal with
  no check at all, which is safe because a user's word is checked when its Signal is first made
  and again when a library kernel claims it later, and a library's Signal is never in the cache.
* An overlap raises :class:`~shmcomm.errors.SignalOverlapError` naming both parties with their
  word ranges: a user's signal inside a claimed region (either order), or two kernels' regions.
  Claims of one kernel may overlap each other (the seed barrier's phases do); they merge.
* :meth:`SignalRegions.reserve` hands out named, 64-byte aligned user regions from the free range
  (``rt.signal_region``).

Scope: each rank process compares what it made and claimed itself, which covers every program
whose ranks all run the library kernels they use (barriers and collectives need every rank
anyway). Host writes through ``rt.signals`` (numpy) are not signals and are not tracked.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from typing import Any

from ..errors import ArgumentError, SignalOverlapError

LINE_WORDS = 16  # int32 words in a 64-byte line: named regions start on one


class _Owner(threading.local):
    """Per thread: the claim whose signals library code is making now (``None``: user code)."""

    claim: Claim | None = None


OWNER = _Owner()


class Claim:
    """Words ``[start, end)`` claimed by the region ``owner`` of a library kernel in this run.

    A context manager: inside ``with claim:`` the Signals this thread makes on the claimed words
    are the kernel's own (see the module docstring). Owner contexts do not nest: a kernel builds
    its signals, not another kernel's, inside its own. ``lo`` / ``hi`` are the byte offsets.
    """

    __slots__ = ("owner", "kernel", "start", "end", "lo", "hi", "custom")

    def __init__(self, owner: str, kernel: str, start: int, end: int, custom: bool) -> None:
        self.owner, self.kernel, self.custom = owner, kernel, custom
        self.start, self.end, self.lo, self.hi = start, end, 4 * start, 4 * end

    @property
    def label(self) -> str:
        return _label(self.owner, self.kernel, self.custom)

    def __enter__(self) -> Claim:
        OWNER.claim = self
        return self

    def __exit__(self, t: Any, v: Any, tb: Any) -> None:
        OWNER.claim = None

    def __repr__(self) -> str:
        return f"Claim({self.owner!r}, words [{self.start}, {self.end}))"


class NoClaim:
    """The owner context of nothing (arguments the kernel itself will reject)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, t: Any, v: Any, tb: Any) -> None:
        return None


NO_CLAIM = NoClaim()


class _Span:
    """One claimed range of a region, merged with the other claims of that region (and disjoint
    from every other region's)."""

    __slots__ = ("start", "end", "owner", "kernel", "custom")

    def __init__(self, start: int, end: int, owner: str, kernel: str, custom: bool) -> None:
        self.start, self.end, self.owner, self.kernel, self.custom = start, end, owner, kernel, custom

    @property
    def label(self) -> str:
        return _label(self.owner, self.kernel, self.custom)


def _label(owner: str, kernel: str, custom: bool) -> str:
    where = " at a custom signal_base" if custom else ""
    return f"the signal region '{owner}' of {kernel}{where}"


class SignalRegions:
    """The claimed regions, user signal words and named user regions of one rank process."""

    def __init__(self, signal_words: int) -> None:
        self.signal_words = signal_words
        # the first word of the users' free range; set by the kernels' layout, which knows it
        self.free_start: int | None = None
        self._lock = threading.Lock()
        self.made: dict[tuple[str, int, int], Claim] = {}  # (owner, start, end) -> its Claim
        self._spans: list[_Span] = []  # sorted by start, disjoint
        self._starts: list[int] = []  # their starts, for bisect
        self._user: dict[int, str] = {}  # word -> "Signal" / "Signal2D" (the first maker)
        self._named: dict[str, tuple[int, int]] = {}
        self._top = 0  # first word after the last named region

    # -- the library's claims ---------------------------------------------------------------

    def claim(self, owner: str, kernel: str, start: int, end: int, caller: str,
              custom: bool = False) -> Claim:
        """Claim words ``[start, end)`` for the region ``owner`` of ``kernel`` (``custom``: placed
        at a signal_base of the caller's choice, not where the layout table puts it). Idempotent;
        claims of one ``owner`` may overlap and merge. Raises ``SignalOverlapError`` (its message
        starts with ``caller``) if another region claimed any of the words, or a user's signal
        was made on one, earlier in this run."""
        key = (owner, start, end)
        c = self.made.get(key)
        if c is not None:
            return c
        with self._lock:
            c = self.made.get(key)
            if c is not None:
                return c
            hits = self._overlapping(start, end)
            custom_any = custom
            for h in hits:
                if h.owner != owner:
                    raise SignalOverlapError(self._kernels_message(
                        caller, _Span(start, end, owner, kernel, custom), h))
                custom_any = custom_any or h.custom
            if self._user:
                user = self._user_in(start, end)
                if user is not None:
                    raise SignalOverlapError(self._claim_user_message(
                        caller, _Span(start, end, owner, kernel, custom), user))
            lo, hi = start, end
            for h in hits:  # merge with this owner's claims it overlaps
                i = self._spans.index(h)
                del self._spans[i], self._starts[i]
                lo, hi = min(lo, h.start), max(hi, h.end)
            i = bisect_right(self._starts, lo)
            self._spans.insert(i, _Span(lo, hi, owner, kernel, custom_any))
            self._starts.insert(i, lo)
            c = self.made[key] = Claim(owner, kernel, start, end, custom)
            return c

    def claims(self) -> list[tuple[str, int, int]]:
        """``(owner, start, end)`` of every claimed range (merged per kernel), in word order."""
        return [(s.owner, s.start, s.end) for s in self._spans]

    # -- the user's signals -----------------------------------------------------------------

    def note_user(self, what: str, rank: int, ranges: tuple[tuple[int, int], ...]) -> None:
        """Record a user's signal on words ``ranges`` (``[start, end)`` pairs) of ``rank``'s
        window; raise ``SignalOverlapError`` (prefixed with ``what``) if a kernel claimed one."""
        with self._lock:
            if self._spans:  # (no kernel claimed anything yet: nothing to overlap)
                for s, e in ranges:
                    for h in self._overlapping(s, e):
                        first = ranges[0][0]
                        raise SignalOverlapError(self._user_message(what, rank, first,
                                                                    ranges[-1][1], h))
            user = self._user
            for s, e in ranges:
                for w in range(s, e):
                    if w not in user:
                        user[w] = what

    # -- named user regions -----------------------------------------------------------------

    def reserve(self, name: Any, words: Any, low: int) -> int:
        """The first word of ``words`` fresh words named ``name`` at or after word ``low``,
        64-byte aligned, below the end of the signal matrix (``rt.signal_region``)."""
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"rt.signal_region: name must be a non-empty str, got {name!r}")
        if isinstance(words, bool) or not isinstance(words, int) or words < 1:
            raise ArgumentError(f"rt.signal_region: words must be an int >= 1, got {words!r}")
        with self._lock:
            had = self._named.get(name)
            if had is not None:
                raise ArgumentError(
                    f"rt.signal_region: the name {name!r} is already taken in this run (words "
                    f"[{had[0]}, {had[1]})); give every region its own name")
            start = -(-max(self._top, low) // LINE_WORDS) * LINE_WORDS
            end = start + words
            if end > self.signal_words:
                left = max(0, self.signal_words - start)
                raise ArgumentError(
                    f"rt.signal_region: {name!r} needs words={words} but only {left} words are left "
                    f"of the free range [{low}, {self.signal_words}) (signal_bytes="
                    f"{4 * self.signal_words}); raise signal_bytes or ask for fewer words")
            self._named[name] = (start, end)
            self._top = end
            return start

    def named(self) -> dict[str, tuple[int, int]]:
        """``name -> (start, end)`` of every region ``reserve`` handed out, in order."""
        return dict(self._named)

    # -- helpers ----------------------------------------------------------------------------

    def _overlapping(self, start: int, end: int) -> list[_Span]:
        """The claimed spans that share a word with ``[start, end)``, in word order."""
        spans = self._spans
        i = bisect_right(self._starts, start)
        if i and spans[i - 1].end > start:
            i -= 1
        out = []
        n = len(spans)
        while i < n and spans[i].start < end:
            out.append(spans[i])
            i += 1
        return out

    def _user_in(self, start: int, end: int) -> tuple[int, int, str] | None:
        """``(first, last + 1, maker)`` of the user's words in ``[start, end)``, or ``None``."""
        user = self._user
        if not user:
            return None
        if len(user) < end - start:
            ws = [w for w in user if start <= w < end]
        else:
            ws = [w for w in range(start, end) if w in user]
        if not ws:
            return None
        first = min(ws)
        return first, max(ws) + 1, user[first]

    def _in_named(self, start: int, end: int) -> str:
        for name, (s, e) in self._named.items():
            if s < end and start < e:
                return f" (in rt.signal_region {name!r})"
        return ""

    def _free(self) -> str | None:
        """The free range as text, or ``None`` when unknown or empty."""
        fs, sw = self.free_start, self.signal_words
        return f"the free range, words [{fs}, {sw})" if fs is not None and fs < sw else None

    def _fix(self) -> str:
        free = self._free()
        if free is not None:
            return f"{free}, is for user signals: take words there with rt.signal_region(name, words)"
        if self.free_start is None:
            return "use words no library kernel of this run uses"
        return (f"this signal matrix ({self.signal_words} words) has no free range for user "
                f"signals: raise signal_bytes above {4 * self.free_start} and take words with "
                "rt.signal_region(name, words)")

    def _user_message(self, what: str, rank: int, start: int, end: int, h: _Span) -> str:
        return (f"{what}: user signal words [{start}, {end}) of rank {rank}'s window"
                f"{self._in_named(start, end)} overlap {h.label}, words [{h.start}, {h.end}), "
                f"which this run uses; keep your signals out of the library's regions: {self._fix()}")

    def _claim_user_message(self, caller: str, new: _Span, user: tuple[int, int, str]) -> str:
        us, ue, maker = user
        return (f"{caller}: {new.label}, words [{new.start}, {new.end}), overlaps user signal words "
                f"[{us}, {ue}){self._in_named(us, ue)} ({maker} made earlier in this run); move the "
                f"user's signals out of it: {self._fix()}")

    def _kernels_message(self, caller: str, new: _Span, old: _Span) -> str:
        mover = old if old.custom and not new.custom else new
        free = self._free() or "a free range (raise signal_bytes)"
        return (f"{caller}: {new.label}, words [{new.start}, {new.end}), overlaps {old.label}, "
                f"words [{old.start}, {old.end}), used earlier in this run; give {mover.kernel} a "
                f"signal_base of its own from {free}: rt.signal_region(name, words)")


__all__ = ["Claim", "NO_CLAIM", "OWNER", "SignalRegions", "LINE_WORDS"]
