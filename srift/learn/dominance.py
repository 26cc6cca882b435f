"""A GPU that beats another on every spec is not predicted slower than it.

The engine applies the clip in the C++ core (srift::LearnedCompute); the functions here are the
training code's twin (tests/python/test_learned_compute.py holds both equal).

Note "dominance". GPU b dominates GPU a at a precision when b's matmul/conv peak at that
precision, its FP32 peak and its memory bandwidth are each at least a's, and one is higher.
In the measured rows timed the way srift's profiler times a model (a batch already in memory:
Lambda's and Gavel's), a dominating GPU is never more than 2% slower than the GPU it dominates
on the same model, batch and precision: 0 of Lambda's pairs and 3 of Gavel's (V100 against
P100); only Sia's host-bound harness breaks it (66 pairs across clusters, where the host, not
the GPU, sets the time; dominance_contradictions finds them and the least error they force on a
prediction that keeps dominance: docs/accuracy.md, "Where the cross-GPU error sits"). The
absolute model (no measurement anywhere) is a linear correction in log peaks and bandwidth, and
its slope in the peak has the sign that fits the data's range: outside it, or at batches where
the roofline is launch-bound, it could put an L40S 1.4x behind an A10G (ResNet-18 at AMP and
batch 8), a B200 behind an H200, or TF32 behind FP32.

The no-measurement prediction of GPU b is therefore clipped to the absolute model's own
predictions of the reference GPUs (every GPU of the training data, srift.learn.gpus):
  upper bound  the fastest prediction among the references b dominates,
  lower bound  the slowest prediction among the references that dominate b,
the upper bound winning where the two cross (the references disagree among themselves). A
reference with exactly b's peaks and bandwidth bounds nothing (it predicts the same time).
Median / p90 APE of the no-measurement model on Lambda's and Gavel's rows (147; Huber, CPU rows
in training; each held-out chip's own variants removed from the references;
bench/accuracy.py compute_absolute_leave_one_*_out_with_cpu_rows, *_dominance_guard):
  leave one GPU chip out   13.0 / 38 -> 10.5 / 35 (Lambda 11.7 / 33 -> 9.8 / 28, Gavel 22.1 -> 20.0)
  leave one model out      13.7 / 35 -> 13.3 / 34 (the references: the model's predictions of
                           the other GPUs, the model itself held out)
  as the engine applies it 13.7 / 39 -> 12.5 / 39 (one affine line per GPU, memory limit 4x)
The upper bound alone scores 11.7 / 36 leaving a chip out. Of 7,140 (zoo model, precision,
batch, catalog GPU pair) cases where one GPU beats the other, 69 were predicted the wrong way
round before and 15 after (each under 5%, at batch 8: the affine line bends the clipped times,
and the H200 above a B200 was no reference: counted before Lambda's v2 rows made
the H200, GH200 and B200 references). Clipping the absolute terms inside the anchored
blend (srift.learn.blend) moved it by +-0.3 either way: not applied.

Anchored. With a measurement on GPU a, the anchored ratio of the target is clipped the same way
by the anchored predictions of the references, and a is a reference whose prediction is exact
(log ratio 0). Each reference's prediction is first clipped against the measurement, so that,
dominance being transitive, a target a dominates is never predicted faster than the
measurement and one that dominates a never slower (guarded_log_ratio). Held out, shipped blend
(bench/accuracy.py compute_leave_one_*_out_blended, *_dominance_guard), the blend (weight,
shrink) as shipped before, (0.3, 0.3) unclipped -> (0.3, 0.3) clipped -> (0.4, 0.3) clipped,
which train.py select_blend now ships (it scores its best pairs again as applied):
  leave one GPU chip out   14.9 / 55 -> 14.7 / 53 -> 14.5 / 52 (Lambda 12.1 -> 11.8, Sia 31.0 -> 29.0)
  leave one model out      15.5 / 53 -> 15.5 / 55 -> 15.3 / 55 (Lambda 13.2 -> 12.5, Gavel 21.9 -> 22.4)
  as the engine applies it 15.7 / 59 -> 15.6 / 57 -> 15.4 / 56
train.py's selection score (mean over both splits of median + p90/4): 28.8 -> 28.5 -> 28.3. Letting the
references overrule the measurement (the upper bound winning over the anchor) scored 14.6 / 51
and 15.5 / 53, but left an A100-80GB predicted faster than a measured H100: not shipped.
With each anchor's time set to its own no-measurement prediction, the catalog's wrong-way
cases (zoo models x precisions x 5 anchors x 3 batches x GPU pairs, 32,130) fall from 87 (up
to 1.20x) to 30 (within 3%: B200 and B300 behind the H200, then no reference; counted before Lambda's v2
rows made the H200, GH200 and B200 references). Adding the
catalog's GPUs to the references scored worse on the no-measurement split (11.7 / 35).
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np

from srift.learn.datasets import chip_of
from srift.learn.features import absolute_features, roofline_per_sample
from srift.learn.gpus import TRAINING_GPUS, GpuPeaks
from srift.learn.workloads import WorkloadInfo

__all__ = ["dominates", "reference_gpus", "dominance_bounds", "clip_to_bounds", "guarded_log_times",
           "guarded_correction", "guarded_log_ratio", "reference_specs", "no_lean", "with_training_specs",
           "line_in_order", "DOMINANCE_TOLERANCE", "dominance_contradictions"]

# A dominating GPU measured no more than this share slower than the GPU it dominates agrees with
# its specs (note "dominance": Lambda's and Gavel's timings stay within it but for 3 of Gavel's).
DOMINANCE_TOLERANCE = 0.02

_PRECISIONS = ("fp32", "tf32", "amp")


def _specs(g: GpuPeaks, precision: str) -> tuple[float, float, float, float]:
    # the convolutions' peak too: PyTorch's FP32 runs them on TF32 (srift/compute.hpp note
    # "fp32 is PyTorch's"); at TF32 and AMP it is the matmul peak
    conv_peak = g.peak_tflops("tf32" if precision == "fp32" else precision)
    return g.peak_tflops(precision), conv_peak, g.fp32_tflops, g.memory_gbytes_s


def dominates(b: GpuPeaks, a: GpuPeaks, precision: str) -> bool:
    """Whether GPU b beats GPU a on every spec that sets a training step's speed at `precision`
    (the matmul peak, the convolutions' peak, the FP32 peak, the memory bandwidth) and on one
    strictly."""
    if precision not in _PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(_PRECISIONS)}, got {precision!r}")
    sb, sa = _specs(b, precision), _specs(a, precision)
    return all(x >= y for x, y in zip(sb, sa)) and sb != sa


def same_specs(a: GpuPeaks, b: GpuPeaks, precision: str) -> bool:
    """Whether GPUs a and b have the same specs at `precision` (those dominates() compares): the
    same chip with more memory, which the core predicts from a run of the other as that run's
    own curve (srift::LearnedCompute note "same specs")."""
    if precision not in _PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(_PRECISIONS)}, got {precision!r}")
    return _specs(a, precision) == _specs(b, precision)


def reference_gpus(exclude_chips: Iterable[str] = ()) -> list[GpuPeaks]:
    """The GPUs of the training data, less every variant of the chips in `exclude_chips`
    (a held-out chip's variants leave together, as in the leave-one-chip-out splits)."""
    out = set(exclude_chips)
    return [g for key, g in TRAINING_GPUS.items() if chip_of(key) not in out]


def reference_specs(keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """The specs of TRAINING_GPUS `keys` as a model document records them (dominance_guard.
    reference_specs: FLOP/s, bytes/s, bytes; 0 where the GPU has no such unit), the core's
    GpuSpec fields, so that srift::learned_compute_config needs no GPU table."""
    from srift.learn.features import gpu_spec

    out = {}
    for k in keys:
        s = gpu_spec(TRAINING_GPUS[k])
        out[k] = {"fp32_flops": s.fp32_flops, "tf32_flops": s.tf32_flops, "fp16_flops": s.fp16_flops,
                  "memory_bandwidth": s.memory_bandwidth, "memory_bytes": s.memory_bytes}
    return out


def dominance_bounds(target: GpuPeaks, references: Sequence[GpuPeaks],
                     precision: str) -> tuple[list[GpuPeaks], list[GpuPeaks]]:
    """(the references `target` dominates, the references that dominate `target`): the first
    bound its time from above, the second from below."""
    below = [g for g in references if dominates(target, g, precision)]
    above = [g for g in references if dominates(g, target, precision)]
    return below, above


def clip_to_bounds(log_time: np.ndarray, upper_candidates: np.ndarray, lower_candidates: np.ndarray) -> np.ndarray:
    """log_time (n,) clipped to [max of lower_candidates, min of upper_candidates] row by row;
    the candidate arrays are (k, n) with k possibly 0. The upper bound wins where they cross."""
    t = np.asarray(log_time, dtype=np.float64)
    if len(lower_candidates):
        t = np.maximum(t, np.max(lower_candidates, axis=0))
    if len(upper_candidates):
        t = np.minimum(t, np.min(upper_candidates, axis=0))
    return t


def guarded_log_times(log_times: Callable[[GpuPeaks], np.ndarray], target: GpuPeaks,
                      references: Sequence[GpuPeaks], precision: str) -> np.ndarray:
    """The target's log times clipped by the references it dominates and that dominate it.
    log_times(gpu) -> the model's log times of one GPU at the batches of interest (n,)."""
    below, above = dominance_bounds(target, references, precision)
    own = np.asarray(log_times(target), dtype=np.float64)
    upper = np.array([log_times(g) for g in below]).reshape(len(below), own.size)
    lower = np.array([log_times(g) for g in above]).reshape(len(above), own.size)
    out = clip_to_bounds(own, upper, lower)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"log times of {target.key} at {precision}: expected finite values, got {out.tolist()!r}")
    return out


def no_lean(g: GpuPeaks) -> float:
    """The lean of a GPU inside the data (srift.learn.data_edge): none."""
    return 0.0


def with_training_specs(g: GpuPeaks, references: Iterable[GpuPeaks], precision: str) -> bool:
    """Whether `g` has, at `precision`, the specs of one of `references` (the GPUs the models
    learned from; same_specs): then it is inside the data whatever its launch year, and no lean
    moves it (srift.learn.data_edge note "data edge"; srift::LearnedCompute's past_edge)."""
    return any(same_specs(g, r, precision) for r in references)


def _lean_of(lean: Callable[[GpuPeaks], float], g: GpuPeaks, references: Sequence[GpuPeaks], precision: str) -> float:
    # lean(g), none for a GPU with a reference's specs (with_training_specs)
    return 0.0 if with_training_specs(g, references, precision) else float(lean(g))


def guarded_correction(predict: Callable[[np.ndarray], np.ndarray], workload: WorkloadInfo, target: GpuPeaks,
                       batches: Sequence[float], precision: str, references: Sequence[GpuPeaks],
                       lean: Callable[[GpuPeaks], float] = no_lean) -> np.ndarray:
    """The absolute model's log correction of the target's roofline (log(t / roofline),
    per-sample time) at each of `batches`, with the predicted time clipped by the references
    (note "dominance"). predict: feature rows -> log corrections (the absolute model).
    lean(gpu): the log lean of a GPU past the data's edge (srift.learn.data_edge; 0 inside it),
    added to each GPU's time before the clip, as srift::LearnedCompute adds it; none for a GPU
    with a reference's specs (with_training_specs)."""
    b = [float(x) for x in batches]

    def log_times(g: GpuPeaks) -> np.ndarray:
        roof = np.log([roofline_per_sample(workload, g, precision, x) for x in b])
        return (roof + np.asarray(predict(np.asarray([absolute_features(workload, g, x, precision) for x in b])))
                + _lean_of(lean, g, references, precision))

    own_roof = np.log([roofline_per_sample(workload, target, precision, x) for x in b])
    return guarded_log_times(log_times, target, references, precision) - own_roof


def guarded_log_ratio(log_ratio: Callable[[GpuPeaks], float], anchor: GpuPeaks, target: GpuPeaks,
                      references: Sequence[GpuPeaks], precision: str,
                      lean: Callable[[GpuPeaks], float] = no_lean) -> float:
    """log(t_target / t_anchor) from a measurement on `anchor`, clipped by the anchored
    predictions of the references the target dominates and that dominate it (note "dominance",
    anchored). The measurement is exact: the anchor is a reference (log ratio 0), so is any
    reference with its specs, and every other reference's prediction is first clipped against
    it, so that a target the anchor dominates is never predicted faster than the measurement,
    nor one that dominates the anchor slower (dominance is transitive). log_ratio(gpu) -> the
    anchored model's log ratio. lean(gpu): the log lean of a GPU past the data's edge
    (srift.learn.data_edge; 0 inside it, and for a GPU with a reference's specs:
    with_training_specs); each GPU's ratio moves by its lean less the anchor's before the clip,
    as srift::LearnedCompute moves it."""
    anchor_specs = _specs(anchor, precision)
    anchor_lean = _lean_of(lean, anchor, references, precision)

    def moved(g: GpuPeaks) -> float:
        return float(log_ratio(g)) + _lean_of(lean, g, references, precision) - anchor_lean

    def ratio(g: GpuPeaks) -> float:
        if _specs(g, precision) == anchor_specs:
            return 0.0
        r = moved(g)
        if dominates(g, anchor, precision):
            return min(r, 0.0)
        return max(r, 0.0) if dominates(anchor, g, precision) else r

    def log_times(g: GpuPeaks) -> np.ndarray:  # log(t / t_anchor): a time up to the anchor's constant
        return np.array([moved(g) if g is target else ratio(g)])

    return float(guarded_log_times(log_times, target, [*references, anchor], precision)[0])


def line_in_order(own: tuple[float, float], upper: Sequence[tuple[float, float]], lower: Sequence[tuple[float, float]],
                  grid: Sequence[float], floor_per_sample: float = 0.0) -> tuple[float, float]:
    """The core's note "lines in order" (csrc/learned_compute.cpp line_in_order): the line
    own = (fixed s, per-sample s) held, at the grid's first and last batch, between the `lower`
    lines (those of the references that dominate the target) and the `upper` ones (of those it
    dominates), the upper bound winning; the line through the held ends (through the origin
    under both where no line with a fixed cost >= 0 and a rising time passes them), its slope
    then raised by the least that keeps it on or above floor_per_sample x b on the grid. `own`
    itself where both ends are already in order."""
    first, last = float(grid[0]), float(grid[-1])
    v0, v1 = own[0] + own[1] * first, own[0] + own[1] * last
    h0, h1 = v0, v1
    if lower:
        h0 = max(h0, max(f + s * first for f, s in lower))
        h1 = max(h1, max(f + s * last for f, s in lower))
    if upper:
        h0 = min(h0, min(f + s * first for f, s in upper))
        h1 = min(h1, min(f + s * last for f, s in upper))
    if h0 == v0 and h1 == v1:
        return own
    fixed = per_sample = 0.0
    if last > first:
        per_sample = (h1 - h0) / (last - first)
        fixed = h0 - per_sample * first
    if not (last > first) or not per_sample > 0 or fixed < 0:
        fixed, per_sample = 0.0, min(h0 / first, h1 / last)
    lift = max(floor_per_sample - (fixed + per_sample * float(b)) / float(b) for b in grid)
    return fixed, (per_sample + lift if lift > 0 else per_sample)


def dominance_contradictions(pairs: Sequence[tuple], peaks: dict[str, GpuPeaks]) -> np.ndarray:
    """Note "dominance", against the data: for each (anchor, target) pair of measured rows
    (srift.learn.datasets.ComputeRow: group, gpu, precision, batch, per_sample_s), the least
    absolute percentage error any prediction of the target that keeps dominance makes, 0 where
    none is forced. It is forced where the anchor's GPU was measured at the target's batch (a row
    of the same group among `pairs`), one of the two GPUs dominates the other at the precision,
    and the dominating one was measured more than DOMINANCE_TOLERANCE slower: a prediction that
    keeps dominance then sits on the anchor's own time or beyond it, on the wrong side of the
    target's, so it misses by at least 1 - t_a / t_b (the target dominates) or t_a / t_b - 1
    (the anchor does). The bound of a host that sets the time (Sia's harness) on a model of GPUs
    (docs/accuracy.md, "Where the cross-GPU error sits"). peaks: GPU key -> GpuPeaks.

    The anchor's time is its own GPU's (by GPU key, not chip: a group holds variants of one chip
    at one batch, Lambda's H100 SXM and PCIe at 1.5x apart). ValueError naming the row for a
    time that is not finite and > 0, or a GPU that ``peaks`` does not hold."""
    def time_of(r) -> float:
        t = r.per_sample_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t > 0):
            raise ValueError(f"per_sample_s of {r.gpu} in group {r.group!r} at batch {r.batch:g}: expected a "
                             f"finite time > 0, got {t!r}")
        return float(t)

    measured = {(r.group, r.gpu, r.batch): time_of(r) for pair in pairs for r in pair}
    missing = sorted({r.gpu for pair in pairs for r in pair} - set(peaks))
    if missing:
        raise ValueError(f"peaks: no GpuPeaks for GPU {', '.join(map(repr, missing))} of the pairs "
                         f"(srift.learn.datasets.device_peaks() holds every GPU of the data)")
    out = np.zeros(len(pairs))
    for i, (a, b) in enumerate(pairs):
        anchor_there = measured.get((a.group, a.gpu, b.batch))
        if anchor_there is None:
            continue
        ratio = time_of(b) / anchor_there
        if ratio > 1.0 + DOMINANCE_TOLERANCE and dominates(peaks[b.gpu], peaks[a.gpu], b.precision):
            out[i] = (1.0 - 1.0 / ratio) * 100.0
        elif ratio < 1.0 / (1.0 + DOMINANCE_TOLERANCE) and dominates(peaks[a.gpu], peaks[b.gpu], b.precision):
            out[i] = (1.0 / ratio - 1.0) * 100.0
    return out
