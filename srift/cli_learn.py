"""`srift train` and `srift probe-network`; the main CLI calls register(subparsers)."""
from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timezone
from typing import Any

from srift import jsonout
from srift.files import check_output_path

__all__ = ["register", "probe_network", "default_probe_ranks", "fit_alpha_beta"]


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
    p.add_argument("--ranks", type=int, default=None,
                   help="local processes (single-host probe; default: every visible GPU, as srift plans whole "
                        "instances, or 2 gloo processes without GPUs)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--loopback", action="store_true",
                   help="without NCCL on the ranks' GPUs, store gloo's allreduce between processes on this one "
                        "host as the instance's network link (tests and emulated hosts: it is not the NIC)")
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


def probe_network(instance_type: str, min_bytes: int = 1024, max_bytes: int = 1 << 30, ranks: int | None = None,
                  repeats: int = 5, *, loopback: bool = False) -> dict[str, Any]:
    """Allreduce sweep among `ranks` local processes (default_probe_ranks() when None); a
    catalog-overrides document. With NCCL on `ranks` GPUs it measures the instance's
    interconnect (`measured_intra_*`). Without, it would time gloo between processes on this one
    host, which is loopback and not the instance's NIC: ValueError unless ``loopback`` (tests
    and emulated hosts), which stores it as the network link."""
    import torch

    from srift import checks
    from srift.catalog import Catalog
    from srift.validate.launcher import run_ranks

    Catalog.default().instance(instance_type)  # an unknown type would give an overrides file srift refuses
    if ranks is None:
        ranks = default_probe_ranks()
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2:
        raise ValueError(f"ranks: expected an integer >= 2 (an allreduce needs two processes), got {ranks!r}")
    checks.integer("min_bytes", min_bytes)
    checks.integer("max_bytes", max_bytes, low=max(min_bytes, MIN_BANDWIDTH_BYTES), high=1 << 34)
    checks.integer("repeats", repeats, high=10_000)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= ranks else "gloo"
    if backend == "gloo" and not loopback:
        raise ValueError(f"probing {instance_type} needs NCCL on {ranks} GPUs of this instance (found {gpus}): "
                         "gloo between processes on one host measures loopback, not the instance's NIC, and "
                         "storing it as the network link would mislead every prediction. On a 1-GPU type the "
                         "link that matters is the network between instances, which one host cannot probe; "
                         "give --ranks N for fewer GPUs, or --loopback to store the loopback figure anyway "
                         "(tests, emulated hosts)")
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= 4
    # the validation worker's allreduce mode: one process per rank, every size timed after one
    # untimed call, ranks released together by a barrier before each timing
    cfg = {"mode": "allreduce", "local_batches": [1] * ranks, "message_bytes": sizes, "repeats": repeats,
           "backend": backend, "device": "cuda" if backend == "nccl" else "cpu"}
    run = run_ranks(cfg, ranks_per_host=[ranks], mode="loopback", launcher="direct", timeout_s=600,
                    measure_latency=False)
    times = next(r["allreduce_s"] for r in run.ranks if r["rank"] == 0)
    big = [(s, t) for s, t in zip(sizes, times) if s >= 1 << 20] or list(zip(sizes, times))
    bw, _ = fit_alpha_beta([s for s, _ in big], [t for _, t in big], ranks)
    _, lat = fit_alpha_beta(sizes, times, ranks)
    if not math.isfinite(bw):
        raise ValueError(f"allreduce times did not grow with message size ({min_bytes}-{max_bytes} B: "
                         f"{', '.join(f'{t:.3g}' for t in times)} s): no bandwidth to fit; probe larger messages")
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
    if args.out != "-":
        check_output_path(args.out, "--out")
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
