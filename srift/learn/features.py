"""Physically meaningful features of (workload, GPU, precision, batch).

Compute. The v0 roofline (srift._core.roofline_compute at its default efficiencies) gives a
per-sample time for every (workload, GPU, precision, batch); the learned models predict the
log of what the roofline gets wrong:
  ratio model    y = log(t_b / t_a) - log(roof_b / roof_a)   (a: the anchor GPU, measured)
  absolute model y = log(t_b / roof_b)                      (no measurement anywhere)
from features that say *why* a roofline misses: how memory-bound the model is on each GPU,
its FLOP mix by op kind, arithmetic intensity, the peak/bandwidth ratios between the GPUs,
the precision and the batch. Every feature is computable from a Profile and a catalog GPU.

Note "new models". The absolute model (no measurement anywhere) sees only the roofline and the
GPU: the roofline's own time, the peaks and bandwidth, how memory-bound and how fixed-cost the
roofline says the iteration is, the precision and the batch. It does not see the FLOP mix by op
kind, the arithmetic intensity or the size of an iteration, and it learns only from rows timed
the way srift's profiler times a model (a batch already in memory: Lambda's, Gavel's and the CPU
rows measured here), not from Sia's 1-GPU rows. Both choices come from leaving a whole *model*
out, the split a user with a new model is in. With 11 workloads (6 of them timed on GPUs),
the workload descriptors act as a workload's name: the model learned each workload's correction and applied it to whatever
resembled it, so on an unseen model it did worse than no correction at all. Sia's rows were
timed with Sia's input pipeline in the loop (throughput still rising with the batch long after a
GPU saturates: ResNet-50 AMP on a V100, 127 img/s at batch 20 and 376 at 81, where Lambda
measures 833 at 256); a flag saying which rows came from that harness (shipped before) kept
their batch slope out of predictions on the seen models but not out of the fit. Median / p90
APE on Lambda's and Gavel's rows (147; bench/accuracy.py, Huber, CPU rows in training):
  features and rows                      leave one model out   leave one GPU chip out
  v0 roofline (nothing learned)               20.3 / 47             20.3 / 47
  all 17, Sia rows in, harness flag           40.6 / 109            18.6 / 48
  roofline and GPU only, Sia rows in          22.4 / 54             19.9 / 52
  roofline and GPU only, Sia rows out         14.5 / 39             13.5 / 43
  the same, precision flags as run (*)        13.7 / 35             13.0 / 38
  the same, clipped by dominance (**)         13.3 / 34             10.5 / 35
(*) absolute_features: TF32 mode without TF32 units, and autocast without an FP16 path, run FP32.
(**) srift.learn.dominance note "dominance".
Since Lambda's Transformer-XL rows count sequences (srift.learn.workloads) they join these rows
(195): the clipped Huber model with the CPU rows scores 14.2 / 40 and 13.2 / 37 on them (shipped
until the mean of Huber and boosted trees, srift.learn.train note "mean of two": 12.5 / 39 and
11.0 / 35),
boosted trees without the CPU rows 11.6 / 36 and 14.7 / 43 (by the mean over both splits of
median + p90/4, 23.1 against 23.3, but worse inside the anchored blend: srift.learn.train note
"two uses").
Adding the FLOP shares back: 21.4 / 46 and 14.9 / 43; the intensity: 16.9 / 40 and 13.9 / 43.
The ratio model keeps its workload features: anchor and target run the same model, so they
describe the pair, not the model's speed, and its two splits agree (19.0 / 61 and 18.6 / 60).
"""
from __future__ import annotations

import math

import numpy as np

from srift.learn.gpus import GpuPeaks
from srift.learn.workloads import WorkloadInfo

__all__ = ["RATIO_FEATURES", "ABSOLUTE_FEATURES", "gpu_spec", "roofline", "WorkloadStats", "core_precision", "peak_floor_per_sample",
           "core_workload_stats",
           "ratio_features", "absolute_features", "PRECISIONS"]

PRECISIONS = ("fp32", "tf32", "amp")
_MATMUL, _CONV, _ATTN, _EMB, _REC = 0, 1, 2, 5, 7
# v0 roofline efficiencies (compute.hpp RooflineParams defaults); used for the shares only.
_TENSOR_EFF, _CUDA_EFF, _MEM_EFF = 0.45, 0.60, 0.70

# Note "interactions". The ratio data hold every pair both ways round (a->b and b->a), so the
# target is antisymmetric and a linear model gives zero weight to every feature the two
# directions share (the FLOP shares, the precision, the intensity): the fitted correction could
# not depend on *what* runs, only on the two GPUs. Products of those shared features with the
# antisymmetric peak and bandwidth ratios let it: how much of an A100's tensor-core advantage a
# conv-heavy FP32 model sees is not what a matmul-heavy AMP model sees. Leave-one-GPU-chip-out,
# median / p90 APE: 19.9 / 63.9 -> 18.8 / 59.6 (Lambda 17.8 -> 16.7, Gavel 30.4 -> 26.6, Sia p90
# 187 -> 148); leave-one-model-out 19.1 / 63.8 -> 19.2 / 60.9. Tried and not shipped: the same
# products with the FP32 ratio or the intensity too (19.3-19.7 / 60-64), or with every shared
# feature and the roofline ratio (21.5 / 91: the Sia pairs blow up).
_RATIO_SHARED = ["share_matmul", "share_conv", "share_attention", "share_recurrent", "share_embedding",
                 "prec_amp", "prec_tf32"]
_RATIO_SPEC = ["log_peak_ratio", "log_bw_ratio"]
RATIO_FEATURES = ["log_roof_ratio", "log_peak_ratio", "log_fp32_ratio", "log_bw_ratio", "log_batch_ratio",
                  "membound_a", "membound_b", "share_matmul", "share_conv", "share_attention",
                  "share_recurrent", "share_embedding", "log_intensity", "prec_amp", "prec_tf32",
                  "log_work", "fixed_share_a", "fixed_share_b",
                  *(f"{s}_x_{r}" for s in _RATIO_SHARED for r in _RATIO_SPEC)]
# Note "new models": the roofline and the GPU only.
ABSOLUTE_FEATURES = ["log_roof", "log_peak", "log_fp32", "log_bw", "log_batch", "membound", "prec_amp",
                     "prec_tf32", "fixed_share"]


def gpu_spec(p: GpuPeaks):  # -> _core.GpuSpec
    from srift import _core

    s = _core.GpuSpec()
    s.name = p.key
    s.memory_bytes = p.memory_gib * 2**30
    s.fp32_flops = p.fp32_tflops * 1e12
    s.tf32_flops = (p.tf32_tflops or 0.0) * 1e12
    s.fp16_flops = (p.fp16_tflops or 0.0) * 1e12
    s.memory_bandwidth = p.memory_gbytes_s * 1e9
    s.launch_year = int(p.launch_year)
    return s


class WorkloadStats:
    """Numpy columns of a WorkloadInfo plus its GPU-independent descriptors."""

    def __init__(self, w: WorkloadInfo):
        self.w = w
        self.kinds = np.asarray(w.kinds, dtype=np.int32)
        self.ff = np.asarray(w.forward_flops, dtype=np.float64)
        self.bf = np.asarray(w.backward_flops, dtype=np.float64)
        self.fb = np.asarray(w.forward_bytes, dtype=np.float64)
        self.pb = np.asarray(w.param_bytes, dtype=np.float64)
        flops = self.ff + self.bf
        total = float(flops.sum()) or 1.0
        self.shares = {name: float(flops[self.kinds == k].sum()) / total
                       for name, k in (("matmul", _MATMUL), ("conv", _CONV), ("attention", _ATTN),
                                       ("recurrent", _REC), ("embedding", _EMB))}
        traffic = float(3 * self.fb.sum() + self.pb.sum()) or 1.0
        self.log_intensity = math.log10(max(total, 1.0) / traffic)
        self.flops_per_sample = total
        self._membound: dict[tuple[GpuPeaks, str], float] = {}

    def log_work(self, batch: float) -> float:
        """log10 of the FLOPs of one iteration: small iterations are launch/host bound."""
        return math.log10(max(self.flops_per_sample * batch, 1.0))

    def membound_share(self, p: GpuPeaks, precision: str) -> float:
        """Share of the roofline's per-sample time spent in bandwidth-bound layers (memoised:
        it does not depend on the batch, and the batch grid asks for it at every point)."""
        key = (p, precision)
        cached = self._membound.get(key)
        if cached is None:
            cached = self._membound[key] = self._membound_share(p, precision)
        return cached

    def _membound_share(self, p: GpuPeaks, precision: str) -> float:
        tensor = np.isin(self.kinds, (_MATMUL, _CONV, _ATTN, _REC))
        peak_t = p.peak_tflops(precision) * 1e12 * (_TENSOR_EFF if precision != "fp32" and
                                                    p.peak_tflops(precision) > p.fp32_tflops else _CUDA_EFF)
        peak = np.where(tensor, peak_t, p.fp32_tflops * 1e12 * _CUDA_EFF)
        scale = 0.5 if precision == "amp" else 1.0
        bw = p.memory_gbytes_s * 1e9 * _MEM_EFF
        t_flop = (self.ff + self.bf) / peak
        t_mem = 3 * self.fb * scale / bw
        t = np.maximum(t_flop, t_mem)
        total = float(t.sum()) or 1.0
        return float(t[t_mem > t_flop].sum()) / total


def core_precision(precision: str):  # -> _core.Precision
    """The core's Precision of "fp32" | "tf32" | "amp"; ValueError otherwise."""
    from srift import _core

    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    return getattr(_core.Precision, precision)


def core_workload_stats(w: WorkloadInfo):  # -> _core.WorkloadStats
    """The core's twin of WorkloadStats (srift::WorkloadStats: the features the engine
    evaluates in C++). Not cached: building it is one pass over the layers."""
    from srift import _core

    return _core.WorkloadStats(np.asarray(w.kinds, dtype=np.int32), np.asarray(w.forward_flops, dtype=np.float64),
                               np.asarray(w.backward_flops, dtype=np.float64),
                               np.asarray(w.forward_bytes, dtype=np.float64),
                               np.asarray(w.param_bytes, dtype=np.float64), float(w.optimizer_bytes))


def peak_floor_per_sample(w: WorkloadInfo, target: GpuPeaks, precision: str, anchor: GpuPeaks | None = None,
                          measurements: list | None = None) -> float:
    """The core's note "peak floor" (csrc/learned_compute.cpp): seconds per sample the workload's
    FLOPs take at `target`'s peaks at `precision`; 0 (no floor) when one of `measurements`
    (_core.Measurement) on `anchor` beats the anchor's own floor."""
    from srift import _core

    columns = (np.asarray(w.kinds, dtype=np.int32), np.asarray(w.forward_flops, dtype=np.float64),
               np.asarray(w.backward_flops, dtype=np.float64), np.asarray(w.forward_bytes, dtype=np.float64),
               np.asarray(w.param_bytes, dtype=np.float64))
    if anchor is not None and measurements:
        k = _core.peak_flop_seconds_per_sample(*columns, gpu_spec(anchor), core_precision(precision))
        if any(m.iteration_s < k * m.local_batch for m in measurements):
            return 0.0
    return _core.peak_flop_seconds_per_sample(*columns, gpu_spec(target), core_precision(precision))


_STATS: dict[int, WorkloadStats] = {}  # id(WorkloadInfo) -> stats; holds the info alive
_ROOF: dict[tuple[int, GpuPeaks, str], object] = {}


def _stats(w: WorkloadInfo | WorkloadStats) -> WorkloadStats:
    if isinstance(w, WorkloadStats):
        return w
    s = _STATS.get(id(w))
    if s is None or s.w is not w:
        s = _STATS[id(w)] = WorkloadStats(w)
    return s


def roofline(w: WorkloadInfo | WorkloadStats, p: GpuPeaks, precision: str):
    """The v0 roofline ComputeModel of a workload on a GPU (cached per stats object)."""
    from srift import _core

    s = _stats(w)
    key = (id(s), p, precision)
    m = _ROOF.get(key)
    if m is None:
        prec = {"fp32": _core.Precision.fp32, "tf32": _core.Precision.tf32, "amp": _core.Precision.amp}[precision]
        m = _ROOF[key] = _core.roofline_compute(s.kinds, s.ff, s.bf, s.fb, s.pb, gpu_spec(p), prec,
                                                float(s.w.optimizer_bytes))
    return m


def roofline_per_sample(w: WorkloadInfo | WorkloadStats, p: GpuPeaks, precision: str, batch: float) -> float:
    m = roofline(w, p, precision)
    return (m.compute_s(batch) + m.optimizer_s) / batch


def fixed_share(w: WorkloadInfo | WorkloadStats, p: GpuPeaks, precision: str, batch: float) -> float:
    m = roofline(w, p, precision)
    total = m.compute_s(batch) + m.optimizer_s
    return (m.forward_fixed_s + m.backward_fixed_s + m.optimizer_s) / total


def _prec(precision: str) -> list[float]:
    return [1.0 if precision == "amp" else 0.0, 1.0 if precision == "tf32" else 0.0]


def ratio_features(w: WorkloadInfo | WorkloadStats, a: GpuPeaks, batch_a: float, b: GpuPeaks, batch_b: float,
                   precision: str) -> list[float]:
    s = _stats(w)
    ra = roofline_per_sample(s, a, precision, batch_a)
    rb = roofline_per_sample(s, b, precision, batch_b)
    peak = math.log(b.peak_tflops(precision) / a.peak_tflops(precision))
    bw = math.log(b.memory_gbytes_s / a.memory_gbytes_s)
    shared = [s.shares["matmul"], s.shares["conv"], s.shares["attention"], s.shares["recurrent"],
              s.shares["embedding"], *_prec(precision)]
    return [math.log(rb / ra), peak, math.log(b.fp32_tflops / a.fp32_tflops), bw,
            math.log(batch_b / batch_a), s.membound_share(a, precision), s.membound_share(b, precision),
            *shared[:5], s.log_intensity, *shared[5:], s.log_work(batch_b),
            fixed_share(s, a, precision, batch_a), fixed_share(s, b, precision, batch_b),
            *(v * r for v in shared for r in (peak, bw))]  # note "interactions"


def absolute_features(w: WorkloadInfo | WorkloadStats, g: GpuPeaks, batch: float, precision: str) -> list[float]:
    """Features of the absolute model (note "new models"). The precision flags say what the
    GPU runs: TF32 mode without TF32 units (V100, Turing) runs FP32 (Lambda times every FP32
    model with TF32 on, and its V100 and Quadro rows would otherwise teach a TF32 speed-up those
    GPUs do not have), and so does autocast without an FP16 path (K80, M60: the catalog lists no
    FP16 peak), where the AMP flag would grant the tensor-core speed-up of every AMP row."""
    s = _stats(w)
    r = roofline_per_sample(s, g, precision, batch)
    runs_fp32 = (precision == "tf32" and not g.tf32_tflops) or (precision == "amp" and not g.fp16_tflops)
    flags = _prec("fp32" if runs_fp32 else precision)
    return [math.log(r), math.log(g.peak_tflops(precision)), math.log(g.fp32_tflops),
            math.log(g.memory_gbytes_s), math.log(batch), s.membound_share(g, precision),
            *flags, fixed_share(s, g, precision, batch)]
