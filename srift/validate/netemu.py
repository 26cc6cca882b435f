"""Emulated hosts on one Linux machine: network namespaces, veth pairs, a bridge and tc.

Each emulated host is a network namespace of its own with one interface ``eth0`` holding an
address in TEST-NET-1 (192.0.2.0/24, RFC 5737). The other end of every veth lives in a hub
namespace (also created here) on a bridge, so no interface or address of the machine's own
namespace is touched and traffic never leaves namespaces this module created.

A NIC of ``R`` Gbit/s is emulated with a token-bucket filter (tbf, burst >= 1 MiB: a smaller
burst never reaches the rate) in both directions: on the host's ``eth0`` egress (upload) and on
the hub side of its veth (download). Ranks placed on the same emulated host talk over the
namespace's loopback, which is not limited - as GPUs in one instance talk over NVLink/PCIe.

netem is not available in this kernel, so latency cannot be added; :func:`latency_floor`
measures the round trip the emulation has instead (tens of microseconds), and reports say so.

Everything needs root (CAP_NET_ADMIN). Namespaces are named ``srv<pid>x<n>...`` so leftovers of
a dead process are recognised and removed by :func:`cleanup_leftovers`.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

PREFIX = "srv"
SUBNET = ipaddress.ip_network("192.0.2.0/24")  # TEST-NET-1, documentation only, never routed
MIN_BURST_BYTES = 1 << 20
_CMD_TIMEOUT_S = 15.0
_counter = 0

LATENCY_NOTE = (
    "netem is not available in this kernel, so network latency cannot be emulated; "
    "the measured latency floor of the emulation is reported instead"
)


class EmulationUnavailable(RuntimeError):
    """Host emulation cannot run here (not root, no `ip netns`, no tc); the message says why."""


def _run(args: Sequence[str], *, check: bool = True, timeout: float = _CMD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"command timed out after {timeout:.0f}s: {' '.join(args)}") from exc
    if check and proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def unavailable_reason() -> str | None:
    """None when namespaces + tc can be used here, else a sentence saying why not."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "network namespaces and tc need root (CAP_NET_ADMIN); run as root or use mode='loopback'"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the `{tool}` command (iproute2) is not installed"
    probe = f"{PREFIX}{os.getpid()}probe{time.monotonic_ns() % 100000}"
    try:
        proc = _run(["ip", "netns", "add", probe], check=False)
        if proc.returncode != 0:
            return f"`ip netns add` failed: {proc.stderr.strip() or proc.returncode}"
    except RuntimeError as exc:
        return str(exc)
    finally:
        _run(["ip", "netns", "del", probe], check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_namespaces() -> list[str]:
    proc = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def cleanup_leftovers(*, all_owners: bool = False) -> list[str]:
    """Delete namespaces this module created for processes that are gone (or all, if asked).

    Returns the names deleted. Only names matching ``srv<pid>x...`` are ever touched.
    """
    removed = []
    pattern = re.compile(rf"^{PREFIX}(\d+)x\w+$")
    for name in list_namespaces():
        m = pattern.match(name)
        if not m:
            continue
        owner = int(m.group(1))
        if all_owners or owner == os.getpid() or not _pid_alive(owner):
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


@dataclass
class EmulatedHost:
    """One emulated host: a namespace, its address and its NIC rate (Gbit/s; None = unlimited)."""

    index: int
    netns: str
    address: str
    nic_gbps: float | None
    ifname: str = "eth0"

    def exec_prefix(self) -> list[str]:
        """argv prefix that runs a command inside this host's namespace."""
        return ["ip", "netns", "exec", self.netns]

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "netns": self.netns, "address": self.address,
                "nic_gbps": self.nic_gbps, "ifname": self.ifname}


@dataclass
class Emulation:
    """A set of emulated hosts on one bridge. Use :func:`emulate` (a context manager)."""

    hosts: list[EmulatedHost]
    hub: str
    namespaces: list[str] = field(default_factory=list)

    def close(self) -> None:
        errors = []
        for ns in reversed(self.namespaces):
            proc = _run(["ip", "netns", "del", ns], check=False)
            if proc.returncode != 0 and ns in list_namespaces():
                errors.append(f"{ns}: {proc.stderr.strip()}")
        self.namespaces.clear()
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))


def _tbf(dev: str, netns: str, gbps: float) -> None:
    rate_bit = int(gbps * 1e9)
    # burst: >= 1 MiB, and >= what the rate sends in 1 ms (a 250 Hz kernel needs a few ms)
    burst = max(MIN_BURST_BYTES, int(rate_bit / 8 * 0.004))
    _run(["ip", "netns", "exec", netns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
          "rate", f"{rate_bit}bit", "burst", str(burst), "latency", "50ms"])


def _new_prefix() -> str:
    global _counter
    _counter += 1
    return f"{PREFIX}{os.getpid()}x{_counter}"


@contextlib.contextmanager
def emulate(nic_gbps: Sequence[float | None], *, mtu: int = 9000) -> Iterator[Emulation]:
    """Create ``len(nic_gbps)`` emulated hosts; always removes them on exit.

    ``nic_gbps[i]`` is host i's NIC rate in Gbit/s (each direction), None for no limit.
    MTU 9000 like EC2's jumbo frames inside a placement group.
    """
    if not nic_gbps:
        raise ValueError("nic_gbps: expected at least one host, got an empty list")
    if len(nic_gbps) > 250:
        raise ValueError(f"nic_gbps: at most 250 hosts fit 192.0.2.0/24, got {len(nic_gbps)}")
    for i, r in enumerate(nic_gbps):
        if r is not None and (not isinstance(r, (int, float)) or isinstance(r, bool) or not r > 0 or r > 400):
            raise ValueError(f"nic_gbps[{i}]: expected a rate in (0, 400] Gbit/s or None, got {r!r}")
    reason = unavailable_reason()
    if reason:
        raise EmulationUnavailable(reason)
    cleanup_leftovers()
    base = _new_prefix()
    hub = f"{base}hub"
    emu = Emulation(hosts=[], hub=hub)
    try:
        _run(["ip", "netns", "add", hub])
        emu.namespaces.append(hub)
        _run(["ip", "netns", "exec", hub, "ip", "link", "add", "br0", "type", "bridge"])
        _run(["ip", "netns", "exec", hub, "ip", "link", "set", "br0", "up"])
        hosts_ip = list(SUBNET.hosts())
        for i, rate in enumerate(nic_gbps):
            ns = f"{base}h{i}"
            _run(["ip", "netns", "add", ns])
            emu.namespaces.append(ns)
            # create the pair inside the hub namespace, then move one end into the host
            peer = f"v{i}"
            _run(["ip", "netns", "exec", hub, "ip", "link", "add", peer, "mtu", str(mtu), "type", "veth",
                  "peer", "name", "eth0", "mtu", str(mtu), "netns", ns])
            _run(["ip", "netns", "exec", hub, "ip", "link", "set", peer, "master", "br0"])
            _run(["ip", "netns", "exec", hub, "ip", "link", "set", peer, "up"])
            addr = str(hosts_ip[i])
            _run(["ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/{SUBNET.prefixlen}", "dev", "eth0"])
            _run(["ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"])
            _run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
            if rate is not None:
                _tbf("eth0", ns, float(rate))   # upload
                _tbf(peer, hub, float(rate))    # download
            emu.hosts.append(EmulatedHost(index=i, netns=ns, address=addr, nic_gbps=None if rate is None else float(rate)))
        yield emu
    finally:
        emu.close()


_PINGPONG = r"""
import socket, sys, time, statistics
mode, addr, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if mode == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); s.settimeout(20)
    c, _ = s.accept(); c.settimeout(20); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(n):
        b = c.recv(1)
        if not b: break
        c.sendall(b)
else:
    c = None
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port), timeout=20); break
        except OSError:
            time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(n):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtts.append(time.perf_counter() - t)
    print(statistics.median(rtts[n // 5:]))
"""


def latency_floor(a: EmulatedHost, b: EmulatedHost, *, port: int = 29399, n: int = 200, timeout: float = 30.0) -> float:
    """Median TCP round trip (seconds) of a 1-byte ping-pong from host a to host b."""
    server = subprocess.Popen(b.exec_prefix() + [sys.executable, "-c", _PINGPONG, "server", b.address, str(port), str(n)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.run(a.exec_prefix() + [sys.executable, "-c", _PINGPONG, "client", b.address, str(port), str(n)],
                                capture_output=True, text=True, timeout=timeout)
        if client.returncode != 0:
            raise RuntimeError(f"latency probe failed: {client.stderr.strip()[-500:]}")
        return float(client.stdout.strip())
    finally:
        server.kill()
        server.wait(timeout=5)
