"""Hazard mode: make missing synchronization fail on a CPU without changing a kernel.

``shmcomm.run(host, mode="hazard", seed=S, hazards="...")`` (or ``python -m shmcomm.launch
--mode hazard --seed S [--hazards ...] [--trace out.json]``) makes every block's execution model
a :class:`~shmcomm.exec.hazard.model.HazardBlockModel`. ``hazards`` is ``"all"`` (default) or a comma list of
these sub-models:

``pipes``       TLOAD / TSTORE (also inside TPUT / TGET) queue on MTE2 / MTE3 and the tile
                vector instructions on V, and retire at seeded later points; only
                ``wait_flag`` on the matching event or ``pipe_barrier`` completes them
                (:mod:`shmcomm.exec.hazard.model`). TPUT_ASYNC / TGET_ASYNC copies go to the
                block's DMA engine and land only at their event's ``Wait`` / a true ``Test``
                (:mod:`shmcomm.exec.hazard.dma`).
``visibility``  a completed store into another rank's window stays in the writer block's
                buffer until its ``dsb(DSB_DDR)`` or a seeded later time
                (:mod:`shmcomm.exec.hazard.visibility`).
``lines``       ``TNOTIFY(..., Set)`` goes through a 64-byte cache line filled at the Set and
                written back whole later, so packed Set slots of different writers clobber each
                other (pto-isa #322) (:mod:`shmcomm.exec.hazard.visibility`).
``cache``       ``gm_load`` reads through the block's scalar data cache of 64-byte lines, dropped
                by ``dcci`` (and the block's TWAIT / TTEST / TNOTIFY / stores on the line),
                evicted at seeded later times: a load without ``dcci`` may read a stale line
                (:mod:`shmcomm.exec.hazard.cache`).
``jitter``      seeded sleeps and GIL switches at sync points and data moves, and a small
                ``sys.setswitchinterval`` (:mod:`shmcomm.exec.hazard.jitter`).
``checkers``    rule checks (:mod:`shmcomm.exec.hazard.checkers`): an exact one raises
                :class:`HazardReport`; an advisory one's finding is printed as a likely cause
                beside a failure that something else proved, and never fails a run alone.

Checker names (the ``[name]`` in a report): exact ``line-shared``, ``flag-unbalanced``,
``event-twice``, ``arrival-count``; advisory ``notify-unfenced``, ``phase-reuse``,
``stale-at-launch``, ``arrival-takers``. Every report names the kernel's file:line, rank,
block, signal offset and the run's seed.
``hazard_delay`` (seconds) scales how long work stays pending; ``trace`` names a Chrome trace
JSON file (:mod:`shmcomm.exec.trace`).
"""

from .checkers import ADVISORY, CHECKERS, EXACT
from .model import HazardBlockModel, HazardRankModel
from .report import HazardReport, advice_of

__all__ = ["HazardReport", "CHECKERS", "EXACT", "ADVISORY", "HazardBlockModel", "HazardRankModel",
           "advice_of"]
