"""`srift train` and `srift probe-network`; the main CLI calls register(subparsers)."""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from datetime import datetime, timezone
from typing import Any

from srift import jsonout
from srift.files import check_output_path

__all__ = ["register", "probe_network", "probe_network_distributed", "default_probe_ranks", "fit_alpha_beta"]


def register(subparsers: Any) -> None:
    t = subparsers.add_parser("train", help="rebuild the learned cost models from ../shared/data and the "
                                            "allreduce sweep in srift/data/measurements")
    t.add_argument("--out", default=None, help="directory for the model JSON files (default: srift/data/models)")
    t.add_argument("--reprofile", action="store_true", help="re-profile the training data's models on meta")
    t.set_defaults(func=_cmd_train)
    p = subparsers.add_parser("probe-network", help="measure allreduce bandwidth/latency (NCCL on GPUs, gloo elsewhere) "
                                                    "inside one instance or, under torchrun, across several")
    p.add_argument("--instance-type", required=True)
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--ranks", type=int, default=None,
                   help="local processes (single-host probe; default: every visible GPU, as srift plans whole "
                        "instances, or 2 gloo processes without GPUs)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--loopback", action="store_true",
                   help="without NCCL on the ranks' GPUs, store gloo's allreduce between processes on this one "
                        "host as the instance's network link (tests and emulated hosts: it is not the NIC)")
    p.add_argument("--distributed", action="store_true",
                   help="run under torchrun across two or more instances of the type, one process per GPU "
                        "(torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT "
                        "--no-python srift probe-network --instance-type TYPE --distributed --out F): times the "
                        "ring across instances and stores it as the type's network link; rank 0 writes --out")
    p.add_argument("--out", default="-", help="overrides file to write ('-': stdout)")
    p.add_argument("--json", action="store_true", help="also print the raw sweep (sizes, seconds) as JSON on stderr")
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


def default_probe_ranks() -> int:
    """Every visible GPU (at least 2): srift plans whole instances, and the bandwidth a ring
    achieves inside a node depends on how many ranks share it (srift.learn.comm note "probe
    calibration": on Sia's whole single nodes a probe on all GPUs predicts 10.7 / 38, one on
    two GPUs 14.4 / 47). Without GPUs, 2 gloo processes."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return n if n >= 2 else 2


MIN_BANDWIDTH_BYTES = 1 << 20  # the bandwidth is fitted on messages this large or larger
SMALL_MESSAGE_BYTES = 64 << 10  # the per-step latency, on messages this small or smaller


def _probe_sizes(instance_type: str, min_bytes: int, max_bytes: int, repeats: int) -> list[int]:
    """The message sizes (x4 from min_bytes), every argument checked before any process starts."""
    from srift import checks
    from srift.catalog import Catalog

    Catalog.default().instance(instance_type)  # an unknown type would give an overrides file srift refuses
    checks.integer("min_bytes", min_bytes)
    checks.integer("max_bytes", max_bytes, low=max(min_bytes, MIN_BANDWIDTH_BYTES), high=1 << 34)
    checks.integer("repeats", repeats, high=10_000)
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= 4
    return sizes


def _probe_document(instance_type: str, link: str, backend: str, ranks: int, nodes: int, sizes: list[int],
                    times: list[float]) -> dict[str, Any]:
    """A catalog-overrides document storing the sweep's fitted ring bus bandwidth and per-step
    latency as the instance type's `link` ("intra": inside one instance; "network": the ring
    across instances), fitted with the simulator's own ring model over all `ranks`."""
    from srift.catalog import Catalog

    # The catalog's own spelling: the overrides file is keyed by it ("G4DN.12XLARGE" would be a new type).
    instance_type = Catalog.default().instance(instance_type).name
    big = [(s, t) for s, t in zip(sizes, times) if s >= MIN_BANDWIDTH_BYTES] or list(zip(sizes, times))
    bw, _ = fit_alpha_beta([s for s, _ in big], [t for _, t in big], ranks)
    if not math.isfinite(bw):
        raise ValueError(f"allreduce times did not grow with message size ({sizes[0]}-{sizes[-1]} B: "
                         f"{', '.join(f'{t:.3g}' for t in times)} s): no bandwidth to fit; probe larger messages")
    # The per-step latency from the small messages, what is left of their time after the
    # bandwidth term: a least-squares intercept over every size is set by the large messages'
    # noise and came out negative (0) on a shaped 0.5 Gbit/s link.
    n = ranks
    small = [(s, t) for s, t in zip(sizes, times) if s <= SMALL_MESSAGE_BYTES] or [(sizes[0], times[0])]
    lat = max(0.0, statistics.median((t - 2 * (n - 1) / n * s / bw) / (2 * (n - 1)) for s, t in small))
    gbytes = bw / 1e9
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    where = f"{ranks} local ranks" if nodes == 1 else f"{ranks} ranks on {nodes} instances ({ranks // nodes} each)"
    note = (f"srift probe-network {now}: {backend} allreduce over {where}, {sizes[0]}-{sizes[-1]} B; "
            f"achieved bus bandwidth {gbytes:.3f} GB/s, latency {lat * 1e6:.1f} us/step")
    return {"schema": "srift.catalog-overrides/1",
            "instances": {instance_type: {f"measured_{link}_gbytes_s": gbytes,
                                          f"measured_{link}_latency_us": lat * 1e6, "note": note}},
            "measurements": {"backend": backend, "ranks": ranks, "nodes": nodes, "message_bytes": sizes,
                             "seconds": times, "bus_bandwidth_bytes_s": bw, "latency_s": lat}}


_LOOPBACK_REFUSED = ("gloo between processes on one host measures loopback, not the instance's NIC, and storing "
                     "it as the network link would mislead every prediction")


def probe_network(instance_type: str, min_bytes: int = 1024, max_bytes: int = 1 << 30, ranks: int | None = None,
                  repeats: int = 5, *, loopback: bool = False) -> dict[str, Any]:
    """Allreduce sweep among `ranks` local processes (default_probe_ranks() when None); a
    catalog-overrides document. With NCCL on `ranks` GPUs it measures the instance's
    interconnect (`measured_intra_*`). Without, it would time gloo between processes on this one
    host, which is loopback and not the instance's NIC: ValueError unless ``loopback`` (tests
    and emulated hosts), which stores it as the network link. The link between instances is
    probed across them: probe_network_distributed."""
    import torch

    from srift.validate.launcher import run_ranks

    if ranks is None:
        ranks = default_probe_ranks()
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2:
        raise ValueError(f"ranks: expected an integer >= 2 (an allreduce needs two processes), got {ranks!r}")
    sizes = _probe_sizes(instance_type, min_bytes, max_bytes, repeats)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= ranks else "gloo"
    if backend == "gloo" and not loopback:
        raise ValueError(f"probing {instance_type} needs NCCL on {ranks} GPUs of this instance (found {gpus}): "
                         f"{_LOOPBACK_REFUSED}. On a 1-GPU type the link that matters is the network between "
                         "instances: probe it across two or more of them with --distributed under torchrun; "
                         "give --ranks N for fewer GPUs, or --loopback to store the loopback figure anyway "
                         "(tests, emulated hosts)")
    # the validation worker's allreduce mode: one process per rank, every size timed after one
    # untimed call, ranks released together by a barrier before each timing
    cfg = {"mode": "allreduce", "local_batches": [1] * ranks, "message_bytes": sizes, "repeats": repeats,
           "backend": backend, "device": "cuda" if backend == "nccl" else "cpu"}
    run = run_ranks(cfg, ranks_per_host=[ranks], mode="loopback", launcher="direct", timeout_s=600,
                    measure_latency=False)
    times = next(r["allreduce_s"] for r in run.ranks if r["rank"] == 0)
    # NCCL on one machine measures the GPUs' interconnect; gloo here stands in for a NIC (loopback).
    return _probe_document(instance_type, "intra" if backend == "nccl" else "network", backend, ranks, 1, sizes,
                           times)


def _torchrun_env() -> tuple[int, int, int]:
    """(rank, world size, ranks per node) from the environment torchrun gives each process."""
    import os

    missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
               if not os.environ.get(k)]
    if missing:
        raise ValueError(f"--distributed runs under torchrun, one process per GPU on every instance "
                         f"(environment {', '.join(missing)} not set): torchrun --nnodes N --nproc-per-node G "
                         "--rdzv-backend c10d --rdzv-endpoint HOST:29400 --no-python srift probe-network "
                         "--instance-type TYPE --distributed --out probe.json")
    try:
        rank, world, per_node = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"))
    except ValueError as exc:
        raise ValueError(f"torchrun environment: RANK, WORLD_SIZE and LOCAL_WORLD_SIZE must be integers ({exc})") from None
    if world < 2 or per_node < 1 or world % per_node or not 0 <= rank < world:
        raise ValueError(f"torchrun environment: WORLD_SIZE={world} ranks of LOCAL_WORLD_SIZE={per_node} per node "
                         f"(RANK={rank}): an allreduce needs two or more ranks, the same number on every node")
    return rank, world, per_node


def _host_identity() -> str:
    """This process's host as the others can tell it apart: its hostname and the address it
    reaches the rendezvous master from (emulated hosts share a hostname, not an address)."""
    import os
    import socket

    local = "?"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                                             type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.connect(address)  # UDP: picks the route, sends nothing
            local = s.getsockname()[0]
    except (OSError, ValueError, KeyError):
        pass
    return f"{socket.gethostname()}/{local}"


def probe_network_distributed(instance_type: str, min_bytes: int = 1024, max_bytes: int = 1 << 30,
                              repeats: int = 5, *, loopback: bool = False,
                              collective_timeout_s: float = 300.0) -> dict[str, Any] | None:
    """The allreduce sweep over every rank of a torchrun job spanning N instances of one type
    (one process per GPU; gloo where the ranks have no GPU each): the ring across instances as
    DDP runs it, stored as the type's link between instances (`measured_network_*`, which the
    simulator uses as the ring's bandwidth whenever a cluster spans instances). On one instance
    it is probe_network's measurement (NCCL: `measured_intra_*`; gloo refused unless
    ``loopback``). Several torchrun nodes on one host are loopback too, and refused the same way.
    Returns the document on rank 0 and None on the others."""
    import datetime as dt
    import os

    import torch
    import torch.distributed as dist

    from srift.validate.worker import allreduce_times

    sizes = _probe_sizes(instance_type, min_bytes, max_bytes, repeats)
    rank, world, per_node = _torchrun_env()
    nodes = world // per_node
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= per_node else "gloo"
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank % per_node))}")
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend, timeout=dt.timedelta(seconds=collective_timeout_s))
    try:
        hosts: list[str] = [""] * world
        dist.all_gather_object(hosts, _host_identity())
        distinct = sorted(set(hosts))
        if len(distinct) < nodes and not loopback:
            raise ValueError(f"the {nodes} torchrun nodes run on {len(distinct)} host(s) ({', '.join(distinct)}): "
                             "ranks on one host talk over its loopback or its own GPU interconnect, not the network "
                             "between instances, and storing that as the network link would mislead every "
                             "prediction; run one torchrun node per instance, or --loopback to store it anyway "
                             "(tests, emulated hosts)")
        if nodes == 1 and backend == "gloo" and not loopback:
            raise ValueError(f"probing {instance_type} on one instance needs NCCL on its {per_node} GPUs (found "
                             f"{gpus}): {_LOOPBACK_REFUSED}; probe two or more instances (torchrun --nnodes 2 or "
                             "more), or --loopback")
        times, _ = allreduce_times(sizes, repeats, device, backend == "nccl")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    # Across instances the ring's slowest link is the network (DESIGN: the slowest NIC in the
    # ring); NCCL inside one instance measures its interconnect.
    link = "network" if nodes > 1 or backend == "gloo" else "intra"
    return _probe_document(instance_type, link, backend, world, nodes if link == "network" else 1, sizes, times)


def _cmd_probe(args: argparse.Namespace) -> int:
    import os

    if args.distributed and args.ranks is not None:
        raise ValueError("--ranks is for a probe inside one instance; under --distributed torchrun's "
                         "--nproc-per-node sets the ranks on each instance")
    lead = not args.distributed or os.environ.get("RANK", "0") == "0"  # only rank 0 writes
    if args.out != "-" and lead:
        check_output_path(args.out, "--out")
    if args.distributed:
        doc = probe_network_distributed(args.instance_type, args.min_bytes, args.max_bytes, args.repeats,
                                        loopback=args.loopback)
        if doc is None:
            return 0
    else:
        doc = probe_network(args.instance_type, args.min_bytes, args.max_bytes, args.ranks, args.repeats,
                            loopback=args.loopback)
    # The overrides validator knows no "measurements" section: keep the raw sweep in the note file.
    overrides = {k: v for k, v in doc.items() if k != "measurements"}
    text = jsonout.dumps(overrides)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        print(jsonout.dumps(doc["measurements"], indent=None), file=sys.stderr)
    return 0
