"""``line-shared``: a Set's 64-byte line changed under its cached copy before the write-back:
Set slots of different writers share a line (pto-isa #322). Needs the line model (``lines``)."""

from __future__ import annotations

from ..report import user_site
from .base import Checker


class LineShared(Checker):
    name = "line-shared"
    decides = "a Set's line write-back really overwrites another writer's word (lost write)"

    def clobber(self, rank: int, offset: int, stale: int, current: int, site: str) -> None:
        # The report points at the Set (it made the hazard), wherever the write-back happens: a
        # later instruction, a wait's idle, or the kernel's end (where no kernel line is left).
        now = user_site()
        when = f"at {now}" if now is not None else "when the kernel returned"
        self.found(f"this Set cached the 64-byte line at offset {offset & ~63:#x}; before its "
                   f"write-back ({when}) the word at {offset:#x} changed {stale} -> {current} "
                   f"(another writer on the same line): the write-back restores {stale} "
                   "(pto-isa #322; give each writer's Set slot its own 64-byte line)",
                   offset, rank, site=site or None)
