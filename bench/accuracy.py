"""Accuracy of srift's learned models against baselines computed in the same run.

Prints JSON lines: median and p90 absolute percentage error of per-sample / iteration time for
  compute_leave_one_gpu_out   single-GPU compute, anchored on another GPU's measurement
  compute_absolute_leave_one_{gpu,model}_out  single-GPU compute with no measurement at all, a
                              GPU chip or a whole model held out (Lambda's and Gavel's rows:
                              srift.learn.features note "new models"); *_dominance_guard: as
                              shipped, clipped by the model's predictions of the GPUs the
                              target beats or is beaten by on every spec (srift.learn.dominance)
  compute_leave_one_model_out anchored cross-GPU compute for a model never seen in training
  compute_leave_one_{gpu,model}_out_blended  the anchored ratio as shipped: the ratio model
                              blended with the absolute model differenced, then shrunk toward
                              the absolute model's own prediction (srift.learn.blend notes
                              "blend" and "shrink"), overall and by source
  compute_blend_leave_one_source_out  the blend's weight and shrink with a whole lab (Gavel,
                              Sia) held out of both models: whether the absolute model's level
                              transfers to another lab's software stack
  compute_measured_other_batch  a GPU measured at one batch, predicted at another: the
                              measurement scales the roofline's batch curve or the no-measurement
                              model's (srift::LearnedCompute note "measured batch shape");
                              the model's held to the GPU's peak floor (note "measured floor"),
                              beside it without (peak_floor_moved: the predictions it moved);
                              compute_measured_two_batches the same from two batches
  measured_floor_sweep/*      the measured GPU's own curve under its peak floor before and after
                              note "measured floor", over the zoo x catalog GPUs x precisions
  instance_floor_sweep/*      the same for a whole instance's runs (srift::hold_to_measured_floor)
  compute_several_anchors_*   the same held-out predictions by target row: one measured GPU type
                              at a time against the geometric mean of all the group's others
                              (srift::LearnedCompute note "several anchors")
  compute_*_with_cpu_rows     the same, with the CPU rows measured here (srift.learn.cpu_sweep)
                              in the training folds; errors on GPU targets only
  compute_leave_one_gpu_out_engine_path  the anchored model as the engine applies it (the
                              anchor moved along its measured curve to the target's batch, the
                              blended, shrunk, clipped ratio there: srift::LearnedCompute note
                              "anchored batch shape"), beside the engine before that note
  compute_newest_gpus_out/{generation,chip}/*  the rows of the GPUs only Lambda's v2 tables have
                              (H200, GH200, B200) held out together ("generation": what srift
                              predicts for a GPU newer than all its data) or one chip at a time,
                              with no measurement and anchored (on any other chip, and on the
                              H100 SXM5 alone), by target GPU (srift.learn.lambda_v2 note "past
                              the edge")
  compute_forward_in_time/*    each launch year's GPUs from models trained only on older GPUs
                              (srift.learn.train note "forward"), anchored on an older GPU and
                              with no measurement, by year
  compute_pair_ratio_floor/*   what the data allows on Gavel's and Sia's pairs: each (model,
                              precision, anchor chip, target chip)'s measured ratio fitted in
                              hindsight on its own test rows (a constant, a line in log batch),
                              beside the shipped prediction on the same rows
  compute_engine_path_breakdown/*  where the engine path's error above sits: its p90 tail by
                              source, each source's rows by target and anchor chip, model,
                              direction and batch, the pairs whose measurements contradict the
                              GPUs' specs (and the least error any dominance-keeping model makes
                              on them), Lambda's error by batch ratio, Sia's host noise
  compute_absolute_leave_one_gpu_out_engine_path  the absolute model as the engine applies it
                              (one affine model per GPU fitted on a batch grid) vs at each
                              row's own batch vs the old reference-batch-32 scaling
  selection_nested/*          what `srift train`'s own choices (the absolute model's kind, the
                              blend's weight and shrink), made on the splits that score them,
                              flatter: each held-out group scored with the choice the other
                              groups' errors alone make
  compute_cpu_thread_pairs_gpu_trained  the ratio model trained on GPU pairs only, predicting
                              this CPU at 1 thread from 2 threads and back (unseen device family)
  multi_gpu_leave_one_cluster_out  Sia multi-GPU steps, given the test cluster's 1-GPU steps:
                                   the learned iteration correction (ridge, huber, ...) and the
                                   engine's path, learned_pcie_links (v0 links, but a PCIe
                                   cluster's intra-node link from the line fitted on the other
                                   PCIe cluster: srift.learn.pcie_link note "pcie class")
  multi_gpu_engine_misses/*        where the engine's path misses Sia's multi-node steps: its
                                   signed median error by cluster and GPUs per node, and whether
                                   the 1-GPU step's host share (log of it over the
                                   no-measurement model's GPU time) orders the misses (Spearman)
  multi_gpu_link_calibrated        Sia multi-GPU steps, given the test model's 1-GPU steps and
                                   its cluster's links calibrated on the other models, as
                                   `srift probe-network` would measure them (srift.learn.comm
                                   note "probe calibration")
  multi_gpu_single_host_lambda     Lambda's 2/4/8-GPU steps on one host, given the host's 1-GPU
                                   step, by interconnect and GPU count: v0 links, Sia's PCIe line
                                   wherever PCIe is (never fitted on these hosts), and the engine
                                   (the line within its PCIe generation only: srift.learn.host_scaling
                                   note "host scaling")
  multi_gpu_single_host_lambda_v2  the same for Lambda's v2 NVSwitch hosts (H100, H200, B200),
                                   each n-GPU cell given its own machine's 1-GPU run
                                   (srift.learn.host_scaling lambda_v2_host_cases)
  gavel_multi_gpu                  Gavel's 2/4/8-GPU runs of ResNet-18/50 on K80/P100/V100, in
                                   one server or one GPU per server, given the 1-GPU step: the
                                   engine's PCIe line (never fitted on Gavel), v0, linear, and
                                   the probe path (srift.learn.gavel_scaling note "gavel scaling");
                                   multi_gpu_pcie_line_sites: that line refitted with Gavel's servers
  multi_node_instance_anchored     Sia multi-node steps, given the test cluster's 1-GPU and
                                   single-node steps (a whole instance profiled; nothing learned
                                   from other clusters: srift.learn.comm note "instance anchor"),
                                   held to the peak floor as the engine holds it, beside it not
                                   held (not_held_to_the_peak_floor, moved_by_the_floor)
  allreduce_tcp_leave_one_{rate,shape}_out  gloo allreduce time per message size on emulated
                                   TCP links (srift/data/measurements), a NIC rate or host shape
                                   held out: the learned link model vs v0 (80% of nominal, 30 us)
  nccl_reported_sanity             public NCCL bus bandwidths on EC2 beside v0's (anecdotal)
  interval_coverage/*              share of held-out truths inside the p10-p90 band (the anchored
                                   band as shipped: compute_anchored_blend_*), the band
                                   built from the other GPU chips' (clusters') held-out
                                   residuals only (nested leave-one-out; calibrated: 0.8); for
                                   the learned PCIe links, the other PCIe cluster's band
  interval_coverage/scaling_band/*  multi-GPU steps over modelled links (Lambda's hosts, Sia's
                                   NVLink/NVSwitch nodes, Sia's multi-node steps): the share of
                                   each source's steps inside the band fitted on the *other*
                                   sources (srift.learn.scaling_band note "scaling band"), beside
                                   the compute band alone (a measured GPU's noise band), which
                                   is what such predictions carried before
  interval_coverage/measured_band  a measured GPU's band (noise, and per e-fold of batch away
                                   from the measured one) refitted here as `srift train` fits it
                                   beside the shipped one (srift.learn.measured_band note
                                   "measured band"); interval_coverage/measured_other_batch/*:
                                   each source's pairs inside the other source's band and the
                                   shipped one
  interval_coverage/compute_absolute_lab_band, .../compute_absolute_leave_one_lab_out/*  the
                                   no-measurement band across labs (srift.learn.lab_band note
                                   "lab band"): the lab shifts refitted here beside the shipped
                                   ones; each lab's rows with the lab held out, inside the
                                   chip-out band and the shipped (lab-widened) band
  interval_coverage/scaling_band_predicted_compute/lambda  Lambda's host steps with nothing
                                   measured (the 1-GPU time from the no-measurement model, held
                                   out by chip): the compute and scaling bands combined as the
                                   widest of the two or in quadrature (as shipped)
  deadline_probability_calibration/*  the same held-out rows and bands: the share of truths at or
                                   below the time srift says is met with probability q (0.5,
                                   0.75, 0.9, 0.95: --confidence), its two-piece log-normal
                                   over the band (csrc/include/srift/band.hpp note "deadline
                                   probability"); calibrated: q
  measurement_noise/lambda_single_gpu  the data's own floor: a repeated Lambda 1-GPU
                                   measurement against the median of its other repeats
  measurement_noise/sia_multi_node_own_batches  the same for Sia's multi-node steps: each
                                   predicted from its own placement's other batches
beside "linear" (perfect linear scaling / peak-FLOPs ratio) and "v0" (roofline / nominal
links). Columns "as shipped" (blend_*, *_engine_path, *_dominance_guard beyond the per-kind
ones, interval_coverage, deadline_probability_calibration) refit the estimator kinds `srift
train` chose for the shipped ratio and absolute models (shipped_kind: their JSON's
training.selection.chosen, e.g. "huber+cpu", "gbdt"). Usage: python bench/accuracy.py [--models ridge,huber,gbdt,mlp,mean]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import warnings
from statistics import NormalDist

import numpy as np

from srift.learn.comm import build_cases, instance_anchored_steps, overhead_dataset, site
from srift.learn.datasets import compute_rows, sia_rows
from srift.learn.pcie_link import calibration_points, held_out_pcie_steps
from srift.learn.train import absolute_dataset, absolute_guard, ape, candidates, git_commit, loco_errors, ratio_dataset
from srift.learn.workloads import load_workloads


# The confidences a deadline may be asked at (srift recommend --confidence).
CONFIDENCES = (0.5, 0.75, 0.9, 0.95)


def deadline_calibration(name: str, resid: np.ndarray, hi: np.ndarray) -> None:
    """deadline_probability_calibration/NAME: held-out log residuals (truth / prediction) and
    their band's log p90 edge (from other groups only). srift says a run is met with
    probability q up to prediction x exp(z_q / z90 x hi) (band.hpp note "deadline probability");
    the share of truths at or below it should be q."""
    resid, hi = np.asarray(resid, float), np.asarray(hi, float)
    ok = ~(np.isnan(resid) | np.isnan(hi))
    r, h = resid[ok], np.maximum(hi[ok], 0.0)
    z90 = NormalDist().inv_cdf(0.9)
    met = {str(q): round(float(np.mean(r <= NormalDist().inv_cdf(q) / z90 * h)), 3) for q in CONFIDENCES}
    print(json.dumps({"split": f"deadline_probability_calibration/{name}", "met_when_srift_says": met,
                      "n": int(r.size)}))


def stats(e: np.ndarray) -> dict[str, float]:
    return {"median_ape": round(float(np.median(e)), 2), "p90_ape": round(float(np.quantile(e, 0.9)), 2),
            "n": int(e.size)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="ridge,huber,gbdt,mlp,mean")
    args = ap.parse_args()
    kinds = args.models.split(",")
    header = {"machine": platform.node(), "threads": os.cpu_count(), "commit": git_commit()}
    print(json.dumps({"header": header}))
    w = load_workloads()
    peak_floor_margin(w)
    compute(w, kinds)
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
    # The engine's path: v0 links but a PCIe link learned from the other PCIe cluster
    # (srift.learn.pcie_link note "pcie class"); v0 where no other cluster shares the link class.
    pcie = held_out_pcie_steps(cases, w, calibration_points(cases, w))
    one_gpu = np.array([c.one_gpu_time for c in cases])
    engine_path = np.where(np.isnan(pcie), base, np.log(np.where(np.isnan(pcie), 1.0, pcie) / one_gpu))
    for label, sel in (("all_multi_gpu", np.ones(len(y), bool)), ("multi_node", multinode)):
        for g in [*sorted(set(sites)), "ALL"]:
            m = sel & ((sites == g) if g != "ALL" else True)
            if m.sum() == 0:
                continue
            out = {"split": f"multi_gpu_leave_one_cluster_out/{label}/{g}",
                   "linear_scaling": stats(ape(np.zeros(m.sum()), truth[m])), "v0_simulator": stats(ape(base[m], truth[m])),
                   "learned_pcie_links": stats(ape(engine_path[m], truth[m]))}
            for k in kinds:
                out[k] = stats(ape(preds[k][m], truth[m]))
            print(json.dumps(out))
    engine_misses(cases, w, engine_path, truth, sites, multinode)
    steps = instance_anchored_steps(cases, w, rows)
    instance_anchored(steps, cases, base, truth, sites, instance_anchored_steps(cases, w, rows, floor=False))
    instance_floor_on_sia(cases, w, rows)
    link_calibrated(cases, w, base, truth, sites)
    interval_coverage(w, cases, steps, sites)
    pcie_interval_coverage(cases, pcie, sites)
    scaling_band_coverage(w)
    scaling_band_with_predicted_compute(w)
    measurement_noise(cases)
    single_host_lambda(w)
    gavel_multi_gpu(w)
    links()


def single_host_lambda(w) -> None:
    from srift.learn import default_models
    from srift.learn.comm import V0_EFFICIENCY
    from srift.learn.host_scaling import host_steps, lambda_host_cases, lambda_v2_host_cases
    from srift.learn.pcie_link import pcie_log_efficiency

    models = default_models()
    cases = lambda_host_cases()
    truth = np.array([c.step_time for c in cases])

    def v0_bw(c) -> float:
        return c.nominal_gbytes_s * 1e9 * V0_EFFICIENCY[c.interconnect]

    def line_bw(c) -> float:
        return c.nominal_gbytes_s * 1e9 * math.exp(pcie_log_efficiency(models.pcie_efficiency.core.predict, c.gpus))

    # Lambda's hosts are no catalog instance types, so the engine's rule (Engine._uses_learned_pcie)
    # is applied here through the same CostModels calls.
    def engine_bw(c) -> float:
        applies = c.interconnect == "pcie" and models.pcie_link_applies(c.nominal_gbytes_s * 1e9)
        return models.pcie_link(c.nominal_gbytes_s * 1e9, c.gpus) if applies else v0_bw(c)

    preds = {"linear_scaling": np.array([c.linear_step for c in cases]), "v0_simulator": host_steps(cases, w, v0_bw),
             "engine": host_steps(cases, w, engine_bw)}
    pcie = np.array([c.interconnect == "pcie" for c in cases])
    line = np.full(len(cases), np.nan)
    line[pcie] = host_steps([c for c in cases if c.interconnect == "pcie"], w, line_bw)
    ic = np.array([c.interconnect for c in cases])
    gpus = np.array([c.gpus for c in cases])
    for link in sorted(set(ic)):
        for n in [*sorted(set(gpus[ic == link])), "ALL"]:
            m = (ic == link) & ((gpus == n) if n != "ALL" else True)
            out = {"split": f"multi_gpu_single_host_lambda/{link}/{n if n == 'ALL' else f'{n}_gpus'}",
                   **{k: stats(np.abs(p[m] / truth[m] - 1) * 100) for k, p in preds.items()}}
            if link == "pcie":
                out["sia_pcie_line"] = stats(np.abs(line[m] / truth[m] - 1) * 100)
            print(json.dumps(out))
    m = ic != "pcie"
    print(json.dumps({"split": "multi_gpu_single_host_lambda/nvlink_or_nvswitch/ALL",
                      **{k: stats(np.abs(p[m] / truth[m] - 1) * 100) for k, p in preds.items()}}))
    # Lambda's v2 NVSwitch hosts (H100, H200, B200: srift.learn.host_scaling lambda_v2_host_cases),
    # each n-GPU cell from its own machine's 1-GPU run where there is one; nothing fitted on them
    v2 = lambda_v2_host_cases()
    truth = np.array([c.step_time for c in v2])
    preds = {"linear_scaling": np.array([c.linear_step for c in v2]), "v0_simulator": host_steps(v2, w, v0_bw),
             "engine": host_steps(v2, w, engine_bw)}
    fam, gpus = np.array([c.family for c in v2]), np.array([c.gpus for c in v2])
    for gpu in [*sorted(set(fam)), "ALL"]:
        for n in [*sorted(set(gpus[fam == gpu] if gpu != "ALL" else gpus)), "ALL"]:
            m = ((fam == gpu) if gpu != "ALL" else True) & ((gpus == n) if n != "ALL" else True)
            print(json.dumps({"split": f"multi_gpu_single_host_lambda_v2/{gpu}/{n if n == 'ALL' else f'{n}_gpus'}",
                              **{k: stats(np.abs(p[m] / truth[m] - 1) * 100) for k, p in preds.items()}}))


def scaling_band_coverage(w) -> None:
    """interval_coverage/scaling_band: each source's multi-GPU steps against the band of the
    other sources (as srift.learn.scaling_band.coverage_by_source) and against the compute
    band alone."""
    from srift.learn.scaling_band import BUCKETS, balanced_quantiles, bucket_of, coverage_by_source, scaling_residuals

    residuals = scaling_residuals(w)
    held = coverage_by_source(residuals)
    # the same folds, row by row, for the deadline probability's calibration
    for key in held:
        scope, source = key.split("/")
        here = [x for x in residuals if x.scope == scope]
        r_rows, hi_rows = [], []
        for bucket, _, _ in BUCKETS:
            cell = [x for x in here if bucket_of(x.gpus_per_instance) == bucket]
            train = [x for x in cell if x.source != source]
            test = [x.log_residual for x in cell if x.source == source]
            if train and test:
                _, _, p90 = balanced_quantiles([x.log_residual for x in train], [x.source for x in train])
                r_rows += test
                hi_rows += [p90] * len(test)
        deadline_calibration(f"scaling_band/{key}", np.array(r_rows), np.array(hi_rows))
    from srift.learn import default_models

    lo, hi = (math.log(x) for x in default_models().measured_band()[0])
    for key, cov in held.items():
        scope, source = key.split("/")
        r = np.array([x.log_residual for x in residuals if x.scope == scope and x.source == source])
        print(json.dumps({"split": f"interval_coverage/scaling_band/{key}",
                          "band_of_other_sources": {k: round(v, 3) if isinstance(v, float) else v for k, v in cov.items()},
                          "compute_band_only": {"inside_p10_p90": round(float(np.mean((r >= lo) & (r <= hi))), 3),
                                                "below_p10": round(float(np.mean(r < lo)), 3),
                                                "above_p90": round(float(np.mean(r > hi)), 3), "n": int(r.size)}}))


def scaling_band_with_predicted_compute(w) -> None:
    """interval_coverage/scaling_band_predicted_compute/lambda: Lambda's n-GPU host steps with
    nothing measured at all: the 1-GPU time from the no-measurement model held out by GPU chip,
    the links at v0 (log residuals add: the hosts scale near linearly), against the compute
    band (the shipped absolute model's) combined with the other sources' scaling band, either
    the widest of the two or both in quadrature (srift.prediction)."""
    from srift.learn.comm import V0_EFFICIENCY
    from srift.learn.datasets import lambda_gpu
    from srift.learn.host_scaling import host_steps, lambda_host_cases
    from srift.learn.models import default_models
    from srift.learn.scaling_band import balanced_quantiles, bucket_of, scaling_residuals

    X, y, base, truth, meta = shipped_absolute_dataset(w)
    pred, mask, _ = loco_errors(X, y, meta, shipped_factory("absolute"), "chip", absolute_guard(meta, w, "chip"))
    compute = {(r.workload, r.gpu, r.precision, r.batch): t - (p + b)
               for (_, r), p, t, b, m in zip(meta, pred, truth, base, mask) if m and r.source == "lambda"}
    doc = default_models().absolute.doc["residuals"]
    c10, c90 = float(doc["p10"]), float(doc["p90"])
    hosts = lambda_host_cases()
    v0 = host_steps(hosts, w, lambda c: c.nominal_gbytes_s * 1e9 * V0_EFFICIENCY[c.interconnect])
    others = [r for r in scaling_residuals(w) if r.scope == "single_instance" and r.source != "lambda"]
    total, bands = [], {"widest": [], "quadrature": []}
    for c, p in zip(hosts, v0):
        key = (c.workload, lambda_gpu(c.family), "amp" if c.precision == "fp16" else "tf32", c.local_bsz)
        if key not in compute:
            continue
        cell = [r for r in others if bucket_of(r.gpus_per_instance) == bucket_of(c.gpus)]
        s10, _, s90 = balanced_quantiles([r.log_residual for r in cell], [r.source for r in cell])
        total.append(math.log(c.step_time / p) + compute[key])
        bands["widest"].append((min(c10, s10, 0.0), max(c90, s90, 0.0)))
        bands["quadrature"].append((-math.hypot(min(c10, 0.0), min(s10, 0.0)), math.hypot(max(c90, 0.0), max(s90, 0.0))))
    t = np.array(total)
    out = {"split": "interval_coverage/scaling_band_predicted_compute/lambda"}
    for rule, b in bands.items():
        lo, hi = np.array([x[0] for x in b]), np.array([x[1] for x in b])
        if rule == "quadrature":
            deadline_calibration("scaling_band_predicted_compute/lambda", t, hi)
        out[rule] = {"inside_p10_p90": round(float(np.mean((t >= lo) & (t <= hi))), 3),
                     "below_p10": round(float(np.mean(t < lo)), 3), "above_p90": round(float(np.mean(t > hi)), 3),
                     "n": int(t.size)}
    print(json.dumps(out))


def pcie_interval_coverage(cases, pcie: np.ndarray, sites: np.ndarray) -> None:
    """Share of a PCIe cluster's steps inside the p10-p90 band of the *other* PCIe cluster's
    held-out residuals (nested: the shipped band is built from both)."""
    ok = ~np.isnan(pcie)
    r = np.log(np.array([c.step_time for c in cases]) / np.where(ok, pcie, 1.0))
    for g in sorted(set(sites[ok])):
        other = r[ok & (sites != g)]
        test = r[ok & (sites == g)]
        if other.size == 0:
            continue
        lo, hi = np.quantile(other, 0.1), np.quantile(other, 0.9)
        print(json.dumps({"split": f"interval_coverage/multi_gpu_learned_pcie_links_leave_one_cluster_out/{g}",
                          "inside_p10_p90": round(float(np.mean((test >= lo) & (test <= hi))), 3),
                          "below_p10": round(float(np.mean(test < lo)), 3),
                          "above_p90": round(float(np.mean(test > hi)), 3), "n": int(test.size)}))


def compute(w, kinds: list[str]) -> None:
    """Single-GPU compute splits, on the public data alone and with the CPU rows measured here
    in the training folds (errors on GPU targets only, as `srift train` scores them), and the
    GPU-trained ratio model on the CPU pairs (a device family it never saw)."""
    for label, rows in (("", compute_rows()), ("_with_cpu_rows", compute_rows(cpu=True))):
        for builder, splits in ((ratio_dataset, ("chip", "model")), (absolute_dataset, ("chip", "model"))):
            X, y, base, truth, meta = builder(rows, w)
            gpu = np.array([b.source != "cpu" for _, b in meta])
            for split in splits:
                held_out = "gpu" if split == "chip" else "model"
                name = (f"compute_absolute_leave_one_{held_out}_out" if builder is absolute_dataset else
                        f"compute_leave_one_{held_out}_out")
                out = {"split": name + label}
                if builder is ratio_dataset:
                    out["linear_peak_ratio"] = stats(ape(-X[gpu, 1], truth[gpu]))
                out["v0_roofline"] = stats(ape(base[gpu], truth[gpu]))
                for k in kinds:
                    pred, mask, _ = loco_errors(X, y, meta, candidates()[k], split)
                    m = mask & gpu
                    out[k] = stats(ape(pred[m] + base[m], truth[m]))
                    if builder is absolute_dataset:  # srift.learn.dominance note "dominance"
                        pred, mask, _ = loco_errors(X, y, meta, candidates()[k], split, absolute_guard(meta, w, split))
                        m = mask & gpu
                        out[f"{k}_dominance_guard"] = stats(ape(pred[m] + base[m], truth[m]))
                print(json.dumps(out))
    blended_anchor(w)
    newest_gpus_out(w)
    forward_in_time(w)
    data_edge_backtest(w)
    blend_leave_one_source_out(w)
    measured_other_batch(w)
    measured_two_batches(w)
    measured_floor_sweep(w)
    instance_floor_sweep(w)
    same_specs_hosts(w)
    ratio_engine_path(w)
    absolute_engine_path(w)
    selection_nested(w)
    X, y, base, truth, meta = ratio_dataset(compute_rows(cpu=True), w)
    cpu = np.array([b.source == "cpu" for _, b in meta])
    out = {"split": "compute_cpu_thread_pairs_gpu_trained", "linear_peak_ratio": stats(ape(-X[cpu, 1], truth[cpu])),
           "v0_roofline": stats(ape(base[cpu], truth[cpu]))}
    for k in kinds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = candidates()[k]().fit(X[~cpu], y[~cpu])
        out[k] = stats(ape(est.predict(X[cpu]) + base[cpu], truth[cpu]))
    print(json.dumps(out))


def selection_nested(w) -> None:
    """How much `srift train`'s own choices flatter the "as shipped" columns. It chooses the
    absolute model's kind (with or without the CPU rows) and the anchored blend's (weight,
    shrink) by their errors on the same two held-out splits that score them. Here every
    held-out group (a GPU chip, a model family) is scored with the choice made on the other
    groups' held-out errors alone, with train's selection score (the mean over both splits of
    median + p90 / 4), beside the choice made on all groups. The blend is scored unclipped
    (srift.learn.dominance applies after it), the absolute model clipped, as shipped."""
    from srift.learn.blend import BLEND_WEIGHTS, SHRINK_WEIGHTS, anchored_correction, held_out_absolute_terms, \
        observed_anchor_error
    from srift.learn.train import _split_key, selection_score

    splits = ("chip", "model")

    def score(errors: dict[str, np.ndarray], keep: np.ndarray) -> float:
        return selection_score({by: {"median_ape": float(np.median(e[keep])), "p90_ape": float(np.quantile(e[keep], 0.9))}
                                for by, e in errors.items()})

    def nested(errors: dict, choices: list, group: dict[str, np.ndarray], ok: np.ndarray) -> dict:
        """choices' APE arrays by split -> {split: {"all_groups": ..., "nested": ..., "picks": ...}}"""
        out = {}
        overall = min(choices, key=lambda c: score(errors[c], ok))
        for by in splits:
            e = np.full(ok.size, np.nan)
            picks = set()
            for g in sorted(set(group[by][ok])):
                test = ok & (group[by] == g)
                pick = min(choices, key=lambda c: score(errors[c], ok & (group[by] != g)))  # noqa: B023
                picks.add(str(pick))
                e[test] = errors[pick][by][test]
            out[by] = {"all_groups": stats(errors[overall][by][ok]), "nested": stats(e[ok]), "picks": sorted(picks)}
        return {"chosen_on_all_groups": str(overall), **out}

    # the absolute model's kind, with and without the CPU rows: errors on the GPU rows both share
    errors: dict[str, dict[str, np.ndarray]] = {}
    keys: list | None = None
    for label, cpu in (("", False), ("+cpu", True)):
        X, y, base, truth, meta = absolute_dataset(compute_rows(cpu=cpu), w)
        gpu = np.array([r.source != "cpu" for _, r in meta])
        here = [(r.source, r.workload, r.gpu, r.precision, r.batch) for (_, r), g in zip(meta, gpu) if g]
        if keys is None:
            keys = here
            group = {by: np.array([_split_key(m, by)[1] for m, g in zip(meta, gpu) if g]) for by in splits}
        order = {k: i for i, k in enumerate(here)}
        index = np.array([order[k] for k in keys])
        for kind, make in candidates().items():
            per = {}
            for by in splits:
                pred, mask, _ = loco_errors(X, y, meta, make, by, absolute_guard(meta, w, by))
                e = np.where(mask, ape(pred + base, truth), np.nan)[gpu]
                per[by] = e[index]
            errors[kind + label] = per
    ok = np.all([np.isfinite(e[by]) for e in errors.values() for by in splits], axis=0)
    print(json.dumps({"split": "selection_nested/compute_absolute_kind", "shipped": "+".join(
        [shipped_kind("absolute")[0]] + (["cpu"] if shipped_kind("absolute")[1] else [])),
        **nested(errors, list(errors), group, ok)}))
    # the anchored blend's (weight, shrink), the shipped models' kinds held out as train holds them
    X, y, base, truth, meta = ratio_dataset(compute_rows(cpu=True), w)
    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    observed = observed_anchor_error(meta, w)
    gpu = np.array([b.source != "cpu" for _, b in meta])
    grid = [(wt, sh) for wt in BLEND_WEIGHTS for sh in SHRINK_WEIGHTS]
    blend_errors: dict = {pair: {} for pair in grid}
    ok = gpu.copy()
    for by in splits:
        pred, mask, _ = loco_errors(X, y, meta, shipped_factory("ratio"), by)
        corr_a, corr_b = held_out_absolute_terms(meta, w, Xa, ya, meta_a, shipped_factory("absolute"), by)
        ok &= mask & ~np.isnan(corr_b)
        for pair in grid:
            blend_errors[pair][by] = ape(anchored_correction(pred, corr_a, corr_b, observed, *pair) + base, truth)
    group = {by: np.array([_split_key(m, by)[1] for m in meta]) for by in splits}
    print(json.dumps({"split": "selection_nested/compute_anchored_blend_unclipped", "shipped": list(shipped_blend()),
                      **nested(blend_errors, grid, group, ok)}))


def shipped_blend() -> tuple[float, float]:
    """(weight, shrink) of the shipped anchored ratio (srift.learn.blend)."""
    from srift.learn.models import default_models

    doc = default_models().ratio.doc["absolute_blend"]
    return float(doc["weight"]), float(doc.get("shrink", 0.0))


def shipped_kind(which: str) -> tuple[str, bool]:
    """(candidate kind, trained with the CPU rows) of a shipped compute model ("ratio" or
    "absolute"), as `srift train` chose it: the "as shipped" columns refit that kind."""
    from srift.learn.models import default_models

    chosen = getattr(default_models(), which).doc["training"]["selection"]["chosen"]
    kind, _, extra = chosen.partition("+")
    return kind, extra == "cpu"


def shipped_factory(which: str):
    return candidates()[shipped_kind(which)[0]]


def shipped_absolute_dataset(w):
    """absolute_dataset of the rows the shipped absolute model trains on (CPU rows or not)."""
    return absolute_dataset(compute_rows(cpu=shipped_kind("absolute")[1]), w)


def blended_anchor(w) -> None:
    """Anchored cross-GPU compute as the engine predicts it (srift.learn.blend notes "blend" and
    "shrink"): the ratio model, the absolute model differenced, their blend at the shipped
    weight, and the blend shrunk toward the absolute model's own prediction of the target at the
    shipped shrink (both chosen by `srift train` on these same two splits: two numbers fitted),
    both models held out together; the shipped training data (CPU rows in), GPU targets,
    overall and by source."""
    from srift.learn.blend import (anchored_correction, blended, held_out_absolute_terms, held_out_guarded_corrections,
                                   observed_anchor_error)

    rows = compute_rows(cpu=True)
    X, y, base, truth, meta = ratio_dataset(rows, w)
    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    weight, shrink = shipped_blend()
    observed = observed_anchor_error(meta, w)
    src = np.array([b.source for _, b in meta])
    ratio_est, absolute_est = shipped_factory("ratio"), shipped_factory("absolute")
    for split, held_out in (("chip", "gpu"), ("model", "model")):
        pred, mask, _ = loco_errors(X, y, meta, ratio_est, split)
        corr_a, corr_b = held_out_absolute_terms(meta, w, Xa, ya, meta_a, absolute_est, split)
        corr = corr_b - corr_a
        shipped = anchored_correction(pred, corr_a, corr_b, observed, weight, shrink)
        guarded = held_out_guarded_corrections(meta, w, X, y, Xa, ya, meta_a, ratio_est,
                                               absolute_est, split, [(weight, shrink)],
                                               observed)[(weight, shrink)]
        ok = mask & ~np.isnan(corr) & (src != "cpu") & ~np.isnan(guarded)
        several_anchors(held_out, meta, guarded + base - truth, ok)
        for s in ("ALL", "lambda", "gavel", "sia"):
            m = ok & ((src == s) if s != "ALL" else True)
            print(json.dumps({"split": f"compute_leave_one_{held_out}_out_blended" + ("" if s == "ALL" else f"/{s}"),
                              "v0_roofline": stats(ape(base[m], truth[m])),
                              "ratio_model": stats(ape(pred[m] + base[m], truth[m])),
                              "absolute_differenced": stats(ape(corr[m] + base[m], truth[m])),
                              f"blend_{weight}": stats(ape(blended(pred[m], corr[m], weight) + base[m], truth[m])),
                              f"blend_{weight}_shrink_{shrink}": stats(ape(shipped[m] + base[m], truth[m])),
                              f"blend_{weight}_shrink_{shrink}_dominance_guard": stats(ape(guarded[m] + base[m],
                                                                                          truth[m]))}))


def _held_out_as_shipped(w, split: str, ratio: tuple, absolute: tuple):
    """The shipped models' held-out predictions under `split` (train._split_key) on `ratio`
    (ratio_dataset of the shipped training rows, CPU rows in) and `absolute`
    (shipped_absolute_dataset): (the anchored correction as shipped: the blend, shrunk, clipped by
    dominance, NaN where not predicted; the absolute model's clipped correction; its mask)."""
    from srift.learn.blend import held_out_guarded_corrections, observed_anchor_error

    X, y, _, _, meta = ratio
    Xa, ya, _, _, meta_a = absolute
    blend = shipped_blend()
    anchored = held_out_guarded_corrections(meta, w, X, y, Xa, ya, meta_a, shipped_factory("ratio"),
                                            shipped_factory("absolute"), split, [blend],
                                            observed_anchor_error(meta, w))[blend]
    abs_pred, abs_mask, _ = loco_errors(Xa, ya, meta_a, shipped_factory("absolute"), split,
                                        absolute_guard(meta_a, w, split))
    return anchored, abs_pred, abs_mask


def _learned_beside_v0(corr: np.ndarray, base: np.ndarray, truth: np.ndarray, m: np.ndarray,
                       signed: bool = False) -> dict:
    """APE stats of the learned log correction and of the roofline on rows `m`; with `signed`,
    the learned prediction's signed median error (%)."""
    out = {"v0_roofline": stats(ape(base[m], truth[m])), "learned": stats(ape(corr[m] + base[m], truth[m]))}
    if signed:
        out["signed_median_pct"] = (round(float(np.median(np.exp(corr[m] + base[m] - truth[m]) - 1) * 100), 1)
                                    if m.any() else None)
    return out


def newest_gpus_out(w) -> None:
    """srift.learn.lambda_v2 note "past the edge": the rows of the GPUs only Lambda's v2 tables
    have (H200, GH200, B200), predicted by models trained on no row of any of them (split
    "generation"), beside the same rows with only their own chip held out (split "chip"): what
    srift predicts for a GPU generation newer than its data, and what it gains once one of the
    generation is measured. No measurement (the absolute model, clipped by dominance) and
    anchored on another chip's row of the same group (the shipped blend, clipped), by target
    GPU; shipped training data (CPU rows in)."""
    from srift.learn.lambda_v2 import NEWEST_CHIPS

    ratio, absolute = ratio_dataset(compute_rows(cpu=True), w), shipped_absolute_dataset(w)
    (_, _, base, truth, meta), (_, _, base_a, truth_a, meta_a) = ratio, absolute
    target = np.array([b.chip for _, b in meta])
    target_a = np.array([b.chip for _, b in meta_a])
    anchor_h100 = np.array([a.gpu == "H100-80GB" for a, _ in meta])  # the SXM5, not the PCIe card
    for split in ("generation", "chip"):
        anchored, abs_pred, abs_mask = _held_out_as_shipped(w, split, ratio, absolute)
        for gpu in ("ALL", *sorted(NEWEST_CHIPS)):
            sel = np.isin(target, list(NEWEST_CHIPS)) if gpu == "ALL" else target == gpu
            sel_a = np.isin(target_a, list(NEWEST_CHIPS)) if gpu == "ALL" else target_a == gpu
            ok, ok_a = sel & ~np.isnan(anchored), sel_a & abs_mask
            print(json.dumps({"split": f"compute_newest_gpus_out/{split}/{gpu}",
                              "no_measurement": _learned_beside_v0(abs_pred, base_a, truth_a, ok_a),
                              "anchored": _learned_beside_v0(anchored, base, truth, ok),
                              "anchored_on_h100": _learned_beside_v0(anchored, base, truth, ok & anchor_h100,
                                                                     signed=True)}))


def forward_in_time(w) -> None:
    """train.py note "forward": each launch year's GPUs predicted by models trained only on GPUs
    announced before it (every later chip out of training and of the dominance references), with
    no measurement and anchored on an older GPU's row, as shipped (the blend, shrunk, clipped);
    by year and overall, beside the roofline. What srift would have said of each generation on
    its arrival, from the data before it. Shipped training data (CPU rows in), GPU targets."""
    from srift.learn.gpus import CHIP_LAUNCH_YEAR
    from srift.learn.train import launch_year

    ratio, absolute = ratio_dataset(compute_rows(cpu=True), w), shipped_absolute_dataset(w)
    (_, _, base, truth, meta), (_, _, base_a, truth_a, meta_a) = ratio, absolute
    anchored, abs_pred, abs_mask = _held_out_as_shipped(w, "forward", ratio, absolute)
    year = np.array([launch_year(b.chip) for _, b in meta])
    anchor_year = np.array([launch_year(a.chip) for a, _ in meta])
    year_a = np.array([launch_year(b.chip) for _, b in meta_a])
    older = ~np.isnan(anchored) & (anchor_year < year) & (year > 0)
    for y_ in [*sorted(set(year[older])), "ALL"]:
        m = older & ((year == y_) if y_ != "ALL" else True)
        ma = abs_mask & (year_a > 0) & ((year_a == y_) if y_ != "ALL" else True)
        print(json.dumps({"split": f"compute_forward_in_time/{y_}",
                          "chips": sorted({b.chip for (_, b), k in zip(meta, m) if k}),
                          "trained_on_gpu_chips": (int(sum(yr < y_ for yr in CHIP_LAUNCH_YEAR.values()))
                                                   if y_ != "ALL" else None),
                          "anchored_on_an_older_gpu": _learned_beside_v0(anchored, base, truth, m, signed=True),
                          "no_measurement": _learned_beside_v0(abs_pred, base_a, truth_a, ma)}))


def data_edge_backtest(w) -> None:
    """srift.learn.data_edge note "data edge", backtested: each counted launch year after the
    first, predicted as the forward split does (models trained only on older GPUs, as shipped)
    and moved and banded by the rule fitted on the earlier counted years only (edge_quantiles,
    edge_band: the code `srift train` ships the rule with), beside the same rows unmoved under
    the in-range band shipped for a chip inside the data. The lean moves the year's chips before
    the dominance clip, as the core moves a GPU past the edge (a second forward pass); the band
    is centred on the moved prediction. Median / p90 APE and the share of rows inside each
    p10-p90 band, anchored on an older GPU and with no measurement."""
    from srift.learn.data_edge import counted_years, edge_band, edge_quantiles, forward_residuals
    from srift.learn.gpus import CHIP_LAUNCH_YEAR
    from srift.learn.models import MODELS_DIR

    ratio, absolute = ratio_dataset(compute_rows(cpu=True), w), shipped_absolute_dataset(w)
    args = (w, ratio, absolute, shipped_factory("ratio"), shipped_factory("absolute"), shipped_blend())
    unmoved = dict(zip(("anchored", "no_measurement"), forward_residuals(*args)))
    ratio_doc = json.loads((MODELS_DIR / "compute_ratio.json").read_text())
    absolute_doc = json.loads((MODELS_DIR / "compute_absolute.json").read_text())
    in_range = {"anchored": (ratio_doc["absolute_blend"]["residuals"]["p10"], ratio_doc["absolute_blend"]["residuals"]["p90"]),
                "no_measurement": (absolute_doc["residuals"]["p10"], absolute_doc["residuals"]["p90"])}
    rules: dict[str, dict[int, tuple[float, float, float]]] = {}
    counted: dict[str, list[int]] = {}
    for kind, by_year in unmoved.items():
        years = counted[kind] = counted_years(CHIP_LAUNCH_YEAR, by_year)
        rules[kind] = {year: edge_band(in_range[kind], edge_quantiles({y: by_year[y] for y in years if y < year}))
                       for year in years[1:]}
    moved = dict(zip(("anchored", "no_measurement"),
                     forward_residuals(*args, leans=({y: r[0] for y, r in rules["anchored"].items()},
                                                     {y: r[0] for y, r in rules["no_measurement"].items()}))))
    totals: dict[str, dict[str, list]] = {}
    for kind, rule in rules.items():
        for year, (lean, lo, hi) in rule.items():
            r, r_moved = unmoved[kind][year], moved[kind][year]  # log(measured / predicted)
            t = totals.setdefault(kind, {"before": [], "after": [], "in_before": [], "in_after": []})
            t["before"] += list(r)
            t["after"] += list(r_moved)
            t["in_before"] += list((r >= in_range[kind][0]) & (r <= in_range[kind][1]))
            t["in_after"] += list((r_moved >= lo) & (r_moved <= hi))
            print(json.dumps({"split": f"compute_data_edge_backtest/{kind}/{year}", "n": int(r.size),
                              "rule_from_years": [y for y in counted[kind] if y < year],
                              "lean_factor": round(math.exp(lean), 4),
                              "band": [round(math.exp(lo), 4), round(math.exp(hi), 4)],
                              "as_the_models_say": stats(ape(np.zeros(r.size), r)),
                              "lean_after_the_clip": stats(ape(np.full(r.size, lean), r)),
                              "moved_by_the_lean": stats(ape(np.zeros(r_moved.size), r_moved)),
                              "inside_in_range_band": round(float(np.mean((r >= in_range[kind][0])
                                                                          & (r <= in_range[kind][1]))), 3),
                              "inside_edge_band": round(float(np.mean((r_moved >= lo) & (r_moved <= hi))), 3)}))
    for kind, t in totals.items():
        print(json.dumps({"split": f"compute_data_edge_backtest/{kind}/ALL", "n": len(t["before"]),
                          "as_the_models_say": stats(ape(np.zeros(len(t["before"])), np.array(t["before"]))),
                          "moved_by_the_lean": stats(ape(np.zeros(len(t["after"])), np.array(t["after"]))),
                          "inside_in_range_band": round(float(np.mean(t["in_before"])), 3),
                          "inside_edge_band": round(float(np.mean(t["in_after"])), 3)}))


def blend_leave_one_source_out(w) -> None:
    """The anchored blend's (weight, shrink) with a whole lab held out: the ratio and absolute
    models fitted without any row of the source (Gavel, Sia), so the absolute model's level is
    not that lab's software stack, as for a user's anchor or NVIDIA's own runs
    (bench/external_nvidia.py). Leaving Lambda out leaves no GPU newer than Turing to learn from,
    so it is not reported. Unclipped, GPU targets."""
    from srift.learn.blend import anchored_correction, held_out_absolute_terms, observed_anchor_error

    rows = compute_rows(cpu=True)
    X, y, base, truth, meta = ratio_dataset(rows, w)
    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    observed = observed_anchor_error(meta, w)
    src = np.array([b.source for _, b in meta])
    pred, mask, _ = loco_errors(X, y, meta, shipped_factory("ratio"), "source")
    corr_a, corr_b = held_out_absolute_terms(meta, w, Xa, ya, meta_a, shipped_factory("absolute"), "source")
    ok = mask & ~np.isnan(corr_b)
    for s in ("gavel", "sia"):
        m = ok & (src == s)
        out = {"split": f"compute_blend_leave_one_source_out/{s}", "v0_roofline": stats(ape(base[m], truth[m]))}
        for weight, shrink in ((0.0, 0.0), (0.0, 0.1), (0.0, 0.2), (0.2, 0.0), (0.5, 0.0), (0.5, 0.2)):
            p = anchored_correction(pred, corr_a, corr_b, observed, weight, shrink)
            out[f"blend_{weight}_shrink_{shrink}"] = stats(ape(p[m] + base[m], truth[m]))
        print(json.dumps(out))


def _measured_other_batch_rows(w, held_out: str) -> dict[str, list]:
    """Per source, one row per pair (a measured, b predicted): log truth, log predictions from
    the roofline's, the model's and the halfway curve (as the core built it before 29d84b7: the
    geometric mean of the roofline's and the model's fitted line, fitted again), the per-sample
    constant, |log batch ratio|, the model's without the peak floor (srift::LearnedCompute note
    "measured floor", which the model's column holds), and 1 where the floor moved it.
    `held_out`: "chip" or "model", what the absolute model is fitted without."""
    from srift import _core
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_correction, reference_gpus
    from srift.learn.features import roofline
    from srift.learn.measured_band import batch_pairs
    from srift.learn.models import absolute_on_grid, measured_held_to_floor
    from srift.learn.workloads import model_family

    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    unit_a = np.array([(r.chip if held_out == "chip" else model_family(r.workload)) for _, r in meta_a])
    peaks = device_peaks()
    absolute: dict[str, object] = {}
    out: dict[str, list] = {}
    for source, a, b in batch_pairs(compute_rows()):
        unit = a.chip if held_out == "chip" else model_family(a.workload)
        if unit not in absolute:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                absolute[unit] = shipped_factory("absolute")().fit(Xa[unit_a != unit], ya[unit_a != unit])
        wl, g = w[a.workload], peaks[a.gpu]
        point = [_core.Measurement(a.batch, a.per_sample_s * a.batch)]
        prior = roofline(wl, g, a.precision)
        refs = reference_gpus({a.chip} if held_out == "chip" else ())
        corr = lambda grid: guarded_correction(absolute[unit].predict, wl, g, grid, a.precision, refs)  # noqa: B023
        span = 4 * max(a.batch, b.batch)
        learned = absolute_on_grid(prior, corr, span, token_slope=True)

        def total(m, x):
            return m.compute_s(x) + m.optimizer_s

        halfway = absolute_on_grid(prior, lambda grid: [0.5 * math.log(total(learned, x) / total(prior, x))  # noqa: B023
                                                        for x in grid], span)
        row = [math.log(b.per_sample_s)]
        unheld = _core.anchor_to_measurements(learned, point)
        held = measured_held_to_floor(unheld, wl, g, a.precision, point, span)  # as measured_model holds it
        for m in (_core.anchor_to_measurements(prior, point), held, _core.anchor_to_measurements(halfway, point)):
            row.append(math.log(total(m, b.batch) / b.batch))
        row.append(math.log(a.per_sample_s))
        row.append(abs(math.log(b.batch / a.batch)))
        row.append(math.log(total(unheld, b.batch) / b.batch))
        row.append(float(held is not unheld))
        out.setdefault(source, []).append(row)
    return out


def _print_measured_other_batch(split: str, out: dict[str, list]) -> None:
    for source in [*sorted(out), "ALL"]:
        v = np.array(out[source] if source != "ALL" else [r for rs in out.values() for r in rs])
        print(json.dumps({"split": f"{split}/{source}",
                          "constant_per_sample": stats(ape(v[:, 4], v[:, 0])),
                          "roofline_batch_shape": stats(ape(v[:, 1], v[:, 0])),
                          "learned_batch_shape": stats(ape(v[:, 2], v[:, 0])),
                          "halfway_batch_shape": stats(ape(v[:, 3], v[:, 0])),
                          "learned_without_peak_floor": stats(ape(v[:, 6], v[:, 0])),
                          "peak_floor_moved": int(v[:, 7].sum()),
                          "batch_ratio_p90": round(float(np.exp(np.percentile(v[:, 5], 90))), 1)}))


def measured_other_batch(w) -> None:
    """A GPU type measured at one batch, predicted at another (every DDP plan's local batch is
    the global batch over its GPUs): the measurement scales a prior's batch curve, the roofline's
    or the no-measurement model's as the engine builds it (srift.engine note "measured batch
    shape"; the absolute model held out by GPU chip, on its batch grid, dominance-clipped).
    Pairs of 1-GPU rows of one source, model, GPU and precision at two batches (Gavel's and
    Sia's; Lambda times one batch per GPU); GPU targets; beside the per-sample time held
    constant. Then the same with the absolute model held out by workload (a user's new model:
    no row of it at any batch in training), compute_measured_other_batch_leave_one_model_out."""
    out = _measured_other_batch_rows(w, "chip")
    # The band away from the measured batch (srift.learn.measured_band note "measured band"):
    # the model's curve's log residual per e-fold of batch (the engine's, note "measured batch
    # shape"), its p10 / p90 as `srift train` fits it (both sources) beside the shipped one, and
    # each source's pairs inside the band of the other source.
    from srift.learn import default_models
    from srift.learn.datasets import lambda_repeats
    from srift.learn.measured_band import fit_measured_band, repeat_residuals

    learned_resid = {s: np.array([[r[0] - r[2], r[5]] for r in rows]) for s, rows in out.items()}

    fitted = fit_measured_band(repeat_residuals(lambda_repeats()), learned_resid)
    (n10, n90), (e10, e90) = default_models().measured_band()
    print(json.dumps({"split": "interval_coverage/measured_band", "refitted": {k: {"p10": round(v["p10"], 4), "p90": round(v["p90"], 4)}
                                                                               for k, v in fitted.items() if k in ("noise", "per_e_fold")},
                      "shipped": {"noise": {"p10": round(n10, 4), "p90": round(n90, 4)},
                                  "per_e_fold": {"p10": round(e10, 4), "p90": round(e90, 4)}}}))
    for source, cov in fitted["per_e_fold"]["coverage_from_other_source"].items():
        print(json.dumps({"split": f"interval_coverage/measured_other_batch/{source}", "band_from": "other source",
                          "per_e_fold_p10": round(cov["band_p10"], 4), "per_e_fold_p90": round(cov["band_p90"], 4),
                          "inside_p10_p90": round(cov["inside_p10_p90"], 3), "n": cov["n"]}))
    for source, v in learned_resid.items():
        r, d = v[:, 0], v[:, 1]
        inside = np.mean((r >= math.log(e10) * d) & (r <= math.log(e90) * d))
        print(json.dumps({"split": f"interval_coverage/measured_other_batch/{source}", "band_from": "shipped (both)",
                          "inside_p10_p90": round(float(inside), 3), "n": len(r)}))
    _print_measured_other_batch("compute_measured_other_batch", out)
    _print_measured_other_batch("compute_measured_other_batch_leave_one_model_out",
                                _measured_other_batch_rows(w, "model"))


def measured_two_batches(w) -> None:
    """A GPU type measured at two batches, predicted at a third of the same source, model, GPU
    and precision (Gavel's and Sia's 1-GPU rows; srift::LearnedCompute::measured_model, note
    "several batches, no line"). Their least-squares line where it has a positive slope and an
    intercept >= 0; else a curve scaled through their mean: the roofline's (srift before), the
    no-measurement model's (held out by chip), or the one of the two nearer the two points
    (shipped; held to the GPU's peak floor, note "measured floor", as measured_model holds every
    one of its curves, beside it without the floor); beside the line with its intercept clamped
    at 0 (refitted through the origin)."""
    from srift import _core
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_correction, reference_gpus
    from srift.learn.features import roofline
    from srift.learn.models import absolute_on_grid, measured_held_to_floor

    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    chip_a = np.array([r.chip for _, r in meta_a])
    peaks = device_peaks()
    groups: dict[tuple, dict[float, object]] = {}
    for r in compute_rows():
        if r.units_match and r.source != "cpu":
            groups.setdefault((r.source, r.workload, r.gpu, r.precision), {}).setdefault(r.batch, r)
    absolute: dict[str, object] = {}
    out: dict[tuple[str, str], list] = {}
    for key, by_batch in sorted(groups.items()):
        rows = [by_batch[b] for b in sorted(by_batch)]
        if len(rows) < 3:
            continue
        a = rows[0]
        if a.chip not in absolute:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                absolute[a.chip] = shipped_factory("absolute")().fit(Xa[chip_a != a.chip], ya[chip_a != a.chip])
        wl, g = w[a.workload], peaks[a.gpu]
        prior = roofline(wl, g, a.precision)
        refs = reference_gpus({a.chip})
        learned = absolute_on_grid(prior, lambda grid: guarded_correction(absolute[a.chip].predict, wl, g, grid,  # noqa: B023
                                                                          a.precision, refs),
                                   4 * rows[-1].batch, token_slope=True)
        for i, r1 in enumerate(rows):
            for r2 in rows[i + 1:]:
                points = [_core.Measurement(r.batch, r.per_sample_s * r.batch) for r in (r1, r2)]
                line = _core.measured_line(points)
                roofline_fallback = _core.anchor_to_measurements(prior, points)
                learned_fallback = _core.anchor_to_measurements(learned, points)

                def misfit(m):
                    return sum(math.log((m.compute_s(p.local_batch) + m.optimizer_s) / p.iteration_s) ** 2  # noqa: B023
                               for p in points)

                unheld = learned_fallback if misfit(learned_fallback) < misfit(roofline_fallback) else roofline_fallback
                shipped = measured_held_to_floor(unheld, wl, g, a.precision, points, 4 * rows[-1].batch)
                negative = line.slope > 0 and line.intercept < 0
                kind = "negative_intercept" if negative else ("flat_or_falling" if line.slope <= 0 else "line")
                through_origin = sum(p.local_batch * p.iteration_s for p in points) / sum(p.local_batch ** 2 for p in points)
                for b in rows:
                    if b.batch in (r1.batch, r2.batch):
                        continue
                    truth = b.per_sample_s * b.batch
                    at_b = [math.log(m.compute_s(b.batch) + m.optimizer_s)
                            for m in (roofline_fallback, learned_fallback, shipped, unheld)]
                    clamped = math.log(through_origin * b.batch) if negative else at_b[2]
                    out.setdefault((key[0], kind), []).append([math.log(truth), *at_b[:3], clamped, at_b[3],
                                                               float(shipped is not unheld)])
    for source in sorted({s for s, _ in out}):
        for kind in ("line", "negative_intercept", "flat_or_falling", "all"):
            v = np.array([r for (s, k), rows in out.items() if s == source and kind in (k, "all") for r in rows])
            if len(v):
                print(json.dumps({"split": f"compute_measured_two_batches/{source}/{kind}", "n": len(v),
                                  "roofline_curve": stats(ape(v[:, 1], v[:, 0])),
                                  "learned_curve": stats(ape(v[:, 2], v[:, 0])),
                                  "nearer_curve_shipped": stats(ape(v[:, 3], v[:, 0])),
                                  "nearer_curve_without_peak_floor": stats(ape(v[:, 5], v[:, 0])),
                                  "peak_floor_moved": int(v[:, 6].sum()),
                                  "intercept_clamped_at_0": stats(ape(v[:, 4], v[:, 0]))}))


def several_anchors(held_out: str, meta, log_error: np.ndarray, ok: np.ndarray) -> None:
    """compute_several_anchors_leave_one_{held_out}_out: each target row predicted from every
    other GPU type measured in its group, one anchor at a time (every pair, as the split above)
    against the geometric mean of all of them, as the engine combines several measured types
    (srift::LearnedCompute note "several anchors"): a type's batches averaged first, then the
    types, in log time; by target row."""
    from collections import defaultdict

    by: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in np.flatnonzero(ok):
        a, b = meta[i]
        by[(b.source, b.group, b.gpu, b.batch)][a.gpu].append(float(log_error[i]))
    every, mean = defaultdict(list), defaultdict(list)
    anchors = defaultdict(list)
    for (source, *_), per_gpu in by.items():
        e = np.mean([np.mean(v) for v in per_gpu.values()])
        for s in (source, "ALL"):
            every[s] += [v for vs in per_gpu.values() for v in vs]
            mean[s].append(e)
            anchors[s].append(len(per_gpu))
    for s in ("ALL", "lambda", "gavel", "sia"):
        print(json.dumps({"split": f"compute_several_anchors_leave_one_{held_out}_out/{s}",
                          "one_anchor_every_pair": stats(ape(np.array(every[s]), 0.0)),
                          "all_anchors_geometric_mean": stats(ape(np.array(mean[s]), 0.0)),
                          "anchor_gpus_median": float(np.median(anchors[s]))}))


def held_out_fits(X, y, meta, factory):
    """(row, `factory` model fitted without the row's GPU chip) for every row, chip by chip."""
    from srift.learn.train import _split_key

    touched = [_split_key(m, "chip") for m in meta]
    for g in sorted({t[1] for t in touched}):
        test = np.array([t[1] == g for t in touched])
        train = np.array([g not in t[0] for t in touched])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = factory().fit(X[train], y[train])
        for i in np.flatnonzero(test):
            yield i, est


def peak_floor_margin(w) -> None:
    """How far each measured single-GPU row is above its peak floor (srift::LearnedCompute note
    "peak floor": the workload's FLOPs at the peak each layer runs against at the row's
    precision): measured / floor by source and precision, over the rows whose samples are the
    zoo model's (units_match; Gavel's Transformer is not its stand-in's and beats the count by
    1.4-3.0x). A floor that never binds on the data binds only where the models leave it."""
    from srift.learn.datasets import device_peaks
    from srift.learn.features import peak_floor_per_sample

    peaks = device_peaks()
    by: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for r in compute_rows(cpu=False):
        if not r.units_match or r.workload not in w or r.gpu not in peaks:
            continue
        floor = peak_floor_per_sample(w[r.workload], peaks[r.gpu], r.precision)
        if floor > 0:
            by.setdefault((r.source, r.precision), []).append((r.per_sample_s / floor,
                                                                f"{r.workload} on {r.gpu} at batch {r.batch:g}"))
    for (source, precision), pairs in sorted(by.items()):
        q = np.array([x for x, _ in pairs])
        print(json.dumps({"split": f"peak_floor_margin/{source}/{precision}", "n": len(q),
                          "measured_over_floor": {"min": round(float(q.min()), 3),
                                                  "p10": round(float(np.percentile(q, 10)), 3),
                                                  "median": round(float(np.median(q)), 3)},
                          "nearest": min(pairs)[1], "below_the_floor": int((q < 1).sum())}))


def same_specs_hosts(w) -> None:
    """A run on one host predicting another host of the same GPU (srift::LearnedCompute note
    "same specs"): Lambda's 1-GPU benchmarks repeated on several hosts or dates of one GPU
    type (srift.learn.datasets.lambda_repeats), every ordered pair of them at one (model,
    precision, batch). "shipped": predict_anchored with the target's specs equal to the
    anchor's, which is the anchor's measured curve; "through_the_ratio_model": the same target
    one FLOP/s slower and one byte/s faster (so neither dominates and the order guard is idle),
    which takes the ratio model, its blend and shrink, as every other pair does (and as this pair
    did before the note); beside the hosts' own spread ("the run itself": the measured
    time of the anchor host taken as the prediction, which is what shipped should give)."""
    from srift import _core
    from srift.learn import default_models
    from srift.learn.datasets import device_peaks, lambda_repeats
    from srift.learn.features import core_precision, core_workload_stats, gpu_spec
    from srift.learn.workloads import DATA_MODELS

    lc, peaks = default_models().learned_compute, device_peaks()
    errs: dict[str, list[float]] = {"shipped": [], "through_the_ratio_model": [], "the_run_itself": []}
    pairs = 0
    for (gpu, model, precision, batch), throughputs in sorted(lambda_repeats().items()):
        workload = DATA_MODELS.get(("lambda", model), (None,))[0]
        if len(throughputs) < 2 or gpu not in peaks or workload not in w:
            continue
        stats, spec, prec = core_workload_stats(w[workload]), gpu_spec(peaks[gpu]), core_precision(precision)
        near = gpu_spec(peaks[gpu])
        near.fp32_flops -= 1
        if near.tf32_flops > 0:
            near.tf32_flops -= 1
        if near.fp16_flops > 0:
            near.fp16_flops -= 1
        near.memory_bandwidth += 1
        times = [batch / x for x in throughputs]
        for i, t_anchor in enumerate(times):
            run = [_core.Measurement(batch, t_anchor)]
            same = lc.predict_anchored(stats, spec, run, spec, prec, batch).model
            other = lc.predict_anchored(stats, spec, run, near, prec, batch).model
            for j, t_target in enumerate(times):
                if i == j:
                    continue
                pairs += 1
                for key, predicted in (("shipped", same.compute_s(batch) + same.optimizer_s),
                                       ("through_the_ratio_model", other.compute_s(batch) + other.optimizer_s),
                                       ("the_run_itself", t_anchor)):
                    errs[key].append(abs(predicted / t_target - 1.0) * 100.0)
    print(json.dumps({"split": "same_specs_hosts/lambda", "pairs": pairs,
                      **{k: {"median_ape": round(float(np.median(v)), 2), "p90_ape": round(float(np.percentile(v, 90)), 2)}
                         for k, v in errs.items() if v}}))


def _total_s(m, b: float) -> float:
    """A compute model's forward, backward and optimizer step at local batch ``b`` (seconds)."""
    return m.compute_s(b) + m.optimizer_s


def _floor_counter(**extra: int) -> dict:
    """The counts measured_floor_sweep and instance_floor_sweep keep per family of runs."""
    return {"runs": 0, "runs_under_own_floor": 0, "curves_under_before": 0, "curves_under_after": 0,
            "predictions": 0, "predictions_under_before": 0, "predictions_under_after": 0,
            "least_over_floor_before": math.inf, "least_over_floor_after": math.inf, **extra}


def _count_under_floor(c: dict, before, after, grid, floor: float) -> None:
    """Adds to ``c`` the grid batches where the curves ``before`` and ``after`` (compute plus
    the optimizer step) are under the floor (``floor`` seconds per sample x batch)."""
    for name, m in (("before", before), ("after", after)):
        over = np.array([_total_s(m, b) / (floor * b) for b in grid])
        under = int((over < 1 - 1e-9).sum())
        c[f"predictions_under_{name}"] += under
        c[f"curves_under_{name}"] += int(under > 0)
        c[f"least_over_floor_{name}"] = min(c[f"least_over_floor_{name}"], float(over.min()))
    c["predictions"] += len(grid)


def _print_floor_counts(split: str, out: dict) -> None:
    for family, c in out.items():
        c = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()}
        print(json.dumps({"split": f"{split}/run_at_{family}", **c}))


def measured_floor_sweep(w) -> None:
    """How often the measured GPU's own curve (srift::LearnedCompute::measured_model) fell under
    its peak floor before note "measured floor" held it, and after: every zoo workload x
    catalog GPU x precision, one run at batch 1, 8, 64 or 512 timed at 1.25x, 2x or 4x its floor
    (the data's nearest margins, bench peak_floor_margin) or at 0.25-2x the no-measurement
    prediction (a faster or slower stack than srift's); predictions on batch_grid(1024).
    "before" is the core's curve without the floor (the learned curve scaled through the run),
    "after" the core's; runs under their own floor have none and are counted apart."""
    from srift import _core
    from srift.catalog import Catalog
    from srift.learn import default_models
    from srift.learn.features import (PRECISIONS, core_precision, core_workload_stats, gpu_spec, peak_floor_per_sample,
                                      roofline)
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.models import batch_grid, split_like

    cat, lc = Catalog.default(), default_models().learned_compute
    grid = batch_grid(1024.0)

    total = _total_s
    out: dict[str, dict] = {}
    for key in sorted(w):
        wl = w[key]
        stats_w = core_workload_stats(wl)
        for gpu_key in cat.gpu_keys():
            g = peaks_from_catalog(cat, gpu_key)
            spec = gpu_spec(g)
            for prec in PRECISIONS:
                p, floor, roof = core_precision(prec), peak_floor_per_sample(wl, g, prec), roofline(wl, g, prec)
                learned = lc.predict_absolute(stats_w, spec, p, 1024.0).model
                curve = split_like(roof, learned.forward_fixed_s + learned.backward_fixed_s + learned.optimizer_s,
                                   learned.per_sample_s())
                for batch in (1.0, 8.0, 64.0, 512.0):
                    runs = [("floor", k * floor * batch) for k in (1.25, 2.0, 4.0)]
                    runs += [("no_measurement", k * total(learned, batch)) for k in (0.25, 0.5, 1.0, 2.0)]
                    for family, seconds in runs:
                        c = out.setdefault(family, _floor_counter())
                        run = [_core.Measurement(batch, seconds)]
                        c["runs"] += 1
                        if seconds < floor * batch:
                            c["runs_under_own_floor"] += 1
                            continue
                        before = _core.anchor_to_measurements(curve, run)
                        after = lc.measured_model(stats_w, spec, roof, run, p, 1024.0)
                        _count_under_floor(c, before, after, grid, floor)
    _print_floor_counts("measured_floor_sweep", out)


def ratio_engine_path(w) -> None:
    """The anchored model as the engine applies it (srift::LearnedCompute note "anchored batch
    shape"): the anchor's one measurement moves along the anchor GPU's measured curve (the
    absolute model's, scaled through it: note "measured batch shape"; halfway to the roofline's
    as a column, the curve the engine used until 29d84b7) to the target's batch, and the ratio (blended and shrunk, srift.learn.blend notes "blend" and
    "shrink"; clipped by dominance as shipped) is evaluated there. The engine fits a line
    through such points on its batch grid; this scores the point at the target's batch. Beside
    the pair features of the split above and the engine before this note (the ratio at the
    anchor's batch scaling the anchor's roofline curve). Shipped training data (CPU rows in),
    GPU targets."""
    from srift import _core
    from srift.learn.blend import anchored_correction, anchored_log_ratio, blended, observed_anchor_error
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_correction, guarded_log_ratio, reference_gpus
    from srift.learn.features import absolute_features, peak_floor_per_sample, ratio_features, roofline
    from srift.learn.models import absolute_line_in_order, absolute_on_grid

    rows = compute_rows(cpu=True)
    X, y, base, truth, meta = ratio_dataset(rows, w)
    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    chips_a = np.array([r.chip for _, r in meta_a])
    peaks, (weight, shrink) = device_peaks(), shipped_blend()
    absolute: dict[str, object] = {}
    pair, engine, blend_only, ratio_only, guarded, before, guarded_halfway, floored = (np.full(len(y), np.nan)
                                                                                      for _ in range(8))

    def total(m, b: float) -> float:
        return m.compute_s(b) + m.optimizer_s

    for i, est in held_out_fits(X, y, meta, shipped_factory("ratio")):
        a, b = meta[i]
        if b.source == "cpu":
            continue
        if b.chip not in absolute:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                absolute[b.chip] = shipped_factory("absolute")().fit(Xa[chips_a != b.chip], ya[chips_a != b.chip])
        est_a = absolute[b.chip]
        wl, pa, pb = w[a.workload], peaks[a.gpu], peaks[b.gpu]
        pair[i] = base[i] + est.predict(X[i:i + 1])[0]
        roof_a = roofline(wl, pa, a.precision)
        measurement = [_core.Measurement(a.batch, a.per_sample_s * a.batch)]
        refs = reference_gpus({b.chip})
        comparable = not math.isnan(observed_anchor_error([(a, b)], w)[0])

        def ratio_at(batch: float, on_anchor: float) -> float:
            """The shipped log ratio (per sample) at `batch`, the anchor at `on_anchor` seconds."""
            observed = math.log(on_anchor / total(roof_a, batch)) if comparable else math.nan

            def log_ratio(g) -> float:
                return anchored_log_ratio(est.predict, est_a.predict, wl, pa, batch, g, batch, a.precision, observed,
                                          weight, shrink)

            return guarded_log_ratio(log_ratio, pa, pb, refs, a.precision)

        # the engine before: the anchor's roofline curve, the ratio at the anchor's batch
        rooflined = _core.anchor_to_measurements(roof_a, measurement)
        before[i] = math.log(total(rooflined, b.batch) * math.exp(ratio_at(a.batch, a.per_sample_s * a.batch))
                             / b.batch / a.per_sample_s)
        # now: the anchor's measured curve (the learned one scaled through the measurement, note
        # "measured batch shape") to b's batch; halfway to the roofline's, as shipped until 29d84b7
        span = 4.0 * max(a.batch, b.batch)
        # the core's line for the anchor (predict_absolute: put in order with the references'
        # lines, its note "lines in order")
        # (no grid ends: the workload table knows no memory, so every reference's line is on this
        # grid, as the core's with none: note "own grids")
        learned = absolute_line_in_order(est_a.predict, wl, pa, a.precision, refs, span)
        halfway = absolute_on_grid(roof_a, lambda grid: [0.5 * math.log(total(learned, g) / total(roof_a, g))
                                                         for g in grid], span)
        on_halfway = total(_core.anchor_to_measurements(halfway, measurement), b.batch)
        guarded_halfway[i] = math.log(on_halfway * math.exp(ratio_at(b.batch, on_halfway)) / b.batch / a.per_sample_s)
        on_anchor = total(_core.anchor_to_measurements(learned, measurement), b.batch)
        f = ratio_features(wl, pa, b.batch, pb, b.batch, a.precision)
        fa, fb = absolute_features(wl, pa, b.batch, a.precision), absolute_features(wl, pb, b.batch, a.precision)
        corr = est.predict(np.asarray([f]))[0]
        corr_a, corr_b = est_a.predict(np.asarray([fa]))[0], est_a.predict(np.asarray([fb]))[0]
        observed = math.log(on_anchor / total(roof_a, b.batch)) if comparable else math.nan
        for out, c in ((ratio_only, corr), (blend_only, blended(corr, corr_b - corr_a, weight)),
                       (engine, anchored_correction(corr, corr_a, corr_b, observed, weight, shrink))):
            out[i] = math.log(on_anchor * math.exp(f[0] + c) / b.batch / a.per_sample_s)
        guarded[i] = math.log(on_anchor * math.exp(ratio_at(b.batch, on_anchor)) / b.batch / a.per_sample_s)
        # the core's note "peak floor": no faster than the target's FLOPs at its peak; none where
        # the anchor's run beats its own
        floor = peak_floor_per_sample(wl, pb, a.precision, anchor=pa, measurements=measurement)
        floored[i] = max(guarded[i], math.log(floor / a.per_sample_s)) if floor > 0 else guarded[i]
    ok = ~np.isnan(engine)
    print(json.dumps({"split": "compute_leave_one_gpu_out_engine_path", "v0_roofline": stats(ape(base[ok], truth[ok])),
                      "pair_features": stats(ape(pair[ok], truth[ok])),
                      "before_anchor_roofline_curve_ratio_at_anchor_batch": stats(ape(before[ok], truth[ok])),
                      "engine_path_ratio_model": stats(ape(ratio_only[ok], truth[ok])),
                      f"engine_path_blend_{weight}": stats(ape(blend_only[ok], truth[ok])),
                      f"engine_path_blend_{weight}_shrink_{shrink}": stats(ape(engine[ok], truth[ok])),
                      f"engine_path_blend_{weight}_shrink_{shrink}_dominance_guard": stats(ape(guarded[ok], truth[ok])),
                      "the_same_held_to_the_peak_floor": stats(ape(floored[ok], truth[ok])),
                      "peak_floor_binds": int((floored[ok] > guarded[ok]).sum()),
                      "same_anchor_on_the_halfway_curve": stats(ape(guarded_halfway[ok], truth[ok]))}))
    for source in ("lambda", "gavel", "sia"):
        m = ok & np.array([r.source == source for _, r in meta])
        print(json.dumps({"split": f"compute_leave_one_gpu_out_engine_path/{source}",
                          "before_anchor_roofline_curve_ratio_at_anchor_batch": stats(ape(before[m], truth[m])),
                          f"engine_path_blend_{weight}_shrink_{shrink}_dominance_guard": stats(ape(guarded[m], truth[m])),
                          "the_same_held_to_the_peak_floor": stats(ape(floored[m], truth[m]))}))
    # Where the error is: each (anchor chip -> target chip) of the labs whose pairs miss the target
    for source in ("gavel", "sia"):
        pairs = sorted({(a.chip, b.chip) for (a, b), keep in zip(meta, ok) if keep and b.source == source})
        for chips in pairs:
            m = ok & np.array([b.source == source and (a.chip, b.chip) == chips for a, b in meta])
            print(json.dumps({"split": f"compute_leave_one_gpu_out_engine_path/{source}/{chips[0]}->{chips[1]}",
                              "as_shipped": stats(ape(guarded[m], truth[m])), "v0_roofline": stats(ape(base[m], truth[m]))}))
    pair_ratio_floor(meta, truth, guarded, ok)
    engine_path_breakdown(meta, truth, guarded, ok)


def pair_ratio_floor(meta, truth: np.ndarray, shipped: np.ndarray, ok: np.ndarray) -> None:
    """What any anchored model smooth in the batch could score on a lab's pairs, at best: the
    measured log ratio of each (model, precision, anchor chip, target chip) fitted in hindsight
    on the test truths themselves, as a constant or as a line in log batch, and scored on the
    same rows (in-sample, so a floor on the error, not a prediction). A model that gives every
    batch of a pair the same correction cannot beat the constant; one whose correction moves
    smoothly with the batch cannot beat the line by much. Only groups with at least three
    distinct target batches are scored (Lambda times one batch per GPU, so it has none), beside
    the shipped prediction on the same rows."""
    for source in ("gavel", "sia"):
        groups: dict[tuple, list[int]] = {}
        for i, (a, b) in enumerate(meta):
            if ok[i] and b.source == source:
                groups.setdefault((a.workload, a.precision, a.chip, b.chip), []).append(i)
        rows, constant, line, scored = [], [], [], 0
        for members in groups.values():
            log_batch = np.log([meta[i][1].batch for i in members])
            if len(set(log_batch)) < 3:
                continue
            t = truth[members]
            scored += 1
            rows += members
            constant += list(np.full(len(t), t.mean()))
            line += list(np.polyval(np.polyfit(log_batch, t, 1), log_batch))
        if not rows:
            continue
        print(json.dumps({"split": f"compute_pair_ratio_floor/{source}",
                          "hindsight_constant_per_pair": stats(ape(np.array(constant), truth[rows])),
                          "hindsight_line_in_log_batch_per_pair": stats(ape(np.array(line), truth[rows])),
                          "as_shipped": stats(ape(shipped[rows], truth[rows])), "pairs_scored": scored}))


def engine_path_breakdown(meta, truth: np.ndarray, shipped: np.ndarray, ok: np.ndarray) -> None:
    """Where the anchored engine path's error sits (docs/accuracy.md, "Where the cross-GPU error
    sits"), on the held-out rows ratio_engine_path scores:
      .../tail              the rows past the whole split's p90, by source
      .../{source}/{by}/{key}  each source's rows by target chip, anchor chip, model, direction
                            (the target measured faster or slower than the anchor) and batch
                            (the target's batch against the anchor's): n, how many of the
                            source's own p90 tail, the key's median / p90 and signed median
                            (+: predicted too slow), and the source's figure without the key
      .../contradicts_dominance/{source}  pairs whose measurements contradict the GPUs' specs
                            at one batch (srift.learn.dominance dominance_contradictions): their
                            error, the least any dominance-keeping model makes on them, the
                            figures without them
      .../without/*         the whole split without the groups that hold most of the tail
      .../lambda_batch_ratio  Lambda's signed error by the target's batch over the anchor's,
                            and its slope in log batch ratio with and without the two chips
                            that carry it (RTX 4090 and B200, as target or anchor)
      .../sia_same_gpu_other_host  Sia's A100 timed on two clusters (dgx, dgx-ext), one
                            model and batch: the noise of a host, not of a GPU
    Signed errors are medians of log(predicted / measured), printed as percentages."""
    idx = np.flatnonzero(ok)
    rows = [meta[i] for i in idx]
    log_error = shipped[idx] - truth[idx]
    err = ape(shipped[idx], truth[idx])
    source = np.array([b.source for _, b in rows])

    def figure(m: np.ndarray) -> dict:
        return stats(err[m]) if m.any() else {"n": 0}

    def signed(m: np.ndarray) -> float:
        return round(100.0 * math.expm1(float(np.median(log_error[m]))), 1)

    threshold = float(np.quantile(err, 0.9))
    tail = err > threshold
    print(json.dumps({"split": "compute_engine_path_breakdown/tail", "p90_ape": round(threshold, 2),
                      "rows_past_it": int(tail.sum()),
                      **{s: int((tail & (source == s)).sum()) for s in ("lambda", "gavel", "sia")}}))
    keys = {"target": lambda a, b: b.chip, "anchor": lambda a, b: a.chip, "model": lambda a, b: b.workload,
            "direction": lambda a, b: "target_faster" if b.per_sample_s < a.per_sample_s else "target_slower",
            "batch": lambda a, b: ("same" if a.batch == b.batch else
                                   "target_larger" if b.batch > a.batch else "target_smaller")}
    for s in ("lambda", "gavel", "sia"):
        in_source = source == s
        own_tail = in_source & (err > np.quantile(err[in_source], 0.9))
        for by, key in keys.items():
            labels = np.array([key(a, b) for a, b in rows])
            for k in sorted(set(labels[in_source]), key=lambda k: (-int((own_tail & (labels == k)).sum()), k)):
                m = in_source & (labels == k)
                print(json.dumps({"split": f"compute_engine_path_breakdown/{s}/{by}/{k}", "n": int(m.sum()),
                                  "in_source_p90_tail": f"{int((own_tail & m).sum())}/{int(own_tail.sum())}",
                                  "its": figure(m), "signed_median_pct": signed(m),
                                  "source_without_it": figure(in_source & ~m)}))
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import dominance_contradictions

    bound = dominance_contradictions(rows, device_peaks())
    whether = bound > 0
    for s in ("lambda", "gavel", "sia"):
        m = whether & (source == s)
        print(json.dumps({"split": f"compute_engine_path_breakdown/contradicts_dominance/{s}", "n": int(m.sum()),
                          "of": int((source == s).sum()), "past_the_split_p90": int((m & tail).sum()),
                          "its": figure(m),
                          "least_error_keeping_dominance": (stats(bound[m]) if m.any() else {"n": 0}),
                          "source_without_them": figure((source == s) & ~m)}))
    ncf_sia = np.array([b.source == "sia" and b.workload.startswith("ncf") for _, b in rows])
    newest_or_4090 = np.array([bool({a.chip, b.chip} & {"RTX4090", "B200"}) for a, b in rows])
    for label, m in (("sia", source == "sia"), ("sia_ncf", ncf_sia), ("contradicts_dominance", whether),
                     ("sia_ncf_or_contradicts_dominance", ncf_sia | whether),
                     ("lambda_rtx4090_or_b200", (source == "lambda") & newest_or_4090)):
        print(json.dumps({"split": f"compute_engine_path_breakdown/without/{label}", "removed": int(m.sum()),
                          "removed_past_the_split_p90": int((m & tail).sum()), "the_rest": figure(~m)}))
    lam = source == "lambda"
    log_ratio = np.array([math.log(b.batch / a.batch) for a, b in rows])
    bins = {}
    for lo, hi in ((-9.0, -1.5), (-1.5, -0.7), (-0.7, -0.2), (-0.2, 0.2), (0.2, 0.7), (0.7, 1.5), (1.5, 9.0)):
        m = lam & (log_ratio >= lo) & (log_ratio < hi)
        bins[f"[{lo},{hi})"] = {**figure(m), "signed_median_pct": signed(m)}

    def slope(m: np.ndarray) -> float:
        return round(float(np.polyfit(log_ratio[m], log_error[m], 1)[0]), 3)

    print(json.dumps({"split": "compute_engine_path_breakdown/lambda_batch_ratio",
                      "by_log_target_over_anchor_batch": bins,
                      "slope_of_log_error": slope(lam), "slope_without_rtx4090_b200": slope(lam & ~newest_or_4090)}))
    one_gpu: dict[tuple, list[float]] = {}
    for r in sia_rows():
        if r.replicas == 1 and r.cluster in ("dgx", "dgx-ext"):
            one_gpu.setdefault((r.cluster, r.model, r.local_bsz), []).append(r.step_time)
    apart = [abs(float(np.median(one_gpu[("dgx-ext", m, b)])) / float(np.median(t)) - 1.0) * 100.0
             for (c, m, b), t in one_gpu.items() if c == "dgx" and ("dgx-ext", m, b) in one_gpu]
    print(json.dumps({"split": "compute_engine_path_breakdown/sia_same_gpu_other_host",
                      "abs_pct_apart": {"median": round(float(np.median(apart)), 2),
                                        "p90": round(float(np.quantile(apart, 0.9)), 2), "max": round(max(apart), 1),
                                        "n": len(apart)}}))


def absolute_engine_path(w) -> None:
    """The absolute model as the engine applies it (srift.learn.models note "batch grid"): one
    affine ComputeModel per GPU fitted on a batch grid up to the memory limit (at least 1024),
    which the workload table does not know, so it stands at 4x and 64x each row's batch; beside the
    model evaluated at each row's own batch (the split above) and the reference-batch-32
    scaling the engine used before. Shipped training data (CPU rows in), GPU targets."""
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_correction, reference_gpus
    from srift.learn.features import absolute_features, roofline
    from srift.learn.models import absolute_line_in_order, absolute_on_grid

    X, y, base, truth, meta = shipped_absolute_dataset(w)
    peaks = device_peaks()
    cols = ("at_row_batch", "grid_to_4x_batch", "grid_to_64x_batch", "reference_batch_32",
            "at_row_batch_dominance_guard", "grid_to_4x_batch_dominance_guard", "grid_to_64x_batch_dominance_guard")
    pred = {k: np.full(len(y), np.nan) for k in cols}
    for i, est in held_out_fits(X, y, meta, shipped_factory("absolute")):
        r = meta[i][1]
        if r.source == "cpu":
            continue
        wl, gpu, b = w[r.workload], peaks[r.gpu], r.batch
        prior = roofline(wl, gpu, r.precision)
        refs = reference_gpus({r.chip})

        def corr(batches, guard: bool = False) -> np.ndarray:
            if guard:
                return guarded_correction(est.predict, wl, gpu, batches, r.precision, refs)
            return est.predict(np.asarray([absolute_features(wl, gpu, float(x), r.precision) for x in batches]))

        roof = (prior.compute_s(b) + prior.optimizer_s) / b
        pred["at_row_batch"][i] = math.log(roof) + corr([b])[0]
        pred["at_row_batch_dominance_guard"][i] = math.log(roof) + corr([b], True)[0]
        pred["reference_batch_32"][i] = math.log(roof) + corr([32.0])[0]
        for k, mult in (("grid_to_4x_batch", 4), ("grid_to_64x_batch", 64)):
            # no grid ends (no memory known): the references' lines on the row's grid (note "own grids")
            for suffix, guard in (("", False), ("_dominance_guard", True)):
                m = (absolute_line_in_order(est.predict, wl, gpu, r.precision, refs, mult * b) if guard else
                     absolute_on_grid(prior, lambda grid: corr(grid, guard), mult * b, token_slope=True))
                pred[k + suffix][i] = math.log((m.compute_s(b) + m.optimizer_s) / b)
    ok = ~np.isnan(pred["at_row_batch"])
    print(json.dumps({"split": "compute_absolute_leave_one_gpu_out_engine_path", "v0_roofline": stats(ape(base[ok], truth[ok])),
                      **{k: stats(ape(v[ok], truth[ok])) for k, v in pred.items()}}))


def leave_one_repeat_out(groups: dict) -> np.ndarray:
    """APE (%) of every repeat against the median of the other repeats of its group."""
    out = []
    for ts in groups.values():
        if len(ts) < 2:
            continue
        for i, t in enumerate(ts):
            out.append(abs(t / float(np.median(ts[:i] + ts[i + 1:])) - 1) * 100)
    return np.asarray(out)


def interval_coverage(w, cases, steps, sites) -> None:
    """Do the p10-p90 bands hold on data nobody saw? Nested leave-one-out: for every held-out
    GPU chip (Sia cluster; model), the band comes from the held-out residuals of the *other*
    chips (clusters; models) only, as `srift train` builds the shipped band, and is checked on
    the held-out group's rows. A calibrated band holds 80% of them, 10% below and 10% above. The compute
    bands use and are checked on the rows timed without the Sia harness, as shipped
    (srift.learn.train note "band rows"); "_all_gpu_rows" is the all-rows rule beside them."""
    from srift.learn.train import _split_key

    def report(name: str, resid: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_groups: int) -> None:
        ok = ~(np.isnan(resid) | np.isnan(lo))
        r, lo, hi = resid[ok], lo[ok], hi[ok]
        print(json.dumps({"split": f"interval_coverage/{name}", "inside_p10_p90": round(float(np.mean((r >= lo) & (r <= hi))), 3),
                          "below_p10": round(float(np.mean(r < lo)), 3), "above_p90": round(float(np.mean(r > hi)), 3),
                          "n": int(r.size), "held_out_groups": n_groups}))
        deadline_calibration(name, r, hi)

    rows_c = compute_rows(cpu=True)
    # The absolute model has no Sia rows (srift.learn.features note "new models"): one rule.
    for label, builder, by, rules in (
            ("compute_anchored_leave_one_gpu_out", ratio_dataset, "chip", ("", "_all_gpu_rows")),
            ("compute_absolute_leave_one_gpu_out", absolute_dataset, "chip", ("",)),
            ("compute_absolute_leave_one_model_out", absolute_dataset, "model", ("",))):
        which = "absolute" if builder is absolute_dataset else "ratio"
        X, y, base, truth, meta = builder(compute_rows(cpu=shipped_kind(which)[1]), w)
        touched = [_split_key(m, by) for m in meta]
        groups = sorted({t[1] for t in touched if t[1] is not None})  # GPU chips or models

        fits: dict[tuple, object] = {}  # the folds do not depend on the band rule: fit each once
        # The absolute model as shipped: clipped by the reference GPUs (srift.learn.dominance).
        post = absolute_guard(meta, w, by) if builder is absolute_dataset else None

        def predicted(est, rows: np.ndarray, held: set[str]) -> np.ndarray:
            idx = np.flatnonzero(rows)
            return est.predict(X[idx]) if post is None else post(est, idx, held)

        def fit(key: tuple, train: np.ndarray):
            if key not in fits:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fits[key] = shipped_factory(which)().fit(X[train], y[train])
            return fits[key]

        for suffix in rules:
            no_sia = suffix == ""
            gpu = np.array([b.source != "cpu" and not (no_sia and b.source == "sia") for _, b in meta])
            resid, lo, hi = np.full(len(y), np.nan), np.full(len(y), np.nan), np.full(len(y), np.nan)
            held = 0
            for g in groups:
                test = np.array([t[1] == g for t in touched]) & gpu
                clean = np.array([g not in t[0] for t in touched])
                if not test.any():
                    continue  # a CPU (or, for the shipped band rule, a Sia-only chip): trained on, never scored
                held += 1
                resid[test] = y[test] - predicted(fit((g,), clean), test, {g})
                inner = []
                for h in groups:
                    if h == g:
                        continue
                    t_h = clean & gpu & np.array([t[1] == h for t in touched])
                    train_h = clean & np.array([h not in t[0] for t in touched])
                    if t_h.any() and train_h.sum() >= 10:
                        inner.append(y[t_h] - predicted(fit((g, h), train_h), t_h, {g, h}))
                r = np.concatenate(inner)
                lo[test], hi[test] = np.quantile(r, 0.1), np.quantile(r, 0.9)
            report(label + suffix, resid, lo, hi, held)

    blended_band_coverage(w, rows_c, report)
    lab_band_coverage(w)
    ok = ~np.isnan(steps)
    r_all = np.log(np.array([c.step_time for c in cases]) / steps)
    lo, hi = np.full(len(cases), np.nan), np.full(len(cases), np.nan)
    for g in sorted(set(sites[ok])):
        others = ok & (sites != g)
        lo[ok & (sites == g)], hi[ok & (sites == g)] = np.quantile(r_all[others], 0.1), np.quantile(r_all[others], 0.9)
    report("multi_node_instance_anchored_leave_one_cluster_out", np.where(ok, r_all, np.nan), lo, hi,
           len(set(sites[ok])))


def lab_band_coverage(w) -> None:
    """The no-measurement band across labs (srift.learn.lab_band note "lab band"): each lab's
    GPU rows predicted by the absolute model with that lab held out (the dominance guard as
    shipped), on every row and on the (chip, precision) cells the other lab timed, against the
    chip-out band (what srift shipped before), the shipped band (chip-out convolved with every
    lab's shift, the held-out lab's own included: not out of sample) and the band built from the
    other labs alone (their chip-out residuals convolved with their shifts: what a new lab gets).
    With two labs even that is not nested: the other lab's shift is measured against a model
    that learned this lab. Out of sample it is checked by
    bench/external_nvidia.py (one_gpu_no_measurement). Also the lab shifts refitted in this run
    beside the shipped ones."""
    from srift.learn.lab_band import LAB_SOURCES, convolved_band, lab_shifts, on_shared_cells
    from srift.learn.models import default_models

    X, y, _, _, meta = shipped_absolute_dataset(w)
    pred, mask, _ = loco_errors(X, y, meta, shipped_factory("absolute"), "source", absolute_guard(meta, w, "source"))
    doc = default_models().absolute.doc["residuals"]
    chip_out = doc["within_lab"]
    refitted = lab_shifts(y, meta, pred, mask)
    print(json.dumps({"split": "interval_coverage/compute_absolute_lab_band",
                      "refitted": {s: round(v["factor"], 4) for s, v in refitted.items()},
                      "shipped": {s: round(v["factor"], 4) for s, v in doc["lab_shifts"].items()},
                      "band": {name: [round(math.exp(b["p10"]), 4), round(math.exp(b["p90"]), 4)]
                               for name, b in (("chip_out", chip_out), ("shipped", doc))}}))
    src = np.array([b.source for _, b in meta])
    r = y - pred
    # The shipped band holds every lab's shift, the held-out lab's own among them (its rows'
    # median miss): the band a new lab would get is the other labs' chip-out residuals convolved
    # with the other labs' shifts only.
    chip_pred, chip_mask, _ = loco_errors(X, y, meta, shipped_factory("absolute"), "chip", absolute_guard(meta, w, "chip"))
    for s in LAB_SOURCES:
        others = [v["log_shift"] for lab, v in refitted.items() if lab != s]
        within = (y - chip_pred)[chip_mask & np.isin(src, [lab for lab in LAB_SOURCES if lab != s])]
        other_labs = None
        if others and within.size >= 2:
            # as train_lab_band ships it: each side the wider of the convolution's and the chip-out one's
            conv = convolved_band(within, others)
            other_labs = {"p10": min(conv["p10"], float(np.quantile(within, 0.1))),
                          "p90": max(conv["p90"], float(np.quantile(within, 0.9)))}
        for subset, sel in (("all_rows", mask & (src == s)), ("shared_cells", mask & on_shared_cells(meta, s))):
            if not sel.any():
                continue
            out = {"split": f"interval_coverage/compute_absolute_leave_one_lab_out/{s}/{subset}", "n": int(sel.sum())}
            bands = [("chip_out_band", chip_out), ("shipped_band", doc)]
            if other_labs is not None:
                bands.append(("other_labs_band", other_labs))
            for name, band in bands:
                lo, hi = float(band["p10"]), float(band["p90"])
                out[name] = {"inside_p10_p90": round(float(np.mean((r[sel] >= lo) & (r[sel] <= hi))), 3),
                             "below_p10": round(float(np.mean(r[sel] < lo)), 3),
                             "above_p90": round(float(np.mean(r[sel] > hi)), 3)}
            print(json.dumps(out))


def blended_band_coverage(w, rows, report) -> None:
    """interval_coverage of the shipped anchored band (srift.learn.blend notes "blend" and
    "shrink", clipped by dominance as shipped: srift.learn.dominance): for every held-out GPU
    chip g, the band is the 10th-90th percentile of the held-out
    residuals of the other chips h (both models fitted without g and h), checked on g's rows
    timed without the Sia harness."""
    from srift.learn.blend import anchored_log_ratio, observed_anchor_error
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_log_ratio, reference_gpus
    from srift.learn.train import _split_key

    X, y, _, _, meta = ratio_dataset(rows, w)
    Xa, ya, _, _, meta_a = shipped_absolute_dataset(w)
    weight, shrink = shipped_blend()
    observed = observed_anchor_error(meta, w)
    peaks = device_peaks()
    touched = [_split_key(m, "chip") for m in meta]
    chips_a = np.array([r.chip for _, r in meta_a])
    band_rows = np.array([b.source not in ("cpu", "sia") for _, b in meta])
    groups = sorted({t[1] for t in touched})

    def held_out(test: np.ndarray, out: set[str]) -> np.ndarray:
        train = np.array([not (t[0] & out) for t in touched])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ratio = shipped_factory("ratio")().fit(X[train], y[train])
            absolute = shipped_factory("absolute")().fit(Xa[~np.isin(chips_a, list(out))],
                                                         ya[~np.isin(chips_a, list(out))])
        refs = reference_gpus(out)
        resid = []
        for i in np.flatnonzero(test):  # as shipped: clipped by dominance (srift.learn.dominance)
            a, b = meta[i]
            wl, pa = w[a.workload], peaks[a.gpu]
            ratio_ab = guarded_log_ratio(
                lambda g: anchored_log_ratio(ratio.predict, absolute.predict, wl, pa, a.batch, g, b.batch, a.precision,
                                             float(observed[i]), weight, shrink), pa, peaks[b.gpu], refs, a.precision)
            resid.append(y[i] - (ratio_ab - X[i, 0]))
        return np.asarray(resid)

    resid, lo, hi = (np.full(len(y), np.nan) for _ in range(3))
    held = 0
    for g in groups:
        test = band_rows & np.array([t[1] == g for t in touched])
        if not test.any():
            continue
        held += 1
        resid[test] = held_out(test, {g})
        inner = [held_out(t_h, {g, h}) for h in groups if h != g
                 for t_h in [band_rows & np.array([t[1] == h and g not in t[0] for t in touched])] if t_h.any()]
        r = np.concatenate(inner)
        lo[test], hi[test] = np.quantile(r, 0.1), np.quantile(r, 0.9)
    report(f"compute_anchored_blend_{weight}_shrink_{shrink}_leave_one_gpu_out", resid, lo, hi, held)


def engine_misses(cases, w, engine_path, truth, sites, multinode) -> None:
    """multi_gpu_engine_misses/*: the engine path's signed error on Sia's multi-node steps by
    cluster and GPUs per node, and whether the 1-GPU step's host share orders the misses."""
    from scipy.stats import spearmanr

    from srift.learn import default_models
    from srift.learn.features import roofline_per_sample
    from srift.learn.gpus import DATA_GPU_NAMES, TRAINING_GPUS

    signed = 100 * (np.exp(engine_path - truth) - 1)
    per_node = np.array([max(int(ch) for ch in c.placement) for c in cases])
    for g in sorted(set(sites)):
        by = {}
        for n in sorted(set(per_node)):
            k = multinode & (sites == g) & (per_node == n)
            if k.any():
                by[str(n)] = {"signed_median_pct": round(float(np.median(signed[k])), 1), "n": int(k.sum())}
        if by:
            print(json.dumps({"split": f"multi_gpu_engine_misses/by_gpus_per_node/{g}", **by}))
    # The 1-GPU step over the no-measurement model's GPU time at its batch: how much of it is
    # the host (input pipeline, harness) rather than the GPU.
    models, share, cache = default_models(), np.zeros(len(cases)), {}
    for i, c in enumerate(cases):
        key = (c.cluster, c.workload, c.local_bsz)
        if key not in cache:
            gpu, wl = TRAINING_GPUS[DATA_GPU_NAMES[c.cluster]], w[c.workload]
            corr = models.absolute_corrections(wl, gpu, np.array([c.local_bsz]), "amp")[0]
            cache[key] = math.log(c.one_gpu_time / (c.local_bsz * roofline_per_sample(wl, gpu, "amp", c.local_bsz)
                                                    * math.exp(corr)))
        share[i] = cache[key]
    names = np.array([c.model for c in cases])
    groups = [(g, m) for g in sorted(set(sites)) for m in sorted(set(names))
              if (multinode & (sites == g) & (names == m)).any()]
    med_share = [float(np.median(share[multinode & (sites == g) & (names == m)])) for g, m in groups]
    med_signed = [float(np.median(signed[multinode & (sites == g) & (names == m)])) for g, m in groups]
    rho, p = spearmanr(med_share, med_signed)
    rho_rows, _ = spearmanr(share[multinode], signed[multinode])
    print(json.dumps({"split": "multi_gpu_engine_misses/host_share", "spearman_by_cluster_model": round(float(rho), 2),
                      "p_value": round(float(p), 2), "groups": len(groups),
                      "spearman_by_step": round(float(rho_rows), 2), "steps": int(multinode.sum()),
                      "by_cluster_model": {f"{g}/{m}": {"host_share_x": round(math.exp(a), 1), "signed_median_pct": round(b, 1)}
                                           for (g, m), a, b in zip(groups, med_share, med_signed)}}))


def measurement_noise(cases) -> None:
    """Lambda's 1-GPU throughputs are the data with real repeats (the same benchmark on several
    hosts). Sia's multi-node placements were each measured once and its repeated 1-GPU rows
    are exact copies, so the floor there is how well a placement's *own* other batches predict
    a held-out batch of it: an affine fit in the batch (the form the engine's compute takes)
    and the log-log interpolation between the two neighbouring batches. No model of another
    cluster can be expected to beat either."""
    from srift.learn.comm import affine_fit
    from srift.learn.datasets import lambda_repeats

    e = leave_one_repeat_out({k: [1 / x for x in v] for k, v in lambda_repeats().items()})
    print(json.dumps({"split": "measurement_noise/lambda_single_gpu", "repeat_vs_others": stats(e)}))
    placements: dict[tuple, list[tuple[float, float]]] = {}
    for c in cases:
        if len(c.placement) > 1:
            placements.setdefault((c.cluster, c.model, c.placement), []).append((c.local_bsz, c.step_time))
    affine, neighbours = [], []
    for pts in placements.values():
        pts.sort()
        if len(pts) < 3:
            continue
        b, t = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
        for i, (bi, ti) in enumerate(pts):
            fixed, slope = affine_fit(pts[:i] + pts[i + 1:])
            affine.append(abs((fixed + slope * bi) / ti - 1) * 100)
            if 0 < i < len(pts) - 1:
                guess = t[i - 1] + (t[i + 1] - t[i - 1]) * (b[i] - b[i - 1]) / (b[i + 1] - b[i - 1])
                neighbours.append(abs(math.exp(guess - t[i]) - 1) * 100)
    print(json.dumps({"split": "measurement_noise/sia_multi_node_own_batches",
                      "affine_in_batch_leave_one_batch_out": stats(np.asarray(affine)),
                      "neighbour_batches_interpolated": stats(np.asarray(neighbours))}))


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


def link_calibrated(cases, w, base, truth, sites) -> None:
    """Sia multi-GPU steps given the test model's 1-GPU steps and its cluster's links as a probe
    would measure them, emulated from the other models' steps (srift.learn.comm note "probe
    calibration"): the intra-node probe on every GPU of a node or on two; one whole node, two
    whole nodes, every multi-node placement."""
    from srift.learn.comm import probe_calibrated_steps

    one = np.array([c.one_gpu_time for c in cases])
    full = np.log(probe_calibrated_steps(cases, w)[0] / one)
    two = np.log(probe_calibrated_steps(cases, w, 2)[0] / one)
    node = {g: max(int(ch) for c, s in zip(cases, sites) if s == g for ch in c.placement) for g in set(sites)}
    selections = {"one_whole_node": np.array([c.placement == str(node[s]) for c, s in zip(cases, sites)]),
                  "two_whole_nodes": np.array([c.placement == str(node[s]) * 2 for c, s in zip(cases, sites)]),
                  "multi_node": np.array([len(c.placement) > 1 for c in cases])}
    for label, sel in selections.items():
        sel = sel & ~np.isnan(full)
        for g in [*sorted(set(sites[sel])), "ALL"]:
            m = sel & ((sites == g) if g != "ALL" else True)
            print(json.dumps({"split": f"multi_gpu_link_calibrated/{label}/{g}", "v0_simulator": stats(ape(base[m], truth[m])),
                              "probe_on_every_gpu": stats(ape(full[m], truth[m])),
                              "probe_on_two_gpus": stats(ape(two[m], truth[m]))}))


def instance_floor_sweep(w) -> None:
    """How often a whole instance's measured iterations took its GPU's curve under the peak
    floor before srift::hold_to_measured_floor held it (note "measured floor"), and after: every
    zoo workload x catalog GPU of a multi-GPU instance x precision, the GPU's own curve the
    no-measurement model's (no 1-GPU run; the engine's _compute_entry), scaled through one
    instance run at batch 1, 8, 64 or 512 timed at 1.25x, 2x or 4x its floor or at 0.25-2x the
    GPU's curve (a host or harness faster or slower than srift's stack), or fitted through two
    runs at b and 2b whose times differ by 10% (a flat, host-bound line: Sia's NCF); predictions
    on batch_grid(1024). "before" is anchor_to_measurements of the curve (the engine's fit),
    "after" the core's hold of it; runs under their own floor have none and are counted apart."""
    from srift import _core
    from srift.catalog import Catalog
    from srift.learn import default_models
    from srift.learn.features import PRECISIONS, core_precision, core_workload_stats, gpu_spec, peak_floor_per_sample
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.models import batch_grid

    cat, lc = Catalog.default(), default_models().learned_compute
    grid = batch_grid(1024.0)
    gpus = sorted({cat.instance(n).gpu for n in cat.instance_names() if cat.instance(n).gpu_count > 1})

    total = _total_s
    out: dict[str, dict] = {}
    for key in sorted(w):
        wl = w[key]
        stats_w = core_workload_stats(wl)
        for gpu_key in gpus:
            g = peaks_from_catalog(cat, gpu_key)
            spec = gpu_spec(g)
            for prec in PRECISIONS:
                p, floor = core_precision(prec), peak_floor_per_sample(wl, g, prec)
                single = lc.predict_absolute(stats_w, spec, p, 1024.0).model
                for batch in (1.0, 8.0, 64.0, 512.0):
                    runs = [("floor", [(batch, k * floor * batch)]) for k in (1.25, 2.0, 4.0)]
                    runs += [("gpu_curve", [(batch, k * total(single, batch))]) for k in (0.25, 0.5, 1.0, 2.0)]
                    runs += [("two_batches_flat", [(batch, k * floor * batch), (2 * batch, 1.1 * k * floor * batch)])
                             for k in (1.25, 2.0)]
                    for family, points in runs:
                        c = out.setdefault(family, _floor_counter(measured_points_moved=0))
                        c["runs"] += 1
                        if any(t < floor * b for b, t in points):
                            c["runs_under_own_floor"] += 1
                            continue
                        ms = [_core.Measurement(b, t) for b, t in points]
                        before = _core.anchor_to_measurements(single, ms)
                        after = _core.hold_to_measured_floor(stats_w, spec, before, ms, p, 1024.0)
                        if len(points) == 1:  # one run: the held curve still passes through it
                            b, t = points[0]
                            c["measured_points_moved"] += int(abs(total(after, b) / t - 1) > 1e-9)
                        _count_under_floor(c, before, after, grid, floor)
    _print_floor_counts("instance_floor_sweep", out)


def instance_floor_on_sia(cases, w, rows) -> None:
    """How far under the peak floor Sia's instance fits went before srift::hold_to_measured_floor
    (note "measured floor"): each (cluster, model, GPUs per node, predicted local batch) of a
    multi-node step, the 1-GPU curve scaled through the node's single-node steps (AMP), against
    the floor on batch_grid of the predicted and measured batches."""
    from srift import _core
    from srift.learn.comm import _one_gpu_compute, node_measurements
    from srift.learn.features import peak_floor_per_sample
    from srift.learn.gpus import DATA_GPU_NAMES, TRAINING_GPUS
    from srift.learn.models import batch_grid

    nodes = node_measurements(rows)
    seen: dict[tuple, float] = {}
    for c in cases:
        if len(c.placement) < 2:
            continue
        for n in sorted({int(x) for x in c.placement} - {1}):
            points = nodes.get((c.cluster, c.model, n))
            key = (c.cluster, c.model, n, c.local_bsz)
            if not points or key in seen:
                continue
            runs = [_core.Measurement(b, t, -1.0, -1.0) for b, t in points]
            fit = _core.anchor_to_measurements(_one_gpu_compute(c), runs)
            g = TRAINING_GPUS[DATA_GPU_NAMES[c.cluster]]
            floor = peak_floor_per_sample(w[c.workload], g, "amp", anchor=g, measurements=runs)
            if floor > 0:
                grid = batch_grid(max([c.local_bsz] + [b for b, _ in points]))
                seen[key] = min((fit.compute_s(b) + fit.optimizer_s) / (floor * b) for b in grid)
    under = {k: v for k, v in seen.items() if v < 1}
    least = min(seen, key=seen.get)
    print(json.dumps({"split": "instance_floor_sweep/sia_single_node_fits", "fits": len(seen),
                      "under_the_floor_before": len(under), "least_over_floor_before": round(seen[least], 4),
                      "least_at": list(least)}))


def instance_anchored(steps, cases, base, truth, sites, unheld=None) -> None:
    """Sia multi-node steps given the test cluster's single-node steps (note "instance anchor");
    `unheld`: the same steps not held to the peak floor (note "measured floor"), printed beside
    with the count of steps the floor moved."""
    ok = ~np.isnan(steps)
    one = np.array([c.one_gpu_time for c in cases])
    pred = np.log(steps / one)
    for g in [*sorted(set(sites[ok])), "ALL"]:
        m = ok & ((sites == g) if g != "ALL" else True)
        out = {"split": f"multi_node_instance_anchored/{g}",
               "linear_scaling": stats(ape(np.zeros(m.sum()), truth[m])),
               "v0_simulator": stats(ape(base[m], truth[m])),
               "instance_anchored": stats(ape(pred[m], truth[m]))}
        if unheld is not None:
            out["not_held_to_the_peak_floor"] = stats(ape(np.log(unheld[m] / one[m]), truth[m]))
            out["moved_by_the_floor"] = int((steps[m] != unheld[m]).sum())
        print(json.dumps(out))



def gavel_multi_gpu(w) -> None:
    """Gavel's multi-GPU runs, given the 1-GPU step at the same per-GPU batch (srift.learn.gavel_scaling
    note "gavel scaling"): one server over PCIe with the engine's learned PCIe line (fitted on
    Sia's servers only) against v0 and linear scaling, the probe path (links calibrated on the
    other model), one worker per server; the shipped PCIe band's coverage; and the PCIe line
    refitted with Gavel's servers, leaving one of the four PCIe sites out."""
    from srift.learn import default_models
    from srift.learn.comm import build_cases, simulate_case, v0_log_eff
    from srift.learn.datasets import gavel_scaling_rows, sia_rows
    from srift.learn.gavel_scaling import (gavel_cases, gavel_pcie_points, one_server, pcie_line_steps, pcie_known,
                                           probe_calibrated_gavel_steps, v0_steps)
    from srift.learn.pcie_link import calibration_points, fit_pcie_efficiency, pcie_log_efficiency

    models = default_models()
    cases, dropped = gavel_cases(gavel_scaling_rows())
    truth = np.log([c.step_time for c in cases])
    linear = np.log([c.one_gpu_time for c in cases])
    v0 = np.log(v0_steps(cases, w))
    line = np.log(pcie_line_steps(cases, w, lambda n: pcie_log_efficiency(models.pcie_efficiency.core.predict, n)))
    probe, _ = probe_calibrated_gavel_steps(cases, w)
    probe = np.log(probe)
    gpu = np.array([c.cluster.split("/", 1)[1] for c in cases])
    server = np.array([one_server(c) for c in cases])
    pcie = np.array([pcie_known(c) for c in cases])
    print(json.dumps({"split": "gavel_multi_gpu/rows", "kept": len(cases), "dropped_faster_than_one_gpu": len(dropped)}))

    def emit(name: str, sel: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        for g in [*sorted(set(gpu[sel])), "ALL"]:
            m = sel & ((gpu == g) if g != "ALL" else True)
            print(json.dumps({"split": f"gavel_multi_gpu/{name}/{g}", "linear_scaling": stats(ape(linear[m], truth[m])),
                              **{k: stats(ape(v[m], truth[m])) for k, v in columns.items()}}))

    emit("one_server", server & pcie, {"v0_simulator": v0, "engine_pcie_line": line, "probe_on_every_gpu": probe})
    emit("one_server_interconnect_unknown", server & ~pcie, {"probe_on_every_gpu": probe})
    emit("one_gpu_per_server", ~server, {"v0_at_10gbps_assumed": v0, "probe_on_two_servers": probe})
    lo, hi = np.log(models.pcie_link_interval())
    r = (truth - line)[server & pcie]
    print(json.dumps({"split": "interval_coverage/gavel_multi_gpu/one_server_engine_pcie_line",
                      "inside_p10_p90": round(float(np.mean((r >= lo) & (r <= hi))), 3),
                      "below_p10": round(float(np.mean(r < lo)), 3), "above_p90": round(float(np.mean(r > hi)), 3),
                      "n": int(r.size)}))
    # The line refitted with Gavel's servers (not shipped: srift.learn.gavel_scaling note).
    sia = [c for c in build_cases(sia_rows()) if c.links.interconnect == "pcie"]
    sia_points, gavel_points = calibration_points(sia, w), gavel_pcie_points(cases, w)
    pcie_cases = sia + [c for c in cases if one_server(c) and pcie_known(c)]
    sites = sorted({p[0] for p in sia_points + gavel_points})
    for held in sites:
        out = {"split": f"multi_gpu_pcie_line_sites/{held}"}
        for label, points in (("sia_servers_only", sia_points), ("with_gavel_servers", sia_points + gavel_points)):
            est = fit_pcie_efficiency([p for p in points if p[0] != held])
            test = [c for c in pcie_cases if (site(c.cluster) if not c.cluster.startswith("gavel/") else c.cluster) == held]
            pred = []
            for c in test:
                gpus = max(int(ch) for ch in c.placement)
                le, net = pcie_log_efficiency(est.predict, gpus) if gpus > 1 else 0.0, v0_log_eff(c.links, True)
                pred.append(simulate_case(c, w[c.workload], lambda f, v=le: v, lambda f, v=net: v))
            out[label] = stats(ape(np.log(pred), np.log([c.step_time for c in test])))
        print(json.dumps(out))


if __name__ == "__main__":
    main()
