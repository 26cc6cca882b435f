#!/usr/bin/env python3
"""Take the allreduce measurements the learned link model is trained on (needs root).

    sudo python scripts/measure_allreduce.py [--out srift/data/measurements/allreduce_gloo.json]

Runs srift.learn.allreduce_sweep.DEFAULT_CONFIGS (emulated hosts x ranks x NIC rate, gloo,
4 KiB-64 MiB) and writes the sweep document; `srift train` then refits the link model.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from srift.learn.allreduce_sweep import measure_sweep

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "srift" / "data" / "measurements" / "allreduce_gloo.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    doc = measure_sweep(repeats=args.repeats, progress=lambda m: print(m, file=sys.stderr, flush=True))
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}: {len(doc['configs'])} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
