"""The p10-p90 band of a multi-GPU iteration whose links srift models rather than learns or measures.

Note "scaling band". Given one GPU's step, the simulator predicts a multi-GPU iteration from
the model's gradient buckets and the links' nominal bandwidths (v0 efficiencies; the learned
PCIe line on PCIe 3.0, which carries a band of its own: srift.learn.pcie_link). Until now the
band of such a prediction was the compute band alone (x0.97-x1.03 for a measured GPU), as if
the links and the hosts around them were known exactly. Measured multi-GPU steps say
otherwise. log(measured / predicted), each step predicted from its own 1-GPU step, nothing
fitted on it (p10 and p90 factors; bench/accuracy.py interval_coverage/scaling_band/*):
                                    steps    p10     p90
  one instance   Lambda's hosts       315    x0.94   x1.14   (NVLink, NVSwitch, PCIe 4.0/5.0)
                 Sia azure            473    x0.92   x2.47   (8x V100 NVLink VM)
                 Sia dgx              872    x0.87   x1.38   (DGX-A100)
  several        Sia azure          2,306    x0.94   x2.87
  instances      Sia dgx            4,300    x0.88   x1.44
                 Sia rtx            1,897    x0.89   x1.24   (PCIe line held out)
The error grows with the GPUs sharing an instance (a host shared by eight ranks: azure's steps
grow ~0.1 s per GPU on the node whatever the node count, dgx's yolov3 and deepspeech2 ~1.3-2x
at 2+ GPUs per node), so the band is kept by scope (one instance, or several: the network in
the ring) and by GPUs per instance (BUCKETS). Within a cell every source weighs the same
(balanced_quantiles): dgx's 4,300 steps do not outvote Lambda's 315.
Whether a held-out source lands in the band fitted on the others (coverage_by_source) is the
honest check; share of each source's steps inside p10-p90 (calibrated: 0.8), beside the compute
band alone (x0.97-x1.03), which is what these predictions carried before:
                        one instance               several instances
  held-out source   other sources  compute only   other sources  compute only
  Lambda                0.92           0.47              -             -
  dgx                   0.76           0.21            0.80          0.18
  rtx                     -              -             0.80          0.21
  azure                 0.44           0.09            0.34          0.05
It is poor where one source behaves unlike the rest: half of azure's steps, and 60% over several
instances, land above the band of the others; and the band that includes azure is wider than
dgx's or Lambda's own steps need (few of them above it). With three sources per cell the shipped
band pools all, so a prediction on an NVLink instance says what measured NVLink clusters did,
azure included. The shipped band (p10-p90 factors):
  GPUs per instance          1              2              3-4            5+
  one instance               -        x0.83-x1.26    x0.88-x1.44    x0.91-x2.09
  several instances    x0.83-x1.23    x0.86-x1.43    x0.88-x1.53    x0.90-x2.35
Instances with more than 8 GPUs (p2.16xlarge) take the 5+ cell: no measured host had more.
Tried and not kept: a cell per exact GPU count (1-7, 8+), since EC2 plans whole instances of 1, 2,
4 or 8 GPUs while Sia's 5-7-rank placements are partial nodes. Held-out coverage moved within
0.08 either way (dgx one instance 0.76 -> 0.67, azure 0.44 -> 0.47), so the data does not prefer
it; its 8-GPU cells alone are wider (one instance x0.94-x2.39, several x0.87-x2.78) and smaller
(277 and 1,815 steps), and the buckets keep the larger cells.
Probed links (`srift probe-network` measured the intra-node link of a lone instance, or the
network of every instance type of several) take the probed_* band: Sia's steps with the links
calibrated on the other models' steps (srift.learn.comm note "probe calibration"; the intra-node
probe on as many GPUs as the step has per node). That emulation fits the links to whole
iterations, so it absorbs some host contention a real allreduce probe would not see: the probed
band may be narrower than a real probe earns. Shipped: one instance x0.81-x1.26 (2 GPUs) to
x0.87-x1.51 (5+); several x0.66-x1.14 (2) to x0.81-x1.56 (5+). Held out by source: dgx 91% / 88%
inside, rtx 86% / 98%, azure 58% / 33% (one instance / several).
The band is of whole steps predicted from a *measured* 1-GPU step; where the 1-GPU compute is
itself predicted, its band and this one add in quadrature in log space (srift.prediction: the
two errors are taken as independent). Checked where the data allows it, Lambda's host steps with
nothing measured (the 1-GPU time from the no-measurement model held out by chip, the other
sources' band; bench interval_coverage/scaling_band_predicted_compute/lambda): quadrature holds
91.6% of 311 steps (1.3% above p90), the widest of the two bands 88.1% (4.5% above). Both over-
cover there, because the other sources' band is wide for Lambda's well-behaved hosts, so the data
does not choose; quadrature is kept for the independence it assumes by construction.
The band widens the prediction's p10-p90, never narrows it. It does not
apply where the iteration itself is measured: a whole instance measured by the profile (its
own band, note "instance anchor"), or the learned PCIe line inside one instance (its held-out
band; across several instances its network takes this band).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from srift.learn.loader import LOG_FACTOR_RULE, is_log_factor
from srift.learn.workloads import WorkloadInfo

__all__ = ["BUCKETS", "SCOPES", "ScalingResidual", "bucket_of", "balanced_quantiles", "scaling_residuals",
           "probed_residuals",
           "fit_scaling_band", "coverage_by_source", "validate_scaling_band", "band_factors"]

# (key, fewest, most GPUs per instance; None: no upper bound)
BUCKETS = (("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5+", 5, None))
SCOPES = ("single_instance", "multi_instance", "probed_single_instance", "probed_multi_instance")
_QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True)
class ScalingResidual:
    scope: str               # one of SCOPES
    gpus_per_instance: int   # the most ranks on one instance of the step
    source: str              # lambda | a Sia site (azure, dgx, rtx)
    log_residual: float      # log(measured / predicted) iteration


def bucket_of(gpus_per_instance: int) -> str:
    """The BUCKETS key of an instance with `gpus_per_instance` ranks."""
    if not isinstance(gpus_per_instance, (int, np.integer)) or isinstance(gpus_per_instance, bool) \
            or gpus_per_instance < 1:
        raise ValueError(f"gpus_per_instance: expected a GPU count >= 1, got {gpus_per_instance!r}")
    for key, lo, hi in BUCKETS:
        if gpus_per_instance >= lo and (hi is None or gpus_per_instance <= hi):
            return key
    raise AssertionError("BUCKETS cover every count >= 1")


def balanced_quantiles(values: Any, sources: Any, qs: tuple[float, ...] = _QUANTILES) -> list[float]:
    """Quantiles of `values` with every source weighing the same in total (each value weighs
    1 / the values of its source); the q-quantile is the smallest value whose cumulative weight
    reaches q of the whole."""
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(sources)
    if v.ndim != 1 or v.size == 0 or s.shape != v.shape:
        raise ValueError(f"values: expected a non-empty 1-D array with one source each, got {v.shape} and {s.shape}")
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        raise ValueError(f"values[{int(bad[0])}]: expected a finite value, got {float(v[bad[0]])!r}")
    counts = Counter(s.tolist())
    weights = np.array([1.0 / counts[x] for x in s.tolist()])
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(weights[order]) / weights.sum()
    out = []
    for q in qs:
        if not isinstance(q, (int, float, np.floating)) or isinstance(q, bool) or not 0.0 <= q <= 1.0:
            raise ValueError(f"qs: expected quantiles in [0, 1], got {q!r}")
        i = min(int(np.searchsorted(cum, q - 1e-12)), v.size - 1)
        out.append(float(v[order][i]))
    return out


def scaling_residuals(workloads: dict[str, WorkloadInfo]) -> list[ScalingResidual]:
    """Held-out residuals of every measured multi-GPU step the band is made of: Lambda's
    single-host rows at v0 links; Sia's single-node placements on its NVLink/NVSwitch clusters
    at v0 links; Sia's multi-node placements as the engine predicts them (v0 links, the PCIe
    line fitted on the other PCIe cluster)."""
    from srift.learn.comm import SIA_LINKS, V0_EFFICIENCY, build_cases, site, v0_sim
    from srift.learn.datasets import sia_rows
    from srift.learn.host_scaling import host_steps, lambda_host_cases
    from srift.learn.pcie_link import calibration_points, held_out_pcie_steps

    out = []
    hosts = lambda_host_cases()
    pred = host_steps(hosts, workloads, lambda c: c.nominal_gbytes_s * 1e9 * V0_EFFICIENCY[c.interconnect])
    out += [ScalingResidual("single_instance", c.gpus, "lambda", math.log(c.step_time / p)) for c, p in zip(hosts, pred)]
    cases = build_cases(sia_rows())
    held = held_out_pcie_steps(cases, workloads, calibration_points(cases, workloads))
    for c, h in zip(cases, held):
        counts = [int(ch) for ch in c.placement]
        multi = len(counts) > 1
        pcie = SIA_LINKS[c.cluster].interconnect == "pcie"
        if not multi and pcie:
            continue  # the learned PCIe line inside one instance has its own band
        if pcie and math.isnan(h):
            continue  # no other PCIe cluster to hold the line out with
        p = h if pcie else v0_sim(c, workloads[c.workload])
        out.append(ScalingResidual("multi_instance" if multi else "single_instance", max(counts), site(c.cluster),
                                   math.log(c.step_time / p)))
    return out + probed_residuals(cases, workloads)


def probed_residuals(cases: list[Any], workloads: dict[str, WorkloadInfo]) -> list[ScalingResidual]:
    """Residuals of Sia's multi-GPU steps with the links calibrated as `srift probe-network`
    would measure them (srift.learn.comm note "probe calibration": on the other models' steps),
    the intra-node probe on as many GPUs as the step has per node."""
    from srift.learn.comm import probe_calibrated_steps, site

    per_node = np.array([max(int(ch) for ch in c.placement) for c in cases])
    pred = np.full(len(cases), np.nan)
    for g in sorted(set(per_node.tolist())):
        steps, _ = probe_calibrated_steps(cases, workloads, None if g == 1 else g)
        pred[per_node == g] = steps[per_node == g]
    return [ScalingResidual("probed_multi_instance" if len(c.placement) > 1 else "probed_single_instance", int(g),
                            site(c.cluster), math.log(c.step_time / p))
            for c, g, p in zip(cases, per_node, pred) if not math.isnan(p)]


def _cell(rs: list[ScalingResidual]) -> dict[str, Any]:
    p10, p50, p90 = balanced_quantiles([r.log_residual for r in rs], [r.source for r in rs])
    return {"p10": p10, "p50": p50, "p90": p90, "n": len(rs), "sources": dict(sorted(Counter(r.source for r in rs).items()))}


def fit_scaling_band(residuals: list[ScalingResidual]) -> dict[str, Any]:
    """{scope: {bucket: {p10, p50, p90 (log factors), n, sources}}} of the residuals; a cell
    with no steps borrows the quantiles of the nearest filled bucket below it, then above
    (recorded as "borrowed_from", with n 0)."""
    band: dict[str, Any] = {}
    for scope in SCOPES:
        cells: dict[str, Any] = {}
        for key, _, _ in BUCKETS:
            rs = [r for r in residuals if r.scope == scope and bucket_of(r.gpus_per_instance) == key]
            if rs:
                cells[key] = _cell(rs)
        if not cells:
            raise ValueError(f"residuals: no multi-GPU step of scope {scope!r} to fit a band on")
        keys = [k for k, _, _ in BUCKETS]
        for i, key in enumerate(keys):
            if key not in cells:
                near = next((k for k in [*reversed(keys[:i]), *keys[i + 1:]] if k in cells and "borrowed_from" not in cells[k]))
                cells[key] = {**cells[near], "n": 0, "sources": {}, "borrowed_from": near}
        band[scope] = {k: cells[k] for k in keys}
    return band


def coverage_by_source(residuals: list[ScalingResidual]) -> dict[str, Any]:
    """For each scope and source: the share of its steps inside / below / above the band fitted
    on the other sources' steps of the same scope and bucket (steps whose cell has no other
    source are left out)."""
    out: dict[str, Any] = {}
    for scope in SCOPES:
        here = [r for r in residuals if r.scope == scope]
        for held in sorted({r.source for r in here}):
            inside = below = above = 0
            for key, _, _ in BUCKETS:
                cell = [r for r in here if bucket_of(r.gpus_per_instance) == key]
                train = [r for r in cell if r.source != held]
                test = [r.log_residual for r in cell if r.source == held]
                if not train or not test:
                    continue
                p10, _, p90 = balanced_quantiles([r.log_residual for r in train], [r.source for r in train])
                t = np.asarray(test)
                below += int(np.sum(t < p10))
                above += int(np.sum(t > p90))
                inside += int(np.sum((t >= p10) & (t <= p90)))
            n = inside + below + above
            if n:
                out[f"{scope}/{held}"] = {"inside_p10_p90": inside / n, "below_p10": below / n, "above_p90": above / n,
                                          "n": n}
    return out


def validate_scaling_band(band: Any) -> dict[str, dict[str, tuple[float, float]]]:
    """{scope: {bucket: (p10, p90) log factors}} of a model file's scaling_band; ValueError
    naming the field where it is missing or malformed."""
    if not isinstance(band, dict):
        raise ValueError(f"iteration_overhead: scaling_band must be an object, got {type(band).__name__}")
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for scope in SCOPES:
        cells = band.get(scope)
        if not isinstance(cells, dict):
            raise ValueError(f"iteration_overhead: scaling_band.{scope} must be an object, got {cells!r}")
        out[scope] = {}
        for key, _, _ in BUCKETS:
            cell = cells.get(key)
            if not isinstance(cell, dict):
                raise ValueError(f"iteration_overhead: scaling_band.{scope}.{key} must be an object, got {cell!r}")
            q = []
            for field in ("p10", "p90"):
                v = cell.get(field)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    raise ValueError(f"iteration_overhead: scaling_band.{scope}.{key}.{field} must be a finite "
                                     f"number, got {v!r}")
                if not is_log_factor(v):  # band_factors takes exp() of it (the core's note "log factor")
                    raise ValueError(f"iteration_overhead: scaling_band.{scope}.{key}.{field} must be "
                                     f"{LOG_FACTOR_RULE}, got {v!r}")
                q.append(float(v))
            if q[0] > q[1]:
                raise ValueError(f"iteration_overhead: scaling_band.{scope}.{key}: p10 {q[0]!r} is above p90 {q[1]!r}")
            out[scope][key] = (q[0], q[1])
    return out


def band_factors(band: dict[str, dict[str, tuple[float, float]]], instances: int,
                 gpus_per_instance: int, probed: bool = False) -> tuple[float, float]:
    """(p10, p90) factors on the iteration of `instances` instances with at most
    `gpus_per_instance` ranks each, their links modelled or (probed) measured by
    `srift probe-network`; (1, 1) for a single GPU (no link)."""
    if not isinstance(instances, (int, np.integer)) or isinstance(instances, bool) or instances < 1:
        raise ValueError(f"instances: expected an instance count >= 1, got {instances!r}")
    key = bucket_of(gpus_per_instance)
    if instances == 1 and gpus_per_instance == 1:
        return 1.0, 1.0
    scope = "single_instance" if instances == 1 else "multi_instance"
    p10, p90 = band[f"probed_{scope}" if probed else scope][key]
    return math.exp(p10), math.exp(p90)
