"""Live refresh of the catalog through boto3 (EC2 and the Price List API).

What is called, per region (IAM actions in brackets):
  DescribeInstanceTypes          [ec2:DescribeInstanceTypes]          NVIDIA GPU types and their facts
  DescribeInstanceTypeOfferings  [ec2:DescribeInstanceTypeOfferings]  which of them the region offers
  DescribeSpotPriceHistory       [ec2:DescribeSpotPriceHistory]       latest Linux/UNIX price per AZ
and once per (type, region), against the us-east-1 Price List endpoint:
  GetProducts                    [pricing:GetProducts]                on-demand USD/hour

Credentials come from boto3's standard chain (env, profile, SSO, instance role). Retries use
botocore's adaptive mode. Per-region results are cached as JSON with their fetch time under
$SRIFT_CACHE_DIR or $XDG_CACHE_HOME/srift (default ~/.cache/srift), written atomically.

Merge (note "live-merge"): live values override the snapshot field by field; interconnect
facts, which AWS does not publish through the API, stay from the snapshot. In each refreshed
region, a type of the refresh's scope that AWS does not offer there loses the region and its
prices there (AWS lists a region's types: what it does not list cannot be launched there); a
type left in no region gets status "unlisted" (a retired one stays "retired"), and keeps the
regions nobody refreshed. A type AWS offers in a refreshed region but quotes no spot price for
loses its old spot price there (DescribeSpotPriceHistory quotes every AZ that sells it); one
with no on-demand price from the Price List keeps its old price, with a warning. Every price
keeps its own timestamp and source.

Regions (note "opt-in regions"): EC2 answers AuthFailure or OptInRequired in a region the
account has not enabled (af-south-1, me-south-1, ...). Such a region is skipped with a warning;
only when every region refuses is it an error.

Cache (note "cache scope"): each region's answer is cached with the scope it was fetched for
(the types asked, the patterns, spot, on-demand) and is reused only for a request it covers, so
a refresh of one type never stands in for a whole region's answer.
"""
from __future__ import annotations

import concurrent.futures as _futures
import datetime as _dt
import fnmatch
import json
import math
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from srift.catalog import Catalog, _atomic_write_text

if TYPE_CHECKING:  # pragma: no cover
    import boto3

__all__ = [
    "NVIDIA_TYPE_PATTERNS",
    "PRICING_REGION",
    "CatalogRefreshError",
    "AwsAccessDeniedError",
    "AwsThrottledError",
    "AwsUnreachableError",
    "StaleCatalogWarning",
    "RefreshReport",
    "AwsClients",
    "cache_dir",
    "fetch_instance_types",
    "fetch_offerings",
    "fetch_spot_prices",
    "fetch_on_demand_prices",
    "parse_price_document",
    "merge_live",
    "refresh",
    "refresh_catalog",
]

# Every NVIDIA training family so far is g* or p*; prefiltering server-side turns a ~900-type
# listing into ~70. Pass type_patterns=None to list every type (the NVIDIA check runs anyway).
NVIDIA_TYPE_PATTERNS: tuple[str, ...] = ("g*", "p*")
PRICING_REGION = "us-east-1"  # the Price List API is served from us-east-1 (and two others)
SPOT_PRODUCT = "Linux/UNIX"
DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_MAX_AGE_S = 24 * 3600.0
SRC_LIVE_TYPES = "aws:ec2:DescribeInstanceTypes"
SRC_LIVE_SPOT = "aws:ec2:DescribeSpotPriceHistory"
SRC_LIVE_PRICING = "aws:pricing:GetProducts"

_ACCESS_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
                 "AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken",
                 "ExpiredTokenException", "SignatureDoesNotMatch", "OptInRequired"}
_THROTTLE_CODES = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
                   "ThrottledException", "RequestThrottled", "RequestThrottledException", "SlowDown",
                   "EC2ThrottledException", "PriorRequestNotComplete"}
# What EC2 answers in a region the account has not enabled (note "opt-in regions").
_REGION_DISABLED_CODES = {"AuthFailure", "OptInRequired"}
_AZ_NAME_RE = re.compile(r"^[a-z]{2}-[a-z]+-\d+[a-z]$")  # "us-east-1a"; Local Zones add a city


class CatalogRefreshError(RuntimeError):
    """A live refresh failed in a way the user must act on (``code``: AWS's error code, if any)."""

    code: str | None = None


class AwsAccessDeniedError(CatalogRefreshError, PermissionError):
    """AWS refused a call: the message names the missing IAM action."""


class AwsThrottledError(CatalogRefreshError):
    """AWS kept throttling after every adaptive retry."""


class AwsUnreachableError(CatalogRefreshError, ConnectionError):
    """No endpoint answered (or no credentials): callers fall back to a cached/bundled catalog."""


class StaleCatalogWarning(UserWarning):
    """A refresh could not reach AWS and an older catalog is used instead."""


@dataclass
class RefreshReport:
    """What one refresh did (``srift catalog refresh --json`` prints it)."""

    regions: list[str] = field(default_factory=list)
    fetched_at: str | None = None
    instance_types: int = 0
    offered_pairs: int = 0
    on_demand_prices: int = 0
    spot_rows: int = 0
    from_cache: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)  # "type@region": no longer offered there, prices dropped
    spot_withdrawn: list[str] = field(default_factory=list)  # "type@region": no spot price quoted, old one dropped
    skipped_regions: list[str] = field(default_factory=list)  # refused as not enabled (note "opt-in regions")
    new_types: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fallback: str | None = None  # why an older catalog was used, if it was
    cache_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _iso(t: _dt.datetime) -> str:
    return t.astimezone(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def cache_dir() -> Path:
    """$SRIFT_CACHE_DIR, else $XDG_CACHE_HOME/srift, else ~/.cache/srift."""
    explicit = os.environ.get("SRIFT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "srift"


# ----------------------------------------------------------------------------- clients & errors

class AwsClients:
    """Makes the boto3 clients a refresh uses; tests substitute moto- or Stubber-backed ones."""

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        *,
        endpoint_url: str | None = None,
        pricing_endpoint_url: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
    ) -> None:
        import boto3
        from botocore.config import Config

        if max_attempts < 1:
            raise ValueError(f"max_attempts = {max_attempts!r}: must be >= 1")
        self.session = session or boto3.session.Session()
        self.max_attempts = max_attempts
        self.endpoint_url = endpoint_url
        self.pricing_endpoint_url = pricing_endpoint_url or endpoint_url
        # Adaptive mode: client-side rate limiting + retries, the mode AWS recommends for bursts.
        # botocore's "max_attempts" key counts retries after the first call; "total_max_attempts"
        # counts every call, which is what our max_attempts means.
        self.config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},
            connect_timeout=connect_timeout, read_timeout=read_timeout,
        )
        self._clients: dict[tuple[str, str], Any] = {}

    def _client(self, service: str, region: str, endpoint_url: str | None) -> Any:
        key = (service, region)
        if key not in self._clients:
            kwargs: dict[str, Any] = {"region_name": region, "config": self.config}
            if endpoint_url:
                kwargs["endpoint_url"] = endpoint_url
            self._clients[key] = self.session.client(service, **kwargs)
        return self._clients[key]

    def ec2(self, region: str) -> Any:
        return self._client("ec2", region, self.endpoint_url)

    def spot(self, region: str) -> Any:
        return self.ec2(region)

    def pricing(self) -> Any:
        return self._client("pricing", PRICING_REGION, self.pricing_endpoint_url)

    def profile(self) -> str:
        return getattr(self.session, "profile_name", None) or "default"


def _with_code(code: str, err: CatalogRefreshError) -> CatalogRefreshError:
    err.code = code
    return err


def _translate(exc: BaseException, action: str, region: str, clients: AwsClients | None) -> BaseException:
    """botocore exception -> our error with the IAM action and what to do."""
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.ClientError):
        err = exc.response.get("Error", {})
        code, msg = err.get("Code", "?"), err.get("Message", "")
        if code in _ACCESS_CODES:
            who = f" (profile {clients.profile()!r})" if clients is not None else ""
            return _with_code(code, AwsAccessDeniedError(
                f"AWS denied {action} in {region}: {code}: {msg}. The credentials in use{who} need "
                f"the IAM action {action!r}; see docs for the minimal policy "
                "(ec2:DescribeInstanceTypes, ec2:DescribeInstanceTypeOfferings, "
                "ec2:DescribeSpotPriceHistory, pricing:GetProducts)."
            ))
        if code in _THROTTLE_CODES:
            n = clients.max_attempts if clients is not None else "all"
            return _with_code(code, AwsThrottledError(
                f"AWS throttled {action} in {region} ({code}) through {n} attempts with adaptive "
                "retries; try again later, refresh fewer regions, or raise max_attempts."
            ))
        return _with_code(code, CatalogRefreshError(f"{action} in {region} failed: {code}: {msg}"))
    if isinstance(exc, (bexc.EndpointConnectionError, bexc.ConnectTimeoutError, bexc.ReadTimeoutError,
                        bexc.ConnectionClosedError)):
        return AwsUnreachableError(f"AWS endpoint unreachable for {action} in {region}: {exc}")
    if isinstance(exc, (bexc.NoCredentialsError, bexc.PartialCredentialsError, bexc.ProfileNotFound,
                        getattr(bexc, "TokenRetrievalError", bexc.NoCredentialsError))):
        return AwsUnreachableError(f"no usable AWS credentials for {action} in {region}: {exc}")
    return exc


def _guard(action: str, region: str, clients: AwsClients | None, fn: Callable[[], Any]) -> Any:
    from botocore import exceptions as bexc

    try:
        return fn()
    except (bexc.BotoCoreError, bexc.ClientError) as exc:
        new = _translate(exc, action, region, clients)
        if new is exc:
            raise
        raise new from exc


# ----------------------------------------------------------------------------- fetchers

def _live_fields(t: dict[str, Any]) -> dict[str, Any] | None:
    """DescribeInstanceTypes entry -> catalog fields, or None for non-NVIDIA/fractional GPUs."""
    nv = [g for g in (t.get("GpuInfo") or {}).get("Gpus", []) if g.get("Manufacturer") == "NVIDIA"]
    count = sum(int(g.get("Count") or 0) for g in nv)
    if count < 1:  # no NVIDIA GPU, or a fractional slice (g6f: Count 0) that cannot hold a rank
        return None
    net = t.get("NetworkInfo") or {}
    cards = net.get("NetworkCards") or []
    baseline = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards) or None
    peak = sum(float(c.get("PeakBandwidthInGbps") or 0) for c in cards) or None
    mem = (nv[0].get("MemoryInfo") or {}).get("SizeInMiB")
    return {
        "gpu_name": nv[0].get("Name"),
        "gpu_memory_gib": round(mem / 1024, 3) if mem else None,
        "gpu_count": count,
        "vcpus": int((t.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
        "memory_gib": round(int((t.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / 1024, 3),
        "network_performance": net.get("NetworkPerformance"),
        "network_baseline_gbps": baseline,
        "network_peak_gbps": peak,
        "network_cards": int(net.get("MaximumNetworkCards") or 1),
        "efa": bool(net.get("EfaSupported", False)),
        "max_efa_interfaces": (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces"),
    }


def fetch_instance_types(
    ec2: Any,
    *,
    instance_types: Iterable[str] | None = None,
    type_patterns: Iterable[str] | None = NVIDIA_TYPE_PATTERNS,
) -> dict[str, dict[str, Any]]:
    """NVIDIA GPU instance types this region's EC2 lists: {name: fields} (paginated)."""
    values = sorted(instance_types) if instance_types else (list(type_patterns) if type_patterns else None)
    kwargs: dict[str, Any] = {}
    if values:
        kwargs["Filters"] = [{"Name": "instance-type", "Values": values}]
    out: dict[str, dict[str, Any]] = {}
    for page in ec2.get_paginator("describe_instance_types").paginate(**kwargs):
        for t in page.get("InstanceTypes", []):
            fields = _live_fields(t)
            if fields is not None:
                out[t["InstanceType"]] = fields
    return out


def fetch_offerings(ec2: Any, region: str) -> set[str]:
    """Instance types offered in ``region`` (DescribeInstanceTypeOfferings, paginated)."""
    offered: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="region", Filters=[{"Name": "location", "Values": [region]}]
    )
    for page in pages:
        for o in page.get("InstanceTypeOfferings", []):
            offered.add(o["InstanceType"])
    return offered


def fetch_spot_prices(
    ec2: Any, names: Iterable[str], now: _dt.datetime, warn: Callable[[str], None] = lambda m: None
) -> dict[str, list[dict[str, Any]]]:
    """Latest Linux/UNIX spot price per (type, AZ): {type: [{zone, usd_per_hour, as_of, ...}]}."""
    names = sorted(names)
    if not names:
        return {}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    # StartTime=now asks for the price in effect now: one (the latest) entry per AZ.
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=names, ProductDescriptions=[SPOT_PRODUCT], StartTime=now
    )
    for page in pages:
        for h in page.get("SpotPriceHistory", []):
            name, zone, ts = h.get("InstanceType"), h.get("AvailabilityZone"), h.get("Timestamp")
            try:
                price = float(h["SpotPrice"])
            except (KeyError, TypeError, ValueError):
                warn(f"skipped spot price {h.get('SpotPrice')!r} for {name} in {zone}: not a number")
                continue
            if not 0 < price < math.inf:  # the catalog schema refuses it: one bad row would sink the refresh
                warn(f"skipped spot price {h.get('SpotPrice')!r} for {name} in {zone}: not a price > 0")
                continue
            if not name or not zone:
                continue
            stamp = ts if isinstance(ts, _dt.datetime) else None
            key = (name, zone)
            prev = latest.get(key)
            if prev is None or (stamp and prev["_ts"] and stamp > prev["_ts"]):
                latest[key] = {"zone": zone, "usd_per_hour": price, "local_zone": not _AZ_NAME_RE.match(zone),
                               "as_of": _iso(stamp) if stamp else None, "source": SRC_LIVE_SPOT, "_ts": stamp}
    out: dict[str, list[dict[str, Any]]] = {}
    for (name, _zone), rec in sorted(latest.items()):
        rec.pop("_ts", None)
        out.setdefault(name, []).append(rec)
    for rows in out.values():
        rows.sort(key=lambda z: (z["usd_per_hour"], z["zone"]))
    return out


def pricing_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The GetProducts filters for shared-tenancy Linux on-demand with no pre-installed software."""
    pairs = [("instanceType", instance_type), ("regionCode", region), ("operatingSystem", "Linux"),
             ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used")]
    return [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in pairs]


def parse_price_document(item: str | dict[str, Any]) -> tuple[str, float]:
    """One PriceList entry (a JSON document inside a string) -> (sku, USD per hour).

    Raises ValueError naming the SKU when the document is not the shape AWS documents.
    """
    sku = "unknown"
    try:
        doc = json.loads(item) if isinstance(item, str) else item
        if not isinstance(doc, dict):
            raise TypeError("not an object")
        sku = str((doc.get("product") or {}).get("sku") or doc.get("sku") or "unknown")
        prices: list[float] = []
        for term in doc["terms"]["OnDemand"].values():
            for dim in term["priceDimensions"].values():
                if dim.get("unit", "Hrs") not in ("Hrs", "Hours", "hrs"):
                    continue
                prices.append(float(dim["pricePerUnit"]["USD"]))
        if not prices:
            raise KeyError("no hourly priceDimensions")
        return sku, min(prices)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        if sku == "unknown" and isinstance(item, str):
            m = re.search(r'"sku"\s*:\s*"([^"]+)"', item)
            sku = m.group(1) if m else sku
        raise ValueError(f"malformed price document for SKU {sku!r}: {type(exc).__name__}: {exc}") from None


def fetch_on_demand_prices(
    pricing: Any,
    wanted: Iterable[tuple[str, str]],
    now: _dt.datetime,
    *,
    warn: Callable[[str], None] = lambda m: None,
    workers: int = 8,
    tick: Callable[[], None] = lambda: None,
    guard: Callable[[str, str, Callable[[], Any]], Any] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """On-demand USD/hour per (type, region) through Pricing GetProducts."""
    stamp = _iso(now)
    wanted = sorted(set(wanted))
    guard = guard or (lambda action, region, fn: fn())

    def one(pair: tuple[str, str]) -> tuple[str, str, float | None]:
        name, region = pair

        def call() -> list[Any]:
            items: list[Any] = []
            pages = pricing.get_paginator("get_products").paginate(
                ServiceCode="AmazonEC2", Filters=pricing_filters(name, region), FormatVersion="aws_v1"
            )
            for page in pages:
                items.extend(page.get("PriceList", []))
            return items

        items = guard("pricing:GetProducts", region, call)
        found: list[float] = []
        for item in items:
            try:
                _sku, usd = parse_price_document(item)
            except ValueError as exc:
                warn(f"{name} in {region}: skipped {exc}")
                continue
            if usd > 0:  # $0 rows are capacity-reservation placeholders
                found.append(usd)
        tick()
        return name, region, (min(found) if found else None)

    out: dict[str, dict[str, dict[str, Any]]] = {}
    if workers <= 1:
        results = [one(p) for p in wanted]
    else:  # boto3 clients are thread-safe; the pricing API is per-(type, region) chatty
        with _futures.ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(one, wanted))
    for name, region, usd in results:
        if usd is not None:
            out.setdefault(name, {})[region] = {"usd_per_hour": usd, "as_of": stamp, "source": SRC_LIVE_PRICING}
    return out


# ----------------------------------------------------------------------------- merge

def merge_live(base: Catalog, live: dict[str, dict[str, Any]], fetched_at: str,
               report: RefreshReport | None = None, scope: Iterable[str] | None = None) -> Catalog:
    """Merge per-region live results over ``base`` (see note "live-merge" in the module doc).

    ``scope``: the instance types the refresh asked about (None: all); only those can be
    marked "unlisted" when AWS no longer returns them.
    """
    scope = set(scope) if scope is not None else None
    report = report or RefreshReport()
    data = base.to_dict()
    instances = data["instances"]
    queried = set(live)
    seen: dict[str, dict[str, Any]] = {}
    offered: dict[str, set[str]] = {}
    for region, res in live.items():
        for name, fields in res.get("instance_types", {}).items():
            seen.setdefault(name, fields)
        for name in res.get("offered", []):
            offered.setdefault(name, set()).add(region)

    for name, fields in sorted(seen.items()):
        keys = base.resolve_gpu(f"{fields['gpu_name']} {round(fields['gpu_memory_gib'] or 0)}GB")
        inst = instances.get(name)
        if inst is None:
            if len(keys) != 1:
                msg = f"{name}: GPU {fields['gpu_name']!r} is not in the catalog; add it with an overrides file"
                report.warnings.append(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                continue
            inst = instances[name] = {
                "family": name.split(".")[0], "gpu": keys[0], "status": "current",
                "interconnect": "none" if fields["gpu_count"] == 1 else "pcie",
                "intra_node_gbytes_s": None, "regions": [], "sources": [],
                "note": "new type seen live: interconnect assumed (PCIe, bandwidth unknown); check AWS's page",
            }
            report.new_types.append(name)
        elif len(keys) == 1 and keys[0] != inst["gpu"]:
            inst["gpu"] = keys[0]
        for k in ("gpu_count", "vcpus", "memory_gib", "network_performance", "network_baseline_gbps",
                  "network_peak_gbps", "network_cards", "efa", "max_efa_interfaces", "gpu_memory_gib"):
            if fields.get(k) is not None:
                inst[k] = fields[k]
        inst["network_gbps"] = fields["network_baseline_gbps"] or fields["network_peak_gbps"] or inst.get("network_gbps")
        if SRC_LIVE_TYPES not in inst["sources"]:
            inst["sources"] = [*inst["sources"], SRC_LIVE_TYPES]
        inst["regions"] = sorted((set(inst.get("regions", [])) - queried) | offered.get(name, set()))
        if inst.get("status") == "unlisted" and inst["regions"]:
            inst["status"] = "current"

    on_demand, spot, spot_zones = data["on_demand"], data["spot"], data.setdefault("spot_zones", {})
    for name, inst in instances.items():
        if name not in seen and (scope is None or name in scope):
            # AWS lists no such type in the refreshed regions: it is not offered there now.
            inst["regions"] = sorted(set(inst.get("regions", [])) - queried)
        if name not in seen and scope is not None and name not in scope:
            continue
        for region in sorted(queried - set(inst.get("regions", []))):
            dropped = [table.pop(region) for table in (on_demand.get(name, {}), spot.get(name, {}))
                       if region in table]
            spot_zones.get(name, {}).pop(region, None)
            if dropped:
                report.withdrawn.append(f"{name}@{region}")
        if not inst.get("regions") and inst.get("status") == "current":
            inst["status"] = "unlisted"  # offered nowhere we know of; a retired type stays retired
            report.unlisted.append(name)

    for region, res in live.items():
        for name, by_region in res.get("on_demand", {}).items():
            if name in instances and region in by_region and region in instances[name]["regions"]:
                on_demand.setdefault(name, {})[region] = by_region[region]
        for name, rows in res.get("spot_zones", {}).items():
            if name not in instances or not rows or region not in instances[name]["regions"]:
                continue
            spot_zones.setdefault(name, {})[region] = rows
            regular = [z for z in rows if not z.get("local_zone")] or rows
            best = regular[0]
            spot.setdefault(name, {})[region] = {k: best[k] for k in ("usd_per_hour", "zone", "as_of", "source")}
        if (res.get("scope") or {}).get("spot"):
            for name in res.get("offered", []):
                if name in instances and not res.get("spot_zones", {}).get(name):
                    had = spot.get(name, {}).pop(region, None)
                    spot_zones.get(name, {}).pop(region, None)
                    if had is not None:
                        report.spot_withdrawn.append(f"{name}@{region}")
    intr = data["interruption"]
    for name, inst in instances.items():
        for region in inst.get("regions", []):
            intr.setdefault(name, {}).setdefault(region, "unknown")
    data["regions"] = sorted(set(data["regions"]) | queried)
    data["refreshed_at"] = fetched_at
    data["tables"] = [t for t in data.get("tables", []) if t.get("name") != "live"] + [{
        "name": "live",
        "source": f"AWS APIs: DescribeInstanceTypes, DescribeInstanceTypeOfferings, DescribeSpotPriceHistory "
                  f"({SPOT_PRODUCT}), Pricing GetProducts; regions {', '.join(sorted(queried))}",
        "as_of": fetched_at,
    }]
    for table in (on_demand, spot, spot_zones):  # a type whose last price went leaves no empty entry
        for name in [n for n, by_region in table.items() if not by_region]:
            del table[name]
    report.unlisted.sort()
    report.withdrawn.sort()
    report.spot_withdrawn.sort()
    return Catalog(data, origin=f"{base.origin} + live AWS ({fetched_at})")


# ----------------------------------------------------------------------------- refresh

def _progress(total: int, enabled: bool) -> Any:
    disable = not enabled or not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="srift catalog refresh", unit="call", disable=disable, leave=False)
    except ImportError:  # pragma: no cover - tqdm is a dependency; an embedder may strip it
        class _Null:
            def update(self, n: int = 1) -> None: ...
            def set_postfix_str(self, s: str) -> None: ...
            def close(self) -> None: ...
        return _Null()


def _fetch_scope(instance_types: Iterable[str] | None, type_patterns: Iterable[str] | None,
                 spot: bool, on_demand: bool) -> dict[str, Any]:
    """What one region's answer was fetched for (note "cache scope")."""
    return {"instance_types": sorted(instance_types) if instance_types else None,
            "type_patterns": sorted(type_patterns) if type_patterns and not instance_types else None,
            "spot": bool(spot), "on_demand": bool(on_demand)}


def _scope_covers(cached: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether an answer fetched for ``cached`` holds everything a request for ``wanted`` asks."""
    if (wanted["spot"] and not cached.get("spot")) or (wanted["on_demand"] and not cached.get("on_demand")):
        return False
    have_types, have_patterns = cached.get("instance_types"), cached.get("type_patterns")
    if have_types is not None:  # fetched for named types only
        return wanted["instance_types"] is not None and set(wanted["instance_types"]) <= set(have_types)
    if have_patterns is None:  # fetched for every type
        return True
    if wanted["instance_types"] is not None:
        return all(any(fnmatch.fnmatchcase(n, p) for p in have_patterns) for n in wanted["instance_types"])
    return wanted["type_patterns"] is not None and set(wanted["type_patterns"]) <= set(have_patterns)


def _is_price(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


def _region_doc_is_whole(doc: Any) -> bool:
    """The shape ``refresh`` writes; anything else (another version, a hand edit) is a miss."""
    try:
        types, offered = doc["instance_types"], doc["offered"]
        ok = (isinstance(types, dict) and isinstance(offered, list) and all(isinstance(n, str) for n in offered)
              and isinstance(doc["scope"], dict) and isinstance(doc["spot_zones"], dict)
              and isinstance(doc["on_demand"], dict))
        ok = ok and all(isinstance(f, dict) and isinstance(f["gpu_name"], str) and isinstance(f["gpu_count"], int)
                        for f in types.values())
        ok = ok and all(isinstance(z, dict) and isinstance(z["zone"], str) and _is_price(z["usd_per_hour"])
                        and "as_of" in z and isinstance(z["source"], str)
                        for rows in doc["spot_zones"].values() for z in rows)
        ok = ok and all(isinstance(by_region, dict) and all(
                            isinstance(r, dict) and _is_price(r["usd_per_hour"]) and isinstance(r["source"], str)
                            and "as_of" in r for r in by_region.values())
                        for by_region in doc["on_demand"].values())
        return bool(ok)
    except (KeyError, TypeError, AttributeError):
        return False


def _read_region_cache(path: Path, max_age_s: float, now: _dt.datetime,
                       wanted: dict[str, Any]) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        when = _dt.datetime.fromisoformat(doc["fetched_at"].replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # a missing or unreadable cache entry is just a miss
    if not _region_doc_is_whole(doc) or not _scope_covers(doc["scope"], wanted):
        return None
    return doc if (now - when).total_seconds() <= max_age_s else None


def _fallback(reason: str, base: Catalog | None, cache: bool, report: RefreshReport) -> Catalog:
    """AWS unreachable: the catalog the user gave (``base`` other than the bundled one), else
    the newest cached refresh, else the bundled snapshot, with a warning naming which."""
    cached = cache_dir() / "catalog.json"
    catalog: Catalog | None = None
    given = base is not None and base is not Catalog.default()  # a --catalog or overrides: theirs, not the cache
    if cache and not given and cached.is_file():
        try:
            catalog = Catalog.load(cached)
            what = f"the cached refresh {cached} from {catalog.refreshed_at or catalog.generated_at}"
        except ValueError:
            catalog = None
    if catalog is None:
        catalog = base if given else Catalog.default()
        what = (f"the given catalog ({catalog.origin}) generated {catalog.generated_at}" if given
                else f"the bundled snapshot generated {catalog.generated_at}")
    msg = f"{reason}; using {what} ({catalog.describe_dates()})"
    report.fallback = msg
    warnings.warn(msg, StaleCatalogWarning, stacklevel=3)
    return catalog


def refresh(
    regions: Iterable[str] | None = None,
    session: boto3.session.Session | None = None,
    cache: bool = True,
    progress: bool = True,
    *,
    base: Catalog | None = None,
    clients: AwsClients | None = None,
    endpoint_url: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    instance_types: Iterable[str] | None = None,
    type_patterns: Iterable[str] | None = NVIDIA_TYPE_PATTERNS,
    spot: bool = True,
    on_demand: bool = True,
    fallback: bool = True,
    workers: int = 8,
    now: _dt.datetime | None = None,
) -> tuple[Catalog, RefreshReport]:
    """Refresh the catalog from AWS; returns (catalog, report). See refresh_catalog."""
    if isinstance(regions, str):
        raise ValueError(f"regions = {regions!r}: pass a list of region codes, e.g. ['us-east-1']")
    base = base or Catalog.default()
    region_list = sorted(set(regions)) if regions else base.regions
    for r in region_list:
        if not re.fullmatch(r"[a-z]{2}(-[a-z0-9]+)+-\d+", r):
            raise ValueError(f"regions: {r!r} is not an AWS region code such as 'us-east-1'")
    now = now or _utcnow()
    fetched_at = _iso(now)
    report = RefreshReport(regions=list(region_list), fetched_at=fetched_at)
    if clients is None:
        try:
            clients = AwsClients(session, endpoint_url=endpoint_url, max_attempts=max_attempts)
        except Exception as exc:  # e.g. a profile that does not exist
            new = _translate(exc, "boto3 session", region_list[0] if region_list else "-", None)
            if isinstance(new, AwsUnreachableError) and fallback:
                return _fallback(str(new), base, cache, report), report
            raise
    cdir = cache_dir() / "aws"
    live: dict[str, dict[str, Any]] = {}
    wanted = _fetch_scope(instance_types, type_patterns, spot, on_demand)

    def warn(msg: str) -> None:
        report.warnings.append(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)

    bar = _progress(len(region_list) * 3 + 1, progress)
    refused: list[CatalogRefreshError] = []
    try:
        todo = []
        for region in region_list:
            hit = (_read_region_cache(cdir / f"{region}.json", max_age_s, now, wanted)
                   if cache and max_age_s > 0 else None)
            if hit is not None:
                live[region] = hit
                report.from_cache.append(region)
                bar.update(3)
            else:
                todo.append(region)
        fresh: dict[str, dict[str, Any]] = {}
        for region in todo:
            ec2 = clients.ec2(region)
            bar.set_postfix_str(region)
            try:
                types = _guard("ec2:DescribeInstanceTypes", region, clients,
                               lambda: fetch_instance_types(ec2, instance_types=instance_types,
                                                            type_patterns=type_patterns))
            except AwsAccessDeniedError as exc:
                if exc.code not in _REGION_DISABLED_CODES:
                    raise
                refused.append(exc)  # note "opt-in regions": skip it, keep the others
                report.skipped_regions.append(region)
                warn(f"{region}: skipped: EC2 answered {exc.code}, so the region is not enabled for this "
                     "account (opt-in regions are enabled under Account > AWS Regions) or these "
                     "credentials are not valid there; its snapshot facts and prices are kept")
                bar.update(3)
                continue
            bar.update(1)
            offered = _guard("ec2:DescribeInstanceTypeOfferings", region, clients, lambda: fetch_offerings(ec2, region))
            offered &= set(types)
            bar.update(1)
            zones: dict[str, list[dict[str, Any]]] = {}
            if spot and offered:
                spot_client = clients.spot(region)
                zones = _guard("ec2:DescribeSpotPriceHistory", region, clients,
                               lambda: fetch_spot_prices(spot_client, offered, now, warn))
            bar.update(1)
            fresh[region] = {"region": region, "fetched_at": fetched_at, "scope": wanted, "instance_types": types,
                             "offered": sorted(offered), "spot_zones": zones, "on_demand": {}}
        if refused and not fresh and not live:
            raise AwsAccessDeniedError(
                f"every region refused DescribeInstanceTypes ({', '.join(report.skipped_regions)}): "
                f"{refused[0]}") from refused[0]
        if on_demand and fresh:
            wanted = [(n, r) for r, res in fresh.items() for n in res["offered"]]
            bar.total = (bar.total or 0) + len(wanted)
            prices = fetch_on_demand_prices(
                clients.pricing(), wanted, now, warn=warn, workers=workers, tick=lambda: bar.update(1),
                guard=lambda action, region, fn: _guard(action, region, clients, fn),
            )
            for name, by_region in prices.items():
                for region, rec in by_region.items():
                    fresh[region]["on_demand"].setdefault(name, {})[region] = rec
            missing = sorted((n, r) for n, r in wanted if r not in prices.get(n, {}))
            if missing:
                shown = ", ".join(f"{n}@{r}" for n, r in missing[:5]) + (", ..." if len(missing) > 5 else "")
                warn(f"{len(missing)} offered (type, region) pairs had no on-demand price from GetProducts "
                     f"({shown}); their snapshot prices (with their old dates) are kept")
        bar.update(1)
    except AwsUnreachableError as exc:
        if not fallback:
            raise
        return _fallback(str(exc), base, cache, report), report
    finally:
        bar.close()

    live.update(fresh)
    if cache:
        # One file per region, each replaced atomically: an interruption leaves whole old or new files.
        for region, res in fresh.items():
            _atomic_write_text(cdir / f"{region}.json", json.dumps(res, indent=1, default=str) + "\n")
    scope: set[str] | None = None
    if instance_types:
        scope = set(instance_types)
    elif type_patterns:
        scope = {n for n in base.instance_names() if any(fnmatch.fnmatchcase(n, p) for p in type_patterns)}
    catalog = merge_live(base, live, fetched_at, report, scope=scope)
    if report.spot_withdrawn:
        warn(f"{len(report.spot_withdrawn)} offered (type, region) pairs have no spot price on AWS now "
             f"({', '.join(report.spot_withdrawn[:5])}{', ...' if len(report.spot_withdrawn) > 5 else ''}); "
             "their snapshot spot prices were dropped")
    out = catalog.to_dict()
    report.instance_types = len({n for res in live.values() for n in res.get("offered", [])} & set(out["instances"]))
    report.offered_pairs = sum(len(res.get("offered", [])) for res in live.values())
    report.on_demand_prices = sum(len(v) for res in live.values() for v in res.get("on_demand", {}).values())
    report.spot_rows = sum(len(v) for res in live.values() for v in res.get("spot_zones", {}).values())
    if cache and base is Catalog.default():
        # Only a refresh of the bundled snapshot stands in for it later (_fallback); a refresh of
        # the user's own catalog or of one with their overrides is theirs, returned, not cached.
        path = cache_dir() / "catalog.json"
        catalog.save(path)
        report.cache_path = str(path)
    return catalog, report


def refresh_catalog(
    regions: Iterable[str] | None = None,
    session: boto3.session.Session | None = None,
    cache: bool = True,
    progress: bool = True,
    **kwargs: Any,
) -> Catalog:
    """``Catalog.from_aws``: the snapshot refreshed live from AWS for ``regions`` (default: all
    regions in the snapshot). With ``cache`` a region fetched less than ``max_age_s`` ago (default
    a day) is read from the cache. If AWS cannot be reached, the newest cached refresh or the
    bundled snapshot is returned with a StaleCatalogWarning saying how old it is.
    Access denied and persistent throttling raise CatalogRefreshError subclasses."""
    return refresh(regions, session, cache, progress, **kwargs)[0]
