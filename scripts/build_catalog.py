#!/usr/bin/env python3
"""Build srift/data/catalog.json (schema "srift.catalog/1") from public EC2 facts.

Inputs
  <data>/ec2/instance_specs.csv           DescribeInstanceTypes facts (moto 5.2.1's bundled list)
  <data>/ec2/on_demand_prices_*.csv       on-demand USD/h per (type, region) (instances.vantage.sh)
  <data>/ec2/spot_prices_excerpt.csv      spot USD/h per availability zone (skypilot-catalog)
  srift/data/gpu_specs.csv                GPU peaks from vendor datasheets (cited per row), compute
                                          capability from NVIDIA's CUDA GPUs pages (SRC_CC)
  srift/data/instance_facts.csv           interconnect per type + types the specs table lacks

<data> defaults to ../shared/data relative to the repository root; override with --data.
The script prints what it kept and dropped, and the counts the issue asks for.

    python scripts/build_catalog.py [--data DIR] [--out PATH] [--date YYYY-MM-DD]
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
DEFAULT_OUT = REPO / "srift" / "data" / "catalog.json"
GPU_CSV = REPO / "srift" / "data" / "gpu_specs.csv"
FACTS_CSV = REPO / "srift" / "data" / "instance_facts.csv"
SCHEMA = REPO / "srift" / "schemas" / "catalog.schema.json"

# Commercial-partition regions only: GovCloud ("us-gov-west-1") needs a separate account and
# Local/Wavelength Zones ("us-east-1-atl-1") are not regions a training cluster is planned in.
REGION_RE = re.compile(r"^[a-z]{2}-[a-z]+-\d+$")
# Availability-zone IDs of a region ("use1-az4"); Local Zone IDs carry a city ("use1-atl2-az1").
AZ_ID_RE = re.compile(r"^[a-z]+\d+-az\d+$")

# Long provenance goes once into "tables"; each price row carries a short source label.
SRC_OD_SHORT = "instances.vantage.sh via tsaol/aws-gpu@77fcd9fe"
SRC_SPOT_SHORT = "skypilot-catalog v8 vms.csv@00148f2a"
SRC_SPECS = "instance_specs.csv: moto 5.2.1 bundled instance_types.json.gz (DescribeInstanceTypes/Offerings shape, Apache-2.0)"
SRC_ONDEMAND = "on_demand_prices_2026-01-21.csv: tsaol/aws-gpu@77fcd9fe from instances.vantage.sh (AWS Price List data)"
SRC_SPOT = "spot_prices_excerpt.csv: skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv@00148f2a (DescribeSpotPriceHistory snapshot)"
# Every GPU's compute capability (gpu_specs.csv, compute_capability): which PyTorch wheels carry
# kernels for it (srift/data/torch_wheels.json, srift.torch_support note "wheel runs GPU").
SRC_CC = ("compute_capability: https://developer.nvidia.com/cuda-gpus (T4 and newer) and "
          "https://developer.nvidia.com/cuda-legacy-gpus (K80, M60, V100)")
CC_RE = re.compile(r"^[1-9][0-9]?\.[0-9]$")
INTERRUPTION_NOTE = (
    "No public snapshot of the Spot Instance Advisor's interruption-frequency buckets exists; "
    "every (type, region) is 'unknown' until a user override supplies one. The planner treats "
    "'unknown' conservatively."
)


def _f(value: str | None) -> float | None:
    value = (value or "").strip()
    return float(value) if value else None


def _i(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(float(value)) if value else None


def _b(value: str | None) -> bool | None:
    value = (value or "").strip().lower()
    return None if not value else value in ("true", "1", "yes")


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def load_gpus(path: Path) -> dict[str, dict[str, Any]]:
    gpus: dict[str, dict[str, Any]] = {}
    for row in _read(path):
        if not row["source_url"].startswith("http"):
            raise ValueError(f"gpu_specs.csv: GPU {row['key']!r} has no citation URL")
        if not CC_RE.match(row.get("compute_capability") or ""):
            raise ValueError(f"gpu_specs.csv: GPU {row['key']!r}: compute_capability "
                             f"{row.get('compute_capability')!r} is not MAJOR.MINOR (e.g. '8.6')")
        gpus[row["key"]] = {
            "name": row["name"],
            "chip": row["chip"],
            "aliases": [a for a in row["aliases"].split("|") if a],
            "memory_gib": round(int(row["memory_mib"]) / 1024, 3),
            "fp32_tflops": _f(row["fp32_tflops"]),
            "tf32_tflops": _f(row["tf32_tflops"]),
            "fp16_tflops": _f(row["fp16_tflops"]),
            "bf16_tflops": _f(row["bf16_tflops"]),
            "memory_bandwidth_gbytes_s": _f(row["memory_bandwidth_gbytes_s"]),
            # the year the chip was announced: a learned prediction for a GPU newer than every
            # GPU the models learned from carries a new generation's lean (note "data edge")
            "launch_year": _i(row.get("launch_year")),
            # which PyTorch wheel variants carry kernels it runs (srift.torch_support)
            "compute_capability": row["compute_capability"],
            "source": row["source_url"],
            "note": row["note"] or None,
        }
    return gpus


def build(data: Path, date: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ec2 = data / "ec2"
    specs = {r["instance_type"]: r for r in _read(ec2 / "instance_specs.csv")}
    od_files = sorted(ec2.glob("on_demand_prices_*.csv"))
    if not od_files:
        raise FileNotFoundError(f"no on_demand_prices_*.csv under {ec2}")
    od_rows = _read(od_files[-1])
    # The price table's date is in its file name (on_demand_prices_YYYY-MM-DD.csv).
    m = re.search(r"(\d{4}-\d{2}-\d{2})", od_files[-1].name)
    od_as_of = m.group(1) if m else None
    od_source = SRC_ONDEMAND.replace("on_demand_prices_2026-01-21.csv", od_files[-1].name)
    spot_rows = _read(ec2 / "spot_prices_excerpt.csv")
    gpus = load_gpus(GPU_CSV)
    facts = _read(FACTS_CSV)
    report: dict[str, Any] = {"dropped": {}, "warnings": []}

    # Regions that price each type (commercial regions only).
    priced_regions: dict[str, set[str]] = {}
    for r in od_rows:
        if REGION_RE.match(r["region"]):
            priced_regions.setdefault(r["instance"], set()).add(r["region"])
        else:
            report["dropped"].setdefault("price rows outside commercial regions", 0)
            report["dropped"]["price rows outside commercial regions"] += 1

    instances: dict[str, dict[str, Any]] = {}
    for fact in facts:
        name = fact["instance_type"]
        gkey = fact["gpu_key"]
        if gkey not in gpus:
            raise ValueError(f"instance_facts.csv: {name}: gpu_key {gkey!r} not in gpu_specs.csv")
        sources = [fact["source_url"]]
        spec = specs.get(name)
        if spec is not None:
            sources.insert(0, SRC_SPECS)
            each = int(spec["accel_memory_mib_each"] or 0)
            gpu_mib = round(gpus[gkey]["memory_gib"] * 1024)
            if each and each != gpu_mib:
                report["warnings"].append(f"{name}: specs say {each} MiB/GPU, gpu {gkey} says {gpu_mib}")
            baseline, peak = _f(spec["baseline_bw_gbps_sum"]), _f(spec["peak_bw_gbps_sum"])
            entry = {
                "gpu_count": int(spec["accelerator_count"]),
                "vcpus": int(spec["vcpus"]),
                "memory_gib": round(int(spec["memory_mib"]) / 1024, 3),
                "network_performance": spec["network_performance"],
                "network_baseline_gbps": baseline,
                "network_peak_gbps": peak,
                "network_cards": int(spec["network_cards"]),
                "efa": spec["efa_supported"] == "True",
                "max_efa_interfaces": _i(spec["max_efa_interfaces"]),
                "regions": {x for x in spec["regions"].split("|") if REGION_RE.match(x)},
                # DescribeInstanceTypes' processor maker: "AWS" is a Graviton (arm64) host
                "arm64": spec["cpu"] == "AWS",
            }
        else:
            missing = [c for c in ("gpu_count", "vcpus", "memory_gib", "network_peak_gbps", "network_cards", "efa") if not fact[c]]
            if missing:
                raise ValueError(f"instance_facts.csv: {name} is not in instance_specs.csv and lacks {missing}")
            baseline, peak = _f(fact["network_baseline_gbps"]), _f(fact["network_peak_gbps"])
            entry = {
                "gpu_count": int(fact["gpu_count"]),
                "vcpus": int(fact["vcpus"]),
                "memory_gib": float(fact["memory_gib"]),
                "network_performance": fact["network_performance"],
                "network_baseline_gbps": baseline,
                "network_peak_gbps": peak,
                "network_cards": int(fact["network_cards"]),
                "efa": bool(_b(fact["efa"])),
                "max_efa_interfaces": _i(fact["max_efa_interfaces"]),
                "regions": set(),
            }
        # Offered where the offerings table lists it or where AWS prices it.
        regions = sorted(entry["regions"] | priced_regions.get(name, set()))
        if not regions:
            report["warnings"].append(f"{name}: offered in no commercial region; kept with no regions")
        if name in specs and priced_regions.get(name, set()) - entry["regions"]:
            sources.append(SRC_ONDEMAND + " (regions where it is priced)")
        instances[name] = {
            "family": name.split(".")[0],
            "gpu": gkey,
            "gpu_count": entry["gpu_count"],
            "gpu_memory_gib": gpus[gkey]["memory_gib"],
            "vcpus": entry["vcpus"],
            "memory_gib": entry["memory_gib"],
            "interconnect": fact["interconnect"],
            "interconnect_detail": fact["link"] or None,
            "intra_node_gbytes_s": _f(fact["intra_node_gbytes_s"]),
            # Sustained (baseline) bandwidth: a gradient allreduce runs for hours, past any burst.
            "network_gbps": entry["network_baseline_gbps"] if entry["network_baseline_gbps"] is not None else entry["network_peak_gbps"],
            "network_baseline_gbps": entry["network_baseline_gbps"],
            "network_peak_gbps": entry["network_peak_gbps"],
            "network_performance": entry["network_performance"],
            "efa": entry["efa"],
            "max_efa_interfaces": entry["max_efa_interfaces"],
            "network_cards": entry["network_cards"],
            "status": fact["status"],
            "regions": regions,
            "sources": sources,
            "note": fact["note"] or None,
        }
        if entry.get("arm64"):  # absent: x86_64 (srift.catalog.InstanceType.cpu_arch)
            instances[name]["cpu_arch"] = "arm64"
        if entry["gpu_count"] < 1:
            raise ValueError(f"{name}: gpu_count {entry['gpu_count']} < 1")

    # Types the shared tables list with NVIDIA GPUs that the catalog leaves out, and why.
    for name, spec in specs.items():
        if name not in instances and "NVIDIA" in spec["accelerator"]:
            why = "fractional GPU (accelerator_count 0)" if spec["accelerator_count"] == "0" else "not in instance_facts.csv"
            report["dropped"][name] = why
    for name in sorted(priced_regions):
        if name not in instances and name not in specs and any(
            r["gpu"].startswith("NVIDIA") for r in od_rows if r["instance"] == name
        ):
            report["dropped"][name] = "NVIDIA GPU type priced but not curated (GRID K520 g2: no CUDA support in current PyTorch)"

    on_demand: dict[str, dict[str, Any]] = {}
    for r in od_rows:
        name, region = r["instance"], r["region"]
        if name not in instances or not REGION_RE.match(region):
            continue
        price = _f(r["on_demand_usd_hr"])
        if price is None or price <= 0:
            continue
        prev = on_demand.setdefault(name, {}).get(region)
        if prev is not None and prev["usd_per_hour"] != price:
            report["warnings"].append(f"{name}/{region}: two on-demand prices {prev['usd_per_hour']} and {price}; kept the lower")
            price = min(price, prev["usd_per_hour"])
        on_demand[name][region] = {"usd_per_hour": price, "as_of": od_as_of, "source": SRC_OD_SHORT}

    spot_zones: dict[str, dict[str, list[dict[str, Any]]]] = {}
    spot_rows_kept = 0
    for r in spot_rows:
        name, region, zone = r["InstanceType"], r["Region"], r["AvailabilityZone"]
        price = _f(r["SpotPrice"])
        if name not in instances or price is None or not REGION_RE.match(region):
            why = "spot rows with an empty SpotPrice" if price is None else "spot rows for other types/regions"
            report["dropped"][why] = report["dropped"].get(why, 0) + 1
            continue
        spot_zones.setdefault(name, {}).setdefault(region, []).append({
            "zone": zone,
            "usd_per_hour": price,
            "local_zone": not AZ_ID_RE.match(zone),
            # The source records no timestamp for its snapshot: say so rather than invent one.
            "as_of": None,
            "source": SRC_SPOT_SHORT,
        })
        spot_rows_kept += 1
    spot: dict[str, dict[str, Any]] = {}
    for name, by_region in spot_zones.items():
        for region, rows in by_region.items():
            rows.sort(key=lambda z: (z["usd_per_hour"], z["zone"]))
            regular = [z for z in rows if not z["local_zone"]] or rows
            best = regular[0]
            spot.setdefault(name, {})[region] = {
                "usd_per_hour": best["usd_per_hour"], "zone": best["zone"],
                "as_of": best["as_of"], "source": best["source"],
            }
            if region not in instances[name]["regions"]:
                instances[name]["regions"] = sorted({*instances[name]["regions"], region})

    interruption = {name: {region: "unknown" for region in inst["regions"]} for name, inst in instances.items()}
    regions = sorted({r for inst in instances.values() for r in inst["regions"]})

    catalog = {
        "schema": "srift.catalog/1",
        "generated_at": date,
        "generator": "scripts/build_catalog.py",
        "tables": [
            {"name": "gpus", "source": "srift/data/gpu_specs.csv: NVIDIA datasheets, one URL per row; " + SRC_CC, "as_of": date},
            {"name": "instances", "source": SRC_SPECS + "; srift/data/instance_facts.csv: AWS instance pages, one URL per row", "as_of": date},
            {"name": "on_demand", "source": od_source, "as_of": od_as_of},
            {"name": "spot", "source": SRC_SPOT, "as_of": None, "note": "partial: p3, p3dn, p4d, p4de, p5, g4dn.4xlarge/12xlarge only; snapshot date not recorded by the source"},
            {"name": "interruption", "source": "none", "as_of": None, "note": INTERRUPTION_NOTE},
        ],
        "gpus": gpus,
        "instances": dict(sorted(instances.items())),
        "regions": regions,
        "on_demand": {k: dict(sorted(v.items())) for k, v in sorted(on_demand.items())},
        "spot": {k: dict(sorted(v.items())) for k, v in sorted(spot.items())},
        "spot_zones": {k: dict(sorted(v.items())) for k, v in sorted(spot_zones.items())},
        "interruption": interruption,
        "quotas": {},
    }
    report["counts"] = {
        "instance_types": len(instances),
        "current_types": sum(1 for i in instances.values() if i["status"] == "current"),
        "retired_types": sum(1 for i in instances.values() if i["status"] == "retired"),
        "gpus": len(gpus),
        "regions": len(regions),
        "offered_pairs": sum(len(i["regions"]) for i in instances.values()),
        "priced_pairs": sum(len(v) for v in on_demand.values()),
        "spot_rows": spot_rows_kept,
        "spot_region_pairs": sum(len(v) for v in spot.values()),
    }
    return catalog, report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding ec2/ (default: ../shared/data)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--date", default=_dt.datetime.now(_dt.timezone.utc).date().isoformat(), help="generation date to record")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    catalog, report = build(args.data, args.date)
    try:  # validate what we ship against the schema other code loads it with
        import jsonschema

        jsonschema.validate(catalog, json.loads(SCHEMA.read_text()))
    except ImportError:  # pragma: no cover
        print("warning: jsonschema not installed; catalog not validated", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(catalog, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for key, value in report["counts"].items():
            print(f"{key:>18}: {value}")
        for name, why in sorted(report["dropped"].items()):
            print(f"  dropped {name}: {why}")
        for warning in report["warnings"]:
            print(f"  warning: {warning}")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
