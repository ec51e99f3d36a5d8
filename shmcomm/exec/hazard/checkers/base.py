"""The base class of the hazard checkers: every event a no-op, and how a finding is reported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..report import HazardReport, kernel_site, message

if TYPE_CHECKING:
    from ..model import HazardBlockModel


class Checker:
    """Base class: every event is a no-op. ``block`` is the block's hazard model.

    ``exact``: the checker decides from what happened (a hang that must come, a write the line
    model really lost, an event the program really left set), so its finding fails the run.
    Otherwise it is advisory: it recognizes a pattern that is often a bug but that a correct
    program can show too, so its finding never fails a run by itself; it is printed as a likely
    cause beside a failure that something else proved.
    """

    name = ""
    exact = True
    decides = ""  # one line: what a finding means (the docs' table)
    # the events that can take it out of its first state, where every event it observes is a
    # no-op: it is made at the first of them (None: at the first event it observes). A block
    # that never sees one never makes it (most blocks store nothing and set no flag)
    starts_on: frozenset[str] | None = None

    def __init__(self, block: HazardBlockModel) -> None:
        self.block = block
        self.agent = block.agent

    def found(self, detail: str, offset: int | None = None, sig_rank: int | None = None,
              site: str | None = None) -> None:
        """Report a finding: raise it (exact), or keep it as advice for the run (advisory)."""
        where = site or kernel_site(self.agent)
        text = message(self.agent, self.name, detail, offset, sig_rank, where)
        if self.exact:
            raise HazardReport(self.name, text)
        self.block.advice.add(self.name, where, text)

    def notify(self, sig: Any, value: int, op: int) -> None:
        """Before a TNOTIFY writes."""

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        """At the start of a TWAIT."""

    def stored(self, remote: bool) -> None:
        """A TSTORE (also inside TPUT) was issued to MTE3; ``remote``: into another rank."""

    def drained(self) -> None:
        """Every MTE3 store issued so far has retired (pipe_barrier / wait_flag on MTE3);
        only once the block issued one."""

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
