"""A recorded schedule: the file ``--replay`` runs, and the schedule's Chrome trace.

The file is JSON: the run's shape and options, and the choices (the agent of every step,
run-length encoded as ``[agent id, steps]`` pairs; an agent id is ``rank * 65 + slot``, slot 64
being the rank's host). The trace is a Chrome trace like every mode's (:mod:`shmcomm.exec.trace`)
with the step count as its clock: the blocks' instructions, spans, pipe work and flow arrows
from each notify to the wait it released, stamped with steps, plus one instant per step on the
track of the agent that reached the scheduling point (``pid`` rank, ``tid`` block or the host
track), naming the agent that runs next. The same run gives the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...config import MAX_RANKS
from ...core import control as C
from ...errors import ArgumentError
from ...files import load_json, make_dirs, write_file
from ..trace import HOST_TID, document, write_document
from ..trace import load as load_trace
from .scheduler import MAX_STEPS, OPS, agent_name

FORMAT = "shmcomm-schedule"
VERSION = 2  # 2: a block's first point after its start takes no step


@dataclass
class Schedule:
    """The schedule of one run: every step's agent, and what produced it."""

    nranks: int
    seed: int
    strategy: str
    choices: list[int]
    preemptions: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        runs: list[list[int]] = []
        for a in self.choices:
            if runs and runs[-1][0] == a:
                runs[-1][1] += 1
            else:
                runs.append([a, 1])
        return dict(format=FORMAT, version=VERSION, nranks=self.nranks, seed=self.seed,
                    strategy=self.strategy, steps=len(self.choices), preemptions=self.preemptions,
                    options=self.options, choices=runs)

    def save(self, path: str, what: str = "record") -> None:
        """Write the schedule to ``path`` (:mod:`shmcomm.files`: made aside, renamed into place;
        :class:`~shmcomm.files.OutputError` naming ``what`` if the path is refused)."""
        make_dirs(what, os.path.dirname(path))
        write_file(what, path, json.dumps(self.to_json(), separators=(",", ":")) + "\n")


def load(path: str) -> Schedule:
    """Read a schedule file; a bad file raises :class:`ArgumentError` naming it and the field.
    Its steps are bounded by the run's step limit before any is expanded."""
    doc = load_json("replay", path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ArgumentError(f"replay must name a version-{VERSION} {FORMAT} file; {path!r} is not one")

    def bad(name: str, want: str, got: Any) -> ArgumentError:
        return ArgumentError(f"replay: {path!r} is not a well-formed schedule file: field "
                             f"{name!r} must be {want}, got {json.dumps(got)[:60]}")

    def integer(name: str, lo: int, hi: int) -> int:
        v = doc.get(name)
        if type(v) is not int or not lo <= v <= hi:
            raise bad(name, f"an integer in [{lo}, {hi}]", v)
        return v

    nranks = integer("nranks", 1, MAX_RANKS)
    seed = integer("seed", -(1 << 63), (1 << 64) - 1)
    preemptions = integer("preemptions", 0, MAX_STEPS) if "preemptions" in doc else 0
    if not isinstance(doc.get("strategy"), str):
        raise bad("strategy", "a string", doc.get("strategy"))
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise bad("options", "an object", options)
    runs = doc.get("choices")
    if not isinstance(runs, list):
        raise bad("choices", "a list of [agent, steps] pairs", runs)
    agents, total = nranks * C.SLOTS, 0
    for i, run in enumerate(runs):
        if (not isinstance(run, list) or len(run) != 2 or type(run[0]) is not int
                or type(run[1]) is not int or not 0 <= run[0] < agents or run[1] < 1):
            raise bad(f"choices[{i}]", f"an [agent, steps] pair, agent in [0, {agents}) and "
                                       "steps >= 1", run)
        total += run[1]
        if total > MAX_STEPS:  # checked before a step is expanded: memory stays bounded
            raise bad(f"choices[{i}]", f"within the step limit (the runs add up to more than "
                                       f"{MAX_STEPS} steps, which no run takes)", run)
    choices = [a for a, n in runs for _ in range(n)]
    return Schedule(nranks, seed, doc["strategy"], choices, preemptions, dict(options))


def write_trace(path: str, nranks: int, me: Sequence[int], ops: Sequence[int],
                nxt: Sequence[int], metadata: dict[str, Any] | None = None) -> None:
    """The schedule as a Chrome trace (Perfetto): what the ranks' step-clock tracers wrote to
    ``path`` during the run, one instant per step on the deciding agent's track (naming its
    instruction and the agent that runs next), names, metadata and flow arrows."""
    try:
        events = [e for e in load_trace(path) if not e.get("args", {}).get("unfinished")]
    except (OSError, ValueError):  # nothing traced by the blocks (or not a trace): steps only
        events = []
    first = None
    for step, (a, op, n) in enumerate(zip(me, ops, nxt, strict=True)):
        if a < 0:  # the launcher's first pick
            first = agent_name(n)
            continue
        rank, slot = divmod(a, C.SLOTS)
        tid = HOST_TID if slot == C.HOST_SLOT else slot
        events.append({"ph": "i", "s": "t", "name": OPS[op], "pid": rank, "tid": tid, "ts": step,
                       "args": {"step": step, "next": agent_name(n)}})
    meta = dict(metadata or {}, tool="shmcomm", mode="schedule", clock="steps", nranks=nranks,
                steps=len(me), first_agent=first)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    write_document(path, document(events, meta))
