"""``srift.recommend`` and ``srift.pareto``: which plan to rent.

Python gathers the offers (instance type x region x market with a price) and each GPU
type's compute model once; the core searches every plan and returns the best ones, which
are then re-predicted in full for their details.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from srift import _core, checks
from srift.cluster import MARKETS, Cluster, ClusterGroup
from srift.engine import Engine, EngineConfig, with_overrides
from srift.prediction import DEFAULT_REGIONS, Prediction, check_objects, predict
from srift.torch_support import gpu_capabilities, gpu_label, resolve_target, sm_label

if TYPE_CHECKING:
    from srift.catalog import Catalog
    from srift.profile_data import Profile

__all__ = ["recommend", "pareto", "Plan", "ParetoFront", "Recommendation", "SearchSummary", "SpotAssumptions",
           "DEFAULT_REGIONS"]

_MARKET_TO_CORE = {"on-demand": _core.Market.on_demand, "spot": _core.Market.spot}


def _sentences(*parts: str) -> str:
    """Reasons joined as sentences: the core's why_none ends without a full stop, and the
    wheel check's sentence starts with a capital."""
    said = [x.strip() for x in parts if x and x.strip()]
    return " ".join(x if x.endswith((".", "!", "?")) or i == len(said) - 1 else x + "." for i, x in enumerate(said))


@dataclass
class Plan:
    """A cluster to rent and what it is predicted to do for the whole run."""

    cluster: Cluster
    region: str
    total_hours: float
    total_usd: float
    samples_per_s: float
    usd_per_hour: float
    iteration_s: float
    prediction: Prediction
    # Under spot preemption total_hours is the EXPECTED wall time; these say how it was made.
    nominal_hours: float = math.nan          # without any interruption
    # 90th percentile of the wall time under preemption alone, the prediction taken as exact
    # (nominal_hours without spot); band_hours() has the p10-p90 of the prediction's own band.
    preemption_p90_hours: float = math.nan
    miss_probability: float = 0.0            # P(wall time > deadline)
    interruptions_per_hour: float = 0.0      # the plan's spot groups together
    expected_interruptions: float = 0.0
    checkpoint_interval_hours: float = 0.0   # Young/Daly; 0 without spot
    checkpoint_s: float = 0.0
    restart_s: float = 0.0
    # Chance of finishing within the deadline, under the iteration's p10-p90 band and spot
    # preemption together (band.hpp note "deadline probability"); 1 without a deadline, NaN
    # where the prediction has no band (the roofline compute model): unknown.
    deadline_probability: float = 1.0

    @property
    def usd_per_1k_samples(self) -> float:
        return self.prediction.usd_per_1k_samples

    @property
    def uses_spot(self) -> bool:
        return any(g.market == "spot" for g in self.cluster.groups)

    @property
    def torch_wheels(self) -> list[str] | None:
        """The official wheel variants of the target PyTorch that run every GPU of the plan
        (srift.torch_support; None when the check is off), as ``to_dict()`` has them."""
        return self.prediction.torch_wheels

    def band_hours(self) -> tuple[float, float]:
        """(p10, p90) of the whole run's hours from the prediction's iteration band (NaN where
        the prediction carries none): total_hours scaled by p10/p90 over the iteration."""
        p = self.prediction
        if not (p.iteration_s > 0 and math.isfinite(p.iteration_p10_s) and math.isfinite(p.iteration_p90_s)):
            return math.nan, math.nan
        return self.total_hours * p.iteration_p10_s / p.iteration_s, self.total_hours * p.iteration_p90_s / p.iteration_s

    def to_dict(self) -> dict[str, Any]:
        p10_hours, p90_hours = self.band_hours()
        spot = {k: getattr(self, k) for k in ("nominal_hours", "preemption_p90_hours", "miss_probability",
                                               "interruptions_per_hour", "expected_interruptions",
                                               "checkpoint_interval_hours", "checkpoint_s", "restart_s",
                                               "deadline_probability")}
        return {**{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in spot.items()},
            "cluster": str(Cluster(self.cluster.groups)), "region": self.region,
            "groups": [g.to_dict() for g in self.cluster.groups],
            "total_hours": self.total_hours,
            "total_hours_p10": p10_hours if math.isfinite(p10_hours) else None,
            "total_hours_p90": p90_hours if math.isfinite(p90_hours) else None,
            "total_usd": self.total_usd,
            "samples_per_s": self.samples_per_s, "usd_per_hour": self.usd_per_hour,
            "iteration_s": self.iteration_s, "usd_per_1k_samples": self.usd_per_1k_samples,
            # the official wheel variants of the target PyTorch that run every GPU of the plan
            # (srift.torch_support); None when the check is off
            "torch_wheels": self.torch_wheels,
            "prediction": self.prediction.to_dict(),
        }


class ParetoFront(list):
    """The plans of :func:`pareto` (a list, fastest first); ``why_none`` says why it is empty
    (the search's reason: a model too large for every GPU, a batch no plan holds, ...)."""

    why_none: str = ""
    torch: dict[str, Any] = {}  # noqa: RUF012 - set per front: the wheel check (Recommendation.torch)

    def to_dict(self) -> dict[str, Any]:
        return {"plans": [p.to_dict() for p in self], "why_none": self.why_none, "torch": self.torch}


@dataclass
class SearchSummary:
    """What the search looked at."""

    regions: list[str]
    markets: list[str]
    offers: int
    evaluated: int
    feasible: int
    infeasible_memory: int
    infeasible_batch: int
    violated_deadline: int
    violated_budget: int
    pruned: int
    seconds: float
    cancelled: bool
    optimal: bool = True       # False when cancelled or out of time: see gap
    gap: float = 0.0           # relative optimality gap left (0 when optimal)
    nodes: int = 0             # branch-and-bound nodes visited
    space: float = 0.0         # plans in the space (pruned = space - evaluated)

    def to_dict(self) -> dict[str, Any]:
        # JSON has no Infinity: a search stopped before any plan has an unknown gap (null)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


@dataclass
class Recommendation:
    """The answer to "which plan?": the best plan, runners-up, or why nothing fits."""

    objective: str                     # "min_cost" or "max_throughput"
    global_batch: int
    iterations: float
    deadline_hours: float | None
    budget_usd: float | None
    max_usd_per_hour: float | None
    best: Plan | None
    alternatives: list[Plan]
    why_none: str
    closest: Plan | None               # when nothing fits: the fastest (deadline) / cheapest (budget)
    search: SearchSummary
    precision: str = "fp32"
    assumptions: dict[str, Any] = field(default_factory=dict)
    # the PyTorch wheel check (srift.torch_support): the target release and where it came from,
    # each search run (the wheel variants and the GPUs they run) and the GPUs no variant runs
    torch: dict[str, Any] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.best is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective, "global_batch": self.global_batch,
            "iterations": self.iterations, "deadline_hours": self.deadline_hours,
            "budget_usd": self.budget_usd, "max_usd_per_hour": self.max_usd_per_hour,
            "found": self.found, "best": self.best.to_dict() if self.best else None,
            "alternatives": [p.to_dict() for p in self.alternatives], "why_none": self.why_none,
            "closest": self.closest.to_dict() if self.closest else None,
            "search": self.search.to_dict(), "precision": self.precision,
            "assumptions": self.assumptions, "torch": self.torch,
        }


def _positive(name: str, value: Any, allow_none: bool = True) -> float | None:
    return checks.optional_positive(name, value) if allow_none else checks.positive(name, value)


def resolve_regions(catalog: Catalog, regions: str | Sequence[str] | None) -> list[str]:
    """The regions a request names, checked against the catalog: None for the default regions
    the catalog has, "all", a comma-separated string or a list of names (ValueError naming any
    the catalog does not know)."""
    if regions is None:
        chosen = [r for r in DEFAULT_REGIONS if r in catalog.regions] or list(catalog.regions)
    elif isinstance(regions, str):
        # "all" as region names are read, in any case and spacing ("ALL" was a region not in the catalog)
        every = regions.strip().lower() == "all"
        chosen = list(catalog.regions) if every else [r.strip() for r in regions.split(",") if r.strip()]
    else:
        chosen = list(regions) if isinstance(regions, Iterable) else [regions]
    if not all(isinstance(r, str) for r in chosen):
        raise ValueError(f"regions must be a region name, a comma-separated list of them, 'all' or a "
                         f"list of names, got {regions!r}")
    # each once, as the catalog spells it: "us-east-1,US-EAST-1" searched us-east-1 twice (its
    # offers twice, every plan listed twice among the alternatives)
    chosen = list(dict.fromkeys(catalog.region_name(r) for r in chosen))
    unknown = [r for r in chosen if r not in catalog.regions]
    if unknown:
        close = [c for r in unknown for c in catalog.close_regions(r)[:1]]
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"regions {unknown} are not in the catalog{hint}; known: {', '.join(catalog.regions)}")
    if not chosen:
        raise ValueError("regions must name at least one region, got none")
    return chosen


def _markets(markets: str | Iterable[str]) -> list[str]:
    chosen = [markets] if isinstance(markets, str) else list(markets) if isinstance(markets, Iterable) else [markets]
    bad = [m for m in chosen if m not in MARKETS]
    if bad or not chosen:
        raise ValueError(f"markets must be a non-empty subset of {MARKETS}, got {chosen!r}")
    return chosen


@dataclass
class SpotAssumptions:
    """How spot preemption is priced in (see the note "spot model" in csrc/include/srift/spot.hpp).

    Interruption rates come from the catalog's Spot Instance Advisor class per (type, region),
    at the upper edge of the class; "unknown" is treated as ">20%" per month. A checkpoint is the
    weights plus optimizer state, written and read at the given bandwidths; a restart also waits
    ``provisioning_s`` for a replacement instance."""

    write_gbytes_s: float = 1.0
    read_gbytes_s: float = 1.0
    provisioning_s: float = 300.0
    interruptions_per_hour: dict[str, float] = field(default_factory=dict)  # per instance type, overrides

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Engines:
    """Engines kept across questions on the same profile and catalog objects (a sweep worker's
    rows: srift.sweep). An Engine is a function of its profile, catalog and config, and building
    one builds the compute model of every GPU type a question offers: most of a question's time
    on the bundled catalog (~2/3 of a sweep row). Kept by the profile's and the catalog's
    identity and the config's fields, so only for callers whose profiles and catalogs do not
    change while kept (a sweep worker builds its own from the spec's documents)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, int, str], Engine] = {}

    def get(self, profile: Profile, catalog: Catalog, config: EngineConfig) -> Engine:
        key = (id(profile), id(catalog), repr(config))
        engine = self._kept.get(key)
        # the kept engine holds its profile and catalog, so their ids are not reused while kept
        if engine is None or engine.profile is not profile or engine.catalog is not catalog or engine.config != config:
            engine = Engine(profile, catalog, config)
            self._kept[key] = engine
        return engine


_ENGINES: contextvars.ContextVar[_Engines | None] = contextvars.ContextVar("srift_planning_engines", default=None)


@contextlib.contextmanager
def _reusing_engines(engines: _Engines) -> Iterator[None]:
    """Within the block, questions (recommend, pareto) take their Engine from `engines`."""
    token = _ENGINES.set(engines)
    try:
        yield
    finally:
        _ENGINES.reset(token)


class _Space:
    """Offers and the core request for one question."""

    def __init__(self, profile: Profile, catalog: Catalog, *, global_batch: int, iterations: float,
                 regions: str | Sequence[str] | None, markets: str | Iterable[str],
                 instance_types: Iterable[str] | None, exclude: Iterable[str] | None,
                 max_instances_per_type: int, config: EngineConfig | None, precision: str | None,
                 min_gpu_memory_gib: float | None = None, spot: SpotAssumptions | None = None,
                 held: str | Cluster | None = None, max_accumulation_steps: int | None = None,
                 max_local_batch: int | None = None, torch: Any = None):
        checks.integer("global_batch", global_batch)
        checks.optional_instance("spot_assumptions", spot, SpotAssumptions, "srift.planning.SpotAssumptions(...)")
        checks.iterations("iterations", iterations)
        checks.integer("max_instances_per_type", max_instances_per_type)
        min_memory = _positive("min_gpu_memory_gib", min_gpu_memory_gib)
        config = with_overrides(config or EngineConfig(), precision=precision,
                                max_accumulation_steps=max_accumulation_steps,
                                max_local_batch=max_local_batch)
        self.catalog = catalog
        self.torch = resolve_target(torch, profile)
        engines = _ENGINES.get()
        self.engine = engines.get(profile, catalog, config) if engines is not None else Engine(profile, catalog, config)
        self.spot = spot or SpotAssumptions()
        # each held type as the catalog spells it (the filters below compare names)
        held_cluster = None if held is None else Cluster.parse(held).in_catalog(catalog)
        if held_cluster is not None and held_cluster.region:
            # an unknown held region is named as such first, as held's (not as a `regions` never given)
            try:
                resolve_regions(catalog, [held_cluster.region])
            except ValueError as exc:
                raise ValueError(f"held = {str(held)!r}: {exc}") from None
            # A plan is one region and keeps the held instances, so it runs where they run;
            # regions that leave theirs out would move running instances.
            asked = resolve_regions(catalog, regions) if regions is not None else None
            if asked is not None and held_cluster.region not in asked:
                raise ValueError(f"held instances run in {held_cluster.region}, but regions is "
                                 f"{', '.join(asked)}: every plan keeps them there, so include "
                                 f"{held_cluster.region} or leave regions out")
            regions = [held_cluster.region]
        self.regions = resolve_regions(catalog, regions)
        self.markets = _markets(markets)
        asked_markets = set(self.markets)
        if held_cluster is not None:  # a held group's market is searched for that group alone (below)
            self.markets = sorted(set(self.markets) | {g.market for g in held_cluster.groups}, key=MARKETS.index)
        if isinstance(instance_types, str):  # one name, not its letters
            instance_types = [instance_types]
        if isinstance(exclude, str):
            exclude = [exclude]
        instance_types = None if instance_types is None else list(instance_types)
        if instance_types is not None and not instance_types:
            raise ValueError("instance_types must name at least one instance type, got none "
                             "(leave it out for every type)")
        # Each name as the catalog spells it: the lookup forgives case and spaces, and a filter
        # of the raw name then matched nothing (--exclude P3.2XLARGE kept p3.2xlarge).
        # Unknown names raise with suggestions.
        allowed = None if instance_types is None else {catalog.instance(n).name for n in instance_types}
        excluded = {catalog.instance(n).name for n in (exclude or ())}
        spot_rates = {catalog.instance(n).name: rate for n, rate in self.spot.interruptions_per_hour.items()}
        held_markets = {(g.instance_type, g.market) for g in held_cluster.groups} if held_cluster else set()
        # A held type the user did not allow (or excluded), or held in a market the user did not
        # ask for (spot held, no --spot), stays in every plan as held, and no more of it is
        # rented: its offer is kept at the held count (_held_groups).
        self._not_wanted = {(name, market) for name, market in held_markets
                            if (allowed is not None and name not in allowed) or name in excluded
                            or market not in asked_markets}

        request = _core.SearchRequest()
        request.workload = self.engine.workload
        request.global_batch = global_batch
        request.iterations = float(iterations)
        instance_index: dict[str, int] = {}
        instances, offers = [], []
        self.offer_info: list[tuple[str, str, str]] = []
        priced = 0  # offers in the regions and markets, before the type filters
        for region_id, region in enumerate(self.regions):
            for info in catalog.offers(region, self.markets):
                priced += 1
                name = info.instance
                filtered = (allowed is not None and name not in allowed) or name in excluded
                if (filtered or info.market not in asked_markets) and (name, info.market) not in held_markets:
                    continue
                if name not in instance_index:
                    instance_index[name] = len(instances)
                    instances.append(self.engine.instance_spec(name))
                quota = catalog.quota(name)
                offer = _core.Offer()
                offer.instance = instance_index[name]
                offer.region = region_id
                offer.market = _MARKET_TO_CORE[info.market]
                offer.usd_per_hour = float(info.usd_per_hour)
                offer.max_count = min(max_instances_per_type, quota) if quota is not None else max_instances_per_type
                offer.compute = self.engine.instance_compute(name)[0]
                offer.band = self.engine.group_band(name)  # unknown compute band (roofline): none
                if info.market == "spot":
                    rate = spot_rates.get(name)
                    offer.interruptions_per_hour = (
                        float(rate) if rate is not None else _core.interruption_rate_from_class(info.interruption))
                offers.append(offer)
                self.offer_info.append((name, region, info.market))
        request.instances = instances
        request.offers = offers
        self.offers = offers
        # each offer's GPU: which official wheels of the target PyTorch run it (srift.torch_support)
        # (its label: the GPU key, with an arm64 host named, srift.torch_support.gpu_label)
        self.offer_gpus = [gpu_label(catalog, name) for name, _, _ in self.offer_info]
        # Why nothing can be planned when the user's own filters leave no offer (the core only
        # sees what is left, and would blame the prices, the batch or the model).
        self.why_empty = ""
        usable = [o for o in offers if min_memory is None or instances[o.instance].gpu_memory_bytes >= min_memory * 1024**3]
        if priced == 0:
            self.why_empty = (f"no instance type is priced in {', '.join(self.regions)} "
                              f"({', '.join(self.markets)})")
        elif not usable and held_cluster is None:
            clauses = []
            if allowed is not None:
                clauses.append(f"of the types asked ({', '.join(sorted(allowed))})")
            if excluded:
                clauses.append(f"outside the excluded ({', '.join(sorted(excluded))})")
            if min_memory is not None:
                largest = max((instances[o.instance].gpu_memory_bytes for o in offers), default=0.0) / 1024**3
                clauses.append(f"on GPUs of at least {min_memory:g} GiB"
                               + (f" (the largest {'among those ' if clauses else ''}has {largest:.4g} GiB)"
                                  if offers else ""))
            said = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
            self.why_empty = (f"the filters remove every offer: none of the {priced} offers priced in "
                              f"{', '.join(self.regions)} ({', '.join(self.markets)}) is {said}")
        elif held_cluster is None and all(o.max_count == 0 for o in usable):
            # the core would blame the batch or memory: no plan of one instance exists at all
            zero = sorted({instances[o.instance].name for o in usable if catalog.quota(instances[o.instance].name) == 0})
            self.why_empty = ("every offer left may run no instance: a quota of 0 "
                              f"({', '.join(zero) or 'every type'}; the catalog's quotas, "
                              "`srift catalog` overrides); raise the quota or ask for other types")
        if any(o.band.compute.known for o in offers):  # the plain roofline has no band (nor a table to load)
            request.scaling_band = self.engine.scaling_table()
        request.usable_memory_fraction = config.usable_memory_fraction
        request.max_accumulation_steps = self.engine.config.max_accumulation_steps
        request.max_local_batch = self.engine.config.max_local_batch or 0
        if min_memory is not None:
            request.min_gpu_memory_bytes = min_memory * 1024**3
        params = _core.SpotParams()
        p = profile
        params.checkpoint_bytes = float(p.param_bytes + p.optimizer_state_bytes)
        params.write_bytes_per_s = _positive("spot.write_gbytes_s", self.spot.write_gbytes_s) * 1e9
        params.read_bytes_per_s = _positive("spot.read_gbytes_s", self.spot.read_gbytes_s) * 1e9
        params.provisioning_s = float(self.spot.provisioning_s)
        request.spot = params
        self.request = request
        self.held: list[Any] = []
        if held_cluster is not None:
            self._offers = offers
            self.held = self._held_groups(held_cluster)
            request.held = self.held
            request.offers = offers  # the request holds copies: set them again with the held caps
        self.searches = self._wheel_searches()
        if self.searches == [] and not self.why_empty:
            self.why_empty = self.torch_sentence(nothing=True)

    def _wheel_searches(self) -> list[tuple[list[str], list[int]]] | None:
        """Note "one wheel per plan": the searches one recommendation runs, each (the wheel
        variants, the indices of the offers whose GPUs they all run). Every plan one variant
        runs lies in one of these offer sets, so the best of the searches over them is the best
        plan some wheel runs. Variants running the same offers search once; a set inside
        another's is left out. None: one search over every offer (the check is off, or one
        variant runs every GPU offered); []: no variant runs any offer. Sets ``dropped`` (the
        GPUs no variant runs) and ``wheel_sets`` (each search's variants and GPUs)."""
        self.dropped: dict[str, str | None] = {}
        self.wheel_sets: list[tuple[list[str], list[str]]] = []
        if not self.torch.checked:
            return None
        gpus = sorted(set(self.offer_gpus))
        hosts = gpu_capabilities(self.catalog, [name for name, _, _ in self.offer_info])
        runs = {v.name: {g for g in gpus if v.runs(*hosts[g])} for v in self.torch.release.variants}
        self.dropped = {g: hosts[g][0] for g in gpus if not any(g in r for r in runs.values())}
        by_set: dict[frozenset[str], list[str]] = {}
        for name, ran in runs.items():
            if ran:
                by_set.setdefault(frozenset(ran), []).append(name)
        kept = [(names, ran) for ran, names in by_set.items() if not any(ran < other for other in by_set)]
        self.wheel_sets = [(names, sorted(ran)) for names, ran in kept]
        if len(kept) == 1 and kept[0][1] == set(gpus):
            return None
        return [(names, [i for i, g in enumerate(self.offer_gpus) if g in ran]) for names, ran in kept]

    def torch_sentence(self, nothing: bool = False) -> str:
        """What the wheel check left out, for why_none: the GPUs no variant runs and, where
        the search was split, which variants run which GPUs."""
        t = self.torch
        if not t.checked:
            return ""
        release = t.release
        names = ", ".join(v.name for v in release.variants)
        parts = []
        if self.dropped:
            dropped = ", ".join(f"{g} ({sm_label(c)})" for g, c in self.dropped.items())
            parts.append(f"no official torch {release.torch} wheel ({names}) runs {dropped}, so "
                         f"{'they were' if len(self.dropped) > 1 else 'it was'} left out")
        if self.searches:
            parts.append("one DDP job runs one PyTorch build, so plans were searched per wheel: "
                         + "; ".join(f"{'/'.join(n)} over {', '.join(g)}" for n, g in self.wheel_sets))
        if not parts:
            return ""
        said = "; ".join(parts)
        return (f"{said[0].upper()}{said[1:]}{': no offer is left' if nothing else ''} (torch {t.version}, "
                f"from the {t.origin}; torch='source' / --torch source turns the check off)")

    def search(self, request: Any) -> _Found:
        """The core's search over the offers one wheel runs (note "one wheel per plan"), the
        searches' plans merged as one search would rank them."""
        if self.searches is None:
            return _Found.one(_core.search(request))
        found = _Found()
        held = [(g.offer, g.count) for g in self.held]
        if held and not any(set(index).issuperset(o for o, _ in held) for _, index in self.searches):
            gpus = gpu_capabilities(self.catalog, [self.offer_info[o][0] for o, _ in held])
            found.why_none = f"the held instances cannot run one PyTorch build: {self.torch.why_not(gpus)}"
            return found
        limit = request.time_limit_s  # time_limit_s bounds the searches together, not each
        started = time.perf_counter()
        try:
            for index in self._each_search(request, held):
                if math.isfinite(limit):
                    request.time_limit_s = max(limit - (time.perf_counter() - started), 1e-6)
                found.add(_core.search(request), index)
        finally:
            request.offers = self.offers
            request.held = self.held
            request.time_limit_s = limit
        found.finish(request)
        if (not found.plans and found.closest is not None and math.isfinite(request.deadline_s)
                and (math.isfinite(request.budget_usd) or math.isfinite(request.max_usd_per_hour))
                and _Found._nearest(request, *found.closest)[0] == 1):
            found.why_none = self._fastest_of_all(request, held, found.why_none)
        return found

    def _each_search(self, request: Any, held: list[tuple[int, int]]) -> Iterator[list[int]]:
        """Each wheel search's offer indices, with ``request.offers`` and ``request.held`` set to
        its offers and the held instances among them; a search whose wheel does not run every
        held instance is skipped. The caller sets the request's own offers and held back."""
        for _, index in self.searches or []:
            at = {o: k for k, o in enumerate(index)}
            if any(o not in at for o, _ in held):
                continue  # this wheel does not run every held instance
            request.offers = [self.offers[i] for i in index]
            request.held = [_core.PlanGroup(at[o], c) for o, c in held]
            yield index

    def _fastest_of_all(self, request: Any, held: list[tuple[int, int]], why: str) -> str:
        """Note "closest": the deadline binds under a budget or cap, and the core's sentence
        gives the fastest plan with neither, which is one search's; the fastest some wheel
        runs is the fastest of every search's (each run again for it, with no limits)."""
        saved = (request.objective, request.deadline_s, request.budget_usd, request.max_usd_per_hour,
                 request.deadline_confidence, request.top_k, request.collect_pareto)
        fastest = math.inf
        try:
            request.objective = _core.Objective.max_throughput
            request.deadline_s = request.budget_usd = request.max_usd_per_hour = math.inf
            request.deadline_confidence, request.top_k, request.collect_pareto = 0.0, 1, False
            for _ in self._each_search(request, held):
                fastest = min([fastest, *(p.total_s for p in _core.search(request).plans)])
        finally:
            (request.objective, request.deadline_s, request.budget_usd, request.max_usd_per_hour,
             request.deadline_confidence, request.top_k, request.collect_pareto) = saved
            request.offers, request.held = self.offers, self.held
        if not math.isfinite(fastest):
            return why
        return _FASTEST_OF_ALL.sub(lambda m: m.group(1) + _core_hours(fastest), why, count=1)

    def _held_groups(self, held: Cluster) -> list[Any]:
        groups = []
        for g in held.groups:
            matches = [i for i, (name, region, market) in enumerate(self.offer_info)
                       if name == g.instance_type and market == g.market]
            regions = sorted({self.offer_info[i][1] for i in matches})
            if not matches:
                raise ValueError(f"held group {g} has no {g.market} price in {', '.join(self.regions)}")
            if len(regions) > 1:
                raise ValueError(f"held group {g} is offered in several regions ({', '.join(regions)}); "
                                 f"say which one with '@REGION' (e.g. '{held} @{regions[0]}')")
            if (g.instance_type, g.market) in self._not_wanted:
                self._offers[matches[0]].max_count = g.count  # kept, never grown
            groups.append(_core.PlanGroup(matches[0], g.count))
        return groups

    def plan(self, core_plan: Any, index: list[int] | None = None) -> Plan:
        groups, region = [], None
        for g in core_plan.groups:
            name, region, market = self.offer_info[g.offer if index is None else index[g.offer]]
            groups.append(ClusterGroup(name, g.count, market))
        cluster = Cluster(tuple(groups), region)
        prediction = predict(self.engine.profile, cluster, self.request.global_batch,
                             catalog=self.catalog, region=region, engine=self.engine,
                             iterations=self.request.iterations, torch=self.torch)
        spot = core_plan.spot
        return Plan(cluster=cluster, region=region, total_hours=core_plan.total_s / 3600.0,
                    total_usd=core_plan.total_usd, samples_per_s=prediction.samples_per_s,
                    usd_per_hour=prediction.usd_per_hour, iteration_s=prediction.iteration_s,
                    prediction=prediction, nominal_hours=spot.nominal_s / 3600.0,
                    preemption_p90_hours=spot.p90_s / 3600.0, miss_probability=spot.miss_probability,
                    interruptions_per_hour=spot.interruptions_per_hour,
                    expected_interruptions=spot.expected_interruptions,
                    checkpoint_interval_hours=spot.checkpoint_interval_s / 3600.0,
                    checkpoint_s=spot.checkpoint_s, restart_s=spot.restart_s,
                    deadline_probability=core_plan.deadline_probability)

    def summary(self, found: _Found) -> SearchSummary:
        stats = found.stats
        return SearchSummary(regions=self.regions, markets=self.markets, offers=len(self.offers),
                             evaluated=stats["evaluated"], feasible=stats["feasible"],
                             infeasible_memory=stats["infeasible_memory"], infeasible_batch=stats["infeasible_batch"],
                             violated_deadline=stats["violated_deadline"], violated_budget=stats["violated_budget"],
                             pruned=stats["pruned"], seconds=stats["seconds"], cancelled=bool(stats["cancelled"]),
                             optimal=found.optimal, gap=found.gap, nodes=int(stats["nodes"]),
                             space=float(stats["space"]))

    def torch_summary(self) -> dict[str, Any]:
        """Recommendation.torch: the target PyTorch, the searches run and the GPUs left out."""
        d = self.torch.to_dict()
        if self.torch.checked:
            d["wheels"] = [v.name for v in self.torch.release.variants]
            d["searches"] = [{"wheels": names, "gpus": gpus} for names, gpus in self.wheel_sets]
            d["dropped_gpus"] = dict(self.dropped)
        return d


# The clause of the core's why_none that note "closest" adds when the deadline binds under a
# budget or cap (csrc/search.cpp, why_none), and its hours() format (three significant digits).
_FASTEST_OF_ALL = re.compile(r"(; with no (?:budget or hourly cap|budget|hourly cap) the fastest takes )[^;]*")


def _core_hours(seconds: float) -> str:
    if seconds < 60.0:
        return f"{seconds:.3g} s"
    if seconds < 3600.0:
        return f"{seconds / 60.0:.3g} min"
    return f"{seconds / 3600.0:.3g} h"


_STATS = ("evaluated", "feasible", "infeasible_memory", "infeasible_batch", "violated_deadline",
          "violated_budget", "pruned", "seconds", "cancelled", "nodes", "space")


class _Found:
    """The plans of one or more core searches (note "one wheel per plan"), each plan with the
    offer indices its search saw (None: every offer), ranked as core's `better` ranks them
    (the objective, the other term, then the groups' offers and counts in the whole list)."""

    def __init__(self) -> None:
        self.plans: list[tuple[Any, list[int] | None]] = []
        self.pareto: list[tuple[Any, list[int] | None]] = []
        self.closest: tuple[Any, list[int] | None] | None = None
        self.why_none = ""
        self.optimal = True
        self.gap = 0.0
        self.stats = {k: 0 for k in _STATS}
        self._results: list[tuple[Any, list[int] | None]] = []

    @classmethod
    def one(cls, result: Any) -> _Found:
        found = cls()
        found.add(result, None)
        found.plans = [(p, None) for p in result.plans]
        found.pareto = [(p, None) for p in result.pareto]
        if result.closest.groups:
            found.closest = (result.closest, None)
        found.why_none = result.why_none
        return found

    def add(self, result: Any, index: list[int] | None) -> None:
        self._results.append((result, index))
        for k in _STATS:
            self.stats[k] += getattr(result.stats, k)
        self.optimal = self.optimal and bool(result.optimal)
        self.gap = max(self.gap, float(result.gap))

    @staticmethod
    def _groups(plan: Any, index: list[int] | None) -> tuple[tuple[int, int], ...]:
        return tuple(((g.offer if index is None else index[g.offer]), g.count) for g in plan.groups)

    @classmethod
    def _nearest(cls, request: Any, p: Any, index: list[int] | None) -> tuple[Any, ...]:
        """Note "closest" (csrc/search_internal.hpp) across searches: what a search's closest
        plan says binds (the deadline when the plan keeps within the budget and the cap, else
        the budget when it keeps within the cap, else the cap) ranks first, as one search would
        decide it; then the plan within what binds: the fastest (deadline), the cheapest
        (budget), the least hourly rate, then the fastest (cap). The objective's order had
        ranked them all, so a deadline question whose searches each came close was told of
        the cheapest near miss (10.5 h) rather than the fastest (59 min)."""
        rate = p.iteration.usd_per_hour
        groups = cls._groups(p, index)
        within_cap = not rate > request.max_usd_per_hour
        if math.isfinite(request.deadline_s) and within_cap and not p.total_usd > request.budget_usd:
            return (1, p.total_s, p.total_usd, groups)
        if math.isfinite(request.budget_usd) and within_cap:
            return (2, p.total_usd, p.total_s, groups)
        return (3, rate, p.total_s, p.total_usd, groups)

    def finish(self, request: Any) -> None:
        min_cost = request.objective == _core.Objective.min_cost

        def key(item: tuple[Any, list[int] | None]) -> tuple[Any, ...]:
            p, index = item
            terms = (p.total_usd, p.total_s) if min_cost else (p.total_s, p.total_usd)
            return (*terms, self._groups(p, index))

        def unique(items: list[tuple[Any, list[int] | None]]) -> list[tuple[Any, list[int] | None]]:
            seen, out = set(), []
            for item in items:
                g = self._groups(*item)
                if g not in seen:
                    seen.add(g)
                    out.append(item)
            return out

        self.plans = unique(sorted(((p, i) for r, i in self._results for p in r.plans), key=key))[:request.top_k]
        pool = unique(sorted(((p, i) for r, i in self._results for p in r.pareto),
                             key=lambda it: (it[0].total_s, it[0].total_usd, self._groups(*it))))
        best_usd, front = math.inf, []
        for p, i in pool:  # as srift::detail::pareto_front: fastest first, each cheaper than those before
            if p.total_usd < best_usd:
                front.append((p, i))
                best_usd = p.total_usd
        self.pareto = front
        if not self.plans:
            closest = [(r, i) for r, i in self._results if r.closest.groups]
            if closest:
                r, i = min(closest, key=lambda it: self._nearest(request, it[0].closest, it[1]))
                self.closest, self.why_none = (r.closest, i), r.why_none
            elif self._results:
                self.why_none = self._results[0][0].why_none
        if self._results:
            self.stats["cancelled"] = any(r.stats.cancelled for r, _ in self._results)


def _threads(threads: int | None) -> int:
    if threads is None:
        return min(2, os.cpu_count() or 1)
    return checks.integer("threads", threads, low=0)


def _markets_arg(markets: str | Iterable[str] | None, spot: bool) -> tuple[str, ...]:
    if not isinstance(spot, bool):  # a string such as 'no' would read as true
        raise ValueError(f"spot must be True or False, got {spot!r}")
    if markets is not None:
        chosen = tuple(_markets(markets))
        if spot and "spot" not in chosen:  # the two disagree: which one was meant?
            raise ValueError(f"spot=True asks for spot offers and markets={markets!r} leaves them out; "
                             "give one of the two")
        return chosen
    return ("on-demand", "spot") if spot else ("on-demand",)


def recommend(profile: Profile, *, global_batch: int, iterations: float,
              deadline_hours: float | None = None, budget_usd: float | None = None,
              max_usd_per_hour: float | None = None, catalog: Catalog | None = None,
              regions: str | Sequence[str] | None = None,
              markets: str | Iterable[str] | None = None, spot: bool = False,
              instance_types: Iterable[str] | None = None, exclude: Iterable[str] | None = None,
              max_types: int = 3, max_instances_per_type: int = 64, max_instances: int | None = None,
              min_gpu_memory_gib: float | None = None, deadline_confidence: float | None = None,
              held: str | Cluster | None = None, spot_assumptions: SpotAssumptions | None = None,
              time_limit_s: float | None = None, top_k: int = 5, precision: str | None = None,
              config: EngineConfig | None = None, threads: int | None = None,
              max_accumulation_steps: int | None = None, max_local_batch: int | None = None,
              torch: str | None = None) -> Recommendation:
    """The cheapest plan that finishes ``iterations`` within ``deadline_hours``, or — with
    ``budget_usd`` (total) or ``max_usd_per_hour`` (rate) instead — the fastest plan within
    it. A plan is up to ``max_types`` (instance type, market) groups in one region, each of
    1..``max_instances_per_type`` instances; the search over them is exact (branch-and-bound).

    ``spot=True`` (or ``markets``) adds spot offers, priced at the expected wall time under
    preemption; ``deadline_confidence=0.9`` asks that the deadline be met with probability
    0.9 under preemption and the plan's predicted p10-p90 band together (each plan's
    ``deadline_probability``); it is 0.5 or more: a deadline met less often than not is none.
    ``held="2x p3.16xlarge @us-east-1"`` replans around instances already running: every plan
    keeps them. ``time_limit_s`` stops early with the best plan found and the remaining gap.
    ``max_accumulation_steps=4`` (default: the config's, 1) lets a plan whose GPUs cannot hold
    the global batch at once run it as up to 4 gradient-accumulation micro-steps;
    ``max_local_batch=32`` (default: the config's, None) caps the samples one GPU runs in a
    micro-step at the per-GPU batch your script uses.
    ``torch="2.13"`` (default: the profile's ``torch_version``, else the installed torch) is the
    PyTorch whose official wheels must run the plan: every plan runs under one wheel variant
    on all its GPUs (``Plan.torch_wheels`` names them; ``Recommendation.torch`` says what was
    searched and left out); ``torch="source"`` turns the check off (srift.torch_support).

    Nothing fitting is not an error: the result's ``best`` is None, ``why_none`` says why and
    ``closest`` shows the plan that comes nearest.
    """
    from srift.catalog import Catalog

    deadline = _positive("deadline_hours", deadline_hours)
    budget = _positive("budget_usd", budget_usd)
    rate = _positive("max_usd_per_hour", max_usd_per_hour)
    if deadline is None and budget is None and rate is None:
        raise ValueError("give deadline_hours (cheapest plan that meets it) or budget_usd / "
                         "max_usd_per_hour (fastest plan within it); got none of them")
    checks.integer("max_types", max_types, high=_core.MAX_GROUPS)
    checks.integer("top_k", top_k, high=_core.MAX_TOP_K)
    if deadline_confidence is not None and (isinstance(deadline_confidence, bool)
                                            or not isinstance(deadline_confidence, numbers.Real)
                                            or not 0.5 <= deadline_confidence < 1):
        raise ValueError(f"deadline_confidence must be a number in [0.5, 1), got {deadline_confidence!r}")
    if deadline_confidence is not None and deadline is None:
        raise ValueError(f"deadline_confidence={deadline_confidence!r} is the probability of meeting deadline_hours, "
                         "and none was given: a budget question asks for the fastest plan, whose time has no "
                         "deadline to meet")
    limit = _positive("time_limit_s", time_limit_s)
    checks.optional_integer("max_instances", max_instances)
    check_objects(profile, catalog, config)
    catalog = catalog if catalog is not None else Catalog.default()
    space = _Space(profile, catalog, global_batch=global_batch, iterations=iterations, regions=regions,
                   markets=_markets_arg(markets, spot), instance_types=instance_types, exclude=exclude,
                   max_instances_per_type=max_instances_per_type, config=config, precision=precision,
                   min_gpu_memory_gib=min_gpu_memory_gib, spot=spot_assumptions, held=held,
                   max_accumulation_steps=max_accumulation_steps, max_local_batch=max_local_batch,
                   torch=torch)
    request = space.request
    if deadline_confidence is not None:
        for offer, (name, region, market) in zip(request.offers, space.offer_info):
            if not (offer.band.compute.known and offer.band.compute_several.known):
                raise ValueError(f"deadline_confidence={deadline_confidence!r} needs every offer's p10-p90 band, and "
                                 f"{name} ({market}, {region}) has none: its compute model carries no held-out "
                                 "spread (EngineConfig(compute_model='roofline') without a measurement on its "
                                 "GPU). Use the learned model, measure that GPU, or leave deadline_confidence out")
    request.objective = _core.Objective.min_cost if deadline is not None else _core.Objective.max_throughput
    request.deadline_s = math.inf if deadline is None else deadline * 3600.0
    request.budget_usd = math.inf if budget is None else budget
    request.max_usd_per_hour = math.inf if rate is None else rate
    request.deadline_confidence = float(deadline_confidence or 0.0)
    request.max_types = max_types
    request.max_instances = max_instances or (1 << 30)
    request.top_k = top_k
    request.threads = _threads(threads)
    if limit is not None:
        request.time_limit_s = limit
    found = space.search(request)

    plans = [space.plan(p, i) for p, i in found.plans]
    closest = space.plan(*found.closest) if not plans and found.closest is not None else None
    why_none = ""
    if not plans:
        why_none = space.why_empty or _sentences(found.why_none, space.torch_sentence())
    return Recommendation(
        objective="min_cost" if deadline is not None else "max_throughput",
        global_batch=int(global_batch), iterations=float(iterations), deadline_hours=deadline,
        budget_usd=budget, max_usd_per_hour=rate, best=plans[0] if plans else None,
        alternatives=plans[1:], why_none=why_none, closest=closest,
        search=space.summary(found), precision=space.engine.precision,
        assumptions={**space.engine.config.to_dict(), **_measured_band_assumptions(space.engine),
                     "spot": space.spot.to_dict(),
                     "deadline_confidence": deadline_confidence},
        torch=space.torch_summary())


def _measured_band_assumptions(engine: Any) -> dict[str, float]:
    """EngineConfig's measured_* band factors as the engine applies them (None in the config
    means as trained)."""
    (p10, p90), (e10, e90) = engine.measured_band()
    return {"measured_p10": p10, "measured_p90": p90, "measured_batch_p10_per_e_fold": e10,
            "measured_batch_p90_per_e_fold": e90}


def pareto(profile: Profile, *, global_batch: int, iterations: float, catalog: Catalog | None = None,
           regions: str | Sequence[str] | None = None, markets: str | Iterable[str] | None = None,
           spot: bool = False, instance_types: Iterable[str] | None = None,
           exclude: Iterable[str] | None = None, max_types: int = 3, max_instances_per_type: int = 64,
           min_gpu_memory_gib: float | None = None, spot_assumptions: SpotAssumptions | None = None,
           precision: str | None = None, config: EngineConfig | None = None,
           threads: int | None = None, max_accumulation_steps: int | None = None,
           max_local_batch: int | None = None, max_instances: int | None = None,
           torch: str | None = None) -> ParetoFront:
    """Every plan not beaten on both total (expected) time and total USD, fastest first (a
    list; empty when nothing runs, with the reason in its ``why_none``). ``max_instances``:
    instances per plan, all types together. ``torch``: as recommend's, every plan runs under one
    official wheel variant of that PyTorch."""
    from srift.catalog import Catalog

    checks.integer("max_types", max_types, high=_core.MAX_GROUPS)
    checks.optional_integer("max_instances", max_instances)
    check_objects(profile, catalog, config)
    catalog = catalog if catalog is not None else Catalog.default()
    space = _Space(profile, catalog, global_batch=global_batch, iterations=iterations, regions=regions,
                   markets=_markets_arg(markets, spot), instance_types=instance_types, exclude=exclude,
                   max_instances_per_type=max_instances_per_type, config=config, precision=precision,
                   min_gpu_memory_gib=min_gpu_memory_gib, spot=spot_assumptions,
                   max_accumulation_steps=max_accumulation_steps, max_local_batch=max_local_batch,
                   torch=torch)
    request = space.request
    request.objective = _core.Objective.min_cost
    request.max_types = max_types
    request.max_instances = max_instances or (1 << 30)
    request.top_k = 1
    request.collect_pareto = True
    request.threads = _threads(threads)
    found = space.search(request)
    front = ParetoFront(space.plan(p, i) for p, i in found.pareto)
    front.why_none = "" if front else (space.why_empty or _sentences(found.why_none, space.torch_sentence()))
    front.torch = space.torch_summary()
    return front
