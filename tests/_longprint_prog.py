"""A host program with a long result (for the closed-pipe test of the launcher)."""


def host(rt):
    rt.barrier()
    return "x" * 200_000
