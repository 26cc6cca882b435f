#!/usr/bin/env python3
"""Time to the optimum on the bundled catalog (issue 5): every region, on-demand and spot,
up to 3 instance types per plan, up to 64 instances each, with resnet50 and bert_large
profiles (meta device), for both questions. The core's search time is reported on one
thread, beside the same question answered by the v0 exhaustive search limited to 2 types and
16 instances (the largest space it finishes quickly), both in this run. Each deadline is also
asked with --confidence (default 0.9: the deadline met with that probability under each plan's
p10-p90 band and preemption together, csrc/band.hpp): its search time as a ratio of the plain
question's in the same run, its best plan, and the chance the plain answer meets the deadline.

    python bench/bench_recommend.py [--json out.json]
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


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unknown"


QUESTIONS = {
    "resnet50": {"global_batch": 1024, "iterations": 100_000,
                 "deadlines_h": [2, 8, 24], "budgets_usd": [100, 500, 2000]},
    "bert_large": {"global_batch": 256, "iterations": 100_000,
                   "deadlines_h": [8, 24, 72], "budgets_usd": [500, 2000, 10000]},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per question (median reported)")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--confidence", type=float, default=0.9,
                        help="deadline confidence of the second run of each deadline question")
    args = parser.parse_args(argv)

    import srift
    from srift import _core
    from srift.planning import _Space

    catalog = srift.Catalog.default()
    rows = []
    for model_name, q in QUESTIONS.items():
        model, batch, loss_fn = srift.zoo.build(model_name, batch_size=4, device="meta",
                                                **({"seq_len": 384} if "bert" in model_name else {}))
        prof = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name=model_name)
        asks = [("min_cost", {"deadline_hours": d}) for d in q["deadlines_h"]] + \
               [("max_throughput", {"budget_usd": b}) for b in q["budgets_usd"]]
        for objective, ask in asks:
            times, rec = [], None
            for _ in range(args.repeat):
                rec = srift.recommend(prof, global_batch=q["global_batch"], iterations=q["iterations"],
                                      catalog=catalog, regions="all", spot=True, max_types=3,
                                      max_instances_per_type=64, threads=1, **ask)
                times.append(rec.search.seconds)
            # v0 reference: exhaustive over <= 2 types x <= 16 instances, same offers.
            space = _Space(prof, catalog, global_batch=q["global_batch"], iterations=q["iterations"],
                           regions="all", markets=("on-demand", "spot"), instance_types=None, exclude=None,
                           max_instances_per_type=16, config=None, precision=None)
            req = space.request
            req.objective = _core.Objective.min_cost if objective == "min_cost" else _core.Objective.max_throughput
            req.deadline_s = ask.get("deadline_hours", float("inf")) * 3600
            req.budget_usd = ask.get("budget_usd", float("inf"))
            req.max_types, req.threads, req.top_k = 2, 1, 1
            t0 = time.perf_counter()
            ex = _core.search_exhaustive(req)
            exhaustive_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            bb = _core.search(req)
            bnb_same_space_s = time.perf_counter() - t0
            same = (not ex.plans and not bb.plans) or (
                ex.plans and bb.plans and abs(ex.plans[0].total_usd - bb.plans[0].total_usd) <= 1e-9 * ex.plans[0].total_usd
                and abs(ex.plans[0].total_s - bb.plans[0].total_s) <= 1e-9 * ex.plans[0].total_s)
            confident = {}
            if objective == "min_cost":
                sure_times, sure = [], None
                for _ in range(args.repeat):
                    sure = srift.recommend(prof, global_batch=q["global_batch"], iterations=q["iterations"],
                                           catalog=catalog, regions="all", spot=True, max_types=3,
                                           max_instances_per_type=64, threads=1, deadline_confidence=args.confidence,
                                           **ask)
                    sure_times.append(sure.search.seconds)
                confident = {
                    "confident_search_s_median": statistics.median(sure_times),
                    "confidence_time_ratio": statistics.median(sure_times) / statistics.median(times),
                    "confident_best": str(sure.best.cluster) if sure.best else None,
                    "confident_total_usd": sure.best.total_usd if sure.best else None,
                    "confident_deadline_probability": sure.best.deadline_probability if sure.best else None,
                    "plain_best_deadline_probability": rec.best.deadline_probability if rec.best else None}
            best = rec.best
            row = {"model": model_name, "objective": objective, **ask, **confident,
                   "search_s_median": statistics.median(times), "space": rec.search.space,
                   "simulated": rec.search.evaluated, "nodes": rec.search.nodes, "optimal": rec.search.optimal,
                   "best": str(best.cluster) if best else None,
                   "total_hours": best.total_hours if best else None, "total_usd": best.total_usd if best else None,
                   "v0_space_exhaustive_s": exhaustive_s, "v0_space_evaluated": ex.stats.evaluated,
                   "v0_space_bnb_s": bnb_same_space_s, "v0_space_equal_optimum": bool(same),
                   "speedup_on_v0_space": exhaustive_s / bnb_same_space_s}
            rows.append(row)
            print(f"{model_name:10s} {objective:14s} {list(ask.values())[0]:>7}: {row['search_s_median'] * 1e3:7.2f} ms "
                  f"over {row['space']:.2e} plans ({row['simulated']} simulated) -> {row['best']} "
                  f"| v0 space: exhaustive {exhaustive_s * 1e3:.0f} ms vs B&B {bnb_same_space_s * 1e3:.2f} ms "
                  f"(x{row['speedup_on_v0_space']:.0f}), equal optimum {row['v0_space_equal_optimum']}")
            if confident:
                p_plain = confident["plain_best_deadline_probability"]
                print(f"{'':10s} {'':14s} {'':>7}  at confidence {args.confidence}: "
                      f"{confident['confident_search_s_median'] * 1e3:7.2f} ms (x{confident['confidence_time_ratio']:.2f} "
                      f"the plain search) -> {confident['confident_best']}"
                      + (f" ${confident['confident_total_usd']:.2f}" if confident["confident_best"] else "")
                      + (f"; the plain answer meets it with probability {p_plain:.2f}" if p_plain is not None else ""))
    result = {"benchmark": "bench_recommend", "commit": _commit(), "confidence": args.confidence, "machine": platform.machine(),
              "cpus": os.cpu_count(), "threads": 1, "catalog_regions": len(catalog.regions), "rows": rows,
              "max_search_s": max(r["search_s_median"] for r in rows)}
    print(f"slowest question: {result['max_search_s'] * 1e3:.1f} ms")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
