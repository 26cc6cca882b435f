"""Turns a Profile and a Catalog into the core's inputs.

This is the one place where srift's modelling assumptions meet the data: how nominal link
speeds become achieved ones, what occupies GPU memory besides activations, and where a GPU
type's compute time comes from (a measurement when the profile has one, else an estimate).
Every constant here is named, documented and overridable through :class:`EngineConfig`.
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from srift import _core, checks
from srift.profile_data import EMULATED_DEVICE_PREFIX

if TYPE_CHECKING:
    from srift.catalog import Catalog, InstanceType
    from srift.profile_data import Profile

__all__ = ["EngineConfig", "Engine", "OP_KINDS", "PRECISIONS"]

GIB = 1024**3
OP_KINDS = ("matmul", "conv", "attention", "norm", "elementwise", "embedding", "pool", "recurrent", "other")
PRECISIONS = {"fp32": _core.Precision.fp32, "tf32": _core.Precision.tf32, "amp": _core.Precision.amp}
# Bandwidth standing for "inside the measured iteration" (bytes/s): allreduce time ~ 0.
INSIDE_MEASUREMENT_BYTES_S = 1e18
LARGEST_LOCAL_BATCH = float(2**31 - 1)  # a local batch is an int (srift::batch_grid's end, the simulator's)


@dataclass
class EngineConfig:
    """Assumptions of the v0 model (see README, "How srift predicts").

    Achieved/nominal ratios: NCCL's ring reaches ~75% of NVLink/NVSwitch bandwidth (p4d: 231
    GB/s bus bandwidth of 300 GB/s, ../shared/data/measured/nccl_ec2_reported.csv), about half
    of PCIe, and ~80% of a TCP NIC (90% with EFA's OS bypass); each in [0.01, 2] (achieved over
    the catalog's nominal figure), usable_memory_fraction in [0.01, 1], latencies and
    workspace_bytes >= 0 (Engine refuses others naming the field). pcie_efficiency applies to the
    PCIe links the learned PCIe model does not cover (pcie_model below: PCIe 4.0 and faster),
    and to all of them with pcie_model="v0"; under the learned model it does not touch a PCIe
    3.0 instance's link.
    """

    precision: str | None = None  # None: the profile's precision
    nvlink_efficiency: float = 0.75
    pcie_efficiency: float = 0.5
    network_efficiency: float = 0.80
    efa_network_efficiency: float = 0.90
    intra_latency_s: float = 5e-6      # per ring step over NVLink/PCIe
    network_latency_s: float = 30e-6   # per ring step over TCP
    efa_latency_s: float = 15e-6       # per ring step over EFA
    workspace_bytes: float = 1.0 * GIB  # CUDA context, cuBLAS/cuDNN workspaces, allocator slack
    usable_memory_fraction: float = 0.95
    # Most gradient-accumulation micro-steps an iteration may take when its global batch does
    # not fit the cluster's GPU memory at once (srift::simulate note "accumulation": the fewest
    # that fit, the allreduce after the last). 1: none, such a cluster does not run.
    max_accumulation_steps: int = 1
    # Largest local batch one GPU may run in a micro-step (samples): the per-GPU batch a
    # training script is written for. None: GPU memory alone limits it. With
    # max_accumulation_steps > 1 it sets the micro-steps, as a fixed per-GPU micro-batch does.
    max_local_batch: int | None = None
    roofline: dict[str, float] = field(default_factory=dict)  # RooflineParams overrides
    # Where a GPU type without its own measurement gets its compute from: "learned" (the
    # shipped scikit-learn models, anchored on a measurement of another GPU when the profile
    # has one) or "roofline" (the v0 estimate). bench/accuracy.py compares them. Under
    # "learned", a GPU type measured at one batch also takes its batch curve partly from the
    # learned model (srift::LearnedCompute note "measured batch shape").
    compute_model: str = "learned"
    # Where a TCP network link (no EFA) without its own measurement gets its bandwidth and
    # latency from: "v0" (nominal x network_efficiency, network_latency_s: NCCL's figures) or
    # "learned" (the link model fitted to gloo allreduce sweeps on emulated hosts,
    # srift.learn.links note "link model"). Not the default: gloo's per-step latency on CPU
    # ranks is ~20x NCCL's, so it describes gloo/CPU clusters, not NCCL on EC2 GPUs.
    comm_model: str = "v0"
    # Where a PCIe link inside an instance without its own measurement gets its bandwidth
    # from: "learned" (achieved / nominal as a function of the instance's GPU count, fitted to
    # the Sia PCIe clusters through the simulator: srift.learn.pcie_link note "pcie class"), for
    # the PCIe generation it was fitted on (3.0: g4dn, g3, g5g, p2; faster PCIe keeps v0, note
    # "host scaling" in srift.learn.host_scaling), or "v0" (nominal x pcie_efficiency).
    pcie_model: str = "learned"
    # A GPU type the profile measured: the p10/p90 factors of its own measurement (host-to-host
    # noise) and, per e-fold of local batch away from the measured batch, of its batch curve
    # (band.hpp note "measured batch band"). None: as `srift train` fitted them, shipped in
    # compute_absolute.json (srift.learn.measured_band note "measured band": Lambda's repeated
    # hosts x0.99-x1.07; Gavel's and Sia's 1-GPU pairs at two batches x0.67-x1.49 per e-fold).
    measured_p10: float | None = None
    measured_p90: float | None = None
    measured_batch_p10_per_e_fold: float | None = None
    measured_batch_p90_per_e_fold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def with_overrides(config: EngineConfig, **fields: Any) -> EngineConfig:
    """`config` with the given fields replaced, those passed as None left as they are."""
    given = {k: v for k, v in fields.items() if v is not None}
    return EngineConfig(**{**config.to_dict(), **given}) if given else config


def _check_config(c: EngineConfig) -> None:
    """ValueError naming the field for an assumption out of its range (an efficiency of 0 or
    NaN had become a made-up 1 GB/s link, 1e-300 a negative interference time)."""
    def number(name: str) -> float:
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"EngineConfig.{name} must be a finite number, got {v!r}")
        return float(v)

    # below 1% of nominal no link or memory is what it claims to be; a link may beat a nominal
    # figure that understates it (one direction of a bidirectional rating), not by 2x
    for name, high in (("nvlink_efficiency", 2.0), ("pcie_efficiency", 2.0), ("network_efficiency", 2.0),
                       ("efa_network_efficiency", 2.0), ("usable_memory_fraction", 1.0)):
        v = number(name)
        if not 0.01 <= v <= high:
            raise ValueError(f"EngineConfig.{name} must be in [0.01, {high:g}], got {getattr(c, name)!r}")
    for name in ("intra_latency_s", "network_latency_s", "efa_latency_s", "workspace_bytes"):
        if number(name) < 0:
            raise ValueError(f"EngineConfig.{name} must be >= 0, got {getattr(c, name)!r}")
    if not isinstance(c.roofline, dict):
        raise ValueError(f"EngineConfig.roofline must be a dict of RooflineParams overrides (name: number), "
                         f"got {type(c.roofline).__name__} {c.roofline!r}")
    for name, v in c.roofline.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"EngineConfig.roofline[{name!r}] must be a finite number, got {v!r}")


# A kept curve that misses a measured point by more than this share is not noise: Lambda's
# repeated hosts agree within 8.2% at p90 (docs/accuracy.md, measurement_noise).
NO_LINE_MISS_SHARE = 0.10


def _warn_if_no_line(gpu_key: str, points: list[_core.Measurement], model: _core.ComputeModel, depth: int = 0) -> None:
    """Measurements at two or more batches that fit no line (srift::measured_line: no positive
    slope or a negative intercept): the core (srift::LearnedCompute::measured_model, note
    "several batches, no line") scales a curve through their mean. Where that curve misses a
    measured point by more than NO_LINE_MISS_SHARE, say so rather than label it "measured" in
    silence. A flat, launch-bound curve whose noise tips the slope below 0 (Sia's NCF, ~10 ms
    from batch 32 to 32,768) is held by the learned curve within the noise: no warning."""
    line = _core.measured_line(points)
    if not line.several_batches or (line.slope > 0 and line.intercept >= 0):
        return

    def pair(p: _core.Measurement) -> tuple[float, float]:
        if p.forward_s >= 0 and p.backward_s >= 0:
            return p.forward_s + p.backward_s, model.compute_s(p.local_batch)
        return p.iteration_s, model.compute_s(p.local_batch) + model.optimizer_s

    worst = max(abs(predicted / measured - 1) for measured, predicted in map(pair, points))
    if worst <= NO_LINE_MISS_SHARE:
        return
    # repeats merged into their median (note "repeated measurements") are one point, shown once
    shown = ", ".join(dict.fromkeys(f"{pair(p)[0]:.4g} s at {p.local_batch:g}"
                                    for p in sorted(points, key=lambda p: p.local_batch)))
    warnings.warn(f"measurements on {gpu_key} ({shown}) fit no line of a fixed cost and a per-sample time; srift "
                  f"scales a curve through their mean (batch {line.mean_batch:g}, {line.mean_s:.4g} s), which misses a "
                  f"measured point by {worst:.0%}; check the runs (a warm-up, another GPU, another precision?)",
                  UserWarning, stacklevel=4 + depth)


# Note "repeated measurements". Runs of one configuration (device, local batch, micro-steps;
# one GPU or a whole instance) are repeats of one measurement: two enter the fit as their mean
# (least squares on their batch does that), three or more as their median, each in the place of
# one (the fit keeps their weight), so one run that timed a warm-up or a busy host does not
# move the curve. Repeats whose slowest is more than REPEAT_SPREAD_SHARE over their fastest
# disagree more than runs of one configuration do: of 6,494 pairs of Lambda's hosts running
# one benchmark on one GPU configuration (lambda_v2_fp32/fp16_hosts.csv) 0.8% differ by more,
# and of Sia's 1,520 pairs of repeated multi-node steps (sia_profiles_non_ec2.csv) 0.7%
# (the median pair differs by 0.4% and 2.0%); of Gavel's two 1-GPU rows per job 3% outside its
# host-bound Recommendation model, all 15 of those (1.5-11.8x). The engine names them and the
# value it uses (docs/accuracy.md, "Repeated runs that disagree"). The core merges them
# (srift::merge_repeats, csrc/include/srift/measurements.hpp), as a C++ scheduler would.
REPEAT_SPREAD_SHARE = _core.REPEAT_SPREAD_SHARE

# A measured run is flagged as impossibly fast past this multiple of its device's fastest peak
# (Engine._warn_if_faster_than_peak): a measured peak (an emulated CPU's) is beaten by noise.
PEAK_MARGIN = 1.2


@dataclass
class _Repeat:
    """One measured point with its configuration: repeats share ``key``."""

    key: tuple[int, int]  # (local batch, micro-steps)
    label: str            # what it is: "measurements[j]", "the profile's own timing"
    point: _core.Measurement  # as the fit reads it (an accumulated run as its plain iteration)
    seconds: float        # as measured


def _core_runs(repeats: list[_Repeat]) -> list[_core.MeasuredRun]:
    """The repeats as the core's runs: configuration (local batch, micro-steps, precision) and
    time as measured."""
    return [_core.MeasuredRun(r.point, r.key[1], r.seconds) for r in repeats]


def _merge(repeats: list[_Repeat]) -> _core.MergedRepeats:
    """The core's merge of the repeats (note "repeated measurements"): its ``points`` are the
    points in order, each group of three or more repeats as its median, one or two as they are;
    its ``disagreeing`` the groups _warn_if_repeats_disagree names. One call gives both."""
    return _core.merge_repeats(_core_runs(repeats), REPEAT_SPREAD_SHARE)


def _merged_repeats(repeats: list[_Repeat]) -> list[_core.Measurement]:
    """The points in order, each group of three or more repeats as its median (note "repeated
    measurements"); one or two as they are."""
    return list(_merge(repeats).points)


def _warn_if_repeats_disagree(where: str, repeats: list[_Repeat], merged: _core.MergedRepeats,
                              depth: int = 0) -> None:
    """Note "repeated measurements": repeats of one configuration whose slowest is more than
    REPEAT_SPREAD_SHARE over their fastest are named, with the value srift fits. `merged` is
    _merge(repeats), the merge the points were read from."""
    for g in merged.disagreeing:
        group = [repeats[i] for i in g.members]
        batch, steps = group[0].key
        config = f"local batch {batch}" + (f", {steps} micro-steps" if steps > 1 else "")
        shown = ", ".join(f"{r.seconds:.4g} s ({r.label})" for r in group)
        warnings.warn(f"measurements on {where} at {config} disagree: {shown}; the slowest is {g.spread:.0%} over the "
                      f"fastest, where 99% of the repeated runs in Lambda's and Sia's data differ by at most "
                      f"{REPEAT_SPREAD_SHARE:.0%}. srift uses "
                      f"their {'mean' if len(group) == 2 else 'median'}, {g.used_s:.4g} s; check the runs (a warm-up "
                      "timed, a busy host, another GPU, batch or precision) and drop the wrong one",
                      UserWarning, stacklevel=4 + depth)


def _roofline_params(overrides: dict[str, float]) -> _core.RooflineParams:
    params = _core.RooflineParams()
    for name, value in overrides.items():
        if not hasattr(params, name):
            raise ValueError(f"roofline parameter {name!r} is unknown; known: tensor_core_efficiency, "
                             "cuda_core_efficiency, memory_efficiency, launch_overhead_s, backward_bytes_factor")
        setattr(params, name, float(value))
    return params


class Engine:
    """Core inputs for one (profile, catalog, config), cached per GPU type and instance type."""

    def __init__(self, profile: Profile, catalog: Catalog, config: EngineConfig | None = None):
        from srift.catalog import Catalog as _Catalog
        from srift.profile_data import Profile as _Profile

        checks.instance("profile", profile, _Profile, "srift.profile(model, ...) or srift.Profile.load(path)")
        checks.instance("catalog", catalog, _Catalog, "srift.Catalog.default() or srift.Catalog.load(path)")
        checks.optional_instance("config", config, EngineConfig, "srift.EngineConfig(...)")
        profile.validate()  # a profile built or edited in Python meets a file's bounds too
        self.profile = profile
        self.catalog = catalog
        self.config = config or EngineConfig()
        _check_config(self.config)
        # None is "the profile's"; 0, "" or [] is no precision, refused below (it read as None)
        precision = profile.precision if self.config.precision is None else self.config.precision
        if isinstance(precision, str) and precision.strip().lower() in PRECISIONS:
            precision = precision.strip().lower()  # "AMP" as the CLI and add_measurement take it
        if not isinstance(precision, str) or precision not in PRECISIONS:  # a list: TypeError unhashable
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.precision = precision
        self._roofline = _roofline_params(self.config.roofline)
        checks.integer("max_accumulation_steps", self.config.max_accumulation_steps)
        checks.optional_integer("max_local_batch", self.config.max_local_batch)
        if self.config.compute_model not in ("learned", "roofline"):
            raise ValueError(f"compute_model must be 'learned' or 'roofline', got {self.config.compute_model!r}")
        if self.config.comm_model not in ("learned", "v0"):
            raise ValueError(f"comm_model must be 'learned' or 'v0', got {self.config.comm_model!r}")
        if self.config.pcie_model not in ("learned", "v0"):
            raise ValueError(f"pcie_model must be 'learned' or 'v0', got {self.config.pcie_model!r}")
        for name in ("measured_p10", "measured_batch_p10_per_e_fold", "measured_p90", "measured_batch_p90_per_e_fold"):
            v = getattr(self.config, name)
            ok = v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                               and (0 < v <= 1 if "p10" in name else v >= 1))
            if not ok:
                rule = "in (0, 1]" if "p10" in name else "finite and >= 1"
                raise ValueError(f"{name} must be None (as trained) or a factor {rule}, got {v!r}")
        self._measured_band: tuple[tuple[float, float], tuple[float, float]] | None = None
        # what _resolve and _anchors answer, asked again for every GPU type (the catalog and the
        # measurements this engine reads do not change; resolving a name is ~16 regex passes)
        self._resolved: dict[str, list[str]] = {}
        self._anchor_list: list[tuple[str, list[_core.Measurement]]] | None = None
        self._compute: dict[str, tuple[_core.ComputeModel, str, float, float]] = {}
        self._learned_cache: tuple[Any, Any] | None = None  # (CostModels, its LearnedComputeCache)
        self._grid_ends: tuple[Any, list[tuple[float, float]]] | None = None  # (CostModels, grid_ends())
        self._instance_compute: dict[str, tuple[_core.ComputeModel, str, float, float]] = {}
        self._instances: dict[str, _core.InstanceSpec] = {}
        self._group_bands: dict[tuple[str, bool], _core.GroupBand] = {}
        self._select_measurements()
        # the core's merge of each instance type's repeats, read once for its points and once
        # for the disagreeing groups (_instance_entry's warning)
        self._instance_merged: dict[str, _core.MergedRepeats] = {}
        self._instance_points = self._instance_measurements()
        self._check_gpu_measurements()
        self._layers = self._layer_columns()
        self.workload = self._workload()

    # ---- workload ---------------------------------------------------------------------------
    def _layer_columns(self) -> tuple[np.ndarray, ...]:
        layers = self.profile.layers
        if not layers:
            raise ValueError(f"profile {self.profile.model!r} has no layers: nothing to predict")
        kind_index = {k: i for i, k in enumerate(OP_KINDS)}
        kinds = np.array([kind_index.get(layer.kind, kind_index["other"]) for layer in layers], dtype=np.int32)
        columns = [np.array([getattr(layer, f) for layer in layers], dtype=np.float64)
                   for f in ("forward_flops", "backward_flops", "forward_bytes", "param_bytes")]
        return (kinds, *columns)

    def _ready_fractions(self) -> list[float]:
        """Bucket ready times inside the backward. Measured per-layer times are used when the
        profile ran on a GPU; on a CPU or meta profile the backward FLOPs share stands in
        (Profile.flops_ready_fractions), because a CPU's per-layer time profile says little
        about a GPU's."""
        if self.profile.device_gpu:
            return [float(b.ready_fraction) for b in self.profile.buckets]
        return self.profile.flops_ready_fractions()

    def _workload(self) -> _core.Workload:
        p = self.profile
        w = _core.Workload()
        w.bucket_bytes = p.allreduce_bucket_bytes()  # what each allreduce carries (a comm hook's dtype)
        w.bucket_ready_fraction = self._ready_fractions()
        w.broadcast_bytes = p.broadcast_bytes()  # DDP's buffer broadcast before each forward
        amp = self.precision == "amp"
        # Weights, their gradients, DDP's bucket copy of the gradients, optimizer state, the
        # module's buffers (BatchNorm statistics, registered tables: on the GPU with the
        # model); autocast also caches half-precision copies of the weights during the forward.
        fixed = (p.param_bytes + 2 * p.trainable_param_bytes + p.optimizer_state_bytes + p.buffer_bytes
                 + (0.5 * p.param_bytes if amp else 0.0) + self.config.workspace_bytes)
        w.fixed_memory_bytes = float(fixed)
        w.activation_bytes_per_sample = float(p.activation_bytes_per_sample) * (0.5 if amp else 1.0)
        w.validate()
        return w

    def optimizer_bytes(self) -> float:
        """Memory traffic of one optimizer step: read weights and gradients, read and write
        the optimizer state, write the weights."""
        p = self.profile
        return float(3 * p.trainable_param_bytes + 2 * p.optimizer_state_bytes)

    # ---- hardware ---------------------------------------------------------------------------
    def gpu_spec(self, key: str) -> _core.GpuSpec:
        g = self.catalog.gpu(key)
        spec = _core.GpuSpec()
        spec.name = key
        spec.memory_bytes = float(g.memory_gib) * GIB
        spec.fp32_flops = float(g.fp32_tflops) * 1e12
        spec.tf32_flops = float(g.tf32_tflops or 0.0) * 1e12
        half = g.bf16_tflops or g.fp16_tflops or 0.0
        spec.fp16_flops = float(half) * 1e12
        spec.memory_bandwidth = float(g.memory_bandwidth_gbytes_s) * 1e9
        spec.validate()
        return spec

    def instance_spec(self, name: str) -> _core.InstanceSpec:
        cached = self._instances.get(name)
        if cached is not None:
            return cached
        it: InstanceType = self.catalog.instance(name)
        gpu = self.catalog.gpu(it.gpu)
        c = self.config
        spec = _core.InstanceSpec()
        spec.name = name
        spec.gpus = int(it.gpu_count)
        spec.gpu_memory_bytes = float(gpu.memory_gib) * GIB
        # A measured link (srift probe-network, srift validate) is used as it is; otherwise the
        # nominal bandwidth times the achieved/nominal ratio assumed for the link class.
        intra_eff = c.nvlink_efficiency if it.interconnect in ("nvlink", "nvswitch") else c.pcie_efficiency
        intra_bw = (float(it.measured_intra_gbytes_s) * 1e9 if it.measured_intra_gbytes_s
                    else float(it.intra_node_gbytes_s or 0.0) * 1e9 * intra_eff)
        if self._uses_learned_pcie(it):
            from srift.learn import default_models

            intra_bw = default_models().pcie_link(float(it.intra_node_gbytes_s) * 1e9, int(it.gpu_count))
        intra_lat = (float(it.measured_intra_latency_us) * 1e-6 if it.measured_intra_latency_us is not None
                     else c.intra_latency_s)
        if it.name in self._instance_points:
            # A measured whole-instance iteration already contains the allreduce inside the
            # instance (and the host contention around it): only traffic leaving it is added.
            spec.intra = _core.LinkSpec(INSIDE_MEASUREMENT_BYTES_S, 0.0)
        else:
            spec.intra = _core.LinkSpec(intra_bw if intra_bw > 0 else 1e9, intra_lat)
        net_eff = c.efa_network_efficiency if it.efa else c.network_efficiency
        net_bw = float(it.network_gbps) * 1e9 / 8 * net_eff
        net_lat = c.efa_latency_s if it.efa else c.network_latency_s
        if not it.efa and c.comm_model == "learned" and it.network_gbps > 0:
            from srift.learn import default_models

            net_bw, net_lat = default_models().tcp_link(float(it.network_gbps) * 1e9 / 8, int(it.gpu_count))
        if it.measured_network_gbytes_s:
            net_bw = float(it.measured_network_gbytes_s) * 1e9
        if it.measured_network_latency_us is not None:
            net_lat = float(it.measured_network_latency_us) * 1e-6
        spec.network = _core.LinkSpec(net_bw, net_lat)
        spec.comm_compute_s_per_byte = float(it.measured_comm_compute_s_per_gbyte or 0.0) * 1e-9
        spec.validate()
        self._instances[name] = spec
        return spec

    # ---- compute ----------------------------------------------------------------------------
    def _select_measurements(self) -> None:
        """Note "measurement precision". The measurements a prediction at self.precision may
        read: those timed at it (Profile.measurement_precision: a measurement's own precision,
        else the profile's), and the profile's own timings when the profile ran at it. A run at
        another precision is no evidence of this one's time (on tensor-core GPUs AMP is often
        2-3x FP32, and srift has no model from one to the other that a measurement should
        pass through), so it anchors nothing: the prediction is made as without it, and one
        warning names every run left out, so a profile may hold runs at several precisions and
        each prediction uses its own. The points the core reads carry their precision
        (_timed_at), and the core refuses one at another precision than it predicts
        (srift::require_precision, csrc/include/srift/compute.hpp note "measurement
        precision"), as it does for a C++ caller. Kept: (index in profile.measurements,
        measurement)."""
        p = self.profile
        self._usable: list[tuple[int, Any]] = []
        skipped: list[str] = []
        for j, m in enumerate(p.measurements):
            at = p.measurement_precision(m)
            if at == self.precision:
                self._usable.append((j, m))
                continue
            how = at if m.precision is not None else f"{at}: recorded without a precision, read as the profile's"
            what = f"{m.device} whole instance" if m.gpus > 1 else m.device
            skipped.append(f"measurements[{j}] ({what}, local batch {m.local_batch}, {m.iteration_s:g} s, {how})")
        self._timings_usable = p.timings is not None and p.precision == self.precision
        if p.timings is not None and p.device_gpu and not self._timings_usable:
            skipped.append(f"the profile's own timings on {p.device_gpu} ({p.precision}, as profiled)")
        if skipped:
            shown = "; ".join(skipped[:6]) + (f"; and {len(skipped) - 6} more" if len(skipped) > 6 else "")
            warnings.warn(f"{len(skipped)} measurement{'s' if len(skipped) > 1 else ''} timed at another precision "
                          f"than the {self.precision} predicted {'are' if len(skipped) > 1 else 'is'} not used: "
                          f"{shown}. srift anchors only on runs at the precision it predicts; time the run at "
                          f"{self.precision} (--measure GPU:BATCH:SECONDS@{self.precision}, "
                          f"add_measurement(..., precision={self.precision!r})) or predict at the run's precision "
                          "(--precision)", UserWarning, stacklevel=4)

    def _instance_measurements(self) -> dict[str, list[_core.Measurement]]:
        """Whole-instance DDP measurements (gpus > 1) at the predicted precision by catalog
        instance type; ValueError when one (at any precision) names no instance type or a GPU
        count the instance does not have."""
        out: dict[str, list[_core.Measurement]] = {}
        self._instance_repeats: dict[str, list[_Repeat]] = {}
        usable = {j for j, _ in self._usable}
        for j, m in enumerate(self.profile.measurements):
            if m.gpus <= 1:
                continue
            try:
                it = self.catalog.instance(m.device.strip())
            except (KeyError, ValueError) as e:
                raise ValueError(f"measurements[{j}].device: a measurement with gpus={m.gpus} names the instance "
                                 f"type it ran on; {m.device!r} is not one ({e})") from None
            if int(it.gpu_count) != m.gpus:
                raise ValueError(f"measurements[{j}].gpus: {it.name} has {it.gpu_count} GPUs and srift plans whole "
                                 f"instances, so a whole-instance measurement uses all of them; got gpus={m.gpus}")
            if j in usable:
                self._instance_repeats.setdefault(it.name, []).append(
                    _Repeat((m.local_batch, 1), f"measurements[{j}]", _core_point(m, self._timed_at(m)),
                            float(m.iteration_s)))
        for name, repeats in self._instance_repeats.items():
            merged = self._instance_merged[name] = _merge(repeats)
            out[name] = list(merged.points)
        return out

    def _check_gpu_measurements(self) -> None:
        """ValueError for a one-GPU measurement on a GPU the catalog does not know: nothing
        could read it (no specs to anchor on), and dropping it would plan as if it were not
        there. `srift validate`'s emulated workers (EMULATED_DEVICE_PREFIX) are the exception:
        their calibration, kept in a profile, means something only in the catalog validate
        builds for them."""
        keys = set(self.catalog.gpu_keys())
        for j, m in enumerate(self.profile.measurements):
            if m.device.startswith(EMULATED_DEVICE_PREFIX):
                continue
            if m.gpus == 1 and not any(k in keys for k in self._resolve(m.device)):
                try:
                    self.catalog.gpu(m.device)
                except ValueError as e:
                    raise ValueError(f"measurements[{j}].device: {e} (a measurement must name a GPU the catalog "
                                     f"knows; srift catalog show lists each instance type's GPU)") from None

    def _measurements_for(self, gpu_key: str, optimizer_s: float | None = None) -> list[_core.Measurement]:
        """The points a GPU type's compute is fitted to, repeats of one configuration merged
        (note "repeated measurements")."""
        return _merged_repeats(self._gpu_repeats(gpu_key, optimizer_s))

    def _gpu_repeats(self, gpu_key: str, optimizer_s: float | None = None) -> list[_Repeat]:
        """A GPU type's measured points at the predicted precision, each with its
        configuration (local batch, micro-steps) and what it is (for the warnings)."""
        out: list[_Repeat] = []
        for j, m in self._usable:
            if m.gpus == 1 and gpu_key in self._resolve(m.device):
                out.append(_Repeat((m.local_batch, m.accumulation_steps), f"measurements[{j}]",
                                   self._plain_point(m, gpu_key, optimizer_s), float(m.iteration_s)))
        t = self.profile.timings
        if t is not None and self._timings_usable and self.profile.device_gpu == gpu_key:
            for i, b in enumerate(t.batch_sizes):
                point = _core.Measurement(float(b), float(t.iteration_s[i]), float(t.forward_s[i]),
                                          float(t.backward_s[i]), PRECISIONS[self.profile.precision])
                out.append(_Repeat((int(b), 1), "the profile's own timing", point, float(t.iteration_s[i])))
        return out

    def _plain_point(self, m: Any, gpu_key: str, optimizer_s: float | None = None) -> _core.Measurement:
        """Note "accumulated measurement". A one-GPU measurement of k > 1 micro-steps per
        optimizer step, T = k c(b) + (k - 1) a + o (srift::simulate note "accumulation": c the
        compute at local batch b, a the gradient add, o the optimizer step), as the plain
        iteration it implies, c(b) + o = (T - o - (k - 1) a) / k + o, with a as srift estimates
        it on this GPU (gradient_accumulate_s) and o the roofline's optimizer step, or
        `optimizer_s`: the measured model's own, which its fit may cap (_compute_entry solves
        for it, so the model gives back T). Every compute path (measured, anchored, the band)
        then reads it as it reads any other."""
        steps = m.accumulation_steps
        if steps == 1:
            return _core_point(m, self._timed_at(m))
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1 or m.gpus != 1:
            raise ValueError(f"measurement on {m.device}: accumulation_steps must be an integer >= 1 on one GPU, "
                             f"got {steps!r} with gpus={m.gpus!r}")
        kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes = self._layers
        spec = self.gpu_spec(gpu_key)
        if optimizer_s is None:
            optimizer_s = _core.roofline_compute(kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes, spec,
                                                 PRECISIONS[self.precision], self.optimizer_bytes(),
                                                 self._roofline).optimizer_s
        add_s = _core.gradient_accumulate_s(float(self.profile.trainable_param_bytes), spec, self._roofline)
        micro_steps_s = m.iteration_s - optimizer_s - (steps - 1) * add_s
        if not micro_steps_s > 0:
            raise ValueError(f"measurement on {m.device}: iteration_s {m.iteration_s!r} is less than the optimizer "
                             f"step and {steps - 1} gradient adds srift estimates for {steps} micro-steps "
                             f"({optimizer_s + (steps - 1) * add_s:.4g} s)")
        return _core.Measurement(float(m.local_batch), micro_steps_s / steps + optimizer_s,
                                 -1.0 if m.forward_s is None else float(m.forward_s),
                                 -1.0 if m.backward_s is None else float(m.backward_s), self._timed_at(m))

    def _timed_at(self, m: Any) -> _core.Precision:
        """The core's precision of a profile measurement (Profile.measurement_precision): the
        core refuses a point at another precision than the one it predicts (srift::
        require_precision), should one pass the filter of note "measurement precision"."""
        return PRECISIONS[self.profile.measurement_precision(m)]

    def _resolve(self, device: str) -> list[str]:
        kept = self._resolved.get(device)
        if kept is not None:
            return kept
        try:
            out = self.catalog.resolve_gpu(device)
        except ValueError:
            out = [device]
        self._resolved[device] = out
        return out

    def memory_max_batch(self, gpu_key: str) -> float:
        """The largest local batch whose memory fits one GPU of `gpu_key` (samples; the
        simulator's max_local_batch rule without the global-batch cap; at least 1). The GPU's
        learned and measured compute models are fitted and held to the peak floor on
        batch_grid of it (and of its measured batches), and the simulator plans no larger local
        batch, so the floor holds at every batch a plan runs (srift::LearnedCompute note "measured floor": a line
        turned to meet the floor at the grid's end, or any line shallower than it, is under the
        floor past the end)."""
        return max(1.0, self._memory_batch_limit(gpu_key))

    def grid_ends(self) -> list[tuple[float, float]]:
        """(memory bytes, memory_max_batch of a GPU with that memory) for every memory among the
        catalog's GPUs and the learned compute models' dominance references: each GPU's own grid
        end, so that a reference bounds a target with its own line on its own grid (srift::
        LearnedCompute note "own grids"; GpuSpec.memory_bytes is memory_gib x 2**30 on both
        sides). Made once per engine and models."""
        from srift.learn import default_models

        models = default_models()
        if self._grid_ends is None or self._grid_ends[0] is not models:
            config = models.learned_compute.config
            memories = {float(self.catalog.gpu(k).memory_gib) * GIB for k in self.catalog.gpu_keys()}
            memories.update(g.memory_bytes for g in [*config.ratio_references, *config.absolute_references])
            self._grid_ends = (models, [(m, max(1.0, self._memory_bytes_batch_limit(m))) for m in sorted(memories)])
        return self._grid_ends[1]

    def _memory_batch_limit(self, gpu_key: str) -> float:
        """memory_max_batch before its floor of 1: 0 where not one sample fits."""
        return self._memory_bytes_batch_limit(float(self.catalog.gpu(gpu_key).memory_gib) * GIB)

    def _memory_bytes_batch_limit(self, memory_bytes: float) -> float:
        """_memory_batch_limit of a GPU with `memory_bytes` of memory."""
        w = self.workload
        free = self.config.usable_memory_fraction * memory_bytes - w.fixed_memory_bytes
        if w.activation_bytes_per_sample <= 0:
            # the simulator then plans any local batch up to the global batch, an int: the grid
            # reaches the largest (2**20 here left batches past it under the floor)
            return LARGEST_LOCAL_BATCH if free > 0 else 0.0
        return max(0.0, math.floor(free / w.activation_bytes_per_sample))

    def _anchors(self) -> list[tuple[str, list[_core.Measurement]]]:
        """Every GPU type the profile measured alone (one GPU) at the predicted precision, with
        its measurements, to anchor learned ratios (several: their predictions are averaged,
        srift::LearnedCompute note "several anchors"); else the profiled device's own timings
        when it was profiled at that precision; else none (note "measurement precision").
        Made once per engine (the list is shared: callers copy what they keep)."""
        if self._anchor_list is not None:
            return self._anchor_list
        out: dict[str, list[_core.Measurement]] = {}
        for _, m in self._usable:
            if m.gpus > 1:
                continue
            keys = [k for k in self._resolve(m.device) if k in self.catalog.gpu_keys()]
            if keys and keys[0] not in out:
                out[keys[0]] = self._measurements_for(keys[0])
        if not out and self.profile.device_gpu and self._timings_usable:
            out[self.profile.device_gpu] = self._measurements_for(self.profile.device_gpu)
        anchors = [(k, v) for k, v in sorted(out.items()) if v]
        for key, _ in anchors:
            # a GPU the question never plans on still anchors every other: its measurements get
            # the checks (memory, no line) a planned GPU's would; the entry is cached for later
            self._compute_entry(key, _depth=2)  # its warnings name the same caller a planned GPU's do
        self._anchor_list = anchors
        return anchors

    def compute_model(self, gpu_key: str) -> tuple[_core.ComputeModel, str]:
        """(ComputeModel, source) for a GPU type. Source: "measured" (the profile has runs on
        this GPU type), "learned" (scikit-learn models, anchored on another GPU's runs when
        there are any) or "roofline"."""
        model, source, _, _ = self._compute_entry(gpu_key)
        return model, source

    def compute_interval(self, gpu_key: str) -> tuple[float, float]:
        """(p10, p90) factors on a GPU type's compute time, from held-out residuals of the
        model that produced it (or the measurement noise for measured types)."""
        _, _, p10, p90 = self._compute_entry(gpu_key)
        return p10, p90

    def _learned_compute_cache(self) -> Any:
        """One LearnedComputeCache of this engine's profile for every GPU type's learned compute
        model (srift::LearnedCompute note "shared memo"): the dominance references' lines each
        prediction is held between are computed once, not once a GPU type. Made again where
        default_models() is another object (a cache is bound to its models)."""
        from srift.learn import default_models

        models = default_models()
        if self._learned_cache is None or self._learned_cache[0] is not models:
            self._learned_cache = (models, models.compute_cache(self.profile))
        return self._learned_cache[1]

    def _compute_entry(self, gpu_key: str, _depth: int = 0) -> tuple[_core.ComputeModel, str, float, float]:
        cached = self._compute.get(gpu_key)
        if cached is not None:
            return cached
        # one merge of the repeats gives the points and the groups that disagree
        repeats = self._gpu_repeats(gpu_key)
        merged = _merge(repeats)
        points = list(merged.points)
        if points:
            # a name that resolves to several GPUs (V100: 16 and 32 GB) may have run on the larger
            mine = [m for _, m in self._usable if m.gpus == 1 and self._resolve(m.device) == [gpu_key]]
            _warn_if_repeats_disagree(gpu_key, repeats, merged, _depth)
            self._warn_if_over_memory(gpu_key, mine, depth=_depth)
            self._warn_if_faster_than_peak(gpu_key, mine, depth=_depth)
            kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes = self._layers
            prior = _core.roofline_compute(kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes,
                                           self.gpu_spec(gpu_key), PRECISIONS[self.precision],
                                           self.optimizer_bytes(), self._roofline)
            def fit(points: list[_core.Measurement]) -> _core.ComputeModel:
                if self.config.compute_model == "learned":
                    # One batch measured scales the no-measurement model's curve through it
                    # (srift::LearnedCompute note "measured batch shape"); two or more fit their
                    # own line.
                    from srift.learn import default_models

                    return default_models().measured_model(self.profile, gpu_key, self.catalog, self.precision,
                                                           prior, points, self.memory_max_batch(gpu_key),
                                                           cache=self._learned_compute_cache(),
                                                           grid_ends=self.grid_ends())
                return _core.anchor_to_measurements(prior, points)

            model = fit(points)
            if any(m.accumulation_steps > 1 for _, m in self._usable):
                # note "accumulated measurement": the fit may cap the optimizer step below the
                # roofline's; read the accumulated runs again with the model's own until it holds
                for _ in range(8):
                    used = model.optimizer_s
                    points = self._measurements_for(gpu_key, used)
                    model = fit(points)
                    if abs(model.optimizer_s - used) <= 1e-12 * max(used, 1e-30):
                        break
                if model.optimizer_s != used:  # the points as the final model's step reads them
                    points = self._measurements_for(gpu_key, model.optimizer_s)
            _warn_if_no_line(gpu_key, points, model, _depth)
            entry = (model, "measured", *self.measured_band()[0])
        elif self.config.compute_model == "learned":
            from srift.learn import default_models

            model, p10, p90, source = default_models().compute_model(self.profile, gpu_key, self.catalog,
                                                                     self.precision, anchor=self._anchors() or None,
                                                                     max_batch=self.memory_max_batch(gpu_key),
                                                                     cache=self._learned_compute_cache(),
                                                                     grid_ends=self.grid_ends())
            entry = (model, source, float(p10), float(p90))
        else:
            kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes = self._layers
            prior = _core.roofline_compute(kinds, fwd_flops, bwd_flops, fwd_bytes, param_bytes,
                                           self.gpu_spec(gpu_key), PRECISIONS[self.precision],
                                           self.optimizer_bytes(), self._roofline)
            entry = (prior, "roofline", math.nan, math.nan)
        # every source's model: a measurement or the learned models never saw accumulation
        entry[0].accumulate_s = _core.gradient_accumulate_s(float(self.profile.trainable_param_bytes),
                                                            self.gpu_spec(gpu_key), self._roofline)
        self._compute[gpu_key] = entry
        return entry

    def instance_compute(self, instance_type: str) -> tuple[_core.ComputeModel, str]:
        """(ComputeModel, source) of one rank on an instance type: its GPU's model, or, when
        the profile measured a DDP iteration on the whole instance, that GPU's model anchored
        to it (source "measured-instance"): host contention and the allreduce inside the
        instance are then part of each rank's compute, and srift adds only the network."""
        model, source, _, _ = self._instance_entry(instance_type)
        return model, source

    def _uses_learned_pcie(self, it: InstanceType) -> bool:
        """Whether the GPUs of an instance type exchange gradients over the learned PCIe link:
        PCIe of the generation the link was learned on, several GPUs, no probed link, no
        whole-instance measurement, pcie_model learned."""
        if not (self.config.pcie_model == "learned" and it.interconnect == "pcie" and it.gpu_count > 1
                and not it.measured_intra_gbytes_s and (it.intra_node_gbytes_s or 0.0) > 0
                and it.name not in self._instance_points):
            return False
        from srift.learn import default_models

        return default_models().pcie_link_applies(float(it.intra_node_gbytes_s) * 1e9)

    def link_interval(self, instance_type: str) -> tuple[float, float]:
        """(p10, p90) factors on the iteration of a cluster with this instance type: the
        held-out step residuals of the learned PCIe link where the instance uses it (its GPUs
        exchange gradients over it), (1, 1) elsewhere."""
        if not self._uses_learned_pcie(self.catalog.instance(instance_type)):
            return 1.0, 1.0
        from srift.learn import default_models

        return default_models().pcie_link_interval()

    def scaling_interval(self, groups: list[tuple[str, int]]) -> tuple[float, float]:
        """(p10, p90) factors on the iteration of a cluster of (instance type, count) groups
        over links srift models or a probe measured: the held-out steps of such clusters, by
        scope and GPUs per instance (srift.learn.scaling_band note "scaling band"); the probed
        band where the links that matter were probed (one instance's intra-node link, every
        type's network and every multi-GPU type's intra-node link across several). (1, 1) where
        the iteration carries its own evidence: one GPU; one instance measured whole by the
        profile or on the learned PCIe line (link_interval); several instances of types all
        measured whole (instance_interval). Under pcie_model="v0" a PCIe 3.0 instance takes the
        modelled band, which holds no PCIe 3.0 step at v0 (Sia's are the learned line's)."""
        p10, p90, _ = self.scaling_band(groups)
        return p10, p90

    def scaling_band(self, groups: list[tuple[str, int]]) -> tuple[float, float, str]:
        """scaling_interval's (p10, p90) factors and what they stand for ("" where (1, 1))."""
        if not groups:
            raise ValueError("groups: expected at least one (instance type, count) group, got none")
        if len(groups) > _core.MAX_GROUPS:
            raise ValueError(f"groups: expected at most {_core.MAX_GROUPS} groups, got {len(groups)}")
        pairs = []
        for j, group in enumerate(groups):
            if not isinstance(group, (tuple, list)) or len(group) != 2:
                raise ValueError(f"groups[{j}]: expected an (instance type, count) pair, got {group!r}")
            name, count = group
            if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 0:
                raise ValueError(f"groups[{j}]: expected an instance count >= 0 for {name!r}, got {count!r}")
            self.catalog.instance(name)  # an unknown type fails even at count 0
            pairs.append((name, int(count)))
        if not any(count for _, count in pairs):
            raise ValueError(f"groups: expected at least one instance, got counts {[c for _, c in groups]}")
        found = _core.scaling_lookup(self.scaling_table_for(pairs), self._scaling_rows(pairs))
        if not found.applies:
            return 1.0, 1.0, ""
        return found.factors.p10, found.factors.p90, scaling_description(found)

    def scaling_table(self) -> _core.ScalingBand:
        """The learned scaling band as the core's table (srift.learn.scaling_band)."""
        from srift.learn import default_models

        return default_models().scaling_table()

    def _scaling_rows(self, groups: list[tuple[str, int]]) -> list[tuple[int, int, _core.GroupBand]]:
        several = sum(count for _, count in groups) > 1
        return [(int(self.catalog.instance(name).gpu_count), count, self.group_band(name, several=several))
                for name, count in groups]

    def scaling_table_for(self, groups: list[tuple[str, int]]) -> _core.ScalingBand:
        """scaling_table where the scaling band applies to a cluster of (instance type, count)
        groups, an empty table elsewhere: the cell rule needs no learned model, so a cluster
        without a band (one GPU, one instance measured whole) loads none."""
        if _core.scaling_lookup(_core.ScalingBand(), self._scaling_rows(groups)).applies:
            return self.scaling_table()
        return _core.ScalingBand()

    def group_band(self, instance_type: str, several: bool = True) -> _core.GroupBand:
        """What srift knows of the spread of an instance type's part of an iteration, as the
        core's GroupBand (band.hpp note "iteration band"): its compute band alone and among
        several instances (instance_interval), the learned PCIe link's band (link_interval),
        and whether the profile measured it whole or `srift probe-network` its links. A
        compute band that does not hold its prediction is widened to it (the band widens only);
        NaN where the compute model has no residuals (the plain roofline). several=False: for a
        cluster of one instance, where compute_several is not used (it is set to compute, and a
        whole-instance measurement's across-instance band is not looked up)."""
        it = self.catalog.instance(instance_type)
        cached = self._group_bands.get((it.name, several))
        if cached is not None:
            return cached
        band = _core.GroupBand()
        band.compute = _factors(*self.instance_interval(it.name, 1))
        band.compute_several = _factors(*self.instance_interval(it.name, 2)) if several else band.compute
        band.link = _factors(*self.link_interval(it.name))
        band.measured_whole = it.name in self._instance_points
        batch = self._measured_batch(it.gpu)
        if batch is not None and not band.measured_whole:  # band.hpp note "measured batch band"
            band.measured_batch = batch
            band.per_e_fold = _core.BandFactors(*self.measured_band()[1])
        band.intra_probed = bool(it.measured_intra_gbytes_s)
        band.network_probed = bool(it.measured_network_gbytes_s)
        band.validate(f"band of {it.name}")
        self._group_bands[(it.name, several)] = band
        return band

    def measured_band(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """((p10, p90), (p10, p90 per e-fold of local batch)) factors of a GPU type the profile
        measured: EngineConfig's measured_* where set, else as `srift train` fitted them
        (srift.learn.measured_band note "measured band")."""
        if self._measured_band is None:
            c = self.config
            values = (c.measured_p10, c.measured_p90, c.measured_batch_p10_per_e_fold, c.measured_batch_p90_per_e_fold)
            if any(v is None for v in values):
                from srift.learn.models import shipped_measured_band

                (n10, n90), (e10, e90) = shipped_measured_band()
                values = tuple(d if v is None else v for v, d in zip(values, (n10, n90, e10, e90)))
            self._measured_band = ((float(values[0]), float(values[1])), (float(values[2]), float(values[3])))
        return self._measured_band

    def _measured_batch(self, gpu_key: str) -> float | None:
        """The one local batch a GPU type was measured at, when its compute scales that single
        measurement (srift::LearnedCompute note "measured batch shape"); None otherwise. A GPU
        type predicted as a measured type with its specs (source "measured-same-specs", note
        "same specs") is that type's curve, and its band widens away from that type's batch
        alike: it is no surer of another batch than the measured type itself."""
        source = self._compute_entry(gpu_key)[1]
        if source == "measured":
            batches = {p.local_batch for p in self._measurements_for(gpu_key)}
        elif source == "measured-same-specs":
            from srift.learn.dominance import same_specs
            from srift.learn.gpus import peaks_from_catalog

            mine = peaks_from_catalog(self.catalog, gpu_key)
            batches = {p.local_batch for key, points in self._anchors()
                       if same_specs(peaks_from_catalog(self.catalog, key), mine, self.precision) for p in points}
        else:
            return None
        return float(next(iter(batches))) if len(batches) == 1 else None

    def instance_interval(self, instance_type: str, instances: int = 1) -> tuple[float, float]:
        """(p10, p90) factors on a rank's compute time on an instance type in a cluster of
        `instances` instances. A whole-instance measurement is exact for one instance (the
        measurement noise); across several, the network it did not see widens it to the
        held-out residuals of instance anchoring (srift.learn.comm note "instance anchor")."""
        _, source, p10, p90 = self._instance_entry(instance_type)
        if source == "measured-instance" and instances > 1:
            from srift.learn import default_models

            q10, q90 = default_models().instance_anchor_interval()
            if math.isfinite(q10) and math.isfinite(q90):
                return min(p10, q10), max(p90, q90)
        return p10, p90

    def _warn_if_faster_than_peak(self, gpu_key: str, measurements: list[Any], on: str | None = None,
                                  depth: int = 0) -> None:
        """A run the user timed faster than its GPU's fastest peak allows for the profile's
        FLOPs (a review: T4:32:0.001 planned a T4 at 780 TFLOP/s and an H100 past its own
        peak): most likely a time per sample, per micro-step or in milliseconds. srift keeps
        the run (it cannot know which), so say so. Only past PEAK_MARGIN times the peak: a
        device whose peak is itself measured (srift validate's emulated CPUs) was beaten by 1-4%
        by runs on a busy machine, and warned of nothing wrong; no whole model comes near a
        GPU's datasheet peak (ResNet-50 at AMP on an A100: about a tenth)."""
        gpu = self.catalog.gpu(gpu_key)
        peak = max(float(v or 0.0) for v in (gpu.fp32_tflops, gpu.tf32_tflops, gpu.fp16_tflops, gpu.bf16_tflops)) * 1e12
        flops = self.profile.total_forward_flops() + self.profile.total_backward_flops()
        if not (peak > 0 and flops > 0):
            return
        for m in measurements:
            work = flops * m.local_batch * max(int(getattr(m, "accumulation_steps", 1) or 1), 1)
            if m.iteration_s * PEAK_MARGIN < work / peak:
                where = f"{on} ({gpu_key})" if on else gpu_key
                warnings.warn(f"measurements on {where}: a run at local batch {m.local_batch:g} in {m.iteration_s:g} s "
                              f"does {work / m.iteration_s / 1e12:.4g} TFLOP/s of the profile's FLOPs, "
                              f"{work / m.iteration_s / peak:.2f}x the {peak / 1e12:.4g} TFLOP/s peak of a {gpu_key}: check that the time is seconds per "
                              "iteration (not per sample, per micro-step or milliseconds) and the batch is per GPU",
                              UserWarning, stacklevel=4 + depth)
                return

    def _warn_if_over_memory(self, gpu_key: str, measurements: list[Any], on: str | None = None, depth: int = 0) -> None:
        """A run the user timed at a local batch that srift's memory estimate says does not fit
        this GPU: plans will hold fewer samples per GPU than the run did. The run is the
        stronger evidence (activation checkpointing, a shorter sequence, a framework that frees
        what the profile counted), so say so rather than plan around it in silence."""
        biggest = max((m.local_batch for m in measurements), default=0)
        w, gpu = self.workload, self.catalog.gpu(gpu_key)
        most = self._memory_batch_limit(gpu_key)
        if biggest <= most:
            return
        where = f"{on} ({gpu_key})" if on else gpu_key
        holds = (f"plans put at most {most:g} sample{'s' if most != 1 else ''} on a {gpu_key}" if most > 0
                 else f"no plan runs on a {gpu_key}")
        warnings.warn(f"measurements on {where}: a run at local batch {biggest:g} is more than srift's memory estimate "
                      f"holds on one {gpu_key} ({most:g} samples: {w.fixed_memory_bytes / GIB:.2f} GiB of weights, "
                      f"gradients, optimizer state and workspace, {w.activation_bytes_per_sample / 2**20:.1f} MiB of "
                      f"activations per sample, {self.config.usable_memory_fraction:g} of {float(gpu.memory_gib):g} GiB "
                      f"usable); {holds}. If the run held them, the profile "
                      "overstates its memory: profile the model as that run built it (activation checkpointing, "
                      "sequence length, precision)", UserWarning, stacklevel=4 + depth)

    def _instance_entry(self, instance_type: str) -> tuple[_core.ComputeModel, str, float, float]:
        it = self.catalog.instance(instance_type)
        points = self._instance_points.get(it.name)
        if not points:
            return self._compute_entry(it.gpu)
        cached = self._instance_compute.get(it.name)
        if cached is None:
            whole = [m for _, m in self._usable
                     if m.gpus > 1 and self.catalog.instance(m.device.strip()).name == it.name]
            _warn_if_repeats_disagree(f"{it.name} ({it.gpu})", self._instance_repeats[it.name],
                                      self._instance_merged[it.name])
            self._warn_if_over_memory(it.gpu, whole, on=it.name)
            self._warn_if_faster_than_peak(it.gpu, whole, on=it.name)
            single, _, _, _ = self._compute_entry(it.gpu)
            anchored = _core.anchor_to_measurements(single, points)
            if self.config.compute_model == "learned":
                # srift::LearnedCompute note "measured floor", as the GPU's own runs are held:
                # an instance run faster than the GPU's curve scaled it under the FLOPs at the
                # peak at large batches (srift::hold_to_measured_floor)
                from srift.learn.models import hold_to_measured_floor

                anchored = hold_to_measured_floor(self.profile, it.gpu, self.catalog, self.precision, anchored,
                                                  points, self.memory_max_batch(it.gpu))
            anchored.accumulate_s = single.accumulate_s
            cached = self._instance_compute[it.name] = (anchored, "measured-instance", *self.measured_band()[0])
        return cached


def scaling_description(found: _core.ScalingLookup) -> str:
    """What a scaling band cell that applies stands for, in words."""
    gpus, where = found.gpus_per_instance, ("one instance" if found.instances == 1 else f"{found.instances} instances")
    return (f"{'probed' if found.probed else 'modelled'} links, {where} of up to {gpus} "
            f"GPU{'s' if gpus > 1 else ''}: measured multi-GPU steps' held-out spread")


def _factors(p10: float, p90: float) -> _core.BandFactors:
    """(p10, p90) factors as the core's BandFactors: NaN stays unknown, else widened to hold 1."""
    if not (math.isfinite(p10) and math.isfinite(p90)):
        return _core.BandFactors(math.nan, math.nan)
    return _core.BandFactors(min(1.0, float(p10)), max(1.0, float(p90)))


def _core_point(m: Any, precision: _core.Precision | None = None) -> _core.Measurement:
    """A profile Measurement as the core's (-1: forward/backward not measured), timed at
    `precision` (None: the prediction's, vouched for by the caller)."""
    return _core.Measurement(float(m.local_batch), float(m.iteration_s),
                             -1.0 if m.forward_s is None else float(m.forward_s),
                             -1.0 if m.backward_s is None else float(m.backward_s), precision)


def hours_to_seconds(hours: float | None) -> float:
    return math.inf if hours is None else float(hours) * 3600.0
