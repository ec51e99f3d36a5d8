"""The exceptions shmcomm raises.

Every error a user can provoke is a :class:`ShmcommError`. Bad arguments raise
:class:`ArgumentError`, which is also a ``ValueError`` so that generic callers can catch it the
usual way; its message names the argument and the range it must lie in.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ShmcommError(Exception):
    """Base class of every error shmcomm raises on purpose."""


class ShmcommWarning(UserWarning):
    """A setting that has no effect (an unknown ``SHMCOMM_*`` variable, a hazard-mode setting in
    eager mode): the run goes on, but not as the user may think."""


class ArgumentError(ShmcommError, ValueError):
    """An argument is out of range, of the wrong type or otherwise unusable."""


class SignalOverlapError(ArgumentError):
    """Two parties of one run use the same signal words: a user's ``Signal`` / ``Signal2D`` and a
    library kernel's signal region, or two library kernels' regions. The message starts with the
    instruction or kernel that found it, names both parties with their word ranges, and says where
    free words are (``rt.signal_region``)."""


class LibraryError(ShmcommError, OSError):
    """A system library (libatomic, libc) is missing or does not offer what shmcomm needs."""


class WaitTimeout(ShmcommError, TimeoutError):
    """A ``TWAIT`` (or another bounded wait) passed its deadline without its condition holding."""


class Aborted(ShmcommError):
    """The run was aborted (a failure elsewhere, a deadlock, a timeout) while this agent waited."""


@dataclass
class Failure:
    """One failure of a run, as the launcher reports it.

    ``block`` is ``None`` for failures in host code or of a whole rank process (a crash).
    ``kind`` is one of ``"exception"``, ``"crash"``, ``"deadlock"``, ``"timeout"``, ``"race"``.
    ``cause``: what the launcher inferred a failure from, when no rank reported it
    (``"unreported-abort"``: the run was aborted and no rank said why), for code that reads
    failures (a model whose own report explains the abort drops it); ``""`` otherwise.
    """

    rank: int | None
    block: int | None
    kind: str
    message: str
    traceback: str = ""
    cause: str = ""

    def where(self) -> str:
        if self.rank is None:
            return "launcher"
        return f"rank {self.rank}" + ("" if self.block is None else f" block {self.block}")

    def __str__(self) -> str:
        head = f"{self.where()}: {self.message}"
        return head + ("\n" + self.traceback.rstrip() if self.traceback else "")


@dataclass
class RunError(ShmcommError):
    """A run failed. ``failures[0]`` is the root cause; ``seed`` reproduces the run's randomness."""

    failures: list[Failure] = field(default_factory=list)
    seed: int | None = None
    secondary: int = 0
    advice: list[str] = field(default_factory=list)  # advisory checkers' findings: likely causes

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __reduce__(self):  # dataclass fields, not Exception.args, carry the state
        return (type(self), (self.failures, self.seed, self.secondary, self.advice))

    @property
    def kind(self) -> str:
        return self.failures[0].kind if self.failures else "exception"

    def __str__(self) -> str:
        if not self.failures:
            return "run failed"
        first = self.failures[0]
        lines = [f"shmcomm run failed ({first.kind}) at {first}"]
        for other in self.failures[1:]:
            lines.append(f"also failed: {other}")
        if self.secondary:
            lines.append(f"({self.secondary} other agents stopped by the abort)")
        for text in self.advice:  # not proven by themselves: they may explain the failure above
            lines.append(f"likely cause: {text}")
        if self.seed is not None:
            lines.append(f"seed: {self.seed}")
        hint = getattr(self, "hint", "")  # set by the launcher when the mode can replay the run
        if hint:
            lines.append(hint)
        return "\n".join(lines)


class RaceReport(RunError):
    """The race detector (``detect_races=True``) found conflicting accesses to window data that
    no synchronization orders; each failure of kind ``"race"`` names both sites."""


class DeadlockError(RunError):
    """Every live agent of the run waits and no wait can be satisfied."""


class RunTimeout(RunError):
    """The run did not finish within its ``timeout``."""
