"""The happens-before race detector (``shmcomm.run(..., detect_races=True)``).

It reports two accesses to the same bytes of a window or UB tile, at least one a write and not
both atomic, that no synchronization of the kernel API orders, whether or not the data came
out wrong in this run: vector clocks per block pipe and host (:mod:`.clocks`), edges from the
API's semantics and an observing wrapper around the run's execution model (:mod:`.detector`),
range records checked in the launcher (:mod:`.shadow`), and reports with both sites and the
missing edge (:mod:`.report`). It works with every mode (eager, hazard, ...): it observes, it
does not execute.
"""

from .detector import RaceBlockModel, RaceDetector, RaceRankModel

__all__ = ["RaceBlockModel", "RaceDetector", "RaceRankModel"]
