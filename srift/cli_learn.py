"""`srift train` and `srift probe-network`; the main CLI calls register(subparsers)."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from datetime import datetime, timezone
from typing import Any

__all__ = ["register", "probe_network", "fit_alpha_beta"]


def register(subparsers: Any) -> None:
    t = subparsers.add_parser("train", help="rebuild the learned cost models from ../shared/data and the "
                                            "allreduce sweep in srift/data/measurements")
    t.add_argument("--out", default=None, help="directory for the model JSON files (default: srift/data/models)")
    t.add_argument("--reprofile", action="store_true", help="re-profile the training data's models on meta")
    t.set_defaults(func=_cmd_train)
    p = subparsers.add_parser("probe-network", help="measure allreduce bandwidth/latency (NCCL on GPUs, gloo elsewhere)")
    p.add_argument("--instance-type", required=True)
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--ranks", type=int, default=2, help="local processes (single-host probe)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="-", help="overrides file to write ('-': stdout)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_probe)


def _cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from srift.learn.train import MODELS_DIR, train_all

    train_all(Path(args.out) if args.out else MODELS_DIR, verbose=True, reprofile=args.reprofile)
    return 0


def fit_alpha_beta(sizes: list[float], times: list[float], ranks: int) -> tuple[float, float]:
    """(bus bandwidth bytes/s, per-step latency s) of t = 2(n-1)/n S/B + 2(n-1) a, least squares."""
    import numpy as np

    n = ranks
    A = np.column_stack([[2 * (n - 1) / n * s for s in sizes], [2 * (n - 1)] * len(sizes)])
    coef, *_ = np.linalg.lstsq(A, np.asarray(times), rcond=None)
    inv_bw, lat = float(coef[0]), max(float(coef[1]), 0.0)
    return (1.0 / inv_bw if inv_bw > 0 else math.inf), lat


def _worker(rank: int, world: int, port: int, sizes: list[int], repeats: int, backend: str, q: Any) -> None:
    import time

    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    out = []
    for s in sizes:
        x = torch.ones(max(s // 4, 1), dtype=torch.float32, device=dev)
        dist.all_reduce(x)
        ts = []
        for _ in range(repeats):
            if backend == "nccl":
                torch.cuda.synchronize(dev)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if backend == "nccl":
                torch.cuda.synchronize(dev)
            ts.append(time.perf_counter() - t0)
        out.append(sorted(ts)[len(ts) // 2])
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def probe_network(instance_type: str, min_bytes: int = 1024, max_bytes: int = 1 << 30, ranks: int = 2,
                  repeats: int = 5) -> dict[str, Any]:
    """Allreduce sweep among `ranks` local processes; a catalog-overrides document."""
    import socket

    import torch
    import torch.multiprocessing as mp

    backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= ranks else "gloo"
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= 4
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, ranks, port, sizes, repeats, backend, q)) for r in range(ranks)]
    for p in procs:
        p.start()
    times = q.get(timeout=600)
    for p in procs:
        p.join(60)
    big = [(s, t) for s, t in zip(sizes, times) if s >= 1 << 20] or list(zip(sizes, times))
    bw, _ = fit_alpha_beta([s for s, _ in big], [t for _, t in big], ranks)
    _, lat = fit_alpha_beta(sizes, times, ranks)
    gbytes = bw / 1e9
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    note = (f"srift probe-network {now}: {backend} allreduce over {ranks} local ranks, "
            f"{min_bytes}-{max_bytes} B; achieved bus bandwidth {gbytes:.3f} GB/s, latency {lat * 1e6:.1f} us/step")
    # NCCL on one machine measures the GPUs' interconnect; gloo across hosts measures the NIC.
    link = "intra" if backend == "nccl" else "network"
    return {"schema": "srift.catalog-overrides/1",
            "instances": {instance_type: {f"measured_{link}_gbytes_s": gbytes,
                                          f"measured_{link}_latency_us": lat * 1e6, "note": note}},
            "measurements": {"backend": backend, "ranks": ranks, "message_bytes": sizes, "seconds": times,
                             "bus_bandwidth_bytes_s": bw, "latency_s": lat}}


def _cmd_probe(args: argparse.Namespace) -> int:
    doc = probe_network(args.instance_type, args.min_bytes, args.max_bytes, args.ranks, args.repeats)
    # The overrides validator knows no "measurements" section: keep the raw sweep in the note file.
    overrides = {k: v for k, v in doc.items() if k != "measurements"}
    text = json.dumps(overrides, indent=2)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        print(json.dumps(doc["measurements"]), file=sys.stderr)
    return 0
