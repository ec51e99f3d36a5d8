"""Expected failures: a sweep that passes only when every run fails the way the test names.

A kernel author keeps a buggy twin of a kernel as a regression test of the checker that catches
it: ``shmcomm_sweep(host, expect="race")`` passes when every run of every configuration fails
with a race, and fails, with the report, when one passes or fails otherwise. ``expect`` is one
of :data:`CAUSES` or a callable that receives the structured :class:`Report` and returns
true when the sweep went as expected (or raises ``AssertionError`` with why it did not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError
from ..stress.harness import Outcome, Report

# the causes a test can expect, as it spells them -> Outcome.cause
CAUSES = {
    "race": "race",
    "deadlock": "deadlock",
    "wrong-result": "wrong result",
    "wrong result": "wrong result",
    "wrong_result": "wrong result",
    "timeout": "timeout",
    "crash": "crash",
    "checker": "checker",
}
Expect = str | Callable[[Report], Any] | None


def check_expect(expect: Expect) -> Expect:
    """``expect`` as given, or :class:`ArgumentError` naming the accepted values."""
    if expect is None or callable(expect):
        return expect
    if not isinstance(expect, str) or expect.strip().lower() not in CAUSES:
        names = ", ".join(k for k in CAUSES if "_" not in k and k != "wrong result")
        raise ArgumentError(f"expect must be one of {names} or a callable taking the report, "
                            f"got {expect!r}")
    return expect.strip().lower()


def _how(out: Outcome) -> str:
    if out.kind == "ok":
        return "passed"
    first = next((x.strip() for x in out.message.splitlines() if x.strip()), "")
    return f"failed with {out.cause}: {first}"


def unmet(report: Report, expect: Expect) -> str | None:
    """``None`` when the sweep went as ``expect`` says, else the first line of the failure:
    which run did otherwise, and how."""
    if expect is None:
        return None
    if callable(expect):
        name = getattr(expect, "__name__", "expect")
        try:
            ok = expect(report)
        except AssertionError as exc:
            return f"not as expected: {name}(report): {exc}".rstrip(": ")
        return None if ok else f"not as expected: {name}(report) returned {ok!r}"
    want = CAUSES[str(expect)]
    if not report.outcomes:
        return f"not caught: expected {want}, but no run ran"
    other = [o for o in report.outcomes if o.cause != want]
    if not other:
        return None
    first = other[0]
    head = "not caught" if first.kind == "ok" else f"{first.cause}, not {want}"
    return (f"{head}: expected {want} in every run; {len(other)} of {len(report.outcomes)} did "
            f"otherwise, first [{first.spec.label()} seed={first.spec.seed}] {_how(first)}")


def cause_word(text: str) -> str:
    """The cause a sweep's failure text starts with (``race``, ``not caught``, ...), or ""."""
    head = text.split(":", 1)[0].strip()
    if head in CAUSES.values() or head in ("crash", "checker", "error", "not caught"):
        return head
    if head.endswith(tuple(f", not {c}" for c in CAUSES.values())) or head.startswith(
            "not as expected"):
        return head
    return ""
