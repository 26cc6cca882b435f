"""``srift validate``: real DDP training vs srift's prediction (registered by srift/cli.py).

Examples::

    srift validate --model resnet18_cifar --global-batch 64 --nic-gbps 1,2,5
    srift validate --model ncf --global-batch 512 --nic-gbps 2 --cpu-quota 1,0.5 --json
    srift validate --model resnet18_cifar --global-batch 16 --mode loopback --iterations 5
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from srift import jsonout
from srift.files import check_output_path

__all__ = ["register", "cmd_validate"]


def _floats(text: str) -> list[float | None]:
    out: list[float | None] = []
    for part in text.split(","):
        part = part.strip()
        if part.lower() in ("", "none", "-", "lo"):
            out.append(None)
            continue
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"expected positive numbers, got {part!r} in {text!r}")
        out.append(v)
    return out


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    except RecursionError:  # json recurses once per level of [[[[...]]]]
        raise argparse.ArgumentTypeError(f"{key.strip()}: value nested too deeply") from None
    return key.strip(), parsed


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):  # 0, -5, nan and inf all failed only once the runs started
        raise argparse.ArgumentTypeError(f"expected a positive finite number of seconds, got {text!r}")
    return v


def run_label(model: str, quotas: list[float | None], nic: float | None, mode: str) -> str:
    """A run's label: model, homogeneous or heterogeneous hosts, and the NIC rate emulated
    ("lo" where none is: loopback mode, or a host without a rate)."""
    het = "het" if len(set(quotas)) > 1 else "homo"
    return f"{model} {het} {'lo' if nic is None or mode != 'netns' else f'{nic:g}G'}"


def _terminate_cleanly() -> None:
    """SIGTERM raises KeyboardInterrupt, so namespaces, cgroups and ranks are removed on the way out."""
    import signal

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread
        pass


def cmd_validate(args: argparse.Namespace) -> int:
    from srift.validate import netemu
    from srift.validate.runner import HostSpec, WorkerSpec, resolve_mode, validate

    if args.cleanup:
        removed = netemu.cleanup_leftovers() if netemu.unavailable_reason() is None else []
        from srift.validate.launcher import cleanup_cgroups

        removed += cleanup_cgroups()
        print(jsonout.dumps({"removed": removed}, indent=None) if args.json else f"removed {len(removed)} leftover(s): {removed}")
        return 0
    if not args.model or not args.global_batch:
        raise ValueError("--model and --global-batch are required (or --cleanup)")
    quotas = args.cpu_quota or [None] * args.hosts
    if len(quotas) != args.hosts:
        raise ValueError(f"--cpu-quota: expected one value per host ({args.hosts}), got {len(quotas)}")
    try:
        # the mode first: a label states a NIC rate only where one is emulated
        real_mode, _ = resolve_mode(args.mode)
    except netemu.EmulationUnavailable as exc:
        raise ValueError(f"--mode {args.mode}: {exc}") from None
    clusters, labels = [], []
    for nic in args.nic_gbps:
        clusters.append([HostSpec(nic, tuple(WorkerSpec(args.threads, q) for _ in range(args.ranks_per_host)))
                         for q in quotas])
        labels.append(run_label(args.model, quotas, nic, real_mode))
    _terminate_cleanly()
    if args.measurements:
        check_output_path(args.measurements, "--measurements")  # before the runs, not after them
    profile = None
    if args.profile:
        import srift

        profile = srift.Profile.load(args.profile)
    progress = None if args.json or args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    report = validate(args.model, args.global_batch, clusters, options=dict(args.option or []), mode=args.mode,
                      launcher=args.launcher, warmup=args.warmup, iterations=args.iterations,
                      optimizer=args.optimizer, profile=profile, add_to_profile=bool(args.profile),
                      measurements_path=args.measurements, timeout_s=args.timeout, labels=labels,
                      progress=progress)
    if args.profile and profile is not None:
        profile.save(args.profile)
    if args.json:
        print(jsonout.dumps(report.to_dict(), indent=1))
    else:
        print(report.format_table())
    return 1 if report.failures else 0


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``validate`` to the main parser's subparsers."""
    p = subparsers.add_parser(
        "validate", help="run real DDP training and compare with srift's prediction",
        description="Launch real DistributedDataParallel training (gloo/NCCL) of a zoo model on emulated hosts "
                    "(network namespaces + tc rate limits; root) or loopback, measure iteration times after "
                    "warm-up, predict the same cluster with srift and report the absolute percentage error.")
    p.add_argument("--model", help="zoo model name, e.g. resnet18_cifar, ncf, bert_base")
    p.add_argument("--option", action="append", type=_option, metavar="KEY=VALUE",
                   help="zoo model option, e.g. seq_len=64 (repeatable)")
    p.add_argument("--global-batch", type=_positive_int, help="samples per iteration over all ranks")
    p.add_argument("--hosts", type=_positive_int, default=2, help="emulated hosts (default 2)")
    p.add_argument("--ranks-per-host", type=_positive_int, default=1, help="ranks per host (default 1)")
    p.add_argument("--nic-gbps", type=_floats, default=[1.0],
                   help="NIC rate(s) in Gbit/s, comma-separated: one run per rate (default 1)")
    p.add_argument("--cpu-quota", type=_floats, default=None,
                   help="per host: fraction of a core per rank (cgroups), e.g. 1,0.5 for heterogeneous hosts")
    p.add_argument("--threads", type=_positive_int, default=1, help="torch threads per rank (default 1)")
    p.add_argument("--mode", choices=("auto", "netns", "loopback"), default="auto",
                   help="netns: emulated hosts (root); loopback: no NIC emulation; auto (default): netns if possible")
    p.add_argument("--launcher", choices=("torchrun", "direct"), default="torchrun",
                   help="torchrun per host (default) or one process per rank with torchrun's environment")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations (default 3)")
    p.add_argument("--iterations", type=_positive_int, default=10, help="timed iterations (default 10)")
    p.add_argument("--optimizer", choices=("adam", "adamw", "sgd"), default="adam")
    p.add_argument("--profile", metavar="PATH", help="profile JSON to predict with; calibration measurements are "
                                                      "appended to it (add_measurement) and it is saved")
    p.add_argument("--measurements", metavar="PATH",
                   help="append measurements (JSON lines, schema srift.measurements/1) here")
    p.add_argument("--timeout", type=_positive_seconds, default=600.0,
                   help="seconds per launched run (default 600)")
    p.add_argument("--cleanup", action="store_true", help="remove namespaces/cgroups left by dead runs and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_validate)
    return p
