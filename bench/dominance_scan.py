#!/usr/bin/env python3
"""Dominance over the catalog: how often srift predicts a GPU that beats another on every spec
(srift.learn.dominance.dominates) slower than it, as the engine predicts (srift::LearnedCompute).

Measured, a dominating GPU is never more than 2% behind the GPU it dominates (srift.learn.
dominance note "dominance"), so every such prediction is a model error. Two sweeps:
- anchored: every workload of the shipped table (srift.learn.workloads), precision, anchor GPU
  (H100, A100, L4, A10G, T4, V100) and batch (8, 32, 128), the anchor's run set at 0.7x, 1x and
  1.4x its own no-measurement prediction, every ordered pair of catalog GPUs;
- no measurement: every workload, precision and batch.
A break counts when the dominating GPU is more than 0.01% slower; they are grouped by whether
one GPU of the pair is past the data's edge (note "data edge") and by precision, and the worst
ratio of each (precision, pair) is listed.

    python bench/dominance_scan.py [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys

ANCHORS = ("H100-80GB", "A100-40GB", "L4", "A10G", "T4", "V100-16GB")
BATCHES = (8.0, 32.0, 128.0)
RUN_FACTORS = (0.7, 1.0, 1.4)
TOLERANCE = 1.0001


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()

    from srift import _core
    from srift.catalog import Catalog
    from srift.learn.dominance import dominates
    from srift.learn.features import PRECISIONS, core_precision, core_workload_stats, gpu_spec
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.models import default_models
    from srift.learn.workloads import load_workloads

    cat = Catalog.default()
    gpus = {k: peaks_from_catalog(cat, k) for k in cat.gpu_keys()}
    models = default_models()
    lc, edge_year = models.learned_compute, models.data_edge()[0]
    past = {k for k, g in gpus.items() if edge_year > 0 and g.launch_year > edge_year}
    workloads = load_workloads()

    def total(m, b: float) -> float:
        return m.compute_s(b) + m.optimizer_s

    pairs = 0
    breaks: collections.Counter = collections.Counter()
    worst: dict[tuple, dict] = {}

    def count(kind: str, prec: str, t: dict[str, float], where: dict) -> None:
        nonlocal pairs
        for x, y in itertools.permutations(gpus, 2):
            if not dominates(gpus[x], gpus[y], prec):
                continue
            pairs += 1
            if t[x] > TOLERANCE * t[y]:
                group = "past the edge" if (x in past) != (y in past) else "inside"
                breaks[(kind, group, prec)] += 1
                key = (kind, prec, x, y)
                ratio = t[x] / t[y]
                if ratio > worst.get(key, {}).get("ratio", 0.0):
                    worst[key] = {"ratio": round(ratio, 4), **where}

    for key in sorted(workloads):
        stats = core_workload_stats(workloads[key])
        for prec in PRECISIONS:
            p = core_precision(prec)
            for batch in BATCHES:
                own = {k: lc.predict_absolute(stats, gpu_spec(g), p, batch).model for k, g in gpus.items()}
                count("no_measurement", prec, {k: total(m, batch) for k, m in own.items()},
                      {"workload": key, "batch": batch})
                for anchor, factor in itertools.product(ANCHORS, RUN_FACTORS):
                    run = [_core.Measurement(batch, factor * total(own[anchor], batch))]
                    t = {k: total(lc.predict_anchored(stats, gpu_spec(gpus[anchor]), run, gpu_spec(g), p).model, batch)
                         for k, g in gpus.items()}
                    count("anchored", prec, t, {"workload": key, "batch": batch, "anchor": anchor,
                                                "run_over_own_prediction": factor})
    result = {
        "benchmark": "dominance_scan", "dominating_pairs": pairs, "tolerance": TOLERANCE,
        "breaks": {f"{k}/{g}/{p}": n for (k, g, p), n in sorted(breaks.items())},
        "breaks_total": sum(breaks.values()),
        "largest": max((w["ratio"] for w in worst.values()), default=1.0),
        "worst": [{"kind": k, "precision": p, "faster_on_paper": x, "slower_on_paper": y, **w}
                  for (k, p, x, y), w in sorted(worst.items(), key=lambda kv: -kv[1]["ratio"])[:20]],
    }
    json.dump(result, sys.stdout, indent=1)
    print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
