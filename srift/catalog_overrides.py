"""User overrides of the catalog: negotiated prices, private offerings, measured NICs, quotas.

File format (JSON or TOML), schema "srift.catalog-overrides/1"::

    schema = "srift.catalog-overrides/1"

    [instances."p3.16xlarge"]          # partial entry: patches an existing type
    measured_network_gbytes_s = 2.3    # achieved allreduce bandwidth (srift probe-network)
    measured_network_latency_us = 45
    measured_network_over = "nic"      # or "loopback": what the probe crossed (optional)

    [instances."p9.private"]           # new name: every required field
    gpu = "H100-80GB"
    gpu_count = 8
    vcpus = 192
    memory_gib = 2048
    interconnect = "nvswitch"
    intra_node_gbytes_s = 450
    network_gbps = 400
    efa = true
    network_cards = 4
    regions = ["us-east-1"]

    [[prices]]
    instance = "p3.16xlarge"
    region = "us-east-1"
    market = "on-demand"               # or "spot"
    usd_per_hour = 15.0

    [[interruption]]                   # srift extension: a known Spot Advisor bucket
    instance = "p3.16xlarge"
    region = "us-east-1"
    class = "5-10%"

    [quotas]
    "p3.16xlarge" = 4

Every problem is a ValueError naming the field path and the offending value.
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from srift.catalog import (CPU_ARCHES, INSTANCE_STATUSES, INTERRUPTION_CLASSES, MARKETS, NETWORK_PROBED_OVER, SCHEMA_PATH,
                           format_json_path)
from srift.files import decode_text, read_input_bytes, strip_bom, unique_keys

if TYPE_CHECKING:  # pragma: no cover
    from srift.catalog import Catalog

__all__ = ["OVERRIDES_SCHEMA_ID", "load_overrides", "validate_overrides", "apply_overrides"]

OVERRIDES_SCHEMA_ID = "srift.catalog-overrides/1"
_TOP_LEVEL = {"schema", "gpus", "instances", "prices", "quotas", "interruption", "note"}
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")
# An overrides file nests a few levels; thousands ([[[[...]]]]) exhaust Python's recursion limit.
_TOO_DEEP = "arrays or tables nested too deeply to be catalog overrides"


def _is_num(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer past a double (TOML and JSON read any number of digits)
        return False


def _pos(v: Any) -> bool:
    return _is_num(v) and v > 0


def _pos_or_none(v: Any) -> bool:
    return v is None or _pos(v)


def _nonneg_or_none(v: Any) -> bool:
    return v is None or (_is_num(v) and v >= 0)


def _nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _str(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _str_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _year_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and 1990 <= v <= 2100)


def _capability_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, str) and re.fullmatch(r"[1-9][0-9]?\.[0-9]", v) is not None)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# field -> (check, description); required-for-new fields listed separately.
_GPU_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (_str, "a non-empty string"),
    "chip": (_str, "a non-empty string"),
    "aliases": (_str_list, "a list of strings"),
    "memory_gib": (_pos, "a number > 0"),
    "fp32_tflops": (_pos, "a number > 0"),
    "tf32_tflops": (_pos_or_none, "a number > 0 or null"),
    "fp16_tflops": (_pos_or_none, "a number > 0 or null"),
    "bf16_tflops": (_pos_or_none, "a number > 0 or null"),
    "memory_bandwidth_gbytes_s": (_pos, "a number > 0"),
    "source": (_str, "a non-empty string"),
    "note": (_str_or_none, "a string"),
    "launch_year": (_year_or_none, "a whole year in 1990-2100 or null"),
    "compute_capability": (_capability_or_none, "a CUDA compute capability 'MAJOR.MINOR' such as '8.6', or null"),
}
_GPU_REQUIRED = ("name", "chip", "memory_gib", "fp32_tflops", "memory_bandwidth_gbytes_s")

_INSTANCE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "family": (_str, "a non-empty string"),
    "gpu": (_str, "a GPU key of the catalog"),
    "gpu_count": (_pos_int, "an integer >= 1"),
    "gpu_memory_gib": (_pos_or_none, "a number > 0"),
    "vcpus": (_pos_int, "an integer >= 1"),
    "memory_gib": (_pos, "a number > 0"),
    "interconnect": (lambda v: v in ("nvswitch", "nvlink", "pcie", "none"), "one of nvswitch, nvlink, pcie, none"),
    "interconnect_detail": (_str_or_none, "a string"),
    "intra_node_gbytes_s": (_pos_or_none, "a number > 0 (GB/s) or null"),
    "network_gbps": (_pos, "a number > 0 (Gbit/s)"),
    "measured_network_gbytes_s": (_pos_or_none, "a number > 0 (GB/s, achieved allreduce bus bandwidth) or null"),
    "measured_network_latency_us": (_nonneg_or_none, "a number >= 0 (microseconds per ring step) or null"),
    "measured_network_over": (lambda v: v is None or v in NETWORK_PROBED_OVER,
                              "what the measured network link crossed: " + " or ".join(map(repr, NETWORK_PROBED_OVER))
                              + " (srift probe-network writes it) or null"),
    "measured_intra_gbytes_s": (_pos_or_none, "a number > 0 (GB/s, achieved allreduce bus bandwidth) or null"),
    "measured_intra_latency_us": (_nonneg_or_none, "a number >= 0 (microseconds per ring step) or null"),
    "measured_comm_compute_s_per_gbyte": (_nonneg_or_none, "a number >= 0 (seconds of compute lost per GB of "
                                                           "allreduce traffic) or null"),
    "network_baseline_gbps": (_pos_or_none, "a number > 0 (Gbit/s)"),
    "network_peak_gbps": (_pos_or_none, "a number > 0 (Gbit/s)"),
    "network_performance": (_str_or_none, "a string"),
    "efa": (lambda v: isinstance(v, bool), "true or false"),
    "max_efa_interfaces": (lambda v: v is None or _nonneg_int(v), "an integer >= 0"),
    "network_cards": (_pos_int, "an integer >= 1"),
    "status": (lambda v: v in INSTANCE_STATUSES, "one of " + ", ".join(INSTANCE_STATUSES)),
    "regions": (lambda v: _str_list(v) and all(_REGION_RE.match(x) for x in v), "a list of region codes such as 'us-east-1'"),
    "sources": (_str_list, "a list of strings"),
    "note": (_str_or_none, "a string"),
    "cpu_arch": (lambda v: v in CPU_ARCHES, "the host CPU's architecture: " + " or ".join(map(repr, CPU_ARCHES))),
}
_INSTANCE_REQUIRED = ("gpu", "gpu_count", "vcpus", "memory_gib", "interconnect", "network_gbps", "efa", "network_cards")


@lru_cache(maxsize=None)
def _limits(kind: str, key: str) -> tuple[float | None, float | None]:
    """The catalog schema's (minimum, maximum) of field ``key`` of a ``$defs`` entry (gpu,
    instance, price), so overrides and catalog files share one set of limits; None: unbounded."""
    defs = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]
    prop = defs[kind]["properties"].get(key, {})
    if "$ref" in prop:
        prop = defs[prop["$ref"].rpartition("/")[2]]
    return prop.get("minimum"), prop.get("maximum")


def load_overrides(source: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """Read an overrides mapping or file (.json / .toml); returns (data, origin label)."""
    if isinstance(source, Mapping):
        try:
            return copy.deepcopy(dict(source)), "catalog overrides"
        except RecursionError:
            raise ValueError(f"catalog overrides: {_TOO_DEEP}") from None
    path = Path(source)
    try:
        raw = read_input_bytes(path)
    except OSError as exc:
        raise ValueError(f"catalog overrides path {str(path)!r}: cannot read ({exc.strerror or exc})") from exc
    origin = f"catalog overrides {path}"
    is_toml = path.suffix.lower() == ".toml"
    if not is_toml and path.suffix.lower() != ".json":
        # No telling suffix: JSON documents start with "{".
        is_toml = not strip_bom(raw).lstrip().startswith(b"{")
    if is_toml:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib

        try:
            data = tomllib.loads(decode_text(raw))
        except ValueError as exc:  # TOMLDecodeError, UnicodeDecodeError, an integer of too many digits
            raise ValueError(f"{origin}: not valid TOML ({exc})") from exc
        except RecursionError:  # the parser recurses once per level of nesting
            raise ValueError(f"{origin}: {_TOO_DEEP}") from None
    else:
        try:
            data = json.loads(decode_text(raw), object_pairs_hook=unique_keys)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits, a repeated key
            raise ValueError(f"{origin}: not valid JSON ({exc})") from exc
        except RecursionError:  # the parser recurses once per level of nesting
            raise ValueError(f"{origin}: {_TOO_DEEP}") from None
    return data, origin


def _check_fields(origin: str, where: list[Any], entry: Any, fields: Mapping[str, tuple[Callable[[Any], bool], str]],
                  kind: str | None = None) -> None:
    """``kind``: the catalog schema's ``$defs`` entry whose maximums bound the numbers."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"{origin}: {format_json_path(where)} = {entry!r}: must be a table/object of fields")
    for key, value in entry.items():
        if key not in fields:
            raise ValueError(
                f"{origin}: {format_json_path([*where, key])}: unknown field {key!r} "
                f"(known: {', '.join(sorted(fields))})"
            )
        check, what = fields[key]
        if not check(value):
            raise ValueError(f"{origin}: {format_json_path([*where, key])} = {value!r}: must be {what}")
        low, high = _limits(kind, key) if kind is not None and _is_num(value) else (None, None)
        if high is not None and value > high:
            raise ValueError(f"{origin}: {format_json_path([*where, key])} = {value!r}: "
                             f"must be {what}, at most {high:g}")
        if low is not None and value < low:
            raise ValueError(f"{origin}: {format_json_path([*where, key])} = {value!r}: "
                             f"must be {what}, at least {low:g}")


def validate_overrides(data: Any, catalog: Catalog, origin: str = "catalog overrides") -> None:
    """Check an overrides document against the schema and the catalog it will patch."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{origin}: $ must be an object/table, got {type(data).__name__}")
    version = data.get("schema")
    if version != OVERRIDES_SCHEMA_ID:
        raise ValueError(f"{origin}: $.schema = {version!r}: must be {OVERRIDES_SCHEMA_ID!r}")
    for key in data:
        if key not in _TOP_LEVEL:
            raise ValueError(f"{origin}: {format_json_path([key])}: unknown section (known: {', '.join(sorted(_TOP_LEVEL))})")
    base = catalog.to_dict()
    for section in ("gpus", "instances"):
        if data.get(section) is not None and not isinstance(data[section], Mapping):
            raise ValueError(f"{origin}: $.{section} = {data[section]!r}: must be a table/object "
                             f"{{name: {{field: value}}}}")
    gpu_keys = set(base["gpus"])
    for key, entry in (data.get("gpus") or {}).items():
        _check_fields(origin, ["gpus", key], entry, _GPU_FIELDS, "gpu")
        if key not in base["gpus"]:
            missing = [f for f in _GPU_REQUIRED if f not in entry]
            if missing:
                raise ValueError(f"{origin}: {format_json_path(['gpus', key])}: new GPU needs fields {missing}")
        gpu_keys.add(key)
    names = set(base["instances"])
    for name, entry in (data.get("instances") or {}).items():
        _check_fields(origin, ["instances", name], entry, _INSTANCE_FIELDS, "instance")
        if name not in base["instances"]:
            missing = [f for f in _INSTANCE_REQUIRED if f not in entry]
            if missing:
                raise ValueError(f"{origin}: {format_json_path(['instances', name])}: new instance type needs fields {missing}")
        if "gpu" in entry and entry["gpu"] not in gpu_keys:
            raise ValueError(f"{origin}: {format_json_path(['instances', name, 'gpu'])} = {entry['gpu']!r}: not a GPU key (known: {', '.join(sorted(gpu_keys))})")
        names.add(name)
    # None is an absent section; 0 or {} is not one read as absent
    prices = [] if data.get("prices") is None else data["prices"]
    if not isinstance(prices, list):
        raise ValueError(f"{origin}: $.prices = {prices!r}: must be a list of {{instance, region, market, usd_per_hour}}")
    price_fields = {
        # a list or an object is no name (its lookup in the set raised TypeError: unhashable)
        "instance": (lambda v: isinstance(v, str) and v in names, "an instance type of the catalog or of these overrides"),
        "region": (lambda v: isinstance(v, str) and bool(_REGION_RE.match(v)), "a region code such as 'us-east-1'"),
        "market": (lambda v: v in MARKETS, "one of " + ", ".join(MARKETS)),
        # > 0: recommend's search refuses a free offer; refuse it here, not after predict priced it at $0
        "usd_per_hour": (_pos, "a number > 0 (USD per hour)"),
        "zone": (_str_or_none, "a string"),
        "as_of": (_str_or_none, "an ISO 8601 date or time"),
        "source": (_str, "a non-empty string"),
    }
    for i, entry in enumerate(prices):
        _check_fields(origin, ["prices", i], entry, price_fields, "price")
        missing = [f for f in ("instance", "region", "market", "usd_per_hour") if f not in entry]
        if missing:
            raise ValueError(f"{origin}: {format_json_path(['prices', i])}: missing fields {missing}")
    intr = [] if data.get("interruption") is None else data["interruption"]
    if not isinstance(intr, list):
        raise ValueError(f"{origin}: $.interruption = {intr!r}: must be a list of {{instance, region, class}}")
    intr_fields = {
        "instance": price_fields["instance"],
        "region": price_fields["region"],
        "class": (lambda v: v in INTERRUPTION_CLASSES, "one of " + ", ".join(INTERRUPTION_CLASSES)),
    }
    for i, entry in enumerate(intr):
        _check_fields(origin, ["interruption", i], entry, intr_fields)
        missing = [f for f in intr_fields if f not in entry]
        if missing:
            raise ValueError(f"{origin}: {format_json_path(['interruption', i])}: missing fields {missing}")
    quotas = {} if data.get("quotas") is None else data["quotas"]
    if not isinstance(quotas, Mapping):
        raise ValueError(f"{origin}: $.quotas = {quotas!r}: must be a table {{instance: max_count}}")
    for name, value in quotas.items():
        if name not in names:
            raise ValueError(f"{origin}: {format_json_path(['quotas', name])}: unknown instance type {name!r}")
        if not _nonneg_int(value):
            raise ValueError(f"{origin}: {format_json_path(['quotas', name])} = {value!r}: must be an integer >= 0")


def apply_overrides(catalog: Catalog, source: Mapping[str, Any] | str | os.PathLike[str]) -> Catalog:
    """A new Catalog with ``source`` applied over ``catalog`` (validated first)."""
    from srift.catalog import Catalog

    data, origin = load_overrides(source)
    try:
        validate_overrides(data, catalog, origin)
    except RecursionError:  # a deeply nested value, e.g. in the repr of an error message
        raise ValueError(f"{origin}: {_TOO_DEEP}") from None
    out = catalog.to_dict()
    label = f"override ({origin})"
    today = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    for key, entry in (data.get("gpus") or {}).items():
        if key in out["gpus"]:
            out["gpus"][key].update(entry)
        else:
            new = {"tf32_tflops": None, "fp16_tflops": None, "bf16_tflops": None, "source": label}
            new.update(entry)
            out["gpus"][key] = new
    for name, entry in (data.get("instances") or {}).items():
        if name in out["instances"]:
            inst = out["instances"][name]
            if "measured_network_gbytes_s" in entry and "measured_network_over" not in entry:
                # a new figure without its provenance: an earlier file's "loopback" does not describe it
                inst.pop("measured_network_over", None)
            inst.update(entry)
            inst["sources"] = [*inst.get("sources", []), label]
            if "regions" in entry:
                # Regions taken away: it cannot be bought there, so its prices and interruption
                # rates there go too (a price in this file's prices adds a region back).
                kept = set(entry["regions"])
                for table in ("on_demand", "spot", "spot_zones", "interruption"):
                    for region in [r for r in out.get(table, {}).get(name, {}) if r not in kept]:
                        del out[table][name][region]
        else:
            inst = {"family": name.split(".")[0], "intra_node_gbytes_s": None, "status": "current",
                    "regions": [], "sources": [label]}
            inst.update(entry)
            out["instances"][name] = inst
        for region in inst.get("regions", []):
            out["interruption"].setdefault(name, {}).setdefault(region, "unknown")
    # An instance's GPU memory follows its GPU (a new GPU type, or the GPU's memory overridden)
    # unless the instance entry gives its own.
    changed_gpus = {k for k, e in (data.get("gpus") or {}).items() if "memory_gib" in e}
    for name, inst in out["instances"].items():
        entry = (data.get("instances") or {}).get(name, {})
        if "gpu_memory_gib" in entry:
            continue
        if "gpu" in entry or inst["gpu"] in changed_gpus or (entry and "gpu_memory_gib" not in inst):
            inst["gpu_memory_gib"] = out["gpus"][inst["gpu"]]["memory_gib"]
    for entry in data.get("prices") or []:
        name, region, market = entry["instance"], entry["region"], entry["market"]
        rec: dict[str, Any] = {"usd_per_hour": float(entry["usd_per_hour"]),
                               "as_of": entry.get("as_of", today), "source": entry.get("source", label)}
        if market == "spot":
            rec["zone"] = entry.get("zone")
        out["on_demand" if market == "on-demand" else "spot"].setdefault(name, {})[region] = rec
        inst = out["instances"][name]
        if region not in inst["regions"]:  # a price there means it can be bought there
            inst["regions"] = sorted({*inst["regions"], region})
        out["interruption"].setdefault(name, {}).setdefault(region, "unknown")
    for entry in data.get("interruption") or []:
        out["interruption"].setdefault(entry["instance"], {})[entry["region"]] = entry["class"]
    out.setdefault("quotas", {}).update(data.get("quotas") or {})
    out["regions"] = sorted({*out["regions"], *(r for i in out["instances"].values() for r in i.get("regions", []))})
    return Catalog(out, origin=f"{catalog.origin} + {origin}")
