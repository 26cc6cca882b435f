"""`srift train` and `srift probe-network`; the main CLI calls register(subparsers)."""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import warnings
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
    p.add_argument("--instance-type", required=True,
                   help="the catalog's instance type (with --catalog-overrides, one of their private types too)")
    p.add_argument("--min-bytes", type=_message_bytes, default=1024, metavar="BYTES",
                   help=f"smallest allreduce message, 1..{MAX_PROBE_BYTES} (default 1024); sizes grow x4")
    p.add_argument("--max-bytes", type=_message_bytes, default=1 << 30, metavar="BYTES",
                   help=f"largest allreduce message, 1..{MAX_PROBE_BYTES} (default 2^30); the bandwidth is fitted "
                        f"on two or more sizes of at least {MIN_BANDWIDTH_BYTES} B (1 MiB)")
    p.add_argument("--ranks", type=int, default=None,
                   help="local processes (single-host probe; default: every visible GPU, as srift plans whole "
                        f"instances, or 2 gloo processes without GPUs; gloo: at most {GLOO_RANKS_PER_CPU} per CPU "
                        "core of this host)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=_timeout_arg, default=DEFAULT_COLLECTIVE_TIMEOUT_S, metavar="SECONDS",
                   help="how long a rank waits for the others in one collective (the process group's timeout) "
                        f"before the probe fails, 0 < SECONDS <= {MAX_COLLECTIVE_TIMEOUT_S:.0f} (default "
                        f"{DEFAULT_COLLECTIVE_TIMEOUT_S:.0f}): bounds the wait for a dead peer")
    p.add_argument("--loopback", action="store_true",
                   help="without NCCL on the ranks' GPUs, store gloo's allreduce between processes on this one "
                        "host as the instance's network link (tests and emulated hosts: it is not the NIC), "
                        "marked measured_network_over: loopback, which predictions and --explain then say")
    p.add_argument("--allow-above-nominal", action="store_true",
                   help=f"store a link across instances faster than the catalog's NIC by more than "
                        f"{NIC_MARGIN:g}x (refused without it: no allreduce beats its NIC's line rate, so "
                        "such a probe did not measure the NIC, or the catalog's NIC figure is wrong)")
    p.add_argument("--distributed", action="store_true",
                   help="run under torchrun across two or more instances of the type, one process per GPU "
                        "(torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT "
                        "--no-python srift probe-network --instance-type TYPE --distributed --out F): times the "
                        "ring across instances and stores it as the type's network link; rank 0 writes --out")
    p.add_argument("--out", default="-", help="overrides file to write, JSON ('-': stdout)")
    p.add_argument("--json", action="store_true", help="also print the raw sweep (sizes, seconds) as JSON on stderr")
    from srift.cli_catalog import add_catalog_arguments

    add_catalog_arguments(p)  # --catalog, --catalog-overrides: a private instance type can be probed
    p.set_defaults(func=_cmd_probe)


def _message_bytes(text: str) -> int:
    """--min-bytes / --max-bytes: a whole number of bytes in 1..MAX_PROBE_BYTES (the same rule for both)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes, got {text!r}") from None
    if not 1 <= value <= MAX_PROBE_BYTES:
        raise argparse.ArgumentTypeError(f"expected a number of bytes in 1..{MAX_PROBE_BYTES}, got {text!r}")
    return value


def _timeout_arg(text: str) -> float:
    try:
        return _check_timeout("--timeout", float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("--timeout ", "", 1)) from None


def _check_timeout(name: str, value: Any) -> float:
    """A collective timeout in seconds: finite, > 0 and at most MAX_COLLECTIVE_TIMEOUT_S."""
    from srift import checks

    seconds = checks.positive(name, value)
    if seconds > MAX_COLLECTIVE_TIMEOUT_S:
        raise ValueError(f"{name} must be at most {MAX_COLLECTIVE_TIMEOUT_S:.0f} seconds, got {value!r}")
    return seconds


def _cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from srift.learn.train import MODELS_DIR, train_all

    if args.out is not None and not args.out.strip():
        raise ValueError("--out: expected a directory for the model JSON files, got an empty path "
                         "(leave --out out to write the package's own srift/data/models)")
    out = Path(args.out) if args.out is not None else MODELS_DIR
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: expected a directory, got {args.out!r}, which is a file")
    if not out.exists() and any(p.exists() and not p.is_dir() for p in out.parents):
        raise ValueError(f"--out: {args.out!r} cannot be a directory: a parent is a file")
    train_all(out, verbose=True, reprofile=args.reprofile)
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


NETWORK_PROBED_OVER = ("nic", "loopback")  # srift.catalog.NETWORK_PROBED_OVER, without importing the catalog
MIN_BANDWIDTH_BYTES = 1 << 20  # the bandwidth is fitted on messages this large or larger
SMALL_MESSAGE_BYTES = 64 << 10  # the per-step latency, on messages this small or smaller
MAX_PROBE_BYTES = 1 << 34  # the largest message, and the largest smallest one
DEFAULT_COLLECTIVE_TIMEOUT_S = 300.0  # how long a rank waits for its peers in one collective
MAX_COLLECTIVE_TIMEOUT_S = 86400.0
GLOO_RANKS_PER_CPU = 4  # a single-host gloo probe starts one process per rank


def _catalog(catalog: Any) -> Any:
    from srift import checks
    from srift.catalog import Catalog

    if catalog is None:
        return Catalog.default()
    return checks.instance("catalog", catalog, Catalog, "Catalog.default().with_overrides(path) for private types")


def _probe_sizes(instance_type: str, min_bytes: int, max_bytes: int, repeats: int, catalog: Any = None) -> list[int]:
    """The message sizes (x4 from min_bytes), every argument checked before any process starts."""
    from srift import checks

    _catalog(catalog).instance(instance_type)  # an unknown type would give an overrides file srift refuses
    checks.integer("min_bytes", min_bytes, high=MAX_PROBE_BYTES)
    checks.integer("max_bytes", max_bytes, low=min_bytes, high=MAX_PROBE_BYTES)
    checks.integer("repeats", repeats, high=10_000)
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= 4
    big = [s for s in sizes if s >= MIN_BANDWIDTH_BYTES]
    if len(big) < 2:
        # One point cannot separate the bandwidth from the per-step latency: a least-squares fit
        # stored the whole time as bandwidth and a latency of 0.
        first = min_bytes
        while first < MIN_BANDWIDTH_BYTES:
            first *= 4
        fix = (f"raise --max-bytes to {first * 4} or more" if first * 4 <= MAX_PROBE_BYTES else
               f"lower --min-bytes to {MAX_PROBE_BYTES // 4} or less")
        shown = ", ".join(map(str, sizes)) if len(sizes) <= 4 else f"{sizes[0]}, {sizes[1]}, ..., {sizes[-1]}"
        raise ValueError(f"--min-bytes {min_bytes} --max-bytes {max_bytes} time message sizes {shown} B, "
                         f"{len(big)} of them at least {MIN_BANDWIDTH_BYTES} B (1 MiB); the bandwidth and latency "
                         f"are fitted on two or more sizes of at least 1 MiB (x4 apart): {fix}")
    return sizes


def _probe_document(instance_type: str, link: str, backend: str, ranks: int, nodes: int, sizes: list[int],
                    times: list[float], catalog: Any = None, *, over: str | None = None,
                    allow_above_nominal: bool = False) -> dict[str, Any]:
    """A catalog-overrides document storing the sweep's fitted ring bus bandwidth and per-step
    latency as the instance type's `link` ("intra": inside one instance; "network": the ring
    across instances), fitted with the simulator's own ring model over all `ranks`. A network
    link records what it crossed, `over`: "nic" (instances' NICs) or "loopback" (processes on one
    host), as `measured_network_over`. Note "above the NIC": a network link faster than the
    catalog's NIC by more than NIC_MARGIN is a ValueError when it crossed NICs, unless
    `allow_above_nominal`, and a warning when it is loopback's (or allowed)."""
    if link == "network" and over not in NETWORK_PROBED_OVER:
        raise ValueError(f"over: a network link says what it crossed, one of {', '.join(NETWORK_PROBED_OVER)}; "
                         f"got {over!r}")
    # The catalog's own spelling: the overrides file is keyed by it ("G4DN.12XLARGE" would be a new type).
    info = _catalog(catalog).instance(instance_type)
    instance_type = info.name
    big = [(s, t) for s, t in zip(sizes, times) if s >= MIN_BANDWIDTH_BYTES]
    if len(big) < 2:  # _probe_sizes refuses such a sweep; a caller's own sizes too
        raise ValueError(f"message sizes {sizes}: the bandwidth is fitted on two or more sizes of at least "
                         f"{MIN_BANDWIDTH_BYTES} B, got {len(big)}")
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
    if link == "network" and over == "loopback":
        note += "; measured over loopback on one host, not the instance's NIC"
    above = _above_nic(info, gbytes) if link == "network" else None
    if above is not None:
        if over == "nic" and not allow_above_nominal:
            raise ValueError(f"measured_network_gbytes_s: the probe found {gbytes:.3f} GB/s across {instance_type} "
                             f"instances, {above}: no allreduce over a NIC runs faster than its line rate (probes "
                             f"of shaped NICs fit within 1% of it), so this is not the NIC (ranks that share a host "
                             f"or a link other than the one planned), or the catalog's NIC is wrong (set network_gbps "
                             f"in --catalog-overrides); --allow-above-nominal stores it anyway")
        warnings.warn(f"{instance_type}: the probed network link, {gbytes:.3f} GB/s, is {above}"
                      + ("; stored as measured over loopback, which predictions across instances name"
                         if over == "loopback" else "; stored as asked (--allow-above-nominal)"),
                      UserWarning, stacklevel=3)
        note += f"; {above}"
    entry: dict[str, Any] = {f"measured_{link}_gbytes_s": gbytes, f"measured_{link}_latency_us": lat * 1e6}
    if link == "network":
        entry["measured_network_over"] = over
    entry["note"] = note
    return {"schema": "srift.catalog-overrides/1",
            "instances": {instance_type: entry},
            "measurements": {"backend": backend, "ranks": ranks, "nodes": nodes, "message_bytes": sizes,
                             "seconds": times, "bus_bandwidth_bytes_s": bw, "latency_s": lat,
                             **({"over": over} if link == "network" else {})}}


# Note "above the NIC". A ring allreduce across instances moves every byte through each
# instance's NIC, so its bus bandwidth cannot beat the NIC's line rate: the 25 probes of shaped
# NICs (0.5-8 Gbit/s, 2-4 hosts, srift/data/measurements/allreduce_gloo.json) fit at most 0.9%
# above their rate, most below. A probe more than NIC_MARGIN over the catalog's fastest figure
# for the type (its burst peak where AWS lists one, else its baseline) did not measure the NIC.
NIC_MARGIN = 1.10


def _above_nic(info: Any, gbytes: float) -> str | None:
    """How far `gbytes` (GB/s) is over an instance type's NIC, in words, where it is more than
    NIC_MARGIN over its fastest nominal figure; None within it."""
    gbps = max(float(info.network_gbps or 0.0), float(info.network_peak_gbps or 0.0))
    nominal = gbps / 8
    if not nominal > 0 or gbytes <= NIC_MARGIN * nominal:
        return None
    return (f"{gbytes / nominal:.2f}x the {nominal:.3g} GB/s ({gbps:g} Gbit/s) the catalog gives its NIC, more than "
            f"the {NIC_MARGIN:g}x a probe's fit allows")


_LOOPBACK_REFUSED = ("gloo between processes on one host measures loopback, not the instance's NIC, and storing "
                     "it as the network link would mislead every prediction")


def probe_network(instance_type: str, min_bytes: int = 1024, max_bytes: int = 1 << 30, ranks: int | None = None,
                  repeats: int = 5, *, loopback: bool = False, catalog: Any = None,
                  collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
                  allow_above_nominal: bool = False) -> dict[str, Any]:
    """Allreduce sweep among `ranks` local processes (default_probe_ranks() when None); a
    catalog-overrides document. With NCCL on `ranks` GPUs it measures the instance's
    interconnect (`measured_intra_*`). Without, it would time gloo between processes on this one
    host, which is loopback and not the instance's NIC: ValueError unless ``loopback`` (tests
    and emulated hosts), which stores it as the network link, marked `measured_network_over:
    "loopback"` (one faster than the NIC with a warning, ``allow_above_nominal`` unused). The
    link between instances is probed across them: probe_network_distributed. ``catalog``
    (default: the bundled one) names the type, e.g. a private one from overrides. A rank that
    fails (or waits on the others longer than ``collective_timeout_s``) raises
    srift.validate.launcher.LaunchError naming it."""
    import os

    import torch

    from srift.validate.launcher import run_ranks

    if ranks is None:
        ranks = default_probe_ranks()
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2:
        raise ValueError(f"ranks: expected an integer >= 2 (an allreduce needs two processes), got {ranks!r}")
    sizes = _probe_sizes(instance_type, min_bytes, max_bytes, repeats, catalog)
    timeout = _check_timeout("collective_timeout_s", collective_timeout_s)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= ranks else "gloo"
    cpus = os.cpu_count() or 1
    if backend == "gloo" and ranks > GLOO_RANKS_PER_CPU * cpus:
        raise ValueError(f"ranks={ranks} (--ranks): a gloo probe starts one process per rank on this host, at most "
                         f"{GLOO_RANKS_PER_CPU * cpus} ({GLOO_RANKS_PER_CPU} per CPU core, {cpus} cores)")
    if backend == "gloo" and not loopback:
        raise ValueError(f"probing {instance_type} needs NCCL on {ranks} GPUs of this instance (found {gpus}): "
                         f"{_LOOPBACK_REFUSED}. On a 1-GPU type the link that matters is the network between "
                         "instances: probe it across two or more of them with --distributed under torchrun; "
                         "give --ranks N for fewer GPUs, or --loopback to store the loopback figure anyway "
                         "(tests, emulated hosts)")
    # the validation worker's allreduce mode: one process per rank, every size timed after one
    # untimed call, ranks released together by a barrier before each timing
    cfg = {"mode": "allreduce", "local_batches": [1] * ranks, "message_bytes": sizes, "repeats": repeats,
           "backend": backend, "device": "cuda" if backend == "nccl" else "cpu", "collective_timeout_s": timeout}
    # the whole sweep's deadline: 10 minutes, or two collective timeouts when those are longer
    run = run_ranks(cfg, ranks_per_host=[ranks], mode="loopback", launcher="direct",
                    timeout_s=max(600.0, 2 * timeout), measure_latency=False)
    times = next(r["allreduce_s"] for r in run.ranks if r["rank"] == 0)
    # NCCL on one machine measures the GPUs' interconnect; gloo here stands in for a NIC (loopback).
    return _probe_document(instance_type, "intra" if backend == "nccl" else "network", backend, ranks, 1, sizes,
                           times, catalog, over="loopback", allow_above_nominal=allow_above_nominal)


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
                              repeats: int = 5, *, loopback: bool = False, catalog: Any = None,
                              collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
                              allow_above_nominal: bool = False) -> dict[str, Any] | None:
    """The allreduce sweep over every rank of a torchrun job spanning N instances of one type
    (one process per GPU; gloo where the ranks have no GPU each): the ring across instances as
    DDP runs it, stored as the type's link between instances (`measured_network_*`, which the
    simulator uses as the ring's bandwidth whenever a cluster spans instances). On one instance
    it is probe_network's measurement (NCCL: `measured_intra_*`; gloo refused unless
    ``loopback``). Several torchrun nodes on one host are loopback too, and refused the same way;
    with ``loopback`` the link is stored marked `measured_network_over: "loopback"`, else
    "nic". A link across NICs faster than the catalog's NIC is refused unless
    ``allow_above_nominal`` (note "above the NIC"). Returns the document on rank 0 and None on
    the others. A failure of the process group (a
    peer that died or lost its network, or no answer within ``collective_timeout_s``) raises
    srift.validate.launcher.LaunchError naming this rank."""
    import datetime as dt
    import os

    import torch
    import torch.distributed as dist

    from srift.validate import worker

    sizes = _probe_sizes(instance_type, min_bytes, max_bytes, repeats, catalog)
    timeout = _check_timeout("collective_timeout_s", collective_timeout_s)
    rank, world, per_node = _torchrun_env()
    nodes = world // per_node
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    backend = "nccl" if gpus >= per_node else "gloo"
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank % per_node))}")
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend=backend, timeout=dt.timedelta(seconds=timeout))
    except RuntimeError as exc:  # torch.distributed's DistError / DistStoreError / DistBackendError
        raise _rank_failed(rank, world, "joining the process group", exc, timeout) from exc
    failure: BaseException | None = None
    shared_host = True
    try:
        hosts: list[str] = [""] * world
        dist.all_gather_object(hosts, _host_identity())
        distinct = sorted(set(hosts))
        shared_host = len(distinct) < nodes or nodes == 1
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
        times, _ = worker.allreduce_times(sizes, repeats, device, backend == "nccl")
        dist.barrier()
    except RuntimeError as exc:  # a dead or unreachable peer: gloo/NCCL errors and timeouts
        failure = exc
        raise _rank_failed(rank, world, "the allreduce sweep", exc, timeout) from exc
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a broken group may not tear down; the failure above is the news
            if failure is None:
                raise
    if rank != 0:
        return None
    # Across instances the ring's slowest link is the network (DESIGN: the slowest NIC in the
    # ring); NCCL inside one instance measures its interconnect.
    link = "network" if nodes > 1 or backend == "gloo" else "intra"
    return _probe_document(instance_type, link, backend, world, nodes if link == "network" else 1, sizes, times,
                           catalog, over="loopback" if shared_host else "nic", allow_above_nominal=allow_above_nominal)


def _rank_failed(rank: int, world: int, during: str, exc: BaseException, timeout: float) -> Exception:
    """torch.distributed's error on this rank as a LaunchError: one line that names the rank."""
    from srift.validate.launcher import LaunchError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return LaunchError(f"rank {rank} failed: {type(exc).__name__} during {during} ({world} ranks, collective "
                       f"timeout {timeout:g} s): {first}", rank=rank, reason=first)


def _cmd_probe(args: argparse.Namespace) -> int:
    import os

    if args.distributed and args.ranks is not None:
        raise ValueError("--ranks is for a probe inside one instance; under --distributed torchrun's "
                         "--nproc-per-node sets the ranks on each instance")
    from srift.cli import UserError
    from srift.cli_catalog import catalog_from_args
    from srift.validate.launcher import LaunchError

    lead = not args.distributed or os.environ.get("RANK", "0") == "0"  # only rank 0 writes
    if args.out != "-" and lead:
        if args.out.lower().endswith(".toml"):
            raise UserError(f"--out {args.out}: probe-network writes the overrides as JSON; name it .json "
                            "(--catalog-overrides reads both)")
        check_output_path(args.out, "--out")
    catalog = catalog_from_args(args)
    try:
        if args.distributed:
            doc = probe_network_distributed(args.instance_type, args.min_bytes, args.max_bytes, args.repeats,
                                            loopback=args.loopback, catalog=catalog, collective_timeout_s=args.timeout,
                                            allow_above_nominal=args.allow_above_nominal)
            if doc is None:
                return 0
        else:
            doc = probe_network(args.instance_type, args.min_bytes, args.max_bytes, args.ranks, args.repeats,
                                loopback=args.loopback, catalog=catalog, collective_timeout_s=args.timeout,
                                allow_above_nominal=args.allow_above_nominal)
    except LaunchError as exc:  # a rank failed or a peer died: the user's machines, not srift's bug
        if args.debug:
            raise
        hint = ("another rank or instance may have died or lost its network (its own output says why); "
                f"--timeout SECONDS bounds the wait for a peer (now {args.timeout:g} s)" if args.distributed else
                "a smaller --max-bytes if a rank ran out of memory; --timeout SECONDS for ranks slower "
                f"than {args.timeout:g} s per collective")
        raise UserError(str(exc), hint=hint) from exc
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
