"""Launch the ranks of a validation run and collect what they measured.

Ranks are placed on hosts: ``hosts[h]`` runs ``ranks_per_host[h]`` ranks. In ``loopback`` mode
every host is this machine's loopback; in ``netns`` mode each host is an emulated host
(:mod:`srift.validate.netemu`) with its own NIC rate. Two launchers:

* ``torchrun`` (default): one ``torchrun --nnodes H --node_rank h --nproc_per_node k`` per host,
  exactly what a user runs on a real cluster (needs the same ``k`` on every host);
* ``direct``: one Python process per rank with torchrun's environment contract (RANK,
  WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) - lighter, any ``k``.

Every process group is killed when a rank fails or the deadline passes; the error names the
rank and its reason. Compute speed per rank: ``threads`` (torch.set_num_threads) and
``cpu_quota`` (fraction of one core through a cgroup's CFS quota, when cgroups allow it).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from srift.validate import netemu

_CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
_CGROUP_V2 = Path("/sys/fs/cgroup")


class LaunchError(RuntimeError):
    """A run failed: ``rank`` (None if unknown) and ``reason`` say which rank and why."""

    def __init__(self, message: str, *, rank: int | None = None, reason: str = "", logs: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.reason = reason
        self.logs = logs


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------
# CPU quota through cgroups
def cgroup_support() -> str | None:
    """'v1', 'v2' or None: where a per-rank CPU quota can be set."""
    if os.geteuid() != 0:
        return None
    if (_CGROUP_V1_CPU / "cpu.cfs_quota_us").exists() and os.access(_CGROUP_V1_CPU, os.W_OK):
        return "v1"
    ctl = _CGROUP_V2 / "cgroup.controllers"
    if ctl.exists() and "cpu" in ctl.read_text().split() and os.access(_CGROUP_V2, os.W_OK):
        sub = (_CGROUP_V2 / "cgroup.subtree_control").read_text().split()
        if "cpu" in sub:
            return "v2"
    return None


class _Cgroups:
    """Creates one CPU cgroup per limited rank and removes them all (after killing members)."""

    PERIOD_US = 10_000  # short periods: throttling spreads evenly over an iteration

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.paths: list[Path] = []
        self.kind = cgroup_support()

    def make(self, rank: int, quota: float) -> str:
        if self.kind is None:
            raise LaunchError("cpu_quota needs a writable cgroup cpu controller (root, cgroups v1 cpu or v2 with cpu "
                              "delegated); use threads= to vary compute speed instead", reason="no cgroups")
        if not 0.05 <= quota <= 64:
            raise ValueError(f"cpu_quota[{rank}]: expected a fraction of a core in [0.05, 64], got {quota!r}")
        if self.kind == "v1":
            path = _CGROUP_V1_CPU / f"{self.prefix}r{rank}"
            path.mkdir()
            self.paths.append(path)
            (path / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(int(quota * self.PERIOD_US)))
        else:
            path = _CGROUP_V2 / f"{self.prefix}r{rank}"
            path.mkdir()
            self.paths.append(path)
            (path / "cpu.max").write_text(f"{int(quota * self.PERIOD_US)} {self.PERIOD_US}")
        return str(path)

    def close(self) -> None:
        for path in self.paths:
            for _ in range(50):
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except OSError:
                    pids = []
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        self.paths.clear()


def cleanup_cgroups() -> list[str]:
    """Remove empty cgroups left by dead validation processes."""
    removed = []
    for root in (_CGROUP_V1_CPU, _CGROUP_V2):
        if not root.is_dir():
            continue
        for path in root.glob(f"{netemu.PREFIX}*x*r*"):
            try:
                pid = int(path.name[len(netemu.PREFIX):].split("x", 1)[0])
            except ValueError:
                continue
            if pid != os.getpid() and netemu._pid_alive(pid):
                continue
            try:
                path.rmdir()
                removed.append(str(path))
            except OSError:
                pass
    return removed


# ---------------------------------------------------------------------------------------------
@dataclass
class RunResult:
    ranks: list[dict[str, Any]]
    hosts: list[dict[str, Any]]
    mode: str
    launcher: str
    wall_s: float
    latency_floor_s: float | None


def _kill(procs: Sequence[subprocess.Popen[Any]], out_dir: Path) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    # torchrun starts its workers in sessions of their own: kill them by the pid they wrote
    for f in out_dir.glob("rank*.json"):
        try:
            pid = json.loads(f.read_text()).get("pid")
        except (OSError, ValueError):
            continue
        if pid:
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _rank_status(out_dir: Path, world: int) -> list[dict[str, Any]]:
    out = []
    for r in range(world):
        f = out_dir / f"rank{r}.json"
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            out.append({"rank": r, "status": "not started"})
    return out


def run_ranks(
    cfg: dict[str, Any],
    *,
    ranks_per_host: Sequence[int],
    mode: str = "loopback",
    nic_gbps: Sequence[float | None] | None = None,
    cpu_quota: Sequence[float | None] | None = None,
    launcher: str = "torchrun",
    timeout_s: float = 300.0,
    measure_latency: bool = True,
) -> RunResult:
    """Run the worker on every rank; return their results or raise LaunchError naming the rank.

    ``cfg`` is the worker config (model, options, local_batches, threads, warmup, iterations,
    ...); ``out_dir`` and ``cgroups`` are filled in here.
    """
    if mode not in ("loopback", "netns"):
        raise ValueError(f"mode: expected 'loopback' or 'netns', got {mode!r}")
    if launcher not in ("torchrun", "direct"):
        raise ValueError(f"launcher: expected 'torchrun' or 'direct', got {launcher!r}")
    if not ranks_per_host or any(not isinstance(k, int) or k < 1 for k in ranks_per_host):
        raise ValueError(f"ranks_per_host: expected positive integers, got {list(ranks_per_host)!r}")
    world = sum(ranks_per_host)
    if len(cfg["local_batches"]) != world:
        raise ValueError(f"local_batches: expected one per rank ({world}), got {len(cfg['local_batches'])}")
    if launcher == "torchrun" and len(set(ranks_per_host)) != 1:
        raise ValueError("launcher='torchrun' needs the same number of ranks on every host; use launcher='direct'")
    if mode == "netns":
        nic_gbps = list(nic_gbps) if nic_gbps is not None else [None] * len(ranks_per_host)
        if len(nic_gbps) != len(ranks_per_host):
            raise ValueError(f"nic_gbps: expected one rate per host ({len(ranks_per_host)}), got {len(nic_gbps)}")
    if cpu_quota is not None and len(cpu_quota) != world:
        raise ValueError(f"cpu_quota: expected one entry per rank ({world}), got {len(cpu_quota)}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s: expected a positive number, got {timeout_s!r}")

    cleanup_cgroups()
    t_start = time.monotonic()
    out_dir = Path(tempfile.mkdtemp(prefix="srift-validate-"))
    procs: list[subprocess.Popen[Any]] = []
    logs: list[Path] = []
    cg = _Cgroups(f"{netemu.PREFIX}{os.getpid()}x{int(time.monotonic_ns() % 10**9)}")
    try:
        with ExitStack() as stack:
            if mode == "netns":
                emu = stack.enter_context(netemu.emulate(nic_gbps))  # type: ignore[arg-type]
                hosts = [{"address": h.address, "netns": h.netns, "nic_gbps": h.nic_gbps, "ifname": h.ifname,
                          "prefix": h.exec_prefix()} for h in emu.hosts]
                latency = None
                if measure_latency and len(emu.hosts) > 1:
                    latency = netemu.latency_floor(emu.hosts[0], emu.hosts[1])
            else:
                hosts = [{"address": "127.0.0.1", "netns": None, "nic_gbps": None, "ifname": "lo", "prefix": []}
                         for _ in ranks_per_host]
                latency = None
            # CPU quota: the launched process joins its cgroup *before* `ip netns exec` (which
            # remounts /sys), and everything it starts inherits it. torchrun: one cgroup per host
            # with the quota of all its ranks; direct: one per rank.
            cgroups: dict[int, str] = {}  # process index -> cgroup path
            if cpu_quota is not None:
                r = 0
                for h, k in enumerate(ranks_per_host):
                    qs = [cpu_quota[r + i] for i in range(k)]
                    if launcher == "torchrun":
                        if any(q is not None for q in qs):
                            if any(q is None for q in qs):
                                raise ValueError(f"cpu_quota: launcher='torchrun' limits a host as a whole; host {h} "
                                                 f"mixes limited and unlimited ranks {qs}")
                            cgroups[h] = cg.make(h, float(sum(qs)))  # type: ignore[arg-type]
                    else:
                        for i, q in enumerate(qs):
                            if q is not None:
                                cgroups[r + i] = cg.make(r + i, float(q))
                    r += k
            cfg = {**cfg, "out_dir": str(out_dir), "timeout_s": timeout_s}
            cfg_path = out_dir / "config.json"
            cfg_path.write_text(json.dumps(cfg))
            master, port = hosts[0]["address"], free_port()
            env_base = {**os.environ, "MASTER_ADDR": master, "MASTER_PORT": str(port),
                        "WORLD_SIZE": str(world), "OMP_NUM_THREADS": str(cfg.get("threads_default", 1)),
                        "PYTHONPATH": os.pathsep.join(filter(None, [_repo_root(), os.environ.get("PYTHONPATH")]))}
            rank = 0
            for h, k in enumerate(ranks_per_host):
                host = hosts[h]
                env = {**env_base, "GLOO_SOCKET_IFNAME": host["ifname"]}
                if launcher == "torchrun":
                    cmds = [(host["prefix"] + [sys.executable, "-m", "torch.distributed.run",
                                               f"--nnodes={len(ranks_per_host)}", f"--node_rank={h}",
                                               f"--nproc_per_node={k}", f"--master_addr={master}",
                                               f"--master_port={port}", "--max_restarts=0", "--monitor_interval=0.5",
                                               "-m", "srift.validate.worker", str(cfg_path)], env, f"host{h}")]
                    rank += k
                else:
                    cmds = []
                    for lr in range(k):
                        e = {**env, "RANK": str(rank), "LOCAL_RANK": str(lr), "LOCAL_WORLD_SIZE": str(k),
                             "GROUP_RANK": str(h)}
                        cmds.append((host["prefix"] + [sys.executable, "-m", "srift.validate.worker", str(cfg_path)],
                                     e, f"rank{rank}"))
                        rank += 1
                for argv, env, tag in cmds:
                    cgpath = cgroups.get(len(procs))
                    if cgpath:
                        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgpath, *argv]
                    log = out_dir / f"{tag}.log"
                    logs.append(log)
                    with open(log, "w") as fh:
                        procs.append(subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                                      start_new_session=True, cwd=_repo_root()))
            deadline = time.monotonic() + timeout_s + 30
            failure = None
            while time.monotonic() < deadline:
                codes = [p.poll() for p in procs]
                if any(c not in (None, 0) for c in codes):
                    # give the others a moment to write their own status, then stop everything
                    time.sleep(0.5)
                    failure = "exit"
                    break
                if all(c == 0 for c in codes):
                    break
                time.sleep(0.1)
            else:
                failure = "timeout"
            if failure:
                _kill(procs, out_dir)
                statuses = _rank_status(out_dir, world)
                tail = "\n".join(f"--- {p.name}\n" + p.read_text()[-1500:] for p in logs if p.exists())
                bad = [s for s in statuses if s.get("status") == "error"]
                if bad:
                    s = bad[0]
                    raise LaunchError(f"rank {s['rank']} failed: {s.get('error')}", rank=s["rank"],
                                      reason=str(s.get("error")), logs=tail)
                unfinished = [s["rank"] for s in statuses if s.get("status") != "ok"]
                r0 = unfinished[0] if unfinished else None
                if failure == "timeout":
                    raise LaunchError(f"run timed out after {timeout_s:.0f}s; ranks not finished: {unfinished}",
                                      rank=r0, reason="timeout", logs=tail)
                codes = {i: p.returncode for i, p in enumerate(procs)}
                raise LaunchError(f"a launcher process exited with {codes}; ranks not finished: {unfinished}; "
                                  f"log tail:\n{tail[-1500:]}", rank=r0, reason="exit", logs=tail)
            statuses = _rank_status(out_dir, world)
            not_ok = [s for s in statuses if s.get("status") != "ok"]
            if not_ok:
                raise LaunchError(f"rank {not_ok[0]['rank']} did not report a result ({not_ok[0].get('status')})",
                                  rank=not_ok[0]["rank"], reason=str(not_ok[0].get("status")))
            for h in hosts:
                h.pop("prefix", None)
            return RunResult(ranks=statuses, hosts=hosts, mode=mode, launcher=launcher,
                             wall_s=time.monotonic() - t_start, latency_floor_s=latency)
    finally:
        _kill(procs, out_dir)
        cg.close()
        shutil.rmtree(out_dir, ignore_errors=True)


def measure_compute(
    model: str,
    local_batch: int,
    *,
    options: dict[str, Any] | None = None,
    threads: int = 1,
    cpu_quota: float | None = None,
    optimizer: str = "sgd",
    warmup: int = 2,
    iterations: int = 6,
    device: str = "cpu",
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Time single-worker training (no DDP) in a fresh process with the given compute speed."""
    cfg = {"mode": "compute", "model": model, "options": options or {}, "local_batches": [local_batch],
           "threads": threads, "optimizer": optimizer, "warmup": warmup, "iterations": iterations,
           "device": device, "probe": False}
    res = run_ranks(cfg, ranks_per_host=[1], mode="loopback", launcher="direct",
                    cpu_quota=None if cpu_quota is None else [cpu_quota], timeout_s=timeout_s, measure_latency=False)
    return res.ranks[0]
