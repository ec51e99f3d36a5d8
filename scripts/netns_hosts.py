"""Several "hosts" on one machine for MPI jobs: network namespaces joined by a veth bridge.

``Hosts(n)`` makes ``n`` network namespaces ``<prefix>h0 .. h{n-1}`` and one switch namespace
holding a bridge; each host has one veth ``eth0`` on the bridge with address ``10.200.0.(k+1)/24``
(addresses that exist only inside these namespaces: no packet leaves them). ``mpiexec`` runs in
host 0 and starts its proxies through ``scripts/netns-exec`` instead of ssh, which enters a
host's namespace with a hostname of its own (``h1``...), so MPICH sees one process per host and
talks between them over TCP on the veths (UCX ``tcp``). ``close()`` kills what still runs in the
namespaces and deletes them (their veths go with them); a ``with`` block does it on any exit.

As a command (root; needs ``ip`` from iproute2 and ``unshare`` from util-linux)::

    python scripts/netns_hosts.py --hosts 3 -- python -m shmcomm launch --transport mpi

runs ``mpiexec -n 3`` (one rank per host unless ``--ranks``) and exits with its status;
``--shell`` runs the command itself with ``scripts/netns-mpiexec`` ready to start MPI jobs::

    python scripts/netns_hosts.py --hosts 3 --shell -- python benchmarks/collectives.py \
        --mpi --mpiexec scripts/netns-mpiexec --nranks 3 --collectives ar
``--cleanup`` deletes namespaces left by a killed run (their creator pid is gone).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "netns-exec")  # mpiexec's launcher into a namespace (not ssh)
MPIEXEC = os.path.join(HERE, "netns-mpiexec")  # mpiexec across the namespaces, from host 0
NAME_PREFIX = "shmcnet"  # namespaces are named shmcnet<creator pid>x<token>{h<k>,sw}
SUBNET = "10.200.0"  # private to the namespaces made here
# the MPI job's network path between "hosts": UCX over TCP on the veths only
NET_ENV = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def forbidden() -> str | None:
    """Why this machine cannot make the namespaces (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    for tool, pkg in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (apt-get install {pkg})"
    try:
        with Hosts(2):
            pass
    except (OSError, subprocess.SubprocessError) as exc:
        err = getattr(exc, "stderr", "") or ""
        return f"this machine refuses network namespaces or veths: {exc} {err}".strip()
    return None


class Hosts:
    """``n`` network namespaces on a private bridge (see the module docstring)."""

    def __init__(self, n: int) -> None:
        if not 2 <= n <= 16:
            raise ValueError(f"Hosts: n must be in [2, 16], got {n}")
        self.n = n
        self.prefix = f"{NAME_PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        self.names = [f"h{k}" for k in range(n)]
        self.made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def ns(self, host: str) -> str:
        return self.prefix + host

    def address(self, k: int) -> str:
        return f"{SUBNET}.{k + 1}"

    def _add(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)

    def _make(self) -> None:
        sw = self.ns("sw")
        self._add(sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for k, host in enumerate(self.names):
            ns = self.ns(host)
            self._add(ns)
            _ip("-n", sw, "link", "add", f"v{k}", "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            _ip("-n", sw, "link", "set", f"v{k}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(k)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def mpiexec(self, nranks: int, argv: list[str]) -> list[str]:
        """The command that runs ``mpiexec -n nranks argv`` across the hosts, from host 0 (with
        the environment of :meth:`env`)."""
        return [MPIEXEC, "-n", str(nranks), *argv]

    def env(self, mpiexec: str, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of :meth:`mpiexec` and ``scripts/netns-mpiexec``: the namespaces, the
        real ``mpiexec``, UCX on TCP over the veths."""
        return dict(base if base is not None else os.environ, NETNS_EXEC_PREFIX=self.prefix,
                    NETNS_HOSTS=",".join(self.names), NETNS_LOCALHOST=self.address(0),
                    NETNS_MPIEXEC=mpiexec, **NET_ENV)

    def close(self) -> None:
        """Kill what runs in the namespaces, then delete them (idempotent)."""
        for name in reversed(self.made):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)
        self.made = []

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill_inside(name: str) -> None:
    res = _ip("netns", "pids", name, check=False)
    for pid in (int(p) for p in res.stdout.split() if p.isdigit()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stale() -> list[str]:
    """Namespaces of this helper whose creator pid is gone."""
    res = _ip("netns", "list", check=False)
    out = []
    for line in res.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(rf"^{NAME_PREFIX}(\d+)x[0-9a-f]+(h\d+|sw)$", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="netns_hosts.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=2, help="network namespaces (default: 2)")
    p.add_argument("--ranks", type=int, default=None, help="MPI ranks (default: one per host)")
    p.add_argument("--mpiexec", default=os.path.join(os.path.dirname(sys.executable), "mpiexec"))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds (default: 600)")
    p.add_argument("--cleanup", action="store_true", help="delete namespaces of dead runs")
    p.add_argument("--shell", action="store_true",
                   help="run the command itself (not under mpiexec), with scripts/netns-mpiexec "
                        "set up to start MPI jobs across the hosts (e.g. a benchmark's --mpiexec)")
    p.add_argument("command", nargs="*", help="the program each rank runs (after --)")
    ns = p.parse_args(argv)
    if ns.cleanup:
        for name in stale():
            _kill_inside(name)
            _ip("netns", "del", name, check=False)
            print("deleted", name)
        return 0
    if not ns.command:
        p.error("give the program to run after --")
    why = forbidden()
    if why:
        print(f"netns_hosts.py: {why}", file=sys.stderr)
        return 2
    with Hosts(ns.hosts) as hosts:
        cmd = ns.command if ns.shell else hosts.mpiexec(ns.ranks or ns.hosts, ns.command)
        proc = subprocess.Popen(cmd, env=hosts.env(ns.mpiexec), start_new_session=True)
        try:
            return proc.wait(timeout=ns.timeout)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


if __name__ == "__main__":
    sys.exit(main())
