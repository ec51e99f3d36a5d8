"""``line-shared``: a Set's 64-byte line changed under its cached copy before the write-back:
Set slots of different writers share a line (pto-isa #322). Needs the line model (``lines``)."""

from __future__ import annotations

from ..report import report
from .base import Checker


class LineShared(Checker):
    name = "line-shared"

    def clobber(self, rank: int, offset: int, stale: int, current: int, site: str) -> None:
        raise report(self.agent, self.name,
                     f"the Set at {site} cached the 64-byte line at offset {offset & ~63:#x}; "
                     f"before its write-back the word at {offset:#x} changed {stale} -> {current} "
                     f"(another writer on the same line): the write-back restores {stale} "
                     "(pto-isa #322; give each writer's Set slot its own 64-byte line)",
                     offset, rank)
