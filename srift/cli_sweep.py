"""``srift sweep SPEC``: many models x constraints x regions -> one table (registered by
srift/cli.py). See srift/sweep.py for the spec.

Examples::

    srift sweep sweep.yaml -o results.csv            # parallel over processes, resumable
    srift sweep sweep.yaml -o results.csv --jobs 1   # one worker
    srift sweep sweep.yaml -o results.csv --engine ray --ray-address auto
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from srift import jsonout

__all__ = ["register", "cmd_sweep"]


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    from srift import report
    from srift.sweep import load_spec, run_sweep, tasks

    spec = load_spec(args.spec)
    result = run_sweep(spec, args.output, engine=args.engine, jobs=args.jobs, ray_address=args.ray_address,
                       progress=not args.json and not args.quiet, limit=args.limit)
    if args.json:
        print(jsonout.dumps(result.to_dict()))
        sys.stdout.write("\n")
    else:
        print(f"{result.output}: {result.rows} rows ({result.computed} computed now, {result.skipped} already "
              f"there, {result.failed} failed) in {result.seconds:.1f} s on {result.engine}")
        if result.failed:
            print(f"{result.failed} rows failed: see their `error` column; they are retried on the next run")
        if not args.quiet and result.rows:
            print(_summary(result.output, report, {t["key"] for t in tasks(spec)}))
    return 0


def _summary(path: str, report: Any, keys: set[str]) -> str:
    """The cheapest found plan per model among this spec's rows (``keys``) of the output table:
    rows there from other specs, or from before a profile or catalog was edited, are left out."""
    import csv

    if not path.endswith(".csv"):
        return ""
    best: dict[str, dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("key") not in keys or row.get("found") != "True" or not row.get("total_usd"):
                continue
            cur = best.get(row["model"])
            if cur is None or float(row["total_usd"]) < float(cur["total_usd"]):
                best[row["model"]] = row
    if not best:
        return "no row found a plan"
    rows = [(m, r["constraint"], r["plan"], r["region"], report.hours(float(r["total_hours"])),
             report.usd(float(r["total_usd"]))) for m, r in sorted(best.items())]
    return "cheapest plan per model:\n" + report.table(rows, ["model", "constraint", "plan", "region", "time",
                                                              "total"], right=[4, 5])


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep", help="many models x constraints x regions -> one table (CSV/Parquet), resumable",
        description="Runs `srift recommend` for every combination in a YAML spec and writes one row per "
                    "combination. Rows already in the output are skipped, so rerunning resumes.",
        epilog="spec keys: models, global_batch, iterations, constraints (required); schema (srift.sweep/1), "
               "device, batch_size, regions, markets, types, exclude, max_types, max_instances_per_type, precision, "
               "max_accumulation_steps, max_local_batch, torch, catalog, catalog_overrides, output. Entries of an axis "
               "must differ. See the docstring of srift/sweep.py.")
    p.add_argument("spec", help="sweep spec (YAML or JSON)")
    p.add_argument("-o", "--output", default=None, help="results .csv (or .parquet with pyarrow); "
                   "default: the spec's `output`")
    p.add_argument("--engine", choices=("processes", "ray"), default="processes",
                   help="processes (default, this machine) or ray (an existing Ray cluster)")
    p.add_argument("--jobs", type=_jobs, default=None, help="worker processes (default: CPUs; 0: in this process)")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: auto)")
    p.add_argument("--limit", type=_jobs, default=None, help="compute at most this many new rows, then stop")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--json", action="store_true", help="print what the run did as JSON")
    p.set_defaults(func=cmd_sweep)
