#!/usr/bin/env python3
"""Take the GPU compute measurements the compute models train on, on a GPU lent to srift.

    python scripts/measure_gpu_compute.py [--gpu-key H100-80GB] [--out PATH] [--only resnet50,bert_base]

Profiles srift.learn.gpu_sweep.GPU_PLAN (the training data's models at three local batches)
with srift.profile on the CUDA device, at AMP and at TF32 (strict FP32 on a GPU without TF32),
and writes srift/data/measurements/compute_gpu_<GPU>.json; `srift train` then learns from it
(srift.learn.gpu_sweep note "GPU rows"). The GPU's catalog key is resolved from its device name
unless --gpu-key names it. About 10-20 minutes on an H100 for the whole plan.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from srift.learn.gpu_sweep import GPU_PLAN, measure_gpu_sweep, sweep_path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu-key", default=None, help="catalog GPU key of the device (default: from its name)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="default: srift/data/measurements/compute_gpu_<GPU>.json")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--only", default=None, help="comma-separated workload keys (default: the whole plan)")
    args = ap.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: this sweep times GPUs (scripts/measure_cpu_compute.py times the CPU)", file=sys.stderr)
        return 2
    plan = GPU_PLAN
    if args.only is not None:
        unknown = [k for k in args.only.split(",") if k not in GPU_PLAN]
        if unknown:
            print(f"--only: {unknown} not in the plan; known: {', '.join(GPU_PLAN)}", file=sys.stderr)
            return 2
        plan = {k: GPU_PLAN[k] for k in args.only.split(",")}
    t0 = time.perf_counter()
    doc = measure_gpu_sweep(plan, device=args.device, gpu_key=args.gpu_key, repeats=args.repeats,
                            progress=lambda m: print(m, file=sys.stderr, flush=True))
    out = Path(args.out) if args.out else sweep_path(doc["gpu"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}: {len(doc['rows'])} rows ({len(doc['skipped'])} batches skipped) on {doc['gpu']} "
          f"in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
