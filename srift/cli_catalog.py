"""``srift catalog show | refresh | diff`` (registered into the main CLI by srift/cli.py).

Also exports ``add_catalog_arguments`` / ``catalog_from_args`` so other subcommands
(predict, recommend) accept the same ``--catalog`` and ``--catalog-overrides`` options.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from typing import Any

from srift import jsonout
from srift.catalog import Catalog, diff_catalogs

__all__ = ["register", "add_catalog_arguments", "catalog_from_args", "apply_override_args", "cmd_show", "cmd_refresh", "cmd_diff"]


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """``--catalog PATH`` (default: bundled snapshot) and ``--catalog-overrides FILE``."""
    parser.add_argument("--catalog", metavar="PATH", default=None,
                        help="catalog JSON to use (default: the bundled snapshot)")
    parser.add_argument("--catalog-overrides", metavar="FILE", action="append", default=None,
                        help="JSON or TOML file of overrides (schema srift.catalog-overrides/1); "
                             "repeat to apply several in order, a later file winning")


def catalog_from_args(args: argparse.Namespace, *, overrides: bool = True) -> Catalog:
    path = getattr(args, "catalog", None)
    cat = Catalog.load(path) if path else Catalog.default()
    return apply_override_args(cat, args) if overrides else cat


def apply_override_args(cat: Catalog, args: argparse.Namespace) -> Catalog:
    """Every ``--catalog-overrides`` file over ``cat``, in the order given."""
    for path in getattr(args, "catalog_overrides", None) or []:
        cat = cat.with_overrides(path)
    return cat


def _age_hours(text: str) -> float:
    """--max-age-hours: a finite number of hours >= 0 (NaN and -1 were taken as given)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of hours, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number of hours >= 0, got {text!r}")
    return value


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{v:.0f}"
    return str(v)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def cmd_show(args: argparse.Namespace) -> int:
    cat = catalog_from_args(args)
    gpu_keys: set[str] | None = None
    if args.gpu:
        gpu_keys = set(cat.resolve_gpu(args.gpu))
        if not gpu_keys:
            raise ValueError(f"--gpu = {args.gpu!r}: matches no GPU in the catalog (known: {', '.join(cat.gpu_keys())})")
    families = set(args.family or [])
    unknown = sorted(families - {t.family for t in cat.instance_types()})
    if unknown:
        raise ValueError(f"--family = {', '.join(map(repr, unknown))}: no instance type in the catalog is of "
                         f"that family (known: {', '.join(sorted({t.family for t in cat.instance_types()}))})")
    types = [t for t in cat.instance_types(args.region)
             if (not families or t.family in families) and (gpu_keys is None or t.gpu in gpu_keys)
             and (args.all or t.status != "retired")]
    if args.json:
        # A listing, not a catalog: its own schema id, so nothing mistakes it for one.
        out: dict[str, Any] = {"schema": "srift.catalog-show/1", "generated_at": cat.generated_at,
                               "refreshed_at": cat.refreshed_at, "region": args.region, "instances": []}
        for t in types:
            d = t.to_dict()
            d["gpu_spec"] = cat.gpu(t.gpu).to_dict()
            if args.region:
                d["on_demand"] = cat.price_info(t.name, args.region, "on-demand")
                d["spot"] = cat.price_info(t.name, args.region, "spot")
                d["interruption"] = cat.interruption_class(t.name, args.region)
            out["instances"].append(d)
        print(jsonout.dumps(out, indent=1))
        return 0
    # CC: the GPU's CUDA compute capability, with an arm64 host named (which PyTorch wheels run
    # it: srift.torch_support)
    headers = ["instance", "GPUs", "CC", "GiB/GPU", "vCPU", "RAM GiB", "link", "GB/s", "net Gbps", "EFA", "status"]
    headers += ["on-demand $/h", "spot $/h", "interrupt"] if args.region else ["regions"]
    rows = []
    for t in types:
        cc = cat.gpu(t.gpu).compute_capability or "-"
        row = [t.name, f"{t.gpu_count}x {t.gpu}", cc if t.cpu_arch == "x86_64" else f"{cc} {t.cpu_arch}",
               _fmt(cat.gpu(t.gpu).memory_gib, 1), str(t.vcpus),
               _fmt(t.memory_gib, 0), t.interconnect, _fmt(t.intra_node_gbytes_s, 1), _fmt(t.network_gbps, 1),
               "yes" if t.efa else "no", t.status]
        if args.region:
            row += [_fmt(cat.price(t.name, args.region, "on-demand"), 4),
                    _fmt(cat.price(t.name, args.region, "spot"), 4), cat.interruption_class(t.name, args.region)]
        else:
            row.append(str(len(t.regions)))
        rows.append(row)
    print(_table(headers, rows))
    stamp = f"refreshed {cat.refreshed_at}" if cat.refreshed_at else f"generated {cat.generated_at}"
    print(f"\n{len(types)} instance types; catalog {stamp}, {cat.describe_dates()} ({cat.origin})")
    return 0


def _some(names: list[str], shown: int = 8) -> str:
    """The first few names of a long list, and how many there are (``--json`` lists them all)."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])}, ... ({len(names)} in all; --json lists them)"


def cmd_refresh(args: argparse.Namespace) -> int:
    import boto3
    import botocore.exceptions

    from srift.catalog_aws import CatalogRefreshError, StaleCatalogWarning, refresh

    try:
        session = boto3.session.Session(profile_name=args.profile) if args.profile else None
    except botocore.exceptions.ProfileNotFound:
        raise ValueError(f"--profile {args.profile!r}: no such AWS profile in the AWS config and credentials "
                         "files (aws configure list-profiles lists them)") from None
    # Refresh the catalog itself and lay the user's overrides over the result: live public prices
    # must not replace negotiated ones, and the shared cache must not hold them.
    base = catalog_from_args(args, overrides=False)
    regions = None
    if args.regions and args.regions != ["all"]:
        regions = [r for chunk in args.regions for r in chunk.split(",") if r]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            catalog, report = refresh(
                regions, session, cache=not args.no_cache, progress=not args.json, base=base,
                endpoint_url=args.endpoint_url, max_attempts=args.max_attempts,
                max_age_s=args.max_age_hours * 3600.0, fallback=not args.no_fallback,
            )
        except CatalogRefreshError as exc:
            print(f"srift catalog refresh: error: {exc}", file=sys.stderr)
            return 2
    for w in caught:
        if issubclass(w.category, (StaleCatalogWarning, RuntimeWarning)):
            print(f"warning: {w.message}", file=sys.stderr)
    catalog = apply_override_args(catalog, args)
    if args.out:
        catalog.save(args.out)
        report.cache_path = report.cache_path or None
    if args.json:
        print(jsonout.dumps(report.to_dict(), indent=1))
    else:
        if report.fallback:
            print(f"used an older catalog: {report.fallback}")
        else:
            print(f"refreshed {len(report.regions)} regions at {report.fetched_at}"
                  f" ({len(report.from_cache)} from cache)")
            print(f"  instance types offered: {report.instance_types}; offered (type, region) pairs: "
                  f"{report.offered_pairs}; on-demand prices: {report.on_demand_prices}; spot rows: {report.spot_rows}")
            for label, names in (("skipped (not enabled for this account)", report.skipped_regions),
                                 ("no longer offered there (prices dropped)", report.withdrawn),
                                 ("no spot price now (old spot prices dropped)", report.spot_withdrawn),
                                 ("offered in no known region now (status 'unlisted')", report.unlisted)):
                if names:
                    print(f"  {label}: {_some(names)}")
            if report.new_types:
                print(f"  new types: {', '.join(report.new_types)}")
            if report.cache_path:
                print(f"  cached at {report.cache_path}")
        if getattr(args, "catalog_overrides", None):
            print(f"  overrides applied over the refreshed catalog: {', '.join(args.catalog_overrides)}")
        if args.out:
            print(f"  wrote {args.out}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    old, new = Catalog.load(args.old), Catalog.load(args.new)
    d = diff_catalogs(old, new)
    if args.json:
        print(jsonout.dumps(d.to_dict(), indent=1))
        return 0
    if d.empty:
        print("no differences")
        return 0
    for name in d.added_instances:
        print(f"+ instance {name}")
    for name in d.removed_instances:
        print(f"- instance {name}")
    for name, changes in d.changed_instances.items():
        for k, (a, b) in changes.items():
            print(f"~ {name}.{k}: {a!r} -> {b!r}")
    for key in d.added_gpus:
        print(f"+ gpu {key}")
    for key in d.removed_gpus:
        print(f"- gpu {key}")
    for key, changes in d.changed_gpus.items():
        for k, (a, b) in changes.items():
            print(f"~ gpu {key}.{k}: {a!r} -> {b!r}")
    for r in d.added_regions:
        print(f"+ region {r}")
    for r in d.removed_regions:
        print(f"- region {r}")
    for market, name, region, a, b in d.price_changes:
        print(f"$ {market} {name} {region}: {_fmt(a, 4)} -> {_fmt(b, 4)}")
    for name, region, a, b in d.interruption_changes:
        print(f"! spot interruption {name} {region}: {a or '-'} -> {b or '-'}")
    for name, a, b in d.quota_changes:
        print(f"# quota {name}: {'-' if a is None else a} -> {'-' if b is None else b}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``catalog`` with ``show``, ``refresh`` and ``diff`` to the main parser's subparsers."""
    p = subparsers.add_parser("catalog", help="show, refresh or compare the EC2 catalog",
                              description="The EC2 facts and prices srift plans with.")
    sub = p.add_subparsers(dest="catalog_command", metavar="{show,refresh,diff}")
    sub.required = True

    show = sub.add_parser("show", help="list instance types (filter by family, GPU, region)")
    add_catalog_arguments(show)
    show.add_argument("--family", action="append", help="instance family, e.g. p3 (repeatable)")
    show.add_argument("--gpu", help="GPU key or name, e.g. V100, A100-80GB, 'NVIDIA L4'")
    show.add_argument("--region", help="only types offered here; adds prices")
    show.add_argument("--all", action="store_true", help="include retired types")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=cmd_show)

    ref = sub.add_parser("refresh", help="update facts and prices live from AWS (boto3)")
    add_catalog_arguments(ref)
    ref.add_argument("--regions", nargs="+", metavar="REGION",
                     help="regions to refresh (space or comma separated; default/all: every catalog region)")
    ref.add_argument("--profile", help="AWS profile (default: boto3's credential chain)")
    ref.add_argument("--endpoint-url", help="custom EC2/Pricing endpoint (testing)")
    ref.add_argument("--max-attempts", type=int, default=8, help="adaptive-retry attempts per call")
    ref.add_argument("--max-age-hours", type=_age_hours, default=0.0,
                     help="reuse cached regions younger than this (default 0: fetch everything)")
    ref.add_argument("--no-cache", action="store_true", help="neither read nor write the on-disk cache")
    ref.add_argument("--no-fallback", action="store_true", help="fail instead of using an older catalog")
    ref.add_argument("--out", metavar="PATH", help="also write the refreshed catalog here")
    ref.add_argument("--json", action="store_true", help="print the refresh report as JSON")
    ref.set_defaults(func=cmd_refresh)

    diff = sub.add_parser("diff", help="what changed between two catalog files")
    diff.add_argument("old")
    diff.add_argument("new")
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=cmd_diff)
    return p


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m srift.cli_catalog show ...``) until srift/cli.py wires it."""
    parser = argparse.ArgumentParser(prog="srift")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["catalog", *(argv if argv is not None else sys.argv[1:])])
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"srift catalog: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
