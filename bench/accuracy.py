"""Accuracy of srift's learned models against baselines computed in the same run.

Prints JSON lines: median and p90 absolute percentage error of per-sample / iteration time for
  compute_leave_one_gpu_out   single-GPU compute, anchored on another GPU's measurement
  compute_absolute_logo       single-GPU compute with no measurement at all
  compute_leave_one_model_out anchored cross-GPU compute for a model never seen in training
  multi_gpu_leave_one_cluster_out  Sia multi-GPU steps, given the test cluster's 1-GPU steps
  multi_node_instance_anchored     Sia multi-node steps, given the test cluster's 1-GPU and
                                   single-node steps (a whole instance profiled; nothing learned
                                   from other clusters: srift.learn.comm note "instance anchor")
  allreduce_tcp_leave_one_{rate,shape}_out  gloo allreduce time per message size on emulated
                                   TCP links (srift/data/measurements), a NIC rate or host shape
                                   held out: the learned link model vs v0 (80% of nominal, 30 us)
  nccl_reported_sanity             public NCCL bus bandwidths on EC2 beside v0's (anecdotal)
beside "linear" (perfect linear scaling / peak-FLOPs ratio) and "v0" (roofline / nominal
links). Usage: python bench/accuracy.py [--models ridge,huber,gbdt,mlp]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import warnings

import numpy as np

from srift.learn.comm import build_cases, instance_anchored_steps, overhead_dataset, site
from srift.learn.datasets import compute_rows, sia_rows
from srift.learn.train import absolute_dataset, ape, candidates, git_commit, loco_errors, ratio_dataset
from srift.learn.workloads import load_workloads


def stats(e: np.ndarray) -> dict[str, float]:
    return {"median_ape": round(float(np.median(e)), 2), "p90_ape": round(float(np.quantile(e, 0.9)), 2),
            "n": int(e.size)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="ridge,huber,gbdt,mlp")
    args = ap.parse_args()
    kinds = args.models.split(",")
    header = {"machine": platform.node(), "threads": os.cpu_count(), "commit": git_commit()}
    print(json.dumps({"header": header}))
    w = load_workloads()
    rows = compute_rows()
    X, y, base, truth, meta = ratio_dataset(rows, w)
    peak = np.array([f[1] for f in X])
    for split in ("chip", "model"):
        out = {"split": f"compute_leave_one_{'gpu' if split == 'chip' else 'model'}_out",
               "linear_peak_ratio": stats(ape(-peak, truth)), "v0_roofline": stats(ape(base, truth))}
        for k in kinds:
            pred, mask, _ = loco_errors(X, y, meta, candidates()[k], split)
            out[k] = stats(ape(pred[mask] + base[mask], truth[mask]))
        print(json.dumps(out))
    X, y, base, truth, meta = absolute_dataset(rows, w)
    out = {"split": "compute_absolute_leave_one_gpu_out", "v0_roofline": stats(ape(base, truth))}
    for k in kinds:
        pred, mask, _ = loco_errors(X, y, meta, candidates()[k], "chip")
        out[k] = stats(ape(pred[mask] + base[mask], truth[mask]))
    print(json.dumps(out))
    rows = sia_rows()
    cases = build_cases(rows)
    X, y, base, truth = overhead_dataset(cases, w)
    sites = np.array([site(c.cluster) for c in cases])
    multinode = np.array([len(c.placement) > 1 for c in cases])
    preds = {}
    for k in kinds:
        p = np.full(len(y), np.nan)
        for g in sorted(set(sites)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = candidates()[k]().fit(X[sites != g], y[sites != g])
            p[sites == g] = est.predict(X[sites == g])
        preds[k] = p + base
    for label, sel in (("all_multi_gpu", np.ones(len(y), bool)), ("multi_node", multinode)):
        for g in [*sorted(set(sites)), "ALL"]:
            m = sel & ((sites == g) if g != "ALL" else True)
            if m.sum() == 0:
                continue
            out = {"split": f"multi_gpu_leave_one_cluster_out/{label}/{g}",
                   "linear_scaling": stats(ape(np.zeros(m.sum()), truth[m])), "v0_simulator": stats(ape(base[m], truth[m]))}
            for k in kinds:
                out[k] = stats(ape(preds[k][m], truth[m]))
            print(json.dumps(out))
    instance_anchored(cases, w, rows, base, truth, sites)
    links()


def links() -> None:
    import csv

    from srift.catalog import Catalog
    from srift.engine import EngineConfig
    from srift.learn.datasets import data_dir
    from srift.learn.links import configs_from_sweep, held_out_errors, load_sweep

    configs = configs_from_sweep(load_sweep())
    for by in ("rate", "shape"):
        errs = held_out_errors(configs, by)
        print(json.dumps({"split": f"allreduce_tcp_leave_one_{by}_out", **{k: stats(e) for k, e in errs.items()}}))
    cat, cfg = Catalog.default(), EngineConfig()
    with open(data_dir() / "nccl_ec2_reported.csv", newline="") as f:
        for r in csv.DictReader(f):
            if not (r["num_nodes"].isdigit() and r["busbw_GBps"]):
                continue
            it = cat.instance(r["instance_type"])
            v0 = (it.intra_node_gbytes_s * cfg.nvlink_efficiency if int(r["num_nodes"]) == 1
                  else it.network_gbps / 8 * (cfg.efa_network_efficiency if it.efa else cfg.network_efficiency))
            print(json.dumps({"split": "nccl_reported_sanity", "instance": r["instance_type"], "nodes": int(r["num_nodes"]),
                              "reported_busbw_gbytes_s": float(r["busbw_GBps"]), "v0_gbytes_s": round(v0, 2),
                              "source": r["source_url"]}))


def instance_anchored(cases, w, rows, base, truth, sites) -> None:
    steps = instance_anchored_steps(cases, w, rows)
    ok = ~np.isnan(steps)
    pred = np.log(steps / np.array([c.one_gpu_time for c in cases]))
    for g in [*sorted(set(sites[ok])), "ALL"]:
        m = ok & ((sites == g) if g != "ALL" else True)
        print(json.dumps({"split": f"multi_node_instance_anchored/{g}",
                          "linear_scaling": stats(ape(np.zeros(m.sum()), truth[m])),
                          "v0_simulator": stats(ape(base[m], truth[m])),
                          "instance_anchored": stats(ape(pred[m], truth[m]))}))

if __name__ == "__main__":
    main()
