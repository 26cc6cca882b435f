#!/usr/bin/env python3
"""Gradient accumulation in the search (srift::simulate note "accumulation"; csrc/bnb.cpp note
"bounds"): questions whose global batch fills GPU memory, asked on the bundled catalog (every
region, on-demand alone and with spot, up to 3 instance types and 64 instances each, one
thread), once without accumulation and once allowing up to --steps micro-steps, in the same
run:
  - the best plan, its cost and hours, and its micro-steps;
  - search time with accumulation as a ratio of the plain question's (the bounds read a
    worker's memory cap as the micro-steps', so they prune less);
  - on the space the exhaustive search finishes (2 types, 16 instances each), whether
    branch-and-bound and exhaustive enumeration find the same optimum with accumulation.

    python bench/bench_accumulation.py [--steps 16] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# (zoo model, zoo options, precision, global batch, iterations, deadline in hours)
QUESTIONS = [
    ("resnet50", {}, "fp32", 4096, 20_000, 24),
    ("bert_large", {"seq_len": 384}, "amp", 1024, 20_000, 48),
    ("gpt2_large", {}, "amp", 512, 20_000, 96),
]


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def _best(rec) -> dict:
    b = rec.best
    if b is None:
        return {"best": None, "why_none": rec.why_none}
    return {"best": str(b.cluster), "total_usd": round(b.total_usd, 2), "total_hours": round(b.total_hours, 2),
            "accumulation_steps": b.prediction.accumulation_steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16, help="most accumulation micro-steps allowed")
    parser.add_argument("--repeat", type=int, default=3, help="runs per question (median reported)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)

    import srift
    from srift import _core
    from srift.planning import _Space

    catalog = srift.Catalog.default()
    rows = []
    for name, options, precision, batch, iterations, deadline in QUESTIONS:
        model, sample, loss_fn = srift.zoo.build(name, batch_size=4, device="meta", **options)
        prof = srift.profile(model, sample, loss_fn=loss_fn, device="meta", name=name, precision=precision)
        for spot in (False, True):
            runs = {}
            for steps in (1, args.steps):
                times, rec = [], None
                for _ in range(args.repeat):
                    rec = srift.recommend(prof, global_batch=batch, iterations=iterations, deadline_hours=deadline,
                                          catalog=catalog, regions="all", spot=spot, max_types=3,
                                          max_instances_per_type=64, threads=1, max_accumulation_steps=steps)
                    times.append(rec.search.seconds)
                runs[steps] = (statistics.median(times), rec)
            (plain_s, plain), (acc_s, acc) = runs[1], runs[args.steps]
            # B&B against exhaustive enumeration on the space the latter finishes, accumulation on
            space = _Space(prof, catalog, global_batch=batch, iterations=iterations, regions="all",
                           markets=("on-demand", "spot") if spot else ("on-demand",), instance_types=None, exclude=None,
                           max_instances_per_type=16, config=None, precision=None, max_accumulation_steps=args.steps)
            req = space.request
            req.objective = _core.Objective.min_cost
            req.deadline_s = deadline * 3600.0
            req.max_types, req.threads, req.top_k = 2, 1, 1
            t0 = time.perf_counter()
            ex = _core.search_exhaustive(req)
            exhaustive_s = time.perf_counter() - t0
            bb = _core.search(req)
            same = (not ex.plans and not bb.plans) or bool(
                ex.plans and bb.plans and abs(ex.plans[0].total_usd - bb.plans[0].total_usd) <= 1e-9 * ex.plans[0].total_usd)
            row = {"model": name, "precision": precision, "global_batch": batch, "iterations": iterations,
                   "deadline_hours": deadline, "markets": "on-demand,spot" if spot else "on-demand", "plain": _best(plain), "accumulating": _best(acc),
                   "plain_search_s": plain_s, "accumulating_search_s": acc_s, "search_time_ratio": acc_s / plain_s,
                   "plain_simulated": plain.search.evaluated, "accumulating_simulated": acc.search.evaluated,
                   "cost_ratio": (acc.best.total_usd / plain.best.total_usd
                                  if acc.best is not None and plain.best is not None else None),
                   "exhaustive_s": exhaustive_s, "exhaustive_equal_optimum": same}
            rows.append(row)
            ratio = f"x{row['cost_ratio']:.3f} the cost" if row["cost_ratio"] is not None else "(no plain plan)"
            print(f"{name:10s} batch {batch:5d} within {deadline:3d} h, {row['markets']:14s}: plain {row['plain'].get('best')} "
                  f"${row['plain'].get('total_usd')} | accumulating {row['accumulating'].get('best')} "
                  f"${row['accumulating'].get('total_usd')} "
                  f"({row['accumulating'].get('accumulation_steps')} micro-steps), {ratio}; search "
                  f"{plain_s * 1e3:.1f} -> {acc_s * 1e3:.1f} ms (x{row['search_time_ratio']:.2f}); "
                  f"exhaustive equal optimum {same}")
    result = {"benchmark": "bench_accumulation", "commit": _commit(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "threads": 1, "steps": args.steps, "rows": rows}
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
