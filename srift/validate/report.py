"""Predicted vs measured: absolute percentage error, summaries, tables, the measurements file."""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from srift.files import read_input_text

MEASUREMENT_SCHEMA = "srift.measurements/1"
REPORT_SCHEMA = "srift.validate-report/1"


def ape(predicted: float, measured: float) -> float:
    """Absolute percentage error of a prediction, in percent: 100 * |p - m| / m."""
    for name, v in (("predicted", predicted), ("measured", measured)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name}: expected a finite number, got {v!r}")
    if measured <= 0:
        raise ValueError(f"measured: expected a positive time, got {measured!r}")
    return 100.0 * abs(predicted - measured) / measured


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 1] (numpy's default method)."""
    if not values:
        raise ValueError("percentile of an empty list")
    if not 0 <= q <= 1:
        raise ValueError(f"q: expected a fraction in [0, 1], got {q!r}")
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(math.floor(k))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(apes: Iterable[float]) -> dict[str, Any]:
    xs = [float(a) for a in apes if a is not None and math.isfinite(a)]
    if not xs:
        return {"runs": 0, "median_ape": None, "p90_ape": None, "mean_ape": None, "max_ape": None}
    return {"runs": len(xs), "median_ape": percentile(xs, 0.5), "p90_ape": percentile(xs, 0.9),
            "mean_ape": sum(xs) / len(xs), "max_ape": max(xs)}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ValidationRun:
    """One cluster: what srift predicted and what real DDP training measured."""

    model: str
    cluster: str                        # srift cluster text (emulated instance types)
    global_batch: int
    local_batches: list[int]            # per rank
    hosts: list[dict[str, Any]]         # per host: nic_gbps, ranks, speed classes, address/netns
    mode: str                           # "netns" | "loopback"
    launcher: str
    measured_iteration_s: float         # median over timed iterations of the slowest rank
    measured_p10_s: float
    measured_p90_s: float
    predicted_iteration_s: float
    ape: float
    predicted: dict[str, Any]           # compute_s, comm_s, exposed_comm_s, optimizer_s, bottleneck, ...
    measured: dict[str, Any]            # per-rank summaries, probes
    iterations: int
    warmup: int
    latency_floor_s: float | None = None
    label: str = ""
    predicted_inrun_s: float | None = None  # compute anchored on the run's own no_sync iterations
    ape_inrun: float | None = None
    notes: list[str] = field(default_factory=list)
    recorded_at: str = field(default_factory=_now)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ValidationReport:
    runs: list[ValidationRun]
    notes: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return summarize(r.ape for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "runs": [r.to_dict() for r in self.runs], "summary": self.summary,
                "summary_inrun": summarize(r.ape_inrun for r in self.runs if r.ape_inrun is not None),
                "failures": self.failures, "notes": self.notes}

    def format_table(self) -> str:
        head = ["run", "cluster", "NIC Gbps", "local batches", "measured s (p10-p90)", "predicted s", "APE %",
                "in-run anchor s", "APE %"]
        rows = []
        for r in self.runs:
            nics = sorted({h.get("nic_gbps") for h in r.hosts}, key=lambda x: (x is None, x or 0))
            rows.append([r.label or r.model, r.cluster, "/".join("lo" if n is None else f"{n:g}" for n in nics),
                         ",".join(map(str, r.local_batches)),
                         f"{r.measured_iteration_s:.3f} ({r.measured_p10_s:.3f}-{r.measured_p90_s:.3f})",
                         f"{r.predicted_iteration_s:.3f}", f"{r.ape:.1f}",
                         "-" if r.predicted_inrun_s is None else f"{r.predicted_inrun_s:.3f}",
                         "-" if r.ape_inrun is None else f"{r.ape_inrun:.1f}"])
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        s = self.summary
        if s["runs"]:
            lines.append(f"\n{s['runs']} runs: median APE {s['median_ape']:.1f}%, p90 APE {s['p90_ape']:.1f}%, "
                         f"mean {s['mean_ape']:.1f}%, max {s['max_ape']:.1f}%")
            inrun = summarize(r.ape_inrun for r in self.runs if r.ape_inrun is not None)
            if inrun["runs"]:
                lines.append(f"diagnostic, compute anchored in-run (no_sync): median APE {inrun['median_ape']:.1f}%, "
                             f"p90 APE {inrun['p90_ape']:.1f}%")
        for f in self.failures:
            lines.append(f"FAILED {f.get('label') or f.get('model')}: {f.get('error')}")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)


def append_measurements(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> int:
    """Append records (JSON lines, each with ``schema`` = srift.measurements/1); returns the count."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        raise ValueError(f"measurements path {str(p)!r}: folder {str(p.parent)!r} does not exist")
    n = 0
    with open(p, "a", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps({"schema": MEASUREMENT_SCHEMA, **rec}, sort_keys=True) + "\n")
            n += 1
    return n


def load_measurements(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a measurements file; ValueError names the line of a malformed or unknown record."""
    out = []
    for i, line in enumerate(read_input_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{i}: not valid JSON ({exc})") from exc
        if not isinstance(rec, dict) or rec.get("schema") != MEASUREMENT_SCHEMA:
            raise ValueError(f"{path}:{i}: schema must be {MEASUREMENT_SCHEMA!r}, got "
                             f"{rec.get('schema') if isinstance(rec, dict) else rec!r}")
        out.append(rec)
    return out
