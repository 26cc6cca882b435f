#!/usr/bin/env python3
"""srift v0 speed: one srift.predict call, and clusters per second the core evaluates in search.

Each figure comes with a baseline measured in the same run, and ratios are what to compare
across machines (this machine is shared and noisy):
- predict: the full Python API call vs the bare core simulate() call it wraps.
- search: clusters/s the core simulates when it enumerates a space (search_exhaustive over
  <= 2 types x <= 16 instances in one region, 1 and N threads) vs a loop of srift.predict
  calls over the same kind of clusters, the way one would sweep without the core; and the
  time srift.recommend's branch-and-bound takes to the optimum of the same question (it
  simulates only a few clusters, so clusters/s says nothing about it).
- compute models: what an Engine builds once per profile, the compute model of every catalog
  GPU, as shipped (clipped by dominance: srift.learn.dominance) vs the same models unclipped,
  with no measurement and anchored on a T4 run; then the same for --model and --cases-model
  (bert_base) at FP32 (PyTorch's default) and AMP, each anchored on a T4 run at its precision
  or not (the anchored FP32 models were the costliest, docs/accuracy.md "Line by line").

    python bench/bench_predict.py [--model resnet50] [--repeats 200] [--json out.json]
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
import warnings


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()
    except Exception:  # noqa: BLE001 - a benchmark outside a checkout still runs
        return "unknown"


def _median_seconds(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--cluster", default="2x p3.16xlarge + 4x g4dn.12xlarge")
    parser.add_argument("--global-batch", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--baseline-clusters", type=int, default=300,
                        help="srift.predict calls in the sweep baseline")
    parser.add_argument("--cases-model", default="bert_base",
                        help="a second zoo model whose compute models are timed per precision and anchoring too")
    parser.add_argument("--case-repeats", type=int, default=7,
                        help="Engine builds per case (shipped and unclipped each), median taken")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)

    import srift
    from srift import _core
    from srift.engine import Engine
    from srift.torch_support import TorchSupportWarning

    model, batch, loss_fn = srift.zoo.build(args.model, batch_size=4, device="meta")
    prof = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name=args.model)
    catalog = srift.Catalog.default()

    # --- one predict call vs the core call inside it --------------------------------------
    engine = Engine(prof, catalog)
    srift.predict(prof, args.cluster, args.global_batch, catalog=catalog, engine=engine)  # warm caches
    predict_s = _median_seconds(
        lambda: srift.predict(prof, args.cluster, args.global_batch, catalog=catalog, engine=engine), args.repeats)
    # the same call with the PyTorch wheel check off (srift.torch_support): what the check costs
    unchecked_predict_s = _median_seconds(
        lambda: srift.predict(prof, args.cluster, args.global_batch, catalog=catalog, engine=engine, torch="source"),
        args.repeats)
    cold_predict_s = _median_seconds(
        lambda: srift.predict(prof, args.cluster, args.global_batch, catalog=catalog), max(10, args.repeats // 10))
    cluster = srift.Cluster.parse(args.cluster)
    region = srift.predict(prof, cluster, args.global_batch, catalog=catalog, engine=engine).region
    groups = [(engine.instance_spec(g.instance_type), g.count, engine.instance_compute(g.instance_type)[0],
               float(catalog.price(g.instance_type, region, g.market))) for g in cluster.groups]
    core_s = _median_seconds(lambda: _core.simulate(engine.workload, groups, args.global_batch), args.repeats)

    # --- search throughput: the core enumerating a space ------------------------------------
    from srift.planning import _Space

    space = _Space(prof, catalog, global_batch=args.global_batch, iterations=100_000, regions="us-east-1",
                   markets=("on-demand",), instance_types=None, exclude=None, max_instances_per_type=16,
                   config=None, precision=None)
    request = space.request
    request.objective = _core.Objective.min_cost
    request.deadline_s = 24 * 3600.0
    request.max_types, request.top_k = 2, 1
    search = {}
    for threads in sorted({1, args.threads}):
        request.threads = threads
        t0 = time.perf_counter()
        ex = _core.search_exhaustive(request)
        seconds = time.perf_counter() - t0
        search[threads] = {"evaluated": ex.stats.evaluated, "seconds": seconds,
                           "clusters_per_s": ex.stats.evaluated / seconds}
    rec = srift.recommend(prof, global_batch=args.global_batch, iterations=100_000, deadline_hours=24,
                          catalog=catalog, regions="us-east-1", threads=1, max_instances_per_type=16, max_types=2)
    bnb = {"seconds": rec.search.seconds, "simulated": rec.search.evaluated, "space": rec.search.space,
           "same_optimum": bool(ex.plans) and rec.best is not None
           and abs(ex.plans[0].total_usd - rec.best.total_usd) <= 1e-9 * rec.best.total_usd}

    # --- baseline: a Python loop of srift.predict over clusters of the same space ----------
    offers = catalog.offers("us-east-1", ["on-demand"])
    names = [o.instance for o in offers]
    sweep = []
    for i in range(args.baseline_clusters):
        a, b = names[i % len(names)], names[(7 * i + 3) % len(names)]
        sweep.append(f"{1 + i % 3}x {a} + {1 + (i // 3) % 3}x {b}" if a != b else f"{1 + i % 3}x {a}")
    t0 = time.perf_counter()
    done = 0
    with warnings.catch_warnings():
        # clusters no official wheel of the installed torch runs (a V100 with a B200, a g5g's
        # arm64 T4) are predicted with a TorchSupportWarning each: printing 60 of them is not
        # predict's cost, and buried the figures
        warnings.simplefilter("ignore", TorchSupportWarning)
        for text in sweep:
            try:
                srift.predict(prof, text, args.global_batch, catalog=catalog, engine=engine, region="us-east-1")
            except ValueError:
                pass  # e.g. more GPUs than samples: still a cluster the loop had to look at
            done += 1
    loop_rate = done / (time.perf_counter() - t0)

    # --- compute models of every catalog GPU, what an Engine builds once per profile: as shipped
    # (clipped by dominance, srift.learn.dominance) vs the same models unclipped --------------
    from srift.learn.models import default_models

    learned = default_models()
    anchored = srift.Profile.from_dict(prof.to_dict())
    anchored.add_measurement("T4", local_batch=32, iteration_s=0.21)

    def build_all(p) -> None:
        e = Engine(p, catalog)
        for key in catalog.gpu_keys():
            e.compute_model(key)

    def python_twin(p) -> None:
        # The same no-measurement models composed in Python (srift.learn.dominance,
        # srift.learn.models.absolute_on_grid: what the engine ran before the core did).
        from srift.learn.dominance import guarded_correction
        from srift.learn.features import roofline
        from srift.learn.gpus import peaks_from_catalog
        from srift.learn.models import absolute_on_grid
        from srift.learn.workloads import workload_from_profile

        wl = workload_from_profile(p)
        for key in catalog.gpu_keys():
            g = peaks_from_catalog(catalog, key)
            absolute_on_grid(roofline(wl, g, "amp"), lambda grid: guarded_correction(
                learned.absolute.core.predict, wl, g, grid, "amp", learned._references), None, token_slope=True)

    clip = {}
    for label, p in (("no_measurement", prof), ("anchored_on_T4", anchored)):
        shipped_s = _median_seconds(lambda: build_all(p), 5)
        saved = learned._references, learned._ratio_references, learned._learned_compute
        learned._references, learned._ratio_references, learned._learned_compute = [], [], None
        try:
            unclipped_s = _median_seconds(lambda: build_all(p), 5)
        finally:
            learned._references, learned._ratio_references, learned._learned_compute = saved
        clip[label] = {"gpus": len(catalog.gpu_keys()), "shipped_s": shipped_s, "unclipped_s": unclipped_s,
                       "ratio": shipped_s / unclipped_s}
    twin_s = _median_seconds(lambda: python_twin(prof), 5)
    clip["no_measurement"]["python_twin_s"] = twin_s

    # --- the same per model and precision: the hot path of a sweep or `srift recommend` over the
    # catalog (--cases-model's FP32 anchored on a T4 was the costliest: docs/accuracy.md "Line by
    # line: small batches"), each shipped vs unclipped in this run ----------------------------
    from srift.engine import EngineConfig, with_overrides

    cases = {}
    for name in dict.fromkeys([args.model, args.cases_model]):
        if name == args.model:
            base = prof
        else:
            m2, b2, l2 = srift.zoo.build(name, batch_size=4, device="meta")
            base = srift.profile(m2, b2, loss_fn=l2, device="meta", name=name)
        for precision in ("fp32", "amp"):
            d = base.to_dict()
            d["precision"] = precision
            plain = srift.Profile.from_dict(d)
            on_t4 = srift.Profile.from_dict(d)
            on_t4.add_measurement("T4", local_batch=32, iteration_s=0.21, precision=precision)
            config = with_overrides(EngineConfig(), precision=precision)
            for label, p in (("no_measurement", plain), ("anchored_on_T4", on_t4)):
                def build_case(p=p, config=config) -> None:
                    e = Engine(p, catalog, config)
                    for key in catalog.gpu_keys():
                        e.compute_model(key)

                shipped_s = _median_seconds(build_case, args.case_repeats)
                saved = learned._references, learned._ratio_references, learned._learned_compute
                learned._references, learned._ratio_references, learned._learned_compute = [], [], None
                try:
                    unclipped_s = _median_seconds(build_case, args.case_repeats)
                finally:
                    learned._references, learned._ratio_references, learned._learned_compute = saved
                cases[f"{name}/{precision}/{label}"] = {"shipped_s": shipped_s, "unclipped_s": unclipped_s,
                                                         "ratio": shipped_s / unclipped_s}

    best_threads = max(search)
    result = {
        "benchmark": "bench_predict", "commit": _commit(), "machine": platform.machine(),
        "python": platform.python_version(), "cpus": os.cpu_count(), "model": args.model,
        "cluster": args.cluster, "global_batch": args.global_batch,
        "predict_s": predict_s, "predict_unchecked_s": unchecked_predict_s, "predict_cold_s": cold_predict_s, "core_simulate_s": core_s,
        "predict_over_core": predict_s / core_s,
        "search_exhaustive": {str(k): v for k, v in search.items()},
        "recommend_branch_and_bound": bnb,
        "baseline_predict_loop_clusters_per_s": loop_rate,
        "engine_compute_models": clip,
        "engine_compute_models_by_case": cases,
        "search_speedup_vs_predict_loop_1thread": search[1]["clusters_per_s"] / loop_rate,
        f"search_speedup_{best_threads}_threads_vs_1": search[best_threads]["clusters_per_s"] / search[1]["clusters_per_s"],
    }
    print(f"srift.predict ({args.cluster}, batch {args.global_batch}): {predict_s * 1e6:.0f} us "
          f"(cold, engine rebuilt: {cold_predict_s * 1e3:.2f} ms); core simulate alone {core_s * 1e6:.1f} us "
          f"-> Python API overhead x{predict_s / core_s:.0f}; with the wheel check off (torch='source') "
          f"{unchecked_predict_s * 1e6:.0f} us (the check x{predict_s / unchecked_predict_s:.2f})")
    for threads, s in search.items():
        print(f"core enumerating (search_exhaustive), {threads} thread(s): {s['evaluated']:,} clusters in "
              f"{s['seconds'] * 1e3:.0f} ms = {s['clusters_per_s'] / 1e6:.2f} M clusters/s")
    print(f"baseline, loop of srift.predict: {loop_rate:,.0f} clusters/s -> the core is "
          f"x{result['search_speedup_vs_predict_loop_1thread']:,.0f} faster on one thread")
    print(f"srift.recommend's branch-and-bound on the same question: {bnb['seconds'] * 1e3:.2f} ms, "
          f"{bnb['simulated']} clusters simulated of {bnb['space']:,.0f}; same optimum: {bnb['same_optimum']}")
    for label, c in clip.items():
        print(f"compute models of all {c['gpus']} catalog GPUs ({label.replace('_', ' ')}): "
              f"{c['shipped_s'] * 1e3:.1f} ms as shipped vs {c['unclipped_s'] * 1e3:.1f} ms unclipped "
              f"(x{c['ratio']:.1f}: the dominance clip)")
    c = clip["no_measurement"]
    print(f"the same no-measurement models composed in Python (the training twin): {c['python_twin_s'] * 1e3:.1f} ms "
          f"-> the core's engine path is x{c['python_twin_s'] / c['shipped_s']:.1f} faster")
    for key, c in cases.items():
        print(f"compute models of all catalog GPUs, {key.replace('_', ' ')}: {c['shipped_s'] * 1e3:.1f} ms as shipped "
              f"vs {c['unclipped_s'] * 1e3:.1f} ms unclipped (x{c['ratio']:.1f})")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    else:
        json.dump(result, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
