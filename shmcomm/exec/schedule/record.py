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

from ...core import control as C
from ...errors import ArgumentError
from ...files import make_dirs, write_file
from ..trace import HOST_TID, document, write_document
from ..trace import load as load_trace
from .scheduler import OPS, agent_name

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
    """Read a schedule file; a bad file raises :class:`ArgumentError` naming it."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise ArgumentError(f"replay must name a schedule file; cannot read {path!r}: "
                            f"{exc.strerror}") from None
    except ValueError as exc:
        raise ArgumentError(f"replay must name a schedule file; {path!r} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ArgumentError(f"replay must name a version-{VERSION} {FORMAT} file; {path!r} is not one")
    try:
        choices = [int(a) for a, n in doc["choices"] for _ in range(int(n))]
        return Schedule(int(doc["nranks"]), int(doc["seed"]), str(doc["strategy"]), choices,
                        int(doc.get("preemptions", 0)), dict(doc.get("options", {})))
    except (KeyError, TypeError, ValueError) as exc:
        raise ArgumentError(f"replay must name a well-formed schedule file; {path!r} has a "
                            f"malformed field: {exc!r}") from None


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
