"""Accuracy sweep: srift.predict vs real DDP training on emulated hosts.

3+ zoo models x 3 NIC rates x {homogeneous, heterogeneous} 2-rank clusters (one rank per
emulated host; heterogeneous = the second host's rank limited to a fraction of a core through
a cgroup CPU quota). Prints the table and median/p90 APE; target median APE <= 10%.

    python bench/validate_sweep.py                        # full sweep (root: network namespaces)
    python bench/validate_sweep.py --models ncf --nic-gbps 1 --quick
    python bench/validate_sweep.py --json out.json --measurements meas.jsonl

Not part of the default test run (it takes minutes and its timings depend on the machine).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

# model -> (zoo options, global batch)
MODELS: dict[str, tuple[dict, int]] = {
    "resnet18_cifar": ({}, 32),
    "ncf": ({}, 1024),
    "gpt2": ({"seq_len": 32}, 8),
    "bert_base": ({"seq_len": 32, "head": "qa"}, 8),
}
DEFAULT_MODELS = ("resnet18_cifar", "ncf", "gpt2")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"comma-separated, from {sorted(MODELS)}")
    ap.add_argument("--nic-gbps", default="1,2,5", help="NIC rates in Gbit/s (default 1,2,5)")
    ap.add_argument("--slow-quota", type=float, default=0.35,
                    help="CPU quota (cores) of the slow rank in heterogeneous clusters (default 0.35)")
    ap.add_argument("--mode", default="auto", choices=("auto", "netns", "loopback"))
    ap.add_argument("--launcher", default="torchrun", choices=("torchrun", "direct"))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="warmup 1, iterations 3 (smoke run)")
    ap.add_argument("--kinds", default="homo,het", help="homo, het or both (default homo,het)")
    ap.add_argument("--json", metavar="PATH", help="write the report JSON here")
    ap.add_argument("--measurements", metavar="PATH", help="append measurement records (JSON lines)")
    args = ap.parse_args(argv)

    from srift.validate.report import ValidationReport, summarize
    from srift.validate.runner import Calibrator, emulated_cluster, validate

    from srift.cli_validate import _terminate_cleanly

    _terminate_cleanly()  # SIGTERM: clean up namespaces, cgroups and ranks
    warmup, iters = (1, 3) if args.quick else (args.warmup, args.iterations)
    rates = [float(x) for x in args.nic_gbps.split(",") if x.strip()]
    total = ValidationReport(runs=[])
    t0 = time.time()
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name not in MODELS:
            ap.error(f"--models: unknown {name!r}; choose from {sorted(MODELS)}")
        options, gb = MODELS[name]
        clusters, labels = [], []
        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        if not kinds or set(kinds) - {"homo", "het"}:
            ap.error(f"--kinds: expected homo and/or het, got {args.kinds!r}")
        for het in [k == "het" for k in kinds]:
            for r in rates:
                clusters.append(emulated_cluster(2, r, cpu_quota=[None, args.slow_quota] if het else None))
                labels.append(f"{name} {'het' if het else 'homo'} {r:g}G")
        cal = Calibrator(name, options, optimizer="adam", warmup=max(1, warmup), iterations=iters, timeout_s=900)
        rep = validate(name, gb, clusters, options=options, mode=args.mode, launcher=args.launcher, warmup=warmup,
                       iterations=iters, labels=labels, calibrator=cal, measurements_path=args.measurements,
                       timeout_s=900, progress=lambda s: print(s, file=sys.stderr, flush=True))
        total.runs += rep.runs
        total.failures += rep.failures
        for n in rep.notes:
            if n not in total.notes:
                total.notes.append(n)
        print(f"--- {name} done after {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    print(total.format_table())
    for kind in ("homo", "het"):
        s = summarize(r.ape for r in total.runs if f" {kind} " in r.label)
        if s["runs"]:
            print(f"{kind}: {s['runs']} runs, median APE {s['median_ape']:.1f}%, p90 {s['p90_ape']:.1f}%")
    lat = [r.latency_floor_s for r in total.runs if r.latency_floor_s]
    if lat:
        print(f"latency floor (TCP 1-byte round trip between emulated hosts): median {sorted(lat)[len(lat)//2]*1e6:.0f} us")
    print(f"wall time {time.time() - t0:.0f}s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(total.to_dict(), fh, indent=1)
    s = total.summary
    return 0 if s["runs"] and not total.failures else 1


if __name__ == "__main__":
    sys.exit(main())
