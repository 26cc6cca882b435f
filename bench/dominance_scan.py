#!/usr/bin/env python3
"""Dominance over the catalog: how often srift predicts a GPU that beats another on every spec
(srift.learn.dominance.dominates) slower than it, as the engine predicts (srift::LearnedCompute).

Measured, a dominating GPU is never more than 2% behind the GPU it dominates (srift.learn.
dominance note "dominance"), so every such prediction is a model error. Two sweeps:
- anchored: every workload of the shipped table (srift.learn.workloads), precision, anchor GPU
  (H100, A100, L4, A10G, T4, V100) and batch (8, 32, 128), the anchor's run set at 0.7x, 1x and
  1.4x its own no-measurement prediction, every ordered pair of catalog GPUs;
- no measurement: every workload, precision and batch.
Both fit every GPU's line on the default grid (batch_grid of the batch: 1..1024 here). With
--small, as the engine predicts a small batch instead: batches 1, 2, 4 and 8, each GPU's line
fitted on its own memory limit's grid (srift.Engine.memory_max_batch: GPUs with more memory
get longer grids), over the shipped workloads (profiled on meta for their memory) and the six
models of bench/unlike_models.py (profiled on the CPU, ~1 minute), each reference bounding a
target with its own line on its own grid as the engine passes them (srift.Engine.grid_ends,
srift::LearnedCompute note "own grids"; --no-grid-ends: on the target's grid, as before them).
A break counts when the dominating GPU is more than 0.01% slower; they are grouped by whether
one GPU of the pair is past the data's edge (note "data edge": launched after it, with no
training GPU's specs) and by precision, and the worst
ratio of each (precision, pair) is listed.

    python bench/dominance_scan.py [--small [--no-grid-ends]] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys

ANCHORS = ("H100-80GB", "A100-40GB", "L4", "A10G", "T4", "V100-16GB")
BATCHES = (8.0, 32.0, 128.0)
SMALL_BATCHES = (1.0, 2.0, 4.0, 8.0)
RUN_FACTORS = (0.7, 1.0, 1.4)
TOLERANCE = 1.0001


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("--small", action="store_true",
                    help="batches 1-8 on each GPU's memory grid, with bench/unlike_models.py's models")
    ap.add_argument("--no-grid-ends", action="store_true",
                    help="with --small: the references' lines on the target's grid (no grid ends passed)")
    args = ap.parse_args()

    from srift import _core
    from srift.catalog import Catalog
    from srift.learn.data_edge import past_the_edge
    from srift.learn.dominance import dominates
    from srift.learn.features import PRECISIONS, core_precision, core_workload_stats, gpu_spec
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.models import default_models
    from srift.learn.workloads import load_workloads

    cat = Catalog.default()
    gpus = {k: peaks_from_catalog(cat, k) for k in cat.gpu_keys()}
    models = default_models()
    lc, edge_year = models.learned_compute, models.data_edge()[0]
    # past the edge at each precision: launched after it, with no training GPU's specs (B300 has B200's)
    refs = [*models._ratio_references, *models._references]
    past = {prec: {k for k, g in gpus.items() if past_the_edge(g, edge_year, refs, prec)} for prec in PRECISIONS}
    workloads = {k: (w, None) for k, w in load_workloads().items()}
    batches = BATCHES
    if args.small:
        workloads, batches = small_batch_workloads(cat), SMALL_BATCHES

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
                group = "past the edge" if (x in past[prec]) != (y in past[prec]) else "inside"
                breaks[(kind, group, prec)] += 1
                key = (kind, prec, x, y)
                ratio = t[x] / t[y]
                if ratio > worst.get(key, {}).get("ratio", 0.0):
                    worst[key] = {"ratio": round(ratio, 4), **where}

    for key in sorted(workloads):
        info, profile = workloads[key]
        stats = core_workload_stats(info)
        # one cache per workload (srift::LearnedCompute::Cache, bit-identical to fresh calls; one
        # memo per table of grid ends, note "own grids"): every target's references' lines and
        # the models' outputs are computed once, not once per target, anchor and run
        cache = _core.LearnedComputeCache(stats)
        for prec in PRECISIONS:
            p = core_precision(prec)
            limits, ends = memory_limits(profile, cat, prec)
            if args.no_grid_ends:
                ends = []
            for batch in batches:
                # the grid's span: the engine's memory limit with --small, else the batch (1..1024)
                span = {k: limits[k] if limits else batch for k in gpus}
                own = {k: lc.predict_absolute_cached(cache, gpu_spec(g), p, span[k], ends).model
                       for k, g in gpus.items()}
                count("no_measurement", prec, {k: total(m, batch) for k, m in own.items()},
                      {"workload": key, "batch": batch})
                for anchor, factor in itertools.product(ANCHORS, RUN_FACTORS):
                    run = [_core.Measurement(batch, factor * total(own[anchor], batch))]
                    on = [_core.Anchor(gpu_spec(gpus[anchor]), run)]  # one anchor: predict_anchored's own
                    t = {k: total(lc.predict_anchored_several_cached(cache, on, gpu_spec(g), p,
                                                                     span[k] if limits else 0.0, ends).model, batch)
                         for k, g in gpus.items()}
                    count("anchored", prec, t, {"workload": key, "batch": batch, "anchor": anchor,
                                                "run_over_own_prediction": factor})
    by_kind = {kind: {"breaks": sum(n for (k, _, _), n in breaks.items() if k == kind),
                      "largest": max((w["ratio"] for (k, *_), w in worst.items() if k == kind), default=1.0)}
               for kind in ("no_measurement", "anchored")}
    result = {
        "benchmark": "dominance_scan", "small": args.small, "grid_ends": args.small and not args.no_grid_ends,
        "batches": list(batches),
        "dominating_pairs": pairs, "tolerance": TOLERANCE, "by_kind": by_kind,
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


def small_batch_workloads(cat) -> dict:
    """{key: (WorkloadInfo, Profile)}: the shipped workloads, profiled on meta as srift.learn.
    workloads profiles them (for their memory per sample), and bench/unlike_models.py's models
    ("unlike/" + name), profiled on the CPU as that bench profiles them."""
    import os
    import warnings

    import srift
    from srift import zoo
    from srift.learn.workloads import CPU_ONLY_MODELS, DATA_MODELS, PROFILE_BATCH, workload_from_profile

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import unlike_models

    builds = {key: (name, options) for key, name, options, _ in DATA_MODELS.values()}
    builds.update(CPU_ONLY_MODELS)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, (name, options) in sorted(builds.items()):
            model, batch, loss_fn = zoo.build(name, PROFILE_BATCH.get(name, 2), device="meta", **options)
            prof = srift.profile(model, batch, loss_fn, device="meta", name=key)
            out[key] = (workload_from_profile(prof, key), prof)
        for name in unlike_models.MODELS:
            prof = unlike_models.profile_of(name)
            out["unlike/" + name] = (workload_from_profile(prof, name), prof)
    return out


def memory_limits(profile, cat, precision: str) -> tuple[dict[str, float] | None, list[tuple[float, float]]]:
    """({catalog GPU: the largest local batch that fits it}, each memory's grid end) as the engine
    takes them for the grids (srift.Engine.memory_max_batch and grid_ends); (None, []) without a
    profile."""
    if profile is None:
        return None, []
    import warnings

    from srift.engine import Engine, EngineConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(profile, cat, EngineConfig(precision=precision))
        return {k: eng.memory_max_batch(k) for k in cat.gpu_keys()}, eng.grid_ends()


if __name__ == "__main__":
    main()
