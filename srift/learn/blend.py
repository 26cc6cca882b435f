"""The anchored GPU-to-GPU ratio as a blend of two estimates (what the engine applies).

The engine evaluates it in the C++ core (srift::LearnedCompute, csrc/include/srift/
learned_compute.hpp); the functions here are the training code's twin, which scores held-out
scikit-learn models the same way, and tests/python/test_learned_compute.py holds both equal.

Note "blend". Given a measurement on GPU a, the time on GPU b is the measurement times a ratio,
and srift has two estimates of that ratio's log correction to the roofline:
  ratio model     trained on measured pairs (features of the pair, features.py)
  absolute model  corr(b) - corr(a): the no-measurement model's correction of each GPU's
                  roofline, differenced (what the model would predict for b, anchored to a)
Their errors are far from identical: the ratio model learned from pairs, where Lambda's many
GPUs dominate, and the absolute model from single rows timed the way srift's profiler times a
model. The shipped correction is (1 - w) * ratio + w * absolute, with w chosen by `srift train`
on both held-out splits (train.py note "two splits") from BLEND_WEIGHTS. Median / p90 APE of
anchored cross-GPU compute, GPU targets (bench/accuracy.py compute_leave_one_*_out_blended):
  weight                          leave one GPU chip out          leave one model out
  0 (ratio model alone)               18.6 / 60                       19.0 / 61
  0.4 (shipped)                       15.9 / 59                       17.3 / 58
  0.5                                 16.0 / 59                       17.0 / 61
  1 (absolute model differenced)      19.8 / 79                       19.3 / 80
Lambda's pairs gain most (16.7 -> 12.9 median leaving a chip out); Gavel's a little (24.0 ->
24.0 / 69 -> 64); Sia's host-bound pairs lose a little (30.2 / 148 -> 31.1 / 157): the absolute
model never saw Sia's harness (features.py note "new models"), and a user's anchor is timed as
srift's profiler times it, not through Sia's input pipeline. As the engine applies it (the
ratio at the anchor's batch, compute_leave_one_gpu_out_engine_path): 18.7 / 62 -> 16.7 / 61.
(The engine now takes the ratio at each batch, the anchor moved there along its measured curve:
srift::LearnedCompute note "anchored batch shape"; the figures here are the blend's, at the
pair's own batches.)
The blend's band (p10-p90 of its held-out residuals, x0.77-x1.31 against the ratio model's
x0.73-x1.38) held 81.2% of held-out chips' rows (interval_coverage/compute_anchored_blend_*).
(The figures above are the blend alone, at w = 0.4, chosen before note "shrink".)

Note "shrink". Both terms above trust the anchor completely: whatever the measurement on a
deviates from its roofline, b inherits. Part of that deviation belongs to the model (it
transfers: a model with heavy elementwise tails is slow everywhere), part to GPU a and its
host (it does not: Sia's NCF on azure runs 10x slower than on any other cluster, and a
deepspeech2 step on dgx's A100s is slower than on azure's V100s). The absolute model's own
prediction of b, corr(b) - log(t_a / roofline_a) in the same log-correction space, inherits
none of it. The shipped correction shrinks the blend toward it:
    (1 - s) * [(1 - w) * ratio + w * (corr(b) - corr(a))] + s * (corr(b) - log(t_a / roof_a))
with (w, s) chosen jointly by `srift train` (select_blend) from BLEND_WEIGHTS x SHRINK_WEIGHTS
on both held-out splits. Where the data's sample is not the profiled model's (a row whose
units_match is false: none since Lambda's Transformer-XL tokens are read as sequences),
absolute times do not compare and the shrink term is left out; a user's anchor is always the
profiled model. Median / p90 APE, GPU targets
(bench/accuracy.py compute_leave_one_*_out_blended):
  (w, s)                          leave one GPU chip out          leave one model out
  (0.4, 0) blend alone, before        15.9 / 59                       17.3 / 58
  (0, 1) absolute model alone         20.8 / 71                       21.7 / 71
  (0.3, 0.3) shipped before           14.9 / 55                       15.5 / 53
  (0.4, 0.3) clipped, shipped (*)     14.5 / 52                       15.3 / 55
  (0.4, 0.2) clipped, before (**)     14.1 / 50                       13.3 / 53
  (0.5, 0.2) clipped, before (***)    13.4 / 50                       13.2 / 53
  (0.5, 0.1) clipped, before (****)   13.3 / 52                       14.1 / 60
  (0.5, 0.2) clipped, shipped (*****) 13.6 / 46                       14.0 / 50
(*****) with Lambda's v2 rows (H200, GH200, B200: srift.learn.lambda_v2) in the data, 3,138 pairs
where there were 2,514: srift train chose Huber for the ratio model again, and (0.5, 0.2); by
source leaving a chip out, Lambda 11.2 / 30, Gavel 28.0 / 69, Sia 27.7 / 95.
(****) with a model held out with its family (srift.learn.workloads note "model families"): the
leave-one-model-out column is harder, and srift train re-chose the ratio model (the mean of Huber
and boosted trees, as the absolute model) and the shrink ((0.5, 0.2) with it: 13.4 / 52 and 14.9 /
57); by source leaving a chip out, Lambda 10.7 / 29, Gavel 26.5 / 69, Sia 23.4 / 99.
(***) with the no-measurement model the mean of Huber and boosted trees (srift.learn.train note
"mean of two"): the absolute model differenced alone improves most (leaving a chip out 17.6 / 66
-> 14.5 / 59), so the blend leans on it more; by source leaving a chip out, Lambda 11.7 / 28 ->
10.2 / 28, Gavel 25.6 / 67 -> 26.4 / 66, Sia 26.2 / 95 -> 29.1 / 95; as the engine applies it
14.6 / 53 -> 13.6 / 50; its band x0.83-x1.27 holds 79.6% of held-out chips' rows.
(**) after Lambda's Transformer-XL and SSD300 were profiled as benchmarked (srift.learn.workloads),
with the absolute model chosen for both its uses (srift.learn.train note "two uses"); with the
boosted-tree absolute model that its own score alone picked, the best clipped blend, (0.4, 0.1),
scored 14.3 / 52 and 14.0 / 55.
(*) srift.learn.dominance note "dominance": the prediction as applied is clipped by the anchored
predictions of the reference GPUs, which changes the best pair; select_blend scores the
GUARDED_CANDIDATES best unclipped pairs again clipped and ships the best of those. The figures
below are the unclipped (0.3, 0.3).
By source leaving a chip out: Lambda 12.9 / 34 -> 12.1 / 33, Gavel 24.0 / 64 -> 21.7 / 65, Sia
31.1 / 157 -> 31.0 / 95 (the shrink bounds the host-bound pairs' excursions). As the engine
applies it (compute_leave_one_gpu_out_engine_path): 16.7 / 61 -> 15.7 / 59. The band of the
shipped correction (x0.79-x1.29) holds 80.8% of held-out chips' rows
(interval_coverage/compute_anchored_blend_0.3_shrink_0.3_leave_one_gpu_out). Tried and not
kept: the anchor's own deviation log(t_a / roof_a), and its products with the roofline, peak
and bandwidth ratios, as ratio-model features (15.8-16.1 / 59-63 blended: the linear model
cannot separate what transfers from what does not).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from srift.learn.datasets import ComputeRow, chip_of, device_peaks
from srift.learn.features import absolute_features, ratio_features, roofline_per_sample
from srift.learn.gpus import GpuPeaks
from srift.learn.workloads import WorkloadInfo

__all__ = ["BLEND_WEIGHTS", "SHRINK_WEIGHTS", "pair_absolute_terms", "held_out_absolute_terms",
           "observed_anchor_error", "blended", "anchored_correction", "has_fp16_path", "anchored_terms",
           "combined_log_ratio", "anchored_log_ratio", "held_out_guarded_corrections", "held_out_lean"]

BLEND_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
SHRINK_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))


def pair_absolute_terms(predict: Callable[[np.ndarray], np.ndarray], meta: list[tuple[ComputeRow, ComputeRow]],
                        workloads: dict[str, WorkloadInfo]) -> tuple[np.ndarray, np.ndarray]:
    """(corr(a), corr(b)) for every (anchor a, target b) pair: the absolute model's log
    correction of each row's roofline at its own batch. predict: X -> corrections."""
    peaks = device_peaks()
    cache: dict[tuple, list[float]] = {}

    def features(r: ComputeRow) -> list[float]:
        key = (r.workload, r.gpu, r.batch, r.precision)
        if key not in cache:
            cache[key] = absolute_features(workloads[r.workload], peaks[r.gpu], r.batch, r.precision)
        return cache[key]

    if not meta:
        return np.zeros(0), np.zeros(0)
    fa = np.asarray([features(a) for a, _ in meta])
    fb = np.asarray([features(b) for _, b in meta])
    return predict(fa), predict(fb)


def held_out_absolute_terms(meta: list[tuple[ComputeRow, ComputeRow]], workloads: dict[str, WorkloadInfo],
                            X_abs: np.ndarray, y_abs: np.ndarray, meta_abs: list[tuple[Any, ComputeRow]],
                            make: Callable[[], Any], by: str) -> tuple[np.ndarray, np.ndarray]:
    """pair_absolute_terms of every pair by an absolute model fitted without the pair's
    held-out group (its target's GPU chip, or its model: train.py _split_key), as loco_errors
    holds the ratio model out. NaN where fewer than 10 rows remain to train on."""
    from srift.learn.train import _split_key

    pair_group = [_split_key(m, by)[1] for m in meta]
    touched = [_split_key(m, by)[0] for m in meta_abs]
    corr_a, corr_b = np.full(len(meta), np.nan), np.full(len(meta), np.nan)
    for g in sorted(set(pair_group)):
        train = np.array([g not in t for t in touched])
        if train.sum() < 10:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make().fit(X_abs[train], y_abs[train])
        idx = [i for i, h in enumerate(pair_group) if h == g]
        corr_a[idx], corr_b[idx] = pair_absolute_terms(est.predict, [meta[i] for i in idx], workloads)
    return corr_a, corr_b


def observed_anchor_error(meta: list[tuple[ComputeRow, ComputeRow]], workloads: dict[str, WorkloadInfo]) -> np.ndarray:
    """log(t_a / roofline_a) of every pair's anchor: how far the measurement sits from its
    roofline. NaN where the data's sample is not the profiled model's (absolute times are
    not comparable there, and the shrink term does not apply)."""
    peaks = device_peaks()
    return np.asarray([math.log(a.per_sample_s / roofline_per_sample(workloads[a.workload], peaks[a.gpu],
                                                                      a.precision, a.batch))
                       if a.units_match and b.units_match else math.nan for a, b in meta])


def blended(ratio_correction: np.ndarray | float, absolute_correction: np.ndarray | float, weight: float):
    """(1 - weight) * the ratio model + weight * the absolute model differenced (note "blend")."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight: expected a blend weight in [0, 1], got {weight!r}")
    return (1.0 - weight) * ratio_correction + weight * absolute_correction


def anchored_correction(ratio_correction: Any, corr_anchor: Any, corr_target: Any, observed_anchor: Any,
                        weight: float, shrink: float) -> Any:
    """The shipped log correction of the roofline ratio (notes "blend" and "shrink"):
    (1 - shrink) * blended(ratio, corr_target - corr_anchor, weight)
      + shrink * (corr_target - observed_anchor).
    Where observed_anchor is NaN (units that do not compare) the shrink term is left out."""
    if not 0.0 <= shrink <= 1.0:
        raise ValueError(f"shrink: expected a shrink weight in [0, 1], got {shrink!r}")
    blend = blended(ratio_correction, np.subtract(corr_target, corr_anchor), weight)
    toward = np.subtract(corr_target, observed_anchor)
    out = np.where(np.isnan(toward), blend, (1.0 - shrink) * blend + shrink * np.nan_to_num(toward))
    return float(out) if np.ndim(out) == 0 else out


def has_fp16_path(anchor: GpuPeaks, target: GpuPeaks, precision: str) -> bool:
    """Whether the ratio model covers the pair: every AMP pair it learned from runs FP16 on
    both GPUs (srift.learn.models note "no fp16 path"); FP32 and TF32 pairs always."""
    return precision != "amp" or bool(anchor.fp16_tflops and target.fp16_tflops)


def anchored_terms(ratio_predict: Callable[[np.ndarray], np.ndarray],
                   absolute_predict: Callable[[np.ndarray], np.ndarray], workload: WorkloadInfo,
                   anchor: GpuPeaks, anchor_batch: float, target: GpuPeaks, target_batch: float,
                   precision: str) -> tuple[float, float, float, float]:
    """(log roofline ratio, ratio model's correction, absolute model's correction of the anchor,
    of the target): what every (weight, shrink) combines (combined_log_ratio). The corrections
    are NaN where the ratio model does not cover the pair (has_fp16_path)."""
    f = ratio_features(workload, anchor, anchor_batch, target, target_batch, precision)
    if not has_fp16_path(anchor, target, precision):
        return float(f[0]), math.nan, math.nan, math.nan
    corr = float(ratio_predict(np.asarray([f]))[0])
    terms = absolute_predict(np.asarray([absolute_features(workload, anchor, anchor_batch, precision),
                                         absolute_features(workload, target, target_batch, precision)]))
    return float(f[0]), corr, float(terms[0]), float(terms[1])


def combined_log_ratio(terms: tuple[float, float, float, float], observed_anchor: float, weight: float,
                       shrink: float) -> float:
    """log(t_target / t_anchor) from anchored_terms: the roofline ratio times the blended,
    shrunk correction (notes "blend" and "shrink"), or the roofline ratio alone where the ratio
    model does not cover the pair."""
    roof, corr, corr_anchor, corr_target = terms
    if math.isnan(corr):
        return roof
    return roof + float(anchored_correction(corr, corr_anchor, corr_target, observed_anchor, weight, shrink))


def anchored_log_ratio(ratio_predict: Callable[[np.ndarray], np.ndarray],
                       absolute_predict: Callable[[np.ndarray], np.ndarray], workload: WorkloadInfo,
                       anchor: GpuPeaks, anchor_batch: float, target: GpuPeaks, target_batch: float,
                       precision: str, observed_anchor: float, weight: float, shrink: float) -> float:
    """log(t_target / t_anchor), per-sample time, as the engine predicts it from a measurement
    on `anchor` whose log deviation from its roofline is `observed_anchor` (NaN: not
    comparable): the roofline ratio times the blended, shrunk correction (notes "blend" and
    "shrink"), or the roofline ratio alone where the ratio model does not cover the pair."""
    return combined_log_ratio(anchored_terms(ratio_predict, absolute_predict, workload, anchor, anchor_batch, target,
                                             target_batch, precision), observed_anchor, weight, shrink)


def held_out_guarded_corrections(meta: list[tuple[ComputeRow, ComputeRow]], workloads: dict[str, WorkloadInfo],
                                 X: np.ndarray, y: np.ndarray, X_abs: np.ndarray, y_abs: np.ndarray,
                                 meta_abs: list[tuple[Any, ComputeRow]], make_ratio: Callable[[], Any],
                                 make_absolute: Callable[[], Any], by: str,
                                 blends: list[tuple[float, float]],
                                 observed: np.ndarray,
                                 lean_by_group: dict[str, float] | None = None) -> dict[tuple[float, float], np.ndarray]:
    """For each (weight, shrink) in `blends`, the shipped anchored correction of every pair with
    a GPU target (log ratio minus the roofline ratio, as the ratio dataset's y), clipped by the
    anchored predictions of the reference GPUs (srift.learn.dominance note "dominance"), both
    models fitted once per held-out group (the pair's target's GPU chip, or its model), whose
    variants are no reference. NaN where the pair is not predicted (a CPU target, or too few
    rows to train). lean_by_group: by "forward" only, a held-out year's log lean (srift.learn.
    data_edge), given to that year's chips (and later ones) before the clip, as the core gives
    it to a GPU past the data's edge."""
    from srift.learn.dominance import guarded_log_ratio, reference_gpus
    from srift.learn.train import _split_key, held_out_chips

    peaks = device_peaks()
    pair_key = [_split_key(m, by) for m in meta]
    abs_touched = [_split_key(m, by)[0] for m in meta_abs]
    out = {blend: np.full(len(meta), np.nan) for blend in blends}
    for g in sorted({k[1] for k in pair_key}):
        test = [i for i, k in enumerate(pair_key) if k[1] == g and meta[i][1].source != "cpu"]
        train = np.array([g not in k[0] for k in pair_key])
        train_abs = np.array([g not in t for t in abs_touched])
        if not test or train.sum() < 10 or train_abs.sum() < 10:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ratio = make_ratio().fit(X[train], y[train])
            absolute = make_absolute().fit(X_abs[train_abs], y_abs[train_abs])
        refs = reference_gpus(held_out_chips(g, by))
        lean = held_out_lean(g, by, lean_by_group)
        for i in test:
            a, b = meta[i]
            wl, pa = workloads[a.workload], peaks[a.gpu]
            terms: dict[GpuPeaks, tuple[float, float, float, float]] = {}

            def terms_of(gpu: GpuPeaks) -> tuple[float, float, float, float]:
                if gpu not in terms:  # the models' part, shared by every (weight, shrink)
                    terms[gpu] = anchored_terms(ratio.predict, absolute.predict, wl, pa, a.batch, gpu, b.batch,
                                                a.precision)
                return terms[gpu]

            for (weight, shrink), col in out.items():
                col[i] = guarded_log_ratio(lambda gpu: combined_log_ratio(terms_of(gpu), float(observed[i]), weight,
                                                                          shrink),
                                           pa, peaks[b.gpu], refs, a.precision, lean) - X[i, 0]
    return out


def held_out_lean(group: str, by: str, lean_by_group: dict[str, float] | None) -> Callable[[GpuPeaks], float]:
    """gpu -> its log lean in a forward fold: the fold's lean for the chips it holds out (those
    past the fold's data edge), 0 for the rest."""
    from srift.learn.dominance import no_lean
    from srift.learn.train import held_out_chips

    if not lean_by_group or group not in lean_by_group:
        return no_lean
    if by != "forward":
        raise ValueError(f"lean_by_group: a lean is a forward split's, got split by {by!r}")
    past, lean = held_out_chips(group, by), float(lean_by_group[group])
    return lambda gpu: lean if chip_of(gpu.key) in past else 0.0
