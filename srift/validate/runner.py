"""``validate``: run real DDP training on (emulated) hosts, predict it with srift, compare.

For every cluster:

1. calibrate compute: each rank's speed class (threads, CPU quota) trains the model alone,
   all ranks at once and in step (barriers before every iteration and every optimizer step),
   so they contend for the machine as in the real run, at two local batches
   (an affine fit needs two); these become profile measurements on a catalog "GPU" key of the
   class (``emu-cpu-t1``, ``emu-cpu-t1-q50``, ...). With ``refine`` (default) a second pass
   measures every rank again at the local batch srift's plan gives it (and one more), and the
   plan is made again from those - as a user profiles at the batch they will run;
2. write the catalog entries of the emulated hosts: that GPU key, one instance type per host
   kind with ``network_gbps`` = its tc rate (loopback: the measured allreduce bandwidth);
3. ``srift.predict`` the cluster (exactly as for EC2) - its plan gives each rank's local batch;
4. run DDP with those local batches: a few ``no_sync`` iterations first time each rank's compute
   under the run's own conditions, then iterations after warm-up are measured;
5. compare the prediction with the measurement: APE. A second prediction anchored on the in-run
   compute (no_sync) is reported beside it as a diagnostic (``ape_inrun``).
"""
from __future__ import annotations

import copy
import datetime as _dt
import functools
import json
import math
import os
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from srift.hostinfo import cpu_name, memory_gib
from srift.profile_data import EMULATED_DEVICE_PREFIX
from srift.validate import launcher as _launcher
from srift.validate import netemu
from srift.validate.report import ValidationReport, ValidationRun, ape, append_measurements, percentile

REGION = "us-east-1"           # emulated instances are priced here (nominally) so predict can run
NOMINAL_USD_PER_HOUR = 0.01    # price of an emulated host: nominal, not a real offer
CALIBRATION_SCALES = (0.5, 1.5)  # local batches timed per speed class, relative to global/world


@dataclass(frozen=True)
class WorkerSpec:
    """Compute speed of one rank: torch threads and an optional CPU quota (fraction of a core)."""

    threads: int = 1
    cpu_quota: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads: expected an integer >= 1, got {self.threads!r}")
        if self.cpu_quota is not None and not (isinstance(self.cpu_quota, (int, float)) and 0.05 <= self.cpu_quota <= 64):
            raise ValueError(f"cpu_quota: expected a fraction of a core in [0.05, 64] or None, got {self.cpu_quota!r}")

    @property
    def key(self) -> str:
        """Catalog GPU key of this speed class."""
        q = "" if self.cpu_quota is None else f"-q{int(round(self.cpu_quota * 100))}"
        return f"{EMULATED_DEVICE_PREFIX}cpu-t{self.threads}{q}"


@dataclass(frozen=True)
class HostSpec:
    """One emulated host: its NIC rate (Gbit/s; None = loopback/unlimited) and its ranks."""

    nic_gbps: float | None = None
    workers: tuple[WorkerSpec, ...] = (WorkerSpec(),)

    def __post_init__(self) -> None:
        if not self.workers:
            raise ValueError("workers: a host needs at least one rank")
        if len({w.key for w in self.workers}) != 1:
            raise ValueError(f"workers: all ranks of one host share a speed class (an instance type has one "
                             f"GPU type), got {[w.key for w in self.workers]}")
        if self.nic_gbps is not None and not (isinstance(self.nic_gbps, (int, float)) and self.nic_gbps > 0):
            raise ValueError(f"nic_gbps: expected a positive rate in Gbit/s or None, got {self.nic_gbps!r}")
        if self.nic_gbps is not None:
            # the rate is the emulated instance's network_gbps: what the catalog schema allows
            # (not clamped: the prediction would then be of another NIC than the one run)
            low, high = schema_bounds("instance", "network_gbps")
            if not low <= self.nic_gbps <= high:
                raise ValueError(f"nic_gbps: expected a rate in Gbit/s in [{low:g}, {high:g}] (the catalog's "
                                 f"network_gbps) or None, got {self.nic_gbps!r}")

    def instance_name(self, nic_gbps: float | None = None, *, loopback: bool = False) -> str:
        """Catalog name of the emulated instance type. Its NIC is not emulated (``loopback``, or a
        host without a rate): the rate given is a placeholder that the measured allreduce replaces,
        and the name says ``-lo``, not a rate that was never run."""
        nic = self.nic_gbps if nic_gbps is None else nic_gbps
        rate = "lo" if nic is None or self.nic_gbps is None or loopback else f"{nic:g}g"
        return f"{self.workers[0].key}-x{len(self.workers)}-{rate}"


def emulated_cluster(hosts: int = 2, nic_gbps: float | None = 1.0, *, ranks_per_host: int = 1, threads: int = 1,
                     cpu_quota: Sequence[float | None] | float | None = None) -> list[HostSpec]:
    """``hosts`` hosts of ``ranks_per_host`` ranks; ``cpu_quota`` one value for all or one per host."""
    if isinstance(hosts, bool) or not isinstance(hosts, int) or hosts < 1:
        raise ValueError(f"hosts: expected an integer >= 1, got {hosts!r}")
    quotas = list(cpu_quota) if isinstance(cpu_quota, (list, tuple)) else [cpu_quota] * hosts
    if len(quotas) != hosts:
        raise ValueError(f"cpu_quota: expected one value per host ({hosts}), got {len(quotas)}")
    return [HostSpec(nic_gbps, tuple(WorkerSpec(threads, q) for _ in range(ranks_per_host))) for q in quotas]


def resolve_mode(mode: str) -> tuple[str, str | None]:
    """('netns'|'loopback', why netns is not used or None)."""
    if mode not in ("auto", "netns", "loopback"):
        raise ValueError(f"mode: expected auto, netns or loopback, got {mode!r}")
    if mode == "loopback":
        return "loopback", None
    reason = netemu.unavailable_reason()
    if reason is None:
        return "netns", None
    if mode == "netns":
        raise netemu.EmulationUnavailable(reason)
    return "loopback", f"emulated hosts unavailable ({reason}); ran on loopback, NIC rates not emulated"


def _mem_gib() -> float:
    try:
        return memory_gib()
    except (ValueError, OSError, AttributeError):
        return 16.0


class Calibrator:
    """Times single-worker training per speed class, all ranks of a cluster at once; cached."""

    def __init__(self, model: str, options: dict[str, Any], *, optimizer: str, warmup: int, iterations: int,
                 timeout_s: float) -> None:
        self.model, self.options, self.optimizer = model, options, optimizer
        self.warmup, self.iterations, self.timeout_s = warmup, max(3, iterations), timeout_s
        self._cache: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def calibrate(self, workers: Sequence[WorkerSpec], global_batch: int) -> list[dict[str, Any]]:
        """First pass: every rank at CALIBRATION_SCALES x global/world. Measurement dicts
        {key, local_batch, iteration_s, forward_s, backward_s, ...}."""
        world = len(workers)
        batches: list[int] = []
        for scale in CALIBRATION_SCALES:
            b = max(1, min(global_batch, int(round(scale * global_batch / world))))
            while b in batches:
                b += 1
            batches.append(b)
        return self.calibrate_at(workers, [batches] * world)

    def calibrate_at(self, workers: Sequence[WorkerSpec], batches: Sequence[Sequence[int]]) -> list[dict[str, Any]]:
        """Rank r (speed ``workers[r]``) times ``batches[r]``, all ranks at once; cached."""
        world = len(workers)
        sig = (tuple(w.key for w in workers), tuple(tuple(int(b) for b in bs) for bs in batches))
        if sig in self._cache:
            return self._cache[sig]
        out = []
        cfg = {"mode": "compute", "model": self.model, "options": self.options,
               "local_batches": [int(bs[0]) for bs in batches],
               "calibration_batches": [[int(b) for b in bs] for bs in batches], "threads": [w.threads for w in workers],
               "optimizer": self.optimizer, "warmup": self.warmup, "iterations": self.iterations, "probe": False,
               # ranks start each iteration and each optimizer step together, as in DDP
               "align": world > 1}
        if len({len(bs) for bs in batches}) != 1:
            raise ValueError(f"batches: every rank times the same number of local batches (aligned), got "
                             f"{[len(bs) for bs in batches]}")
        res = _launcher.run_ranks(cfg, ranks_per_host=[1] * world, mode="loopback", launcher="direct",
                                  cpu_quota=[w.cpu_quota for w in workers]
                                  if any(w.cpu_quota is not None for w in workers) else None,
                                  timeout_s=self.timeout_s, measure_latency=False)
        for w, rank in zip(workers, res.ranks):
            for r in rank["calibration"]:
                s = r["summary"]
                out.append({"key": w.key, "threads": w.threads, "cpu_quota": w.cpu_quota,
                            "local_batch": r["local_batch"],
                            "iteration_s": s["iteration"]["median"], "forward_s": s["forward"]["median"],
                            "backward_s": s["backward"]["median"], "optimizer_s": s["optimizer"]["median"],
                            "iteration_p10_s": s["iteration"]["p10"], "iteration_p90_s": s["iteration"]["p90"],
                            "concurrent_ranks": world})
        self._cache[sig] = out
        return out


def refine_batches(local_batches: Sequence[int]) -> list[list[int]]:
    """Second-pass calibration batches per rank: its planned local batch and a second one
    (an affine fit needs two), so the anchor is measured where the rank will run."""
    out = []
    for b in local_batches:
        other = max(1, int(round(b * 0.6)))
        if other == b:
            other = b + 1
        out.append([int(b), other])
    return out


@functools.lru_cache(maxsize=None)
def _schema_properties(definition: str) -> dict[str, Any]:
    """The properties of ``$defs/<definition>`` ("gpu", "instance") in the catalog schema."""
    from srift.catalog import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return dict(schema["$defs"][definition]["properties"])


def schema_bounds(definition: str, prop: str) -> tuple[float, float]:
    """(lowest, highest) value the catalog schema allows for ``$defs/<definition>.<prop>``
    (minimum / maximum; an exclusiveMinimum alone is not a value that can be written)."""
    rules = _schema_properties(definition)[prop]
    low = rules.get("minimum", -math.inf)
    high = rules.get("maximum", math.inf)
    return float(low), float(high)


def clamp_to_schema(definition: str, prop: str, value: float) -> float:
    """``value`` moved into the range the catalog schema allows for the property, so that the
    overrides validate writes for its emulated hosts are always a valid document."""
    low, high = schema_bounds(definition, prop)
    return min(high, max(low, float(value)))


def _gpu_entry(key: str, w: WorkerSpec, cal: list[dict[str, Any]], flops_per_sample: float, world: int) -> dict[str, Any]:
    pts = [c for c in cal if c["key"] == key]
    rates = [flops_per_sample * c["local_batch"] / max(c["forward_s"] + c["backward_s"], 1e-9) for c in pts]
    tflops = statistics.median(rates) / 1e12 if rates else 0.05
    # The peak is nominal: the measured FLOP rate of the calibration. A low-FLOP model (ncf:
    # embeddings, not FLOPs) measures below the schema's minimum of 0.001 TFLOP/s, and the
    # overrides document was refused. Clamping it to the schema's range does not change the
    # prediction validate compares against the measurement: every speed class is calibrated at
    # two (or more) local batches (CALIBRATION_SCALES, then refine_batches), and with two
    # measured batches the engine fits the compute through those measurements (compute source
    # "measured": _core.anchor_to_measurements / LearnedCompute.measured_model fit their own
    # line), so forward, backward and optimizer times are the measured ones whatever the peak
    # (test_validate: test_the_emulated_peak_is_clamped_and_does_not_move_the_prediction).
    tflops = clamp_to_schema("gpu", "fp32_tflops", tflops if math.isfinite(tflops) and tflops > 0 else 0.05)
    q = "" if w.cpu_quota is None else f", CPU quota {w.cpu_quota:g} core"
    return {"name": f"emulated worker ({cpu_name()}, {w.threads} thread(s){q})", "chip": "CPU",
            "memory_gib": round(clamp_to_schema("gpu", "memory_gib", max(1.0, _mem_gib())), 1),
            "fp32_tflops": tflops, "tf32_tflops": None,
            "fp16_tflops": None, "bf16_tflops": None,
            "memory_bandwidth_gbytes_s": clamp_to_schema("gpu", "memory_bandwidth_gbytes_s", 10.0),
            "source": f"srift validate emulation, measured {_dt.date.today().isoformat()}"}


def emulation_overrides(hosts: Sequence[HostSpec], cal: list[dict[str, Any]], flops_per_sample: float,
                        nic_gbps: Sequence[float], *, loopback: bool = False) -> tuple[dict[str, Any], str]:
    """(catalog overrides "srift.catalog-overrides/1", cluster text) for the emulated hosts.
    ``loopback``: no NIC is emulated; ``nic_gbps`` are placeholders and the types are named ``-lo``."""
    gpus: dict[str, Any] = {}
    instances: dict[str, Any] = {}
    counts: dict[str, int] = {}
    world = sum(len(h.workers) for h in hosts)
    for h, nic in zip(hosts, nic_gbps):
        w = h.workers[0]
        gpus.setdefault(w.key, _gpu_entry(w.key, w, cal, flops_per_sample, world))
        name = h.instance_name(nic, loopback=loopback)
        k = len(h.workers)
        instances[name] = {"family": "emu", "gpu": w.key, "gpu_count": k, "vcpus": max(1, w.threads * k),
                           "memory_gib": round(max(1.0, _mem_gib()), 1),
                           "interconnect": "none" if k == 1 else "pcie",
                           "intra_node_gbytes_s": None if k == 1 else 5.0,
                           "network_gbps": float(nic), "efa": False, "network_cards": 1, "status": "current",
                           "regions": [REGION],
                           "sources": ["srift validate: network namespace + tc tbf rate"
                                       if h.nic_gbps is not None and not loopback
                                       else "srift validate: loopback, measured allreduce"]}
        counts[name] = counts.get(name, 0) + 1
    overrides = {"schema": "srift.catalog-overrides/1", "gpus": gpus, "instances": instances,
                 "prices": [{"instance": n, "region": REGION, "market": "on-demand",
                             "usd_per_hour": NOMINAL_USD_PER_HOUR} for n in instances]}
    cluster = " + ".join(f"{c}x {n}" for n, c in counts.items())
    return overrides, cluster


def _rank_batches(prediction: Any, hosts: Sequence[HostSpec], nic_gbps: Sequence[float], *,
                  loopback: bool = False) -> list[int]:
    """Each rank's local batch from the prediction's plan (per instance group: ranks_high ranks
    get local_batch_high, the others local_batch_low)."""
    left: dict[str, list[int]] = {}
    for g in prediction.groups:
        bs = [g.local_batch_high] * g.ranks_high + [g.local_batch_low] * (g.ranks - g.ranks_high)
        left[g.instance_type] = bs
    out = []
    for h, nic in zip(hosts, nic_gbps):
        name = h.instance_name(nic, loopback=loopback)
        for _ in h.workers:
            if not left.get(name):
                raise RuntimeError(f"prediction has no local batch for a rank of {name}: groups "
                                   f"{[g.instance_type for g in prediction.groups]}")
            out.append(int(left[name].pop(0)))
    return out


def _measured(ranks: list[dict[str, Any]]) -> tuple[float, float, float, list[float]]:
    n = min(len(r["iteration_s"]) for r in ranks)
    per_iter = [max(r["iteration_s"][i] for r in ranks) for i in range(n)]
    return statistics.median(per_iter), percentile(per_iter, 0.1), percentile(per_iter, 0.9), per_iter


def _make_profile(model: str, options: dict[str, Any], optimizer: str) -> Any:
    import srift
    from srift import zoo

    m, batch, loss_fn = zoo.build(model, 2, device="meta", **options)
    return srift.profile(m, batch, loss_fn, device="meta", optimizer=optimizer, name=model)


def validate(
    model: str,
    global_batch: int,
    clusters: Sequence[Sequence[HostSpec]],
    *,
    options: dict[str, Any] | None = None,
    mode: str = "auto",
    launcher: str = "torchrun",
    warmup: int = 3,
    iterations: int = 10,
    optimizer: str = "adam",
    profile: Any = None,
    measurements_path: str | os.PathLike[str] | None = None,
    add_to_profile: bool = False,
    timeout_s: float = 600.0,
    labels: Sequence[str] | None = None,
    calibrator: Calibrator | None = None,
    predict_fn: Callable[..., Any] | None = None,
    fail_rank: int | None = None,
    compute_iterations: int = 3,
    refine: bool = True,
    raise_on_failure: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ValidationReport:
    """Validate srift's prediction of ``model`` at ``global_batch`` on each cluster (a list of
    :class:`HostSpec`). Returns a :class:`ValidationReport` (per run: predicted vs measured
    iteration time and APE; summary: median and p90 APE).

    ``mode``: "netns" (emulated hosts; root), "loopback", or "auto" (netns when possible).
    ``profile``: a srift Profile of the model (default: profiled on meta here). With
    ``add_to_profile`` the calibration measurements are appended to it. ``measurements_path``:
    JSON-lines file (schema srift.measurements/1) that gets one record per calibration and run.
    A run that fails is reported in ``report.failures`` with the rank and reason (or raised).
    """
    import srift
    from srift.catalog import Catalog

    options = dict(options or {})
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ValueError(f"global_batch: expected an integer >= 1, got {global_batch!r}")
    if not clusters:
        raise ValueError("clusters: expected at least one cluster (a list of HostSpec)")
    for i, c in enumerate(clusters):
        if not c or not all(isinstance(h, HostSpec) for h in c):
            raise ValueError(f"clusters[{i}]: expected a non-empty list of HostSpec, got {c!r}")
        if sum(len(h.workers) for h in c) > global_batch:
            raise ValueError(f"clusters[{i}]: {sum(len(h.workers) for h in c)} ranks need global_batch >= that, "
                             f"got {global_batch}")
    for name, v in (("warmup", warmup), ("iterations", iterations)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "warmup" else 1):
            raise ValueError(f"{name}: expected an integer >= {0 if name == 'warmup' else 1}, got {v!r}")
    if profile is not None and profile.model != model:
        # its layers, buckets and memory would be predicted as the model run here, and with
        # add_to_profile this model's timings would be saved into it
        raise ValueError(f"profile: it profiles {profile.model!r}, but the model validated is {model!r}; "
                         f"give a profile of {model!r} (srift profile --model {model}) or none")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (
            math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s: expected a positive finite number of seconds, got {timeout_s!r}")
    real_mode, why = resolve_mode(mode)
    loopback = real_mode != "netns"
    say = progress or (lambda s: None)
    base_profile = profile if profile is not None else _make_profile(model, options, optimizer)
    flops = base_profile.total_forward_flops() + base_profile.total_backward_flops()
    cal = calibrator or Calibrator(model, options, optimizer=optimizer, warmup=max(1, warmup),
                                   iterations=iterations, timeout_s=timeout_s)
    predict_fn = predict_fn or srift.predict
    catalog0 = Catalog.default()
    report = ValidationReport(runs=[], notes=[netemu.LATENCY_NOTE] if real_mode == "netns" else [])
    if why:
        report.notes.append(why)
    records: list[dict[str, Any]] = []
    written: set[int] = set()

    for i, hosts in enumerate(clusters):
        label = labels[i] if labels else ""
        workers = [w for h in hosts for w in h.workers]
        rank_host = [hi for hi, h in enumerate(hosts) for _ in h.workers]
        try:
            say(f"[{label or i}] calibrating compute of {sorted({w.key for w in workers})}")
            points = cal.calibrate(workers, global_batch)
            prof = copy.deepcopy(base_profile)
            for p in points:
                prof.add_measurement(p["key"], p["local_batch"], p["iteration_s"], p["forward_s"], p["backward_s"],
                                     source="srift validate calibration")
            if add_to_profile and profile is not None:
                for p in points:
                    profile.add_measurement(p["key"], p["local_batch"], p["iteration_s"], p["forward_s"],
                                            p["backward_s"], source="srift validate calibration")
            # loopback: no NIC to emulate; the plan's split does not depend on it, and the rate
            # is replaced by the measured allreduce bandwidth below
            nic = [h.nic_gbps if (h.nic_gbps is not None and real_mode == "netns") else 10.0 for h in hosts]
            overrides, cluster = emulation_overrides(hosts, points, flops, nic, loopback=loopback)
            pred = predict_fn(prof, cluster, global_batch, catalog=catalog0.with_overrides(overrides), region=REGION)
            if not pred.feasible:
                raise RuntimeError(f"srift predicts {cluster} infeasible: {pred.why_infeasible}")
            local_batches = _rank_batches(pred, hosts, nic, loopback=loopback)
            if refine:
                # second pass: measure each class at the local batch the plan gives it, re-plan
                say(f"[{label or i}] plan {local_batches}; calibrating at the planned local batches")
                points = cal.calibrate_at(workers, refine_batches(local_batches))
                prof = copy.deepcopy(base_profile)
                for p in points:
                    prof.add_measurement(p["key"], p["local_batch"], p["iteration_s"], p["forward_s"],
                                         p["backward_s"], source="srift validate calibration")
                overrides, cluster = emulation_overrides(hosts, points, flops, nic, loopback=loopback)
                pred = predict_fn(prof, cluster, global_batch, catalog=catalog0.with_overrides(overrides),
                                  region=REGION)
                if not pred.feasible:
                    raise RuntimeError(f"srift predicts {cluster} infeasible: {pred.why_infeasible}")
                local_batches = _rank_batches(pred, hosts, nic, loopback=loopback)
                if add_to_profile and profile is not None:
                    for p in points:
                        profile.add_measurement(p["key"], p["local_batch"], p["iteration_s"], p["forward_s"],
                                                p["backward_s"], source="srift validate calibration")
            say(f"[{label or i}] {cluster}: local batches {local_batches}, predicted {pred.iteration_s:.3f}s; running DDP")
            cfg = {"mode": "ddp", "model": model, "options": options, "local_batches": local_batches,
                   "threads": [w.threads for w in workers], "optimizer": optimizer, "warmup": warmup,
                   "iterations": iterations, "bucket_cap_mb": base_profile.bucket_cap_mb, "probe": True,
                   "forward_sync_buffers": base_profile.forward_sync_buffers,
                   "collective_timeout_s": min(timeout_s, 300.0), "compute_iterations": compute_iterations}
            if fail_rank is not None:
                cfg["fail_rank"] = fail_rank
            run = _launcher.run_ranks(
                cfg, ranks_per_host=[len(h.workers) for h in hosts], mode=real_mode,
                nic_gbps=[h.nic_gbps for h in hosts], launcher=launcher, timeout_s=timeout_s,
                cpu_quota=[w.cpu_quota for w in workers] if any(w.cpu_quota is not None for w in workers) else None)
            busbw = [r.get("allreduce_busbw_gbps") for r in run.ranks if r.get("allreduce_busbw_gbps")]
            notes = []
            if busbw:
                # The link is calibrated the way `srift probe-network` calibrates a real one: an
                # allreduce microbenchmark (run before the training iterations) gives the achieved
                # bus bandwidth and the per-step latency, which the engine then uses as measured
                # instead of nominal rate x the assumed TCP efficiency.
                nominal_s = pred.iteration_s
                gbytes = float(statistics.median(busbw)) / 8
                steps = 2 * (len(run.ranks) - 1)
                # per-call start-up: the probe fit's intercept, at least one tiny allreduce
                start = [max(r.get("allreduce_intercept_s") or 0.0, r.get("allreduce_latency_s") or 0.0)
                         for r in run.ranks if r.get("allreduce_latency_s")]
                latency_us = float(statistics.median(start)) / steps * 1e6 if start and steps else None
                for entry in overrides["instances"].values():
                    entry["measured_network_gbytes_s"] = gbytes
                    if latency_us is not None:
                        entry["measured_network_latency_us"] = latency_us
                # Compute lost to collectives on the same cores, measured per host by the
                # ranks' interference probe (compute with and without an allreduce in flight).
                for hi, (h, nic_h) in enumerate(zip(hosts, nic)):
                    vals = [r["interference_s_per_byte"] for r in run.ranks
                            if rank_host[r["rank"]] == hi and r.get("interference_s_per_byte") is not None]
                    if vals:
                        name_h = h.instance_name(nic_h, loopback=loopback)
                        overrides["instances"][name_h]["measured_comm_compute_s_per_gbyte"] = \
                            float(statistics.median(vals)) * 1e9
                pred = predict_fn(prof, cluster, global_batch, catalog=catalog0.with_overrides(overrides), region=REGION)
                if pred.feasible and getattr(pred, "interference_s", 0.0) > 0:
                    plain = copy.deepcopy(overrides)
                    for entry in plain["instances"].values():
                        entry.pop("measured_comm_compute_s_per_gbyte", None)
                    pred_plain = predict_fn(prof, cluster, global_batch, catalog=catalog0.with_overrides(plain),
                                            region=REGION)
                    notes.append(f"collectives sharing the compute's cores cost {pred.interference_s:.3f}s per "
                                 f"iteration; without that srift predicted {pred_plain.iteration_s:.3f}s")
                if pred.feasible and _rank_batches(pred, hosts, nic, loopback=loopback) != local_batches:
                    notes.append(f"with the calibrated link srift would split the batch as "
                                 f"{_rank_batches(pred, hosts, nic, loopback=loopback)}, not as run ({local_batches})")
                inter = sorted({round(e.get("measured_comm_compute_s_per_gbyte") or 0.0, 3)
                                for e in overrides["instances"].values()})
                notes.append(f"link calibrated by the allreduce probe: {gbytes:.3f} GB/s bus bandwidth"
                             + (f", {latency_us:.0f} us/step" if latency_us is not None else "")
                             + f", compute lost to collectives {'/'.join(f'{v:g}' for v in inter)} s/GB"
                             + f"; with the nominal link srift predicted {nominal_s:.3f}s")
            cat_run = catalog0.with_overrides(overrides)
            # second opinion: compute anchored on the in-run compute of every rank (no_sync
            # iterations of the same processes, under the run's own load); srift then predicts
            # communication, overlap and the optimizer as for any cluster
            inrun = [r for r in run.ranks if r.get("local_compute")]
            pred_inrun = None
            if inrun and len(inrun) == len(run.ranks):
                prof_run = copy.deepcopy(base_profile)
                for r in inrun:
                    lc = r["local_compute"]
                    prof_run.add_measurement(workers[r["rank"]].key, r["local_batch"], lc["iteration"]["median"],
                                             lc["forward"]["median"], lc["backward"]["median"],
                                             source="srift validate in-run (no_sync)")
                pred_inrun = predict_fn(prof_run, cluster, global_batch, catalog=cat_run, region=REGION)
            med, p10, p90, per_iter = _measured(run.ranks)
            err = ape(pred.iteration_s, med)
            pd = pred.to_dict()
            predicted = {k: pd.get(k) for k in ("iteration_s", "compute_s", "comm_s", "exposed_comm_s", "broadcast_s",
                                                "optimizer_s", "samples_per_s", "bottleneck", "ring_gbytes_s")}
            predicted["groups"] = [{k: g.get(k) for k in ("instance_type", "count", "local_batch_low",
                                                          "local_batch_high", "ranks_high", "compute_s",
                                                          "compute_source")} for g in pd["groups"]]
            measured = {
                "per_iteration_s": per_iter,
                "ranks": [{"rank": r["rank"], "host": rank_host[r["rank"]], "speed": workers[r["rank"]].key,
                           "local_batch": r["local_batch"], "threads": r["threads"],
                           "iteration": r["summary"]["iteration"], "forward": r["summary"]["forward"],
                           "backward": r["summary"]["backward"], "optimizer": r["summary"]["optimizer"]}
                          for r in run.ranks],
                "allreduce_latency_s": statistics.median([r["allreduce_latency_s"] for r in run.ranks
                                                          if r.get("allreduce_latency_s")] or [math.nan]),
                "allreduce_busbw_gbps": statistics.median(busbw) if busbw else None,
                "in_run_compute": [{"rank": r["rank"], **r["local_compute"]} for r in inrun],
                "interference_s_per_byte": [r.get("interference_s_per_byte") for r in run.ranks],
                "wall_s": run.wall_s,
            }
            host_info = [{"nic_gbps": h.nic_gbps if real_mode == "netns" else None, "ranks": len(h.workers),
                          "speed": h.workers[0].key, "threads": h.workers[0].threads,
                          "cpu_quota": h.workers[0].cpu_quota, **{k: v for k, v in hh.items() if k != "nic_gbps"}}
                         for h, hh in zip(hosts, run.hosts)]
            vr = ValidationRun(model=model, cluster=cluster, global_batch=global_batch, local_batches=local_batches,
                               hosts=host_info, mode=real_mode, launcher=launcher, measured_iteration_s=med,
                               measured_p10_s=p10, measured_p90_s=p90, predicted_iteration_s=pred.iteration_s,
                               ape=err, predicted=predicted, measured=measured, iterations=iterations,
                               warmup=warmup, latency_floor_s=run.latency_floor_s, label=label, notes=notes,
                               predicted_inrun_s=None if pred_inrun is None else pred_inrun.iteration_s,
                               ape_inrun=None if pred_inrun is None else ape(pred_inrun.iteration_s, med))
            report.runs.append(vr)
            say(f"[{label or i}] measured {med:.3f}s (p10 {p10:.3f}, p90 {p90:.3f}), predicted "
                f"{pred.iteration_s:.3f}s, APE {err:.1f}%" + ("" if pred_inrun is None else
                f" (in-run compute anchor: {pred_inrun.iteration_s:.3f}s, APE {vr.ape_inrun:.1f}%)"))
            if id(points) not in written:  # a cached calibration is recorded once
                written.add(id(points))
                records.extend({"kind": "compute", "model": model, "options": options, "device": p["key"],
                                "cpu": cpu_name(), **p} for p in points)
            records.append({"kind": "ddp", "model": model, "options": options, "optimizer": optimizer,
                            "param_bytes": base_profile.param_bytes, "gradient_bytes": base_profile.gradient_bytes(),
                            "flops_per_sample": flops, "bucket_cap_mb": base_profile.bucket_cap_mb,
                            "cpu": cpu_name(), "cpus": os.cpu_count(), **vr.to_dict()})
        except (_launcher.LaunchError, RuntimeError, ValueError, netemu.EmulationUnavailable) as exc:
            if raise_on_failure:
                raise
            fail = {"label": label, "model": model, "cluster_index": i, "error": str(exc).split("\n")[0][:800],
                    "rank": getattr(exc, "rank", None), "reason": getattr(exc, "reason", None)}
            report.failures.append(fail)
            say(f"[{label or i}] FAILED: {fail['error']}")
    if measurements_path is not None and records:
        append_measurements(measurements_path, records)
    return report
