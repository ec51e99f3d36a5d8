"""The base class of the hazard checkers: every event a no-op."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import HazardBlockModel


class Checker:
    """Base class: every event is a no-op. ``block`` is the block's hazard model."""

    name = ""

    def __init__(self, block: HazardBlockModel) -> None:
        self.block = block
        self.agent = block.agent

    def notify(self, sig: Any, value: int, op: int) -> None:
        """Before a TNOTIFY writes."""

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        """At the start of a TWAIT."""

    def stored(self, remote: bool) -> None:
        """A TSTORE (also inside TPUT) was issued to MTE3; ``remote``: into another rank."""

    def drained(self) -> None:
        """Every MTE3 store issued so far has retired (pipe_barrier / wait_flag on MTE3)."""

    def fenced(self) -> None:
        """``dsb(DSB_DDR)`` or ``dsb(DSB_ALL)``: drained stores are visible everywhere."""

    def set_flag(self, key: tuple[int, int, int]) -> None:
        """Before ``set_flag`` records ``key`` = (src, dst, event)."""

    def finish(self) -> None:
        """The kernel returned and every pipe has retired."""

    def expect_blocks(self, kernel: str, param: str, count: int) -> None:
        """The kernel declared the block count its arrival count assumes."""

    def clobber(self, rank: int, offset: int, stale: int, current: int, site: str) -> None:
        """A Set's line write-back is about to overwrite another writer's word."""
