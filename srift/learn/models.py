"""The shipped cost models behind one object the engine calls (see srift/engine.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from srift.learn.features import core_precision, core_workload_stats, gpu_spec
from srift.learn.gpus import peaks_from_catalog
from srift.learn.loader import LOG_FACTOR_RULE, is_log_factor, load_model
from srift.learn.measured_band import validate_measured_band
from srift.learn.scaling_band import band_factors, validate_scaling_band
from srift.learn.workloads import workload_from_profile

__all__ = ["CostModels", "default_models"]

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"


@dataclass
class _Loaded:
    core: Any
    doc: dict[str, Any]

    def predict(self, x: list[float]) -> float:
        return float(self.core.predict(np.asarray(x, dtype=np.float64))[0])

    @property
    def p10(self) -> float:
        return float(self.doc["residuals"]["p10"])

    @property
    def p90(self) -> float:
        return float(self.doc["residuals"]["p90"])

    def roofline_interval(self) -> tuple[float, float]:
        """(p10, p90) log errors of the roofline itself on the training data (the model's
        own interval when the document predates them)."""
        r = self.doc.get("roofline_residuals")
        if not isinstance(r, dict) or not all(isinstance(r.get(k), (int, float)) for k in ("p10", "p90")):
            return self.p10, self.p90
        return float(r["p10"]), float(r["p90"])


def _pcie_domain_bytes_s(doc: dict[str, Any], origin: str = "link_pcie_efficiency") -> float:
    """The fastest nominal per-GPU link (bytes/s) the learned PCIe line covers: its record's
    training.domain, max_nominal_gbytes_s x factor (srift.learn.pcie_link note "pcie class")."""
    from srift.learn.pcie_link import DOMAIN_FACTOR

    domain = (doc.get("training") or {}).get("domain")
    if not isinstance(domain, dict):
        raise ValueError(f"{origin}: $.training.domain must be an object, got {domain!r}")
    top, factor = domain.get("max_nominal_gbytes_s"), domain.get("factor")
    for field, v in (("max_nominal_gbytes_s", top), ("factor", factor)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not v > 0:
            raise ValueError(f"{origin}: $.training.domain.{field} must be a number > 0, got {v!r}")
    if not math.isclose(factor, DOMAIN_FACTOR, rel_tol=1e-12):
        raise ValueError(f"{origin}: $.training.domain.factor is {factor!r}, but this srift applies "
                         f"{DOMAIN_FACTOR!r}: retrain with `srift train`")
    return float(top) * 1e9 * float(factor)


def _expected_features() -> dict[str, list[str]]:
    """Each model file's features, in the order srift computes them for it."""
    from srift.learn.comm import OVERHEAD_FEATURES
    from srift.learn.features import ABSOLUTE_FEATURES, RATIO_FEATURES
    from srift.learn.links import LINK_FEATURES
    from srift.learn.pcie_link import PCIE_FEATURES

    return {"compute_ratio": list(RATIO_FEATURES), "compute_absolute": list(ABSOLUTE_FEATURES),
            "iteration_overhead": list(OVERHEAD_FEATURES), "link_tcp_efficiency": list(LINK_FEATURES),
            "link_tcp_latency": list(LINK_FEATURES), "link_pcie_efficiency": list(PCIE_FEATURES)}


def _feature_range(doc: dict[str, Any], origin: str) -> tuple[list[float], list[float]]:
    """(min, max) of each feature over the training data, from $.training.feature_range, where
    the features are clamped before the model sees them: ValueError naming the JSON path when
    it is missing, of another length than the features, or inverted (min > max)."""
    where = "$.training.feature_range"
    rng = (doc.get("training") or {}).get("feature_range")
    if not isinstance(rng, dict):
        raise ValueError(f"{origin}: {where} must be an object with min and max, got {rng!r}")
    n = len(doc["features"])
    out = []
    for key in ("min", "max"):
        v = rng.get(key)
        if (not isinstance(v, list) or len(v) != n
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            raise ValueError(f"{origin}: {where}.{key} must be a list of {n} finite numbers (one a feature), got {v!r}")
        out.append([float(x) for x in v])
    for i, (lo, hi) in enumerate(zip(*out)):
        if lo > hi:
            raise ValueError(f"{origin}: {where}: min[{i}] {lo!r} is above max[{i}] {hi!r} "
                             f"(feature {doc['features'][i]!r})")
    return out[0], out[1]


def _load_checked(path: Path, expected: list[str]) -> _Loaded:
    """The model at `path`, whose `features` must be `expected` (the features srift computes
    and feeds it, by position), and which carries its held-out residuals (p10, p90): ValueError
    naming the file and the first difference, or the missing field."""
    loaded = _Loaded(*load_model(path))
    if "residuals" not in loaded.doc:  # its shape is the schema's, checked by load_model
        raise ValueError(f"{path}: $.residuals is missing: srift reads each cost model's held-out p10 and p90 from it; "
                         "retrain with `srift train`")
    got = list(loaded.doc["features"])
    if got != expected:
        i = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        if i < min(len(got), len(expected)):
            what = f"features[{i}] is {got[i]!r}, but srift computes {expected[i]!r} there"
        else:
            what = f"{len(got)} features, but srift computes {len(expected)}"
            what += f" (features[{i}] {'is ' + repr(got[i]) if i < len(got) else 'missing: ' + repr(expected[i])})"
        raise ValueError(f"{path}: $.features: {what}; expected {expected!r}: retrain with `srift train`")
    return loaded


class CostModels:
    """Learned compute and iteration models, evaluated by the C++ core."""

    def __init__(self, directory: str | Path = MODELS_DIR):
        d = Path(directory)
        expected = _expected_features()
        self.ratio = _load_checked(d / "compute_ratio.json", expected["compute_ratio"])
        self.absolute = _load_checked(d / "compute_absolute.json", expected["compute_absolute"])
        self.overhead = _load_checked(d / "iteration_overhead.json", expected["iteration_overhead"])
        self.tcp_efficiency = _load_checked(d / "link_tcp_efficiency.json", expected["link_tcp_efficiency"])
        self.tcp_latency = _load_checked(d / "link_tcp_latency.json", expected["link_tcp_latency"])
        self.pcie_efficiency = _load_checked(d / "link_pcie_efficiency.json", expected["link_pcie_efficiency"])
        self._pcie_domain = _pcie_domain_bytes_s(self.pcie_efficiency.doc, str(d / "link_pcie_efficiency.json"))
        self._tcp_range = _feature_range(self.tcp_efficiency.doc, str(d / "link_tcp_efficiency.json"))
        self._scaling_band = validate_scaling_band(self.overhead.doc.get("scaling_band"))
        self._scaling_table: Any = None
        self._references = _guard_references(self.absolute.doc, "compute_absolute")
        self._measured_band = validate_measured_band(self.absolute.doc.get("measured_band"))
        self._ratio_references = _guard_references(self.ratio.doc.get("absolute_blend") or {},
                                                   "compute_ratio: absolute_blend")
        self._learned_compute: Any = None

    def compute_model(self, profile: Any, gpu_key: str, catalog: Any, precision: str,
                      anchor: tuple[str, list[Any]] | list[tuple[str, list[Any]]] | None = None,
                      max_batch: float | None = None, cache: Any = None,
                      grid_ends: list[tuple[float, float]] | None = None) -> tuple[Any, float, float, str]:
        """(ComputeModel, p10_factor, p90_factor, source) of `profile` on catalog GPU `gpu_key`.

        anchor: (catalog GPU key, [_core.Measurement, ...]) measured on another GPU, or a list of
        them measured on several (their predictions averaged in log time: srift::LearnedCompute
        note "several anchors"); when given
        the learned GPU-to-GPU ratio (the ratio model blended with the absolute model's
        differenced correction and shrunk toward the absolute model's own prediction:
        srift.learn.blend notes "blend" and "shrink") scales the anchored model,
        else the absolute model scales the roofline; either clipped by dominance where the
        shipped document says so (srift.learn.dominance note "dominance"). The factors
        multiply the predicted time for the p10/p90 interval. source: "learned",
        "learned-past-edge" (a GPU newer than the models' data, note "data edge"),
        "measured-same-specs" (an anchor has the target's specs: its measured curve, note
        "same specs"), or "anchored-roofline" where the pair is one the ratio model never saw
        (note "no fp16 path"). max_batch: the largest local batch that fits this GPU (samples; the absolute
        model is fitted over 1..max(max_batch, 1024), note "batch grid"). The core evaluates
        all of it (srift::LearnedCompute, csrc/include/srift/learned_compute.hpp), as a C++
        scheduler would. cache: compute_cache(profile) of these models, to keep the
        evaluations every GPU type shares (srift::LearnedCompute::Cache; bit-identical).
        grid_ends: [(memory bytes, max_batch of a GPU with that memory)], each GPU's own grid end
        (srift.Engine.grid_ends): a dominance reference listed bounds the target with its own
        line on its own grid (srift::LearnedCompute note "own grids"); None: on the target's."""
        from srift import _core

        stats = None if cache is not None else core_workload_stats(workload_from_profile(profile))
        target = gpu_spec(peaks_from_catalog(catalog, gpu_key))
        prec = core_precision(precision)
        mb = 0.0 if max_batch is None else float(max_batch)  # NaN or inf: refused by the core (note "max_batch")
        ends = list(grid_ends or [])
        anchors = [anchor] if isinstance(anchor, tuple) else list(anchor or [])
        anchors = [(k, list(meas)) for k, meas in anchors if meas]
        lc = self.learned_compute
        if anchors:
            core_anchors = [_core.Anchor(gpu_spec(peaks_from_catalog(catalog, k)), meas) for k, meas in anchors]
            r = (lc.predict_anchored_several(stats, core_anchors, target, prec, mb, ends) if cache is None else
                 lc.predict_anchored_several_cached(cache, core_anchors, target, prec, mb, ends))
        else:
            r = (lc.predict_absolute(stats, target, prec, mb, ends) if cache is None else
                 lc.predict_absolute_cached(cache, target, prec, mb, ends))
        return r.model, r.p10_factor, r.p90_factor, ("measured-same-specs" if r.same_specs_anchor else
                                                     "anchored-roofline" if r.roofline_ratio_only else
                                                     "learned-past-edge" if r.past_data_edge else "learned")

    def measured_model(self, profile: Any, gpu_key: str, catalog: Any, precision: str, roofline: Any,
                       measurements: list[Any], max_batch: float | None = None, cache: Any = None,
                       grid_ends: list[tuple[float, float]] | None = None) -> Any:
        """The ComputeModel of catalog GPU `gpu_key` that `profile` was measured on
        (`measurements`: _core.Measurement at its local batches): two or more batches fit their
        own line through `roofline` (its roofline estimate); one batch scales the no-measurement
        model's curve through it, split as `roofline` (srift::LearnedCompute note "measured
        batch shape", evaluated by the core). cache, grid_ends: as compute_model's."""
        mb = 0.0 if max_batch is None else float(max_batch)  # NaN or inf: refused by the core (note "max_batch")
        gpu = gpu_spec(peaks_from_catalog(catalog, gpu_key))
        ends = list(grid_ends or [])
        if cache is not None:
            return self.learned_compute.measured_model_cached(cache, gpu, roofline, list(measurements),
                                                              core_precision(precision), mb, ends)
        return self.learned_compute.measured_model(core_workload_stats(workload_from_profile(profile)),
                                                   gpu, roofline, list(measurements), core_precision(precision), mb,
                                                   ends)

    def compute_cache(self, profile: Any) -> Any:
        """A _core.LearnedComputeCache of `profile`'s workload for compute_model and
        measured_model's `cache`: the evaluations all GPU types share (the dominance references'
        lines) are computed once (srift::LearnedCompute::Cache, note "shared memo"). Bound to
        these models; results bit-identical to calls without it."""
        from srift import _core

        return _core.LearnedComputeCache(core_workload_stats(workload_from_profile(profile)))

    @property
    def learned_compute(self) -> Any:
        """The compute documents as the core combines them (_core.LearnedCompute)."""
        if self._learned_compute is None:
            from srift import _core

            cfg = _core.LearnedComputeConfig()
            blend = self.ratio.doc.get("absolute_blend")
            # Note "no fp16 path": every AMP pair in the training data runs FP16 on tensor cores
            # (or packed FP16) on both GPUs. On a GPU without an FP16 path (K80, M60) autocast
            # runs at the FP32 peak, the roofline ratio jumps ~10x, and the linear correction
            # reads that jump as the tensor-core overstatement it learned to shrink (V100 -> K80
            # at AMP: 4.1x predicted, where Gavel's FP32 K80/V100 5.6x and Lambda's V100
            # AMP/FP32 2.3x put it near 13x). The roofline ratio (10x) with the roofline's own
            # error interval is the honest answer there (the core's roofline_ratio_only).
            cfg.roofline_p10, cfg.roofline_p90 = self.ratio.roofline_interval()
            cfg.anchored_p10, cfg.anchored_p90 = self.ratio.p10, self.ratio.p90
            if blend is not None:  # srift.learn.blend notes "blend" and "shrink"
                cfg.blend = True
                cfg.blend_weight, cfg.shrink = float(blend["weight"]), float(blend.get("shrink", 0.0))
                cfg.anchored_p10, cfg.anchored_p90 = float(blend["residuals"]["p10"]), float(blend["residuals"]["p90"])
            cfg.absolute_p10, cfg.absolute_p90 = self.absolute.p10, self.absolute.p90
            cfg.ratio_references = [gpu_spec(g) for g in self._ratio_references]
            cfg.absolute_references = [gpu_spec(g) for g in self._references]
            (cfg.measured_p10, cfg.measured_p90), (cfg.measured_per_e_fold_p10, cfg.measured_per_e_fold_p90) = \
                self._measured_band
            cfg.edge_year, anchored_edge, absolute_edge = self.data_edge()  # srift.learn.data_edge
            cfg.edge_anchored_p10, cfg.edge_anchored_p50, cfg.edge_anchored_p90 = anchored_edge
            cfg.edge_absolute_p10, cfg.edge_absolute_p50, cfg.edge_absolute_p90 = absolute_edge
            self._learned_compute = _core.LearnedCompute(self.ratio.core, self.absolute.core, cfg)
        return self._learned_compute

    def data_edge(self) -> tuple[int, tuple[float, float, float], tuple[float, float, float]]:
        """(launch year of the newest GPU chip the compute models learned from, (p10, p50, p90)
        anchored, (p10, p50, p90) with no measurement): the forward split's log residuals of a
        GPU newer than that (srift.learn.data_edge note "data edge"); year 0 and zeros where
        the documents record none."""
        edges = [doc.get("data_edge") for doc in (self.ratio.doc, self.absolute.doc)]
        if all(e is None for e in edges):
            return 0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        out = []
        for name, e in zip(("compute_ratio", "compute_absolute"), edges):
            if not isinstance(e, dict):
                raise ValueError(f"{name}.data_edge: expected an object (both compute documents or neither), got {e!r}")
            q = []
            for k in ("p10", "p50", "p90"):
                v = e.get(k)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    raise ValueError(f"{name}.data_edge.{k}: expected a finite number, got {v!r}")
                if not is_log_factor(v):  # the core's note "log factor": the band past the edge is exp() of it
                    raise ValueError(f"{name}.data_edge.{k}: expected {LOG_FACTOR_RULE}, got {v!r}")
                q.append(float(v))
            if not q[0] <= q[1] <= q[2]:
                raise ValueError(f"{name}.data_edge: expected p10 <= p50 <= p90, got {q}")
            for hi, lo in ((2, 1), (1, 0)):  # the core's at_data_edge takes exp() of the spreads about p50
                if not is_log_factor(q[hi] - q[lo]):
                    raise ValueError(f"{name}.data_edge: expected p{(10, 50, 90)[hi]} - p{(10, 50, 90)[lo]} to be "
                                     f"{LOG_FACTOR_RULE}, got {q[hi] - q[lo]!r}")
            out.append((e.get("launch_year"), tuple(q)))
        years = [y for y, _ in out]
        if not (isinstance(years[0], int) and not isinstance(years[0], bool) and 1990 <= years[0] <= 2100):
            raise ValueError(f"compute_ratio.data_edge.launch_year: expected a year in 1990-2100, got {years[0]!r}")
        if years[1] != years[0]:
            raise ValueError(f"compute_absolute.data_edge.launch_year: expected {years[0]} (compute_ratio's), "
                             f"got {years[1]!r}")
        return years[0], out[0][1], out[1][1]

    def measured_band(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """((p10, p90), (p10, p90 per e-fold of batch)) factors of a GPU type the profile
        measured: its host-to-host noise, and its widening away from the measured batch
        (srift.learn.measured_band note "measured band"; compute_absolute.json's measured_band)."""
        return self._measured_band

    def absolute_corrections(self, workload: Any, target: Any, batches: Any, precision: str) -> np.ndarray:
        """The absolute model's log corrections of `target`'s roofline (log(t / roofline),
        per-sample) at `batches`, clipped by its predictions of the reference GPUs where the
        shipped model was selected and scored that way (srift.learn.dominance note "dominance")."""
        return np.asarray(self.learned_compute.absolute_corrections(core_workload_stats(workload), gpu_spec(target),
                                                                    [float(b) for b in batches], core_precision(precision)))

    def tcp_link(self, nominal_bytes_s: float, ranks_per_node: int) -> tuple[float, float]:
        """(achieved bandwidth bytes/s, latency s per ring step) of a TCP network link of
        `nominal_bytes_s` on an instance with `ranks_per_node` GPUs (srift.learn.links note
        "link model"; features clamped to the measured range, bandwidth at most nominal)."""
        from srift.learn.links import link_features

        if not nominal_bytes_s > 0:
            raise ValueError(f"nominal_bytes_s: expected a bandwidth > 0 bytes/s, got {nominal_bytes_s!r}")
        x = link_features(nominal_bytes_s, ranks_per_node)
        x = [min(max(v, lo), hi) for v, lo, hi in zip(x, *self._tcp_range, strict=True)]
        eff = min(self.tcp_efficiency.predict(x), 0.0)
        return nominal_bytes_s * math.exp(eff), math.exp(self.tcp_latency.predict(x))

    def pcie_link(self, nominal_bytes_s: float, gpus: int) -> float:
        """Achieved bandwidth (bytes/s) of the PCIe links inside an instance of `gpus` GPUs with
        `nominal_bytes_s` per GPU (srift.learn.pcie_link note "pcie class"; at most nominal)."""
        from srift.learn.pcie_link import pcie_log_efficiency

        if not self.pcie_link_applies(nominal_bytes_s):
            raise ValueError(f"nominal_bytes_s: {nominal_bytes_s!r} bytes/s is outside the PCIe generation the "
                             f"link model was fitted on (up to {self._pcie_domain:.4g} bytes/s)")
        log_eff = pcie_log_efficiency(self.pcie_efficiency.core.predict, gpus)
        return nominal_bytes_s * math.exp(log_eff)

    def pcie_link_applies(self, nominal_bytes_s: float) -> bool:
        """Whether the learned PCIe link covers a link of `nominal_bytes_s` per GPU: the PCIe
        generation it was fitted on (srift.learn.pcie_link note "pcie class")."""
        if not nominal_bytes_s > 0:
            raise ValueError(f"nominal_bytes_s: expected a bandwidth > 0 bytes/s, got {nominal_bytes_s!r}")
        return nominal_bytes_s <= self._pcie_domain

    def pcie_link_interval(self) -> tuple[float, float]:
        """(p10, p90) factors of a step whose instances talk over the learned PCIe link: its
        held-out step residuals (leave-one-PCIe-cluster-out)."""
        return math.exp(self.pcie_efficiency.p10), math.exp(self.pcie_efficiency.p90)

    def instance_anchor_interval(self) -> tuple[float, float]:
        """(p10, p90) factors of an iteration over several instances of a type anchored to a
        whole-instance measurement, from held-out residuals on the Sia traces."""
        r = self.overhead.doc.get("instance_anchor")
        if not isinstance(r, dict) or not all(isinstance(r.get(k), (int, float)) for k in ("p10", "p90")):
            return math.nan, math.nan
        return math.exp(float(r["p10"])), math.exp(float(r["p90"]))

    def scaling_interval(self, instances: int, gpus_per_instance: int, probed: bool = False) -> tuple[float, float]:
        """(p10, p90) factors on a multi-GPU iteration over links srift models rather than
        learns, or (probed) measured by `srift probe-network`: `instances` instances with at
        most `gpus_per_instance` ranks each (srift.learn.scaling_band note "scaling band");
        (1, 1) for one GPU."""
        if not isinstance(probed, (bool, np.bool_)):
            raise ValueError(f"probed: expected True or False, got {probed!r}")
        return band_factors(self._scaling_band, instances, gpus_per_instance, bool(probed))

    def scaling_table(self) -> Any:
        """The scaling band as the core's ScalingBand (srift::ScalingBand; band.hpp), for
        predictions and the searches. A band widens only, so a cell that does not hold its
        prediction (possible after a retrain) is widened to it."""
        if self._scaling_table is None:
            from srift import _core
            from srift.learn.scaling_band import BUCKETS, SCOPES

            table = _core.ScalingBand()
            for scope in SCOPES:
                for bucket, (key, _, _) in enumerate(BUCKETS):
                    cell = self._scaling_band[scope][key]
                    table.set_cell(getattr(_core.ScalingScope, scope), bucket,
                                   _core.BandFactors(min(1.0, math.exp(cell[0])), max(1.0, math.exp(cell[1]))))
            table.validate()
            self._scaling_table = table
        return self._scaling_table

    def iteration_correction(self, counts: list[int], interconnect: str, intra_gbytes_s: float,
                             network_gbps: float, rdma: bool, gradient_bytes: float, one_gpu_s: float,
                             fixed_s: float, simulated_s: float) -> tuple[float, float, float]:
        """(factor, p10_factor, p90_factor) multiplying a simulated multi-GPU iteration time.
        counts: ranks on each instance; one_gpu_s/fixed_s: one worker's compute+optimizer at
        its local batch and the batch-independent part; simulated_s: the simulator's iteration."""
        from srift.learn.comm import LinkClass, overhead_features

        if sum(counts) <= 1:
            return 1.0, 1.0, 1.0
        link = LinkClass(interconnect, intra_gbytes_s, network_gbps, rdma)
        f = overhead_features(link, counts, gradient_bytes, one_gpu_s, fixed_s, simulated_s)
        return math.exp(self.overhead.predict(f)), math.exp(self.overhead.p10), math.exp(self.overhead.p90)


# Note "batch grid". The absolute model corrects the roofline by a factor that depends on the
# batch (small iterations are launch- and host-bound), but the engine needs one ComputeModel
# (fixed + per-sample seconds) per GPU for every local batch the search may try. Evaluating the
# correction at one reference batch (32, before) and scaling the whole roofline by it scored
# 69.6 / 391 on the held-out rows that the model itself, evaluated at each row's own batch,
# predicts at 29.3 / 88: a large-batch row (Lambda's 256-10M) inherited the fixed overheads of
# batch 32. So the corrected time is evaluated on a geometric grid over 1..max_batch (the
# memory limit) and fitted by an affine line with relative-error least squares, every grid
# point weighing the same: 26-30 / 82-90 when the memory limit is 4-16x the batch trained at,
# 49 / 90 even at 4096x (plain least squares, which the large batches dominate: 518 / 947).
# The grid spans at least 1..GRID_MIN_SPAN whatever the memory limit: with the limit alone, two
# GPUs with the same peaks and different memory (V100-16GB / V100-32GB) got different speeds
# (ResNet-50 AMP: 517 vs 560 img/s), and the held-out rows score better with the floor
# (26.2 / 78 against 26.6 / 89 when the limit is 4x the batch; unchanged at 64x). It trades
# sources: Lambda's large-batch rows 18.7 -> 16.6 median, Gavel's batch-16-128 FP32 rows
# 26.6 -> 35.1. A floor of 512 scores the same overall and keeps Gavel at 26.6 (Lambda 17.7),
# but leaves ResNet-50 AMP's V100-16GB/32GB limits (341/721) on different grids; 256: 26.6 / 79.
# (Those figures predate srift.learn.features note "new models"; bench/accuracy.py prints the
# current ones as compute_absolute_leave_one_gpu_out_engine_path.)
GRID_POINTS_PER_DECADE = 4
GRID_MIN_SPAN = 1024.0
# The core's kMinSlopeShare (csrc/learned_compute.cpp): the least slope of a prediction's line, as
# a share of a seconds-per-sample scale; the guard against a curve flat over the grid.
MIN_SLOPE_SHARE = 0.01


def affine_relative_fit(batches: np.ndarray, seconds: np.ndarray, min_per_sample: float = 0.0) -> tuple[float, float]:
    """(fixed s, per-sample s) of t = fixed + per_sample * b minimising the squared relative
    error over the points; both terms non-negative. min_per_sample (s/sample) > 0: the slope is
    at least that, the intercept refitted under it; 0: a falling curve, or one batch, gets the
    mean per-sample time through the origin (the core's twin)."""
    b, t = np.asarray(batches, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if not (np.all(b > 0) and np.all(t > 0) and np.all(np.isfinite(t))):
        raise ValueError(f"batches and seconds: expected positive values, got seconds {t.tolist()!r}")
    if not (math.isfinite(min_per_sample) and min_per_sample >= 0):
        raise ValueError(f"min_per_sample: expected a finite value >= 0, got {min_per_sample!r}")
    one_batch = np.unique(b).size < 2
    fixed = per_sample = 0.0
    if not one_batch:
        A = np.column_stack([np.ones_like(b), b]) / t[:, None]
        (fixed, per_sample), *_ = np.linalg.lstsq(A, np.ones_like(b), rcond=None)
    if min_per_sample > 0:
        if one_batch or not per_sample >= min_per_sample:
            u, v = 1.0 / t, b / t
            per_sample = min_per_sample
            fixed = (np.sum(u) - per_sample * np.sum(u * v)) / np.sum(u * u)
        if fixed < 0:
            x = b / t
            return 0.0, float(max(min_per_sample, np.sum(x) / np.sum(x * x)))
        return float(fixed), float(per_sample)
    if one_batch or per_sample <= 0:
        return 0.0, float(np.mean(t / b))
    if fixed < 0:
        x = b / t
        return 0.0, float(np.sum(x) / np.sum(x * x))
    return float(fixed), float(per_sample)


def check_max_batch(max_batch: float | None) -> None:
    """The core's note "max_batch" (csrc/learned_compute.cpp): None or <= 0 is "not known"; NaN
    or an infinity is no batch, refused naming it as the core does."""
    if max_batch is not None and not math.isfinite(max_batch):
        raise ValueError("max_batch must be finite (the largest local batch the model will be asked, or <= 0 "
                         f"when not known), got {float(max_batch)}")


def batch_grid(max_batch: float | None) -> np.ndarray:
    """Geometric grid of local batches from 1 to max(max_batch, GRID_MIN_SPAN), at most
    2147483647 (a local batch is an int; as srift::batch_grid); None or <= 0: not known (1 to
    GRID_MIN_SPAN); NaN or an infinity: ValueError naming max_batch (note "max_batch")."""
    check_max_batch(max_batch)
    hi = max(float(max_batch), GRID_MIN_SPAN) if max_batch else GRID_MIN_SPAN
    hi = min(hi, 2147483647.0)
    n = max(3, int(math.ceil(math.log10(hi) * GRID_POINTS_PER_DECADE)) + 1)
    return np.unique(np.maximum(1.0, np.round(np.geomspace(1.0, hi, n))))


def absolute_on_grid(prior: Any, log_corrections: Any, max_batch: float | None, min_per_sample: float = 0.0, *,
                     token_slope: bool = False, floor_per_sample: float = 0.0) -> Any:
    """The roofline `prior` (a _core.ComputeModel) anchored to its corrected iteration times
    on batch_grid(max_batch); log_corrections(batches) -> log(t / roofline) at each batch;
    min_per_sample: affine_relative_fit's floor on the slope (0: none); token_slope: the floor is
    instead MIN_SLOPE_SHARE of the corrected curve's least per-sample time, as the core's
    prediction with no measurement (predict_absolute) takes it. floor_per_sample (seconds per
    sample; 0: none): the core's note "peak floor", each grid time at least this times its batch
    and the fitted line's slope raised by the least that keeps it there (the core's
    predictions pass peak_floor_per_sample; 0 leaves every result as it was)."""
    from srift import _core

    if not (isinstance(floor_per_sample, (int, float)) and math.isfinite(floor_per_sample) and floor_per_sample >= 0):
        raise ValueError(f"floor_per_sample: expected seconds per sample, finite and >= 0 (0: no floor), "
                         f"got {floor_per_sample!r}")
    grid = batch_grid(max_batch)
    corr = np.asarray(log_corrections(grid), dtype=np.float64)
    if corr.shape != grid.shape or not np.all(np.isfinite(corr)):
        raise ValueError(f"log_corrections: expected {grid.size} finite values, got {corr.tolist()!r}")
    t = np.array([prior.compute_s(b) + prior.optimizer_s for b in grid]) * np.exp(corr)
    if floor_per_sample > 0:
        t = np.maximum(t, floor_per_sample * grid)
    if token_slope:
        min_per_sample = MIN_SLOPE_SHARE * float(np.min(t / grid))
    fixed, per_sample = affine_relative_fit(grid, t, min_per_sample)
    if floor_per_sample > 0:
        lift = max(floor_per_sample - (fixed + per_sample * b) / b for b in grid)
        per_sample = per_sample + lift if lift > 0 else per_sample
    # (Anchoring to two points on the line did as split_like does, except where rounding left a
    # line through the origin with a hair of negative intercept: its one-batch fallback then
    # rescaled the prior's whole shape, 2000x too slow at batch 1 for NCF on an H200.)
    return split_like(prior, fixed, per_sample)


def absolute_line_in_order(predict: Any, workload: Any, target: Any, precision: str, references: list[Any],
                           max_batch: float | None, lean: Any = None,
                           grid_ends: dict[float, float] | None = None) -> Any:
    """The core's prediction with no measurement (srift::LearnedCompute::predict_absolute) from
    the absolute model `predict` (feature rows -> log corrections): each GPU's line fitted on
    batch_grid(max_batch) through its corrected times clipped by the references
    (srift.learn.dominance.guarded_correction), held to its peak floor, with the token slope;
    then the target's line held between the lines of the references it dominates and that
    dominate it (the core's note "lines in order", srift.learn.dominance.line_in_order).
    lean(gpu): srift.learn.data_edge's log lean (None: none; none either for a GPU with a
    reference's specs: srift.learn.dominance.with_training_specs). grid_ends: {memory bytes:
    max_batch}, each GPU's own grid end (the core's note "own grids"): a reference whose memory
    (memory_gib x 2**30) is listed bounds the target with its own line on its own grid, evaluated
    at the target's grid ends; one not listed (every one where it is None) with its line on the
    target's grid. A _core.ComputeModel."""
    from srift.learn.dominance import dominance_bounds, guarded_log_times, line_in_order, no_lean, with_training_specs
    from srift.learn.features import absolute_features, peak_floor_per_sample, roofline, roofline_per_sample

    lean = lean or no_lean
    grid = batch_grid(max_batch)
    b = [float(x) for x in grid]
    cache: dict[tuple, np.ndarray] = {}

    def log_times_on(grid_b: list[float]) -> Any:
        def log_times(g: Any) -> np.ndarray:
            key = (id(g), len(grid_b), grid_b[-1])
            if key not in cache:
                roof = np.log([roofline_per_sample(workload, g, precision, x) for x in grid_b])
                moved = 0.0 if with_training_specs(g, references, precision) else float(lean(g))
                cache[key] = (roof + np.asarray(predict(np.asarray([absolute_features(workload, g, x, precision)
                                                                    for x in grid_b]))) + moved)
            return cache[key]
        return log_times

    def line(g: Any, on: float | None) -> tuple[Any, tuple[float, float]]:
        """g's line on batch_grid(on), through its clipped corrected times there."""
        prior = roofline(workload, g, precision)
        grid_b = [float(x) for x in batch_grid(on)]
        own_roof = np.log([roofline_per_sample(workload, g, precision, x) for x in grid_b])
        corr = guarded_log_times(log_times_on(grid_b), g, references, precision) - own_roof
        m = absolute_on_grid(prior, lambda _: corr, on, token_slope=True,
                             floor_per_sample=peak_floor_per_sample(workload, g, precision))
        return prior, (m.forward_fixed_s + m.backward_fixed_s + m.optimizer_s, m.per_sample_s())

    def reference_line(g: Any) -> tuple[float, float]:
        """g's own line where grid_ends lists its memory (the core's note "own grids")."""
        memory = g.memory_gib * 2**30
        return line(g, grid_ends[memory] if grid_ends and memory in grid_ends else max_batch)[1]

    prior, own = line(target, max_batch)
    below, above = dominance_bounds(target, references, precision)
    if not references or not (below or above):
        return split_like(prior, *own)
    held = line_in_order(own, [reference_line(g) for g in below], [reference_line(g) for g in above], b,
                         peak_floor_per_sample(workload, target, precision))
    return split_like(prior, *held)


def split_like(prior: Any, fixed: float, per_sample: float) -> Any:
    """The line fixed + per_sample x b (seconds; seconds per sample) as a _core.ComputeModel
    split as `prior` splits its terms (the core's split_like): the optimizer step the prior's,
    at most half the fixed time; forward and backward in the prior's proportions."""
    from srift import _core

    prior_fixed = prior.forward_fixed_s + prior.backward_fixed_s
    share_fixed = prior.forward_fixed_s / prior_fixed if prior_fixed > 0 else 0.5
    share_slope = prior.forward_per_sample_s / (prior.forward_per_sample_s + prior.backward_per_sample_s)
    out = _core.ComputeModel()
    out.optimizer_s = min(prior.optimizer_s, 0.5 * fixed)
    rest = fixed - out.optimizer_s
    out.forward_fixed_s, out.backward_fixed_s = rest * share_fixed, rest * (1 - share_fixed)
    out.forward_per_sample_s, out.backward_per_sample_s = per_sample * share_slope, per_sample * (1 - share_slope)
    return out


def _slope_held_to_floor(grid: np.ndarray, fixed: float, per_sample: float, floor_per_sample: float) -> float:
    lift = max(0.0, *(floor_per_sample - (fixed + per_sample * b) / b for b in grid))
    return per_sample + lift if lift > 0 else per_sample


def held_to_floor_about(model: Any, grid: np.ndarray, floor_per_sample: float, pivot: float,
                        keep_optimizer: bool = False) -> Any:
    """The core's held_to_floor_about (note "peak floor"): `model` (a _core.ComputeModel) turned
    about its time at batch `pivot` by the least slope that keeps it on or above
    floor_per_sample (seconds per sample) x b at every batch b of `grid` above the pivot, its
    fixed cost lowered as much at the pivot (at most to 0), then its slope raised where it is
    still under the floor; `model` itself where it is nowhere under it. keep_optimizer (a
    measured optimizer step): the turn lowers the compute's fixed cost alone, the step stays."""
    model_fixed = model.forward_fixed_s + model.backward_fixed_s
    fixed = model_fixed + model.optimizer_s
    per_sample = model.per_sample_s()
    if _slope_held_to_floor(grid, fixed, per_sample, floor_per_sample) == per_sample:
        return model
    lift = 0.0
    for b in grid:
        if b > pivot:
            lift = max(lift, (floor_per_sample * b - (fixed + per_sample * b)) / (b - pivot))
    lift = min(lift, (model_fixed if keep_optimizer else fixed) / pivot)  # no negative fixed cost
    fixed -= lift * pivot
    per_sample += lift
    out = split_like(model, fixed, _slope_held_to_floor(grid, fixed, per_sample, floor_per_sample))
    if keep_optimizer:
        share_fixed = model.forward_fixed_s / model_fixed if model_fixed > 0 else 0.5
        rest = max(0.0, fixed - model.optimizer_s)
        out.optimizer_s = model.optimizer_s
        out.forward_fixed_s, out.backward_fixed_s = rest * share_fixed, rest * (1 - share_fixed)
    return out


def measured_held_to_floor(model: Any, w: Any, peaks: Any, precision: str, measurements: list[Any],
                           max_batch: float | None) -> Any:
    """The core's note "measured floor" (srift::LearnedCompute::measured_model): the measured
    GPU's curve `model` held to its peak floor on batch_grid of max_batch or the largest
    measured batch, turned about the measurements' mean batch (a measured optimizer step, every
    run with its forward and backward, kept as it is); no floor where one of `measurements`
    (_core.Measurement) beats its own, with its forward + backward where every run timed them
    (w: WorkloadInfo, peaks: GpuPeaks)."""
    from srift.learn.features import peak_floor_per_sample

    check_max_batch(max_batch)  # the core's note "max_batch"
    floor = peak_floor_per_sample(w, peaks, precision, anchor=peaks, measurements=measurements)
    if not model.per_sample_s() < floor:
        return model
    span = float(max_batch) if max_batch and max_batch > 0 else 0.0
    mean_batch = 0.0
    for m in measurements:  # summed as the core sums it
        span = max(span, m.local_batch)
        mean_batch += m.local_batch / len(measurements)
    # every run timed its forward and backward: the optimizer step is measured, and kept; a run
    # whose forward + backward beats the floor beats its own (the FLOPs are theirs): no floor
    phases = all(m.forward_s >= 0 and m.backward_s >= 0 for m in measurements)
    if phases and any(m.forward_s + m.backward_s < floor * m.local_batch for m in measurements):
        return model
    return held_to_floor_about(model, batch_grid(span), floor, mean_batch, keep_optimizer=phases)


def _guard_references(doc: dict[str, Any], where: str) -> list[Any]:
    """The reference GPUs a model document (or its absolute_blend) says its predictions are
    clipped by (srift.learn.dominance note "dominance"); none where it predates the guard."""
    from srift.learn.gpus import TRAINING_GPUS

    guard = doc.get("dominance_guard")
    if guard is None:
        return []
    keys = guard.get("references") if isinstance(guard, dict) else None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{where}: dominance_guard.references must be a list of GPU keys, got {keys!r}")
    for j, k in enumerate(keys):
        if keys.index(k) < j:
            raise ValueError(f"{where}: dominance_guard.references[{j}]: {k!r} is already references[{keys.index(k)}]: "
                             "each reference GPU is listed once")
    unknown = [k for k in keys if k not in TRAINING_GPUS]
    if unknown:
        raise ValueError(f"{where}: dominance_guard.references names GPUs this srift does not know: {unknown!r}")
    # What a C++ embedder reads (srift::learned_compute_config, which requires them) must be what
    # this srift applies.
    from srift.learn.dominance import reference_specs

    specs = guard.get("reference_specs")
    if specs is None:
        raise ValueError(f"{where}: dominance_guard.reference_specs is missing (the core requires each reference's "
                         "specs): retrain with `srift train`")
    if specs != reference_specs(keys):
        raise ValueError(f"{where}: dominance_guard.reference_specs differ from this srift's GPU table: "
                         "retrain with `srift train`")
    return [TRAINING_GPUS[k] for k in keys]


@lru_cache(maxsize=1)
def shipped_measured_band() -> tuple[tuple[float, float], tuple[float, float]]:
    """default_models().measured_band() read from the one document that records it, validated,
    without loading the other models: a measured GPU under the roofline compute model needs
    its band and no learned model. Where default_models() has already loaded that document,
    its band (the same document read and validated the same way) rather than a second read:
    ~40% of a process's model loading, which is most of `srift recommend`'s time after
    profiling."""
    loaded = _loaded_default_models()
    if loaded is not None:
        return loaded.measured_band()
    _, doc = load_model(MODELS_DIR / "compute_absolute.json")
    return validate_measured_band(doc.get("measured_band"))


def _loaded_default_models() -> CostModels | None:
    """default_models()'s CostModels where it has been loaded already, else None (loads nothing)."""
    info = getattr(default_models, "cache_info", None)
    return default_models() if info is not None and info().currsize else None


@lru_cache(maxsize=1)
def default_models() -> CostModels:
    """The models shipped in srift/data/models (validated on load)."""
    return CostModels()


def hold_to_measured_floor(profile: Any, gpu_key: str, catalog: Any, precision: str, fitted: Any,
                           measurements: list[Any], max_batch: float | None = None) -> Any:
    """`fitted` (a _core.ComputeModel fitted through `measurements` on catalog GPU `gpu_key`: the
    engine's whole-instance runs through the GPU's own curve, srift.learn.comm note "instance
    anchor") held to the GPU's peak floor on the batch grid of `max_batch` and the measured
    batches, as measured_model holds the GPU's own runs: srift::hold_to_measured_floor
    (csrc/learned_compute.cpp note "measured floor"), evaluated by the core; its Python twin is
    measured_held_to_floor. ``max_batch`` None: not known (the measured batches' grid); NaN or
    an infinity is refused by the core, naming max_batch."""
    from srift import _core

    mb = 0.0 if max_batch is None else float(max_batch)
    return _core.hold_to_measured_floor(core_workload_stats(workload_from_profile(profile)),
                                        gpu_spec(peaks_from_catalog(catalog, gpu_key)), fitted, list(measurements),
                                        core_precision(precision), mb)
