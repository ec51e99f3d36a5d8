"""What every benchmark shares: the machine it ran on, the statistics of its repeats, whether a
result is stable enough to quote, and the argument types of its command line.

A result is *unstable* (pyperf's rule of thumb) when the relative standard deviation of its
repeats exceeds 10 % or the load average exceeds the machine's cores. An unstable comparison
whose spread crosses 1.0 is printed as "no clear difference", never as a ratio that the next
run may reverse.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: relative standard deviation above which a result is unstable (pyperf warns at 10 %)
MAX_REL_STDEV = 0.10


def cores() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def loadavg() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages, rounded to two decimals."""
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        return ""


def machine() -> dict[str, Any]:
    """The machine and the moment: date, CPU, cores, load average, Python (for a result's header)."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": _cpu_model(),
            "cpus": os.cpu_count(), "affinity": cores(), "loadavg_start": list(loadavg()),
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor()}


def machine_line(meta: dict[str, Any]) -> str:
    """One line naming date, CPU, cores, load and Python, to print above a result."""
    cpu = meta.get("cpu") or meta.get("processor") or meta.get("machine") or "cpu"
    load = meta.get("loadavg_start") or loadavg()
    return (f"{meta['date']}, {cpu}, {meta.get('affinity', meta.get('cpus'))} cores, load average "
            f"{load[0]:.2f}, {meta.get('implementation', 'Python')} {meta['python']}")


@dataclass(frozen=True)
class Stats:
    """Summary of one result's repeats."""

    n: int
    median: float
    q1: float
    q3: float
    mean: float
    stdev: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        """Summarize ``samples`` (at least one)."""
        xs = sorted(float(x) for x in samples)
        if not xs:
            raise ValueError("Stats.of: samples must not be empty")
        if len(xs) >= 2:
            q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
            stdev = statistics.stdev(xs)
        else:
            q1 = q3 = xs[0]
            stdev = 0.0
        return cls(len(xs), statistics.median(xs), q1, q3, statistics.fmean(xs), stdev, xs[0], xs[-1])

    @property
    def iqr(self) -> float:
        """Interquartile range."""
        return self.q3 - self.q1

    @property
    def rel_stdev(self) -> float:
        """Standard deviation over the mean (0 for a single sample or a zero mean)."""
        return self.stdev / abs(self.mean) if self.mean else 0.0

    def as_dict(self) -> dict[str, float]:
        """The fields and the derived spreads, for a JSON document."""
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3, "iqr": self.iqr,
                "mean": self.mean, "stdev": self.stdev, "rel_stdev": self.rel_stdev,
                "min": self.min, "max": self.max}


@dataclass
class Stability:
    """Why a result is not to be quoted as it stands (empty: stable)."""

    reasons: list[str] = field(default_factory=list)

    @property
    def stable(self) -> bool:
        return not self.reasons

    def __str__(self) -> str:
        return "stable" if self.stable else "unstable: " + "; ".join(self.reasons)


# the box's load before this benchmark started: its own rank processes raise the load average
# while it runs (8 ranks on 2 cores make a load of 3 or more by themselves), which says nothing
# about other work disturbing it
START_LOAD = os.getloadavg()[0]


def stability(*results: Stats, load: float | None = None, ncores: int | None = None) -> Stability:
    """Judge ``results`` measured on a box whose load from other work was ``load`` (default:
    the 1-minute load average when this benchmark started, :data:`START_LOAD`)."""
    out = Stability()
    for s in results:
        if s.rel_stdev > MAX_REL_STDEV:
            out.reasons.append(f"relative stdev {s.rel_stdev:.0%} > {MAX_REL_STDEV:.0%}")
            break
    load = START_LOAD if load is None else load
    ncores = cores() if ncores is None else ncores
    if load > ncores:
        out.reasons.append(f"load average {load:.1f} before the run > {ncores} cores")
    return out


def ratio_bounds(num: Stats, den: Stats) -> tuple[float, float]:
    """The range of ``num / den`` the two results' interquartile ranges allow."""
    lo = num.q1 / den.q3 if den.q3 else float("inf")
    hi = num.q3 / den.q1 if den.q1 else float("inf")
    return lo, hi


def describe_ratio(ratio: float, lo: float, hi: float, judged: Stability, unit: str = "x") -> str:
    """``ratio`` with its spread, or "no clear difference" when unstable and the spread crosses 1."""
    if not judged.stable and lo <= 1.0 <= hi:
        return f"no clear difference ({lo:.2f}..{hi:.2f}{unit}, {judged})"
    text = f"{ratio:.2f}{unit} ({lo:.2f}..{hi:.2f})"
    return text if judged.stable else f"{text}  WARNING {judged}: rerun on a quieter machine"


def compare(num: Sequence[float], den: Sequence[float], load: float | None = None) -> str:
    """Medians of two independent samples as a ratio, judged for stability."""
    a, b = Stats.of(num), Stats.of(den)
    lo, hi = ratio_bounds(a, b)
    return describe_ratio(a.median / b.median, lo, hi, stability(a, b, load=load))


def paired(ratios: Sequence[float], load: float | None = None) -> str:
    """Ratios of alternating pairs (same load for both sides): median and quartiles, judged."""
    s = Stats.of(ratios)
    return describe_ratio(s.median, s.q1, s.q3, stability(s, load=load))


def warn_if_unstable(name: str, *results: Stats, load: float | None = None) -> Stability:
    """Print a warning line on stderr when ``results`` are unstable; return the judgement."""
    judged = stability(*results, load=load)
    if not judged.stable:
        print(f"WARNING: {name}: {judged}; rerun on a quieter machine before quoting it",
              file=sys.stderr)
    return judged


# --- argument types (argparse ``type=``: a malformed value is a usage error naming the option) ---

def add_shape(p: Any, nranks: int = 8, blocks: int = 4) -> None:
    """The ``--nranks`` / ``--blocks`` options every run-shaped benchmark takes."""
    p.add_argument("--nranks", type=int_range(1, 64), default=nranks,
                   help="rank processes, 1..64 (default: %(default)s)")
    p.add_argument("--blocks", type=int_range(1, 64), default=blocks,
                   help="blocks per rank, 1..64 (default: %(default)s)")


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when ``high`` is None)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low or (high is not None and v > high):
            allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {'in ' if high is not None else ''}{allowed}, "
                                             f"got {v}")
        return v
    return parse


def int_list(low: int = 1, high: int | None = None) -> Callable[[str], list[int]]:
    """Comma-separated integers, each in [low, high]."""
    def parse(text: str) -> list[int]:
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not vals or any(v < low or (high is not None and v > high) for v in vals):
            allowed = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"expected integers {allowed}, got {text!r}")
        return vals
    return parse


def choice_list(allowed: Sequence[str], all_word: str | None = None) -> Callable[[str], list[str]]:
    """A comma list of names from ``allowed`` (``all_word``, when given, means every one)."""
    def parse(text: str) -> list[str]:
        if all_word is not None and text == all_word:
            return list(allowed)
        names = [x for x in text.split(",") if x]
        if not names or any(x not in allowed for x in names):
            extra = f"'{all_word}' or " if all_word is not None else ""
            raise argparse.ArgumentTypeError(f"choose {extra}a comma list of {', '.join(allowed)}, "
                                             f"got {text!r}")
        return names
    return parse
