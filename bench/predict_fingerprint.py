#!/usr/bin/env python3
"""Every catalog GPU's compute model and a few srift.predict answers, bit for bit, and what
building them costs: a check that a change made for speed changed no prediction.

For each model x precision x anchoring (no measurement; anchored on a T4 run; anchored on a T4
and an A10G run; one batch measured on the target itself), an Engine builds the compute model of
every catalog GPU (what srift.predict and srift.recommend build once per profile), and
srift.predict answers a few clusters. Every float is written as float.hex, so two runs compare
exactly:

    python bench/predict_fingerprint.py --out before.json
    ... change ...
    python bench/predict_fingerprint.py --out after.json --compare before.json

--compare exits 1 naming the first differences. The seconds each build took (the median of
--repeats) are printed and kept in the file, not compared (a shared machine is noisy).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

MODELS = ("resnet50", "bert_base")
PRECISIONS = ("amp", "fp32")
CLUSTERS = ("1x p3.2xlarge", "2x p3.16xlarge + 4x g4dn.12xlarge", "1x g5.xlarge", "2x p4d.24xlarge",
            "1x g6.xlarge")


def _profiles(name: str, precision: str):
    import srift

    model, batch, loss_fn = srift.zoo.build(name, batch_size=4, device="meta")
    base = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name=name)
    d = base.to_dict()
    d["precision"] = precision
    out = {"no_measurement": srift.Profile.from_dict(d)}
    p = srift.Profile.from_dict(d)
    p.add_measurement("T4", local_batch=32, iteration_s=0.21, precision=precision)
    out["anchored_T4"] = p
    p = srift.Profile.from_dict(d)
    p.add_measurement("T4", local_batch=32, iteration_s=0.21, precision=precision)
    p.add_measurement("A10G", local_batch=16, iteration_s=0.06, precision=precision)
    out["anchored_T4_A10G"] = p
    p = srift.Profile.from_dict(d)
    p.add_measurement("V100", local_batch=64, iteration_s=0.12, precision=precision)
    out["measured_V100"] = p
    return out


def _hex(v: float) -> str:
    return float(v).hex()


def _model_fields(m) -> dict[str, str]:
    return {k: _hex(getattr(m, k)) for k in ("forward_fixed_s", "forward_per_sample_s", "backward_fixed_s",
                                             "backward_per_sample_s", "optimizer_s", "accumulate_s")}


def run(repeats: int) -> tuple[dict, dict]:
    import srift
    from srift.engine import Engine, with_overrides, EngineConfig

    catalog = srift.Catalog.default()
    prints: dict = {}
    seconds: dict = {}
    for name in MODELS:
        for precision in PRECISIONS:
            for label, prof in _profiles(name, precision).items():
                config = with_overrides(EngineConfig(), precision=precision)
                key = f"{name}/{precision}/{label}"

                def build():
                    e = Engine(prof, catalog, config)
                    for gpu in catalog.gpu_keys():
                        e.compute_model(gpu)
                    return e

                samples = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    e = build()
                    samples.append(time.perf_counter() - t0)
                seconds[key] = statistics.median(samples)
                entry = {}
                for gpu in catalog.gpu_keys():
                    model, source = e.compute_model(gpu)
                    p10, p90 = e.compute_interval(gpu)
                    entry[gpu] = {"source": source, "p10": _hex(p10), "p90": _hex(p90), **_model_fields(model)}
                preds = {}
                for cluster in CLUSTERS:
                    pr = srift.predict(prof, cluster, 512, catalog=catalog, config=config, engine=e)
                    preds[cluster] = {"iteration_s": _hex(pr.iteration_s), "p10": _hex(pr.iteration_p10_s),
                                      "p90": _hex(pr.iteration_p90_s), "band_from": list(pr.band_from),
                                      "feasible": pr.feasible,
                                      "groups": [[g.compute_source, _hex(g.compute_s)] for g in pr.groups]}
                prints[key] = {"gpus": entry, "predict": preds}
    return prints, seconds


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}/{k}: only in {'after' if k not in a else 'before'}"
            else:
                yield from _diff(a[k], b[k], f"{path}/{k}")
    elif a != b:
        yield f"{path}: {a!r} -> {b!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", default=None, help="an earlier --out file: exit 1 on any difference")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    prints, seconds = run(args.repeats)
    with open(args.out, "w") as f:
        json.dump({"predictions": prints, "seconds": seconds}, f, indent=1, sort_keys=True)
    before = None
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
    for key, s in seconds.items():
        was = f"  (before {before['seconds'][key] * 1e3:7.1f} ms, x{before['seconds'][key] / s:.2f})" if before else ""
        print(f"{key:38s} {s * 1e3:7.1f} ms{was}")
    total = sum(seconds.values())
    if before:
        was = sum(before["seconds"].values())
        print(f"{'total':38s} {total * 1e3:7.1f} ms  (before {was * 1e3:7.1f} ms, x{was / total:.2f})")
        diffs = list(_diff(before["predictions"], prints))
        n = sum(len(v["gpus"]) + len(v["predict"]) for v in prints.values())
        if diffs:
            print(f"{len(diffs)} differences, e.g.:")
            for d in diffs[:20]:
                print("  " + d)
            return 1
        print(f"bit-identical: {n} compute models and predictions over {len(prints)} model/precision/anchoring cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
