"""Allreduce microbenchmarks taken here, the data of the learned link model (srift.learn.links).

Each configuration runs ``hosts`` emulated hosts (network namespaces joined by a bridge, every
NIC shaped to ``nic_gbps`` with tc/tbf, MTU 9000; srift.validate.netemu) with
``ranks_per_host`` ranks each; every rank times gloo's allreduce of float32 messages from 4 KiB
to 64 MiB (srift.validate.worker, mode "allreduce"). Ranks on one host talk over its loopback
(unshaped), as GPUs on one instance talk over NVLink/PCIe, so a configuration with several
ranks per host has the fast-intra, slow-network shape of a real cluster.

Needs root (namespaces, tc). The result is a JSON document (schema srift.allreduce-sweep/1)
that scripts/measure_allreduce.py writes to srift/data/measurements/.
"""
from __future__ import annotations

import os
import platform
import statistics
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

__all__ = ["SCHEMA", "DEFAULT_SIZES", "DEFAULT_CONFIGS", "measure_config", "measure_sweep", "validate_sweep"]

SCHEMA = "srift.allreduce-sweep/1"
DEFAULT_SIZES = [4 << 10 << (2 * k) for k in range(8)]  # 4 KiB .. 64 MiB, x4
# (hosts, ranks per host, NIC Gbit/s): rates and shapes that a 2-core machine can drive.
DEFAULT_CONFIGS = [(h, k, g) for g in (0.5, 1.0, 2.0, 4.0, 8.0) for h, k in ((2, 1), (3, 1), (4, 1), (2, 2), (4, 2))]


def measure_config(hosts: int, ranks_per_host: int, nic_gbps: float, sizes: Sequence[int] = DEFAULT_SIZES,
                   repeats: int = 7, timeout_s: float = 300.0) -> dict[str, Any]:
    """One configuration: per message size, the median over ranks of each rank's median time."""
    from srift.validate.launcher import run_ranks

    if hosts < 1 or ranks_per_host < 1 or hosts * ranks_per_host < 2:
        raise ValueError(f"hosts x ranks_per_host: expected at least 2 ranks, got {hosts} x {ranks_per_host}")
    if not nic_gbps > 0:
        raise ValueError(f"nic_gbps: expected a rate > 0 Gbit/s, got {nic_gbps!r}")
    world = hosts * ranks_per_host
    cfg = {"mode": "allreduce", "local_batches": [1] * world, "message_bytes": list(sizes), "repeats": repeats,
           "collective_timeout_s": timeout_s}
    run = run_ranks(cfg, ranks_per_host=[ranks_per_host] * hosts, mode="netns", nic_gbps=[nic_gbps] * hosts,
                    launcher="direct", timeout_s=timeout_s)
    per_rank = [r["allreduce_s"] for r in run.ranks]
    seconds = [statistics.median(col) for col in zip(*per_rank)]
    return {"hosts": hosts, "ranks_per_host": ranks_per_host, "nic_gbps": nic_gbps, "backend": run.ranks[0]["backend"],
            "message_bytes": list(sizes), "seconds": seconds, "latency_floor_s": run.latency_floor_s}


def measure_sweep(configs: Iterable[tuple[int, int, float]] = DEFAULT_CONFIGS, sizes: Sequence[int] = DEFAULT_SIZES,
                  repeats: int = 7, progress: Any = None) -> dict[str, Any]:
    import torch

    rows = []
    for hosts, rph, gbps in configs:
        if progress:
            progress(f"{hosts} host(s) x {rph} rank(s), {gbps} Gbit/s")
        rows.append(measure_config(hosts, rph, gbps, sizes, repeats))
    return {"schema": SCHEMA, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"node": platform.node(), "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
            "torch": torch.__version__, "transport": "gloo over TCP between network namespaces (tc tbf, MTU 9000)",
            "repeats": repeats, "configs": rows}


def validate_sweep(doc: Any, origin: str = "allreduce sweep") -> dict[str, Any]:
    """The document if it is a well-formed sweep, else ValueError naming the field."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{origin}: schema: expected {SCHEMA!r}, got {doc.get('schema') if isinstance(doc, dict) else doc!r}")
    configs = doc.get("configs")
    if not isinstance(configs, list) or not configs:
        raise ValueError(f"{origin}: configs: expected a non-empty list")
    for i, c in enumerate(configs):
        where = f"{origin}: configs[{i}]"
        for key in ("hosts", "ranks_per_host"):
            if not isinstance(c.get(key), int) or isinstance(c.get(key), bool) or c[key] < 1:
                raise ValueError(f"{where}.{key}: expected an integer >= 1, got {c.get(key)!r}")
        if not isinstance(c.get("nic_gbps"), (int, float)) or not c["nic_gbps"] > 0:
            raise ValueError(f"{where}.nic_gbps: expected a number > 0, got {c.get('nic_gbps')!r}")
        sizes, secs = c.get("message_bytes"), c.get("seconds")
        if not isinstance(sizes, list) or not isinstance(secs, list) or len(sizes) != len(secs) or not sizes:
            raise ValueError(f"{where}: message_bytes and seconds: expected lists of equal, non-zero length")
        for j, (s, t) in enumerate(zip(sizes, secs)):
            if not isinstance(s, (int, float)) or not s > 0:
                raise ValueError(f"{where}.message_bytes[{j}]: expected a number > 0, got {s!r}")
            if not isinstance(t, (int, float)) or not t > 0 or t != t:
                raise ValueError(f"{where}.seconds[{j}]: expected a number > 0, got {t!r}")
    return doc
