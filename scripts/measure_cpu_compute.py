#!/usr/bin/env python3
"""Take the CPU compute measurements the compute models are evaluated (and may train) on.

    python scripts/measure_cpu_compute.py [--out srift/data/measurements/compute_cpu.json]

Profiles srift.learn.cpu_sweep.DEFAULT_PLAN (the training data's models at two local batches)
with srift.profile on this CPU at 1 and 2 threads, measures the CPU's sgemm and copy peaks,
and writes the sweep document; `srift train` then rebuilds the models. Run it on an idle
machine: another process on the same cores shows up as a slower CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from srift.learn.cpu_sweep import DEFAULT_PLAN, measure_sweep

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "srift" / "data" / "measurements" / "compute_cpu.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=None, help="comma-separated workload keys (default: the whole plan)")
    args = ap.parse_args()
    plan = DEFAULT_PLAN if args.only is None else {k: DEFAULT_PLAN[k] for k in args.only.split(",")}
    t0 = time.perf_counter()
    doc = measure_sweep(plan, repeats=args.repeats,
                        progress=lambda m: print(f"[{time.perf_counter() - t0:6.0f} s] {m}", file=sys.stderr, flush=True))
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}: {len(doc['rows'])} rows in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
