#!/usr/bin/env python3
"""B300 against B200: a GPU past the data's edge with a training GPU's specs (srift::LearnedCompute
note "data edge").

The catalog's B300 (2025, past the shipped models' edge of 2024) has exactly the B200's specs
(srift/data/gpu_specs.csv), and B200 is a training GPU. Prints the range of B300's predicted
time over B200's, as the core predicts them (the same grid for both, so that only the rule
differs), over the shipped workloads (srift.learn.workloads: the zoo's models), precisions and
batches 8, 32 and 128:
- no measurement;
- anchored on a T4, an A10G and an H100, the anchor's run set at its own no-measurement
  prediction at the batch;
- measured on the B300 against measured on the B200 (the same run), predicting the T4, A10G
  and H100 (the anchor's lean, where it has one, divides);
and the same ratio through srift.predict (1x p6-b300.48xlarge against 1x p6-b200.48xlarge, each
on its own memory limit's grid, as the engine predicts) for the zoo's models at a global batch
of 64, with the compute_source of each.

    python bench/edge_same_specs.py [--no-engine]
"""
from __future__ import annotations

import argparse
import warnings

ANCHORS = ("T4", "A10G", "H100-80GB")
BATCHES = (8.0, 32.0, 128.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-engine", action="store_true", help="the core's ratios only, not srift.predict's")
    args = ap.parse_args()

    from srift import _core
    from srift.catalog import Catalog
    from srift.learn.features import PRECISIONS, core_precision, core_workload_stats, gpu_spec
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.models import default_models
    from srift.learn.workloads import load_workloads

    cat = Catalog.default()
    spec = {k: gpu_spec(peaks_from_catalog(cat, k)) for k in ("B200", "B300", *ANCHORS)}
    lc = default_models().learned_compute

    def total(m, b: float) -> float:
        return m.compute_s(b) + m.optimizer_s

    ratios: dict[str, list[float]] = {"no measurement": [], **{f"anchored on {a}": [] for a in ANCHORS},
                                      **{f"measured on B300 vs B200, predicting {a}": [] for a in ANCHORS}}
    past = {"B200": set(), "B300": set()}
    for key, info in sorted(load_workloads().items()):
        stats = core_workload_stats(info)
        for prec in PRECISIONS:
            p = core_precision(prec)
            for b in BATCHES:
                r = {g: lc.predict_absolute(stats, spec[g], p, b) for g in ("B200", "B300")}
                for g, x in r.items():
                    past[g].add(x.past_data_edge)
                ratios["no measurement"].append(total(r["B300"].model, b) / total(r["B200"].model, b))
                for a in ANCHORS:
                    run = [_core.Measurement(b, total(lc.predict_absolute(stats, spec[a], p, b).model, b))]
                    t = {g: total(lc.predict_anchored(stats, spec[a], run, spec[g], p, b).model, b)
                         for g in ("B200", "B300")}
                    ratios[f"anchored on {a}"].append(t["B300"] / t["B200"])
                    run = [_core.Measurement(b, total(r["B200"].model, b))]
                    t = {g: total(lc.predict_anchored(stats, spec[g], run, spec[a], p, b).model, b)
                         for g in ("B200", "B300")}
                    ratios[f"measured on B300 vs B200, predicting {a}"].append(t["B300"] / t["B200"])
    print(f"B300 / B200 predicted time, the core ({len(ratios['no measurement'])} workload x precision x batch cases each)")
    for k, v in ratios.items():
        print(f"  {k:45s} min {min(v):.4f}  max {max(v):.4f}")
    print(f"  past_data_edge with no measurement: B200 {sorted(past['B200'])}, B300 {sorted(past['B300'])}")
    if args.no_engine:
        return

    import srift

    out, sources = [], set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in srift.zoo.names():
            model, batch, loss = srift.zoo.build(name, batch_size=2, device="meta")
            prof = srift.profile(model, batch, loss_fn=loss, device="meta")
            for prec in PRECISIONS:
                g = {c: srift.predict(prof, f"1x {c}", global_batch=64, precision=prec).groups[0]
                     for c in ("p6-b300.48xlarge", "p6-b200.48xlarge")}
                out.append(g["p6-b300.48xlarge"].compute_s / g["p6-b200.48xlarge"].compute_s)
                sources.add((g["p6-b300.48xlarge"].compute_source, g["p6-b200.48xlarge"].compute_source))
    print(f"srift.predict, 1x p6-b300.48xlarge / 1x p6-b200.48xlarge compute at global batch 64 "
          f"({len(out)} zoo model x precision cases): min {min(out):.4f}  max {max(out):.4f}")
    print(f"  compute_source (B300, B200): {sorted(sources)}")


if __name__ == "__main__":
    main()
