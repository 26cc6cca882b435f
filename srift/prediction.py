"""``srift.predict``: the iteration time and cost of one cluster."""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from srift import _core, checks
from srift.cluster import Cluster
from srift.engine import GIB, INSIDE_MEASUREMENT_BYTES_S, Engine, EngineConfig, scaling_description, with_overrides

if TYPE_CHECKING:
    from srift.catalog import Catalog
    from srift.profile_data import Profile

__all__ = ["predict", "Prediction", "GroupPrediction", "BucketTiming", "resolve_region", "DEFAULT_REGIONS"]

# The regions recommend searches and predict prices in unless told (a choice of where people
# train, not of price: `regions="all"` / `--regions all` searches every one).
DEFAULT_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")

_BOTTLENECK = {_core.Bottleneck.none: "none", _core.Bottleneck.intra: "intra-node", _core.Bottleneck.network: "network"}


@dataclass
class GroupPrediction:
    """One instance group of a predicted cluster."""

    instance_type: str
    market: str
    count: int
    gpu: str
    gpus_per_instance: int
    usd_per_hour: float          # one instance
    local_batch_low: int         # local batch of (ranks - ranks_high) ranks
    local_batch_high: int        # local batch of ranks_high ranks
    ranks: int
    ranks_high: int
    compute_s: float             # forward + backward of the group's slowest rank
    memory_gib: float            # peak memory of its fullest GPU
    gpu_memory_gib: float
    max_local_batch: int         # largest local batch one GPU may run: what fits it, capped by EngineConfig.max_local_batch
    compute_source: str          # "measured", "measured-instance", "learned", "learned-past-edge" (a GPU newer than the models' data: srift.learn.data_edge), "measured-same-specs" (a measured GPU type with its specs: that type's curve), "anchored-roofline" or "roofline"
    intra_gbytes_s: float = math.nan  # achieved bandwidth of the links inside one instance, GB/s

    @property
    def memory_headroom_gib(self) -> float:
        return self.gpu_memory_gib - self.memory_gib

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory_headroom_gib"] = self.memory_headroom_gib
        # JSON has no NaN: unknown values (an infeasible group's memory, a 1-GPU link) are null
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


@dataclass
class BucketTiming:
    """One gradient bucket's allreduce inside the iteration (seconds from its start)."""

    bytes: float
    ready_s: float
    start_s: float
    end_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Prediction:
    """Predicted behaviour of one training iteration on one cluster (seconds, USD)."""

    cluster: str
    region: str
    global_batch: int
    feasible: bool
    why_infeasible: str
    iteration_s: float
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    optimizer_s: float
    samples_per_s: float
    usd_per_hour: float
    usd_per_iteration: float
    workers: int
    bottleneck: str
    ring_gbytes_s: float
    groups: list[GroupPrediction]
    precision: str
    iterations: float | None = None
    buckets: list[BucketTiming] = field(default_factory=list)
    # p10/p90 of the iteration time: the slowest group's compute scaled by the held-out
    # residual quantiles of the model that estimated it, combined in quadrature (log space)
    # with the widest link band that applies: the learned PCIe link's held-out step residuals
    # where a group exchanges gradients over it, the held-out spread of measured multi-GPU
    # steps over modelled or probed links (srift.learn.scaling_band note "scaling band").
    # band_from: what each part is, with its p10-p90 factors.
    iteration_p10_s: float = math.nan
    iteration_p90_s: float = math.nan
    band_from: list[str] = field(default_factory=list)
    # compute lost to collectives that share the compute's cores (instance types with a
    # measured_comm_compute_s_per_gbyte; 0 elsewhere)
    interference_s: float = 0.0
    # DDP's buffer broadcast before the forward (forward_sync_buffers; simulator.hpp note
    # "buffer broadcast"), part of iteration_s; 0 on one GPU or for a model without buffers
    broadcast_s: float = 0.0
    # gradient accumulation (EngineConfig.max_accumulation_steps): forward/backward
    # micro-steps per iteration, and the samples of the one that all-reduces (global_batch
    # when 1); the local batches of `groups` are that micro-step's
    accumulation_steps: int = 1
    micro_batch: int = 0
    # EngineConfig.max_local_batch: the cap on one GPU's samples per micro-step (None: memory)
    local_batch_cap: int | None = None
    # index in `groups` of the group whose link bounds the ring (the simulator's
    # IterationResult.bottleneck_group: its NIC for "network", its intra-node link for
    # "intra-node"; ring_gbytes_s is that link's achieved speed); -1 when no link bounds it
    bottleneck_group: int = -1
    # srift.torch_support: the PyTorch release whose official wheels were checked (None: the
    # check is off, e.g. torch="source"), the wheel variants that run every GPU of the cluster
    # (None when unchecked; [] when none does: torch_note then says why, and a
    # TorchSupportWarning was raised)
    torch_release: str | None = None
    torch_wheels: list[str] | None = None
    torch_note: str = ""
    # the target PyTorch version as given or recorded ("2.16", "2.13.0+cu126"; None when none is
    # known): past the table it is not torch_release, whose wheels stand in for it
    torch_version: str | None = None

    @property
    def total_hours(self) -> float | None:
        return None if self.iterations is None else self.iterations * self.iteration_s / 3600.0

    @property
    def total_usd(self) -> float | None:
        hours = self.total_hours
        return None if hours is None else hours * self.usd_per_hour

    @property
    def total_hours_p10(self) -> float | None:
        return None if self.iterations is None else self.iterations * self.iteration_p10_s / 3600.0

    @property
    def total_hours_p90(self) -> float | None:
        return None if self.iterations is None else self.iterations * self.iteration_p90_s / 3600.0

    @property
    def usd_per_1k_samples(self) -> float:
        return 1000.0 * self.usd_per_iteration / self.global_batch if self.feasible else math.nan

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("groups", "buckets")}
        d["groups"] = [g.to_dict() for g in self.groups]
        d["buckets"] = [b.to_dict() for b in self.buckets]
        d["total_hours"] = self.total_hours
        d["total_usd"] = self.total_usd
        d["total_hours_p10"] = self.total_hours_p10
        d["total_hours_p90"] = self.total_hours_p90
        d["usd_per_1k_samples"] = self.usd_per_1k_samples
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def resolve_region(catalog: Catalog, cluster: Cluster, region: str | None) -> str:
    """The region to price a cluster in: the one asked for, else the cheapest of the default
    regions (``DEFAULT_REGIONS``, the ones ``recommend`` searches unless told) where every group
    is priced, else the cheapest of every region that prices every group. Raises ValueError
    saying what is not priced where."""
    for value in (region, cluster.region):
        # "" is no region name: it read as "the cheapest region" (falsy), where "us-east-1 " failed
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"region: expected a region name such as 'us-east-1' (or None for the cheapest "
                             f"region), got {value!r}")
    if (region is not None and cluster.region is not None
            and catalog.region_name(region) != catalog.region_name(cluster.region)):
        raise ValueError(f"region = {region!r}, but the cluster says @{cluster.region}: give one of them "
                         f"(or the same)")
    wanted = region if region is not None else cluster.region
    if wanted is not None:
        wanted = catalog.region_name(wanted)
        if wanted not in catalog.regions:
            close = catalog.close_regions(wanted)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise ValueError(f"region {wanted!r} is not in the catalog{hint}; known: {', '.join(catalog.regions)}")
        for g in cluster.groups:
            if catalog.price(g.instance_type, wanted, g.market) is None:
                where = [r for r in catalog.regions if catalog.price(g.instance_type, r, g.market) is not None]
                raise ValueError(
                    f"{g.instance_type} has no {g.market} price in {wanted}; priced in: "
                    f"{', '.join(where) or 'no region'}")
        return wanted
    # recommend's default regions first, so that predicting its answer prices it where it was
    # priced; a cluster none of them prices falls back to every region
    best, best_rate = None, math.inf
    for searched in ([r for r in DEFAULT_REGIONS if r in catalog.regions], catalog.regions):
        for r in searched:
            prices = [catalog.price(g.instance_type, r, g.market) for g in cluster.groups]
            if all(p is not None for p in prices):
                rate = sum(p * g.count for p, g in zip(prices, cluster.groups))
                if rate < best_rate:
                    best, best_rate = r, rate
        if best is not None:
            break
    if best is None:
        raise ValueError(f"no region prices every group of {cluster} "
                         f"({', '.join(sorted({g.market for g in cluster.groups}))})")
    return best


def check_objects(profile: Any, catalog: Any, config: Any) -> None:
    """ValueError when the profile, catalog or config is not the object it must be."""
    from srift.catalog import Catalog
    from srift.profile_data import Profile

    checks.instance("profile", profile, Profile, "srift.profile(model, ...) or srift.Profile.load(path)")
    checks.optional_instance("catalog", catalog, Catalog, "srift.Catalog.load(path), or None for the bundled one")
    checks.optional_instance("config", config, EngineConfig, "srift.engine.EngineConfig(...)")


def _warn_if_loopback_network(catalog: Catalog, cluster: Cluster) -> None:
    """A cluster of several instances whose type's network link was probed over loopback
    (`measured_network_over: "loopback"`, srift probe-network --loopback): its ring runs at a
    figure that is not the NIC's, so say so (once per type: the text names no cluster)."""
    if sum(g.count for g in cluster.groups) < 2:
        return
    for name in dict.fromkeys(g.instance_type for g in cluster.groups):
        info = catalog.instance(name)
        if info.measured_network_gbytes_s and info.measured_network_over == "loopback":
            warnings.warn(f"the network link of {info.name}, {info.measured_network_gbytes_s:.3g} GB/s, was probed over "
                          f"loopback on one host (catalog overrides: measured_network_over \"loopback\", srift "
                          f"probe-network --loopback), not across its {info.network_gbps:g} Gbit/s NIC; predictions "
                          "across instances of it use that figure: probe across instances (--distributed) for the "
                          "NIC's", UserWarning, stacklevel=3)


def predict(profile: Profile, cluster: str | Cluster, global_batch: int, *,
            catalog: Catalog | None = None, region: str | None = None,
            precision: str | None = None, iterations: float | None = None,
            config: EngineConfig | None = None, timeline: bool = False,
            engine: Engine | None = None, max_accumulation_steps: int | None = None,
            max_local_batch: int | None = None, torch: Any = None) -> Prediction:
    """Predicts one iteration of synchronous data-parallel training of ``profile`` on
    ``cluster`` (text such as ``"2x p3.16xlarge + 4x g4dn.12xlarge:spot"``) at
    ``global_batch`` samples per iteration.

    Raises ValueError for bad input (unknown instance type, batch < 1, a global batch smaller
    than the cluster's GPUs); a cluster that does not fit GPU memory returns a Prediction with
    ``feasible=False`` and ``why_infeasible`` set. ``max_accumulation_steps`` (default: the
    config's, 1) lets a global batch that does not fit GPU memory run as up to that many
    gradient-accumulation micro-steps (``accumulation_steps`` and ``micro_batch`` say how).
    ``max_local_batch`` (default: the config's, None: GPU memory alone) caps the samples one
    GPU runs in a micro-step, e.g. at the per-GPU batch a training script is written for.
    ``torch`` (default: the profile's ``torch_version``, else the installed torch; "source"
    turns the check off) is the PyTorch release whose official wheels must run the cluster:
    one no wheel variant runs is still predicted, with a TorchSupportWarning and ``torch_note``
    saying why (srift.torch_support).
    """
    from srift.catalog import Catalog
    from srift.torch_support import TorchSupportWarning, gpu_capabilities, resolve_target

    global_batch = checks.integer("global_batch", global_batch)
    iterations = checks.optional_iterations("iterations", iterations)
    if not isinstance(timeline, bool):  # a string such as 'no' would read as true
        raise ValueError(f"timeline must be True or False, got {timeline!r}")
    cluster = Cluster.parse(cluster) if not isinstance(cluster, Cluster) else cluster
    if engine is None:
        check_objects(profile, catalog, config)
    else:
        checks.instance("engine", engine, Engine, "None, or the Engine of an earlier call")
    catalog = catalog if catalog is not None else Catalog.default()
    if engine is None:
        config = with_overrides(config or EngineConfig(), precision=precision,
                                max_accumulation_steps=max_accumulation_steps,
                                max_local_batch=max_local_batch)
        engine = Engine(profile, catalog, config)
    else:
        for name, value in (("max_accumulation_steps", max_accumulation_steps), ("max_local_batch", max_local_batch)):
            if value is not None and value != getattr(engine.config, name):
                raise ValueError(f"{name}={value!r} differs from the engine's "
                                 f"({getattr(engine.config, name)!r}): set it in the engine's EngineConfig")
    cluster = cluster.in_catalog(catalog)  # unknown types raise with suggestions; names as the catalog spells them
    _warn_if_loopback_network(catalog, cluster)
    region = resolve_region(catalog, cluster, region)
    target = resolve_target(torch, profile)
    torch_wheels, torch_note = None, target.note
    if target.checked:
        caps = gpu_capabilities(catalog, [g.instance_type for g in cluster.groups])
        torch_wheels = [v.name for v in target.variants_for(caps.values())]
        if not torch_wheels:
            torch_note = target.why_not(caps)
            warnings.warn(f"{cluster}: {torch_note}", TorchSupportWarning, stacklevel=2)

    core_groups, sources = [], []
    for g in cluster.groups:
        compute, source = engine.instance_compute(g.instance_type)
        price = catalog.price(g.instance_type, region, g.market)
        core_groups.append((engine.instance_spec(g.instance_type), g.count, compute, float(price)))
        sources.append(source)
    workers = sum(spec.gpus * count for spec, count, _, _ in core_groups)
    if global_batch < workers:
        raise ValueError(f"global_batch must be >= the number of workers (GPUs) of {cluster} "
                         f"({workers}), got {global_batch}")
    result, events, why = _core.simulate(engine.workload, core_groups, global_batch,
                                         engine.config.usable_memory_fraction, timeline,
                                         engine.config.max_accumulation_steps,
                                         engine.config.max_local_batch or 0)
    groups = []
    for g, (spec, _, _, price), source, r in zip(cluster.groups, core_groups, sources,
                                                 result.groups or [None] * len(cluster.groups)):
        gpu_key = catalog.instance(g.instance_type).gpu
        groups.append(GroupPrediction(
            instance_type=g.instance_type, market=g.market, count=g.count, gpu=gpu_key,
            gpus_per_instance=spec.gpus, usd_per_hour=price,
            local_batch_low=r.batch_low if r else 0, local_batch_high=r.batch_high if r else 0,
            ranks=spec.gpus * g.count, ranks_high=r.workers_high if r else 0,
            compute_s=r.compute_s if r else math.nan,
            memory_gib=(r.memory_bytes / GIB) if r and result.feasible else math.nan,
            gpu_memory_gib=spec.gpu_memory_bytes / GIB, max_local_batch=r.max_batch if r else 0,
            compute_source=source,
            # NaN on one GPU and inside a measured whole instance (no link of its own)
            intra_gbytes_s=(spec.intra.bandwidth / 1e9
                            if spec.gpus > 1 and spec.intra.bandwidth < INSIDE_MEASUREMENT_BYTES_S else math.nan)))
    nan = math.nan
    ok = result.feasible
    p10 = p90 = nan
    band_from: list[str] = []
    if ok:
        # srift::iteration_band (band.hpp note "iteration band"): the slowest group's compute
        # band on its compute time, and the widest link band (the learned PCIe link's held-out
        # steps, or the scaling band over modelled or probed links) in quadrature with it.
        pairs = [(g.instance_type, g.count) for g in cluster.groups]
        several = sum(count for _, count in pairs) > 1
        bands = [engine.group_band(name, several=several) for name, _ in pairs]
        # no compute band anywhere (the plain roofline): no band; a learned model loads only
        # where a band needs one (engine.scaling_table_for)
        band = (_core.iteration_band(result, core_groups, bands, engine.scaling_table_for(pairs))
                if any(b.compute.known for b in bands) else None)
        if band is not None and band.known:
            p10, p90 = band.p10_s, band.p90_s
            slowest = groups[band.compute_group]
            measured_at = bands[band.compute_group].measured_batch
            # band.hpp note "measured batch band": a one-batch measurement's band widens away from it
            away = (f" at local batch {measured_at:g}, predicted at {result.groups[band.compute_group].batch_high}"
                    if measured_at > 0 and band.compute.p90 > bands[band.compute_group].compute.p90 else "")
            band_from.append(f"compute on {slowest.instance_type} ({slowest.compute_source}{away}): "
                             f"x{band.compute.p10:.2f}-x{band.compute.p90:.2f} of its compute")
            if not band.link.trivial:
                band_from.append(f"learned PCIe link: held-out steps: x{band.link.p10:.2f}-x{band.link.p90:.2f} "
                                 f"of the iteration")
            if band.scaling.applies and not band.scaling.factors.trivial:
                band_from.append(f"{scaling_description(band.scaling)}: x{band.scaling.factors.p10:.2f}-"
                                 f"x{band.scaling.factors.p90:.2f} of the iteration")
    bottleneck, ring_bytes_s, bottleneck_group = result.bottleneck, result.ring_bandwidth, result.bottleneck_group
    if bottleneck == _core.Bottleneck.intra and ring_bytes_s >= INSIDE_MEASUREMENT_BYTES_S:
        # the link inside a whole-instance measurement: its allreduce is in the measured compute,
        # so no link bounds the ring (not a link of 1e9 GB/s)
        bottleneck, ring_bytes_s, bottleneck_group = _core.Bottleneck.none, math.inf, -1
    return Prediction(
        cluster=str(Cluster(cluster.groups)), region=region, global_batch=global_batch,
        feasible=ok, why_infeasible=why,
        iteration_s=result.iteration_s if ok else nan, compute_s=result.compute_s if ok else nan,
        comm_s=result.comm_s if ok else nan, exposed_comm_s=result.exposed_comm_s if ok else nan,
        optimizer_s=result.optimizer_s if ok else nan,
        samples_per_s=result.samples_per_s if ok else nan,
        usd_per_hour=result.usd_per_hour,
        usd_per_iteration=result.usd_per_iteration if ok else nan,
        workers=result.workers, bottleneck=_BOTTLENECK[bottleneck],
        ring_gbytes_s=(ring_bytes_s / 1e9) if math.isfinite(ring_bytes_s) else 0.0,
        groups=groups, precision=engine.precision, iterations=iterations,
        buckets=[BucketTiming(e.bytes, e.ready_s, e.start_s, e.end_s) for e in events],
        iteration_p10_s=p10, iteration_p90_s=p90, band_from=band_from,
        interference_s=result.interference_s if ok else nan,
        broadcast_s=result.broadcast_s if ok else nan,
        accumulation_steps=result.accumulation_steps if ok else 1,
        micro_batch=result.micro_batch if ok else global_batch,
        local_batch_cap=engine.config.max_local_batch,
        bottleneck_group=int(bottleneck_group) if 0 <= bottleneck_group < len(groups) else -1,
        torch_release=target.release.torch if target.release is not None else None,
        torch_wheels=torch_wheels, torch_note=torch_note, torch_version=target.version)
