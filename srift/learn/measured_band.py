"""The p10-p90 band of a GPU type the profile measured: its noise, and the batches it did not run.

Note "measured band". A GPU type with the user's own measurement is predicted from it, and two
things still move the truth away from the prediction:
  noise          the same benchmark on another host of the same GPU type: Lambda's repeated
                 1-GPU throughputs (srift.learn.datasets.lambda_repeats), each repeat against
                 the median of the other repeats of its (GPU, model, precision, batch); the
                 p10 / p90 of log(repeat / others) over all of them. The band is asymmetric
                 because a slow host is more common than a fast one (the first "H100 80GB
                 SXM5" host runs 6-8% below the five others on every model).
  per e-fold     a GPU measured at one local batch and predicted at another (every plan whose
                 local batch differs from the profiled one): the measurement scales the
                 no-measurement model's curve (srift::LearnedCompute note "measured batch
                 shape"); the log residual of that
                 prediction per e-fold of batch, log(truth / prediction) / |log(b / b_measured)|,
                 its p10 / p90 over the pairs of 1-GPU rows of one source, model, GPU and
                 precision at two batches (Gavel's and Sia's: Lambda times one batch per GPU),
                 the absolute model held out by the pair's GPU chip. Both sources pooled, as
                 each alone covers the other poorly (Sia's band holds 65% of Gavel's pairs,
                 Gavel's 92% of Sia's; `coverage_from_other_source`).
The engine's band of a measured GPU type is the noise band at the measured batch and widens
with the e-folds away from it (csrc/include/srift/band.hpp note "measured batch band"). Both are
fitted by `srift train` and shipped in compute_absolute.json ("measured_band"); EngineConfig's
measured_* fields override them.
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from typing import Any, Callable

import numpy as np

from srift.learn.workloads import WorkloadInfo

__all__ = ["batch_pairs", "fit_measured_band", "other_batch_residuals", "repeat_residuals", "validate_measured_band"]


def repeat_residuals(repeats: dict[tuple, list[float]]) -> np.ndarray:
    """log(t / median of the other repeats) of every repeat of a group with two or more
    (`repeats`: group -> throughputs or times; a ratio of throughputs is the inverse ratio of
    times, so throughputs are inverted first)."""
    out: list[float] = []
    for key, values in repeats.items():
        if any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in values):
            raise ValueError(f"repeats[{key!r}]: expected throughputs > 0, got {values!r}")
        times = [1.0 / float(v) for v in values]
        if len(times) < 2:
            continue
        for i, t in enumerate(times):
            out.append(math.log(t / float(np.median(times[:i] + times[i + 1:]))))
    return np.asarray(out, dtype=np.float64)


def other_batch_residuals(rows: list[Any], workloads: dict[str, WorkloadInfo],
                          fit_absolute: Callable[[str], Any]) -> dict[str, np.ndarray]:
    """source -> array of (log(truth / prediction), e-folds |log(b / a)|) for every ordered pair
    (a measured, b predicted) of `rows` (srift.learn.datasets.ComputeRow) of one source,
    workload, GPU and precision at two batches, predicted as the engine predicts a measured GPU
    type at another batch (note "measured band"). fit_absolute(chip) -> the absolute model
    fitted without that GPU chip (its .predict: feature rows -> log corrections)."""
    from srift import _core
    from srift.learn.datasets import device_peaks
    from srift.learn.dominance import guarded_correction, reference_gpus
    from srift.learn.features import roofline
    from srift.learn.models import absolute_on_grid

    peaks = device_peaks()
    fitted: dict[str, Any] = {}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for source, a, b in batch_pairs(rows):
        if a.chip not in fitted:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted[a.chip] = fit_absolute(a.chip)
        model, wl, g = fitted[a.chip], workloads[a.workload], peaks[a.gpu]
        prior = roofline(wl, g, a.precision)
        refs = reference_gpus({a.chip})

        def correction(grid: Any, model: Any = model, wl: WorkloadInfo = wl, g: Any = g, a: Any = a,
                       refs: Any = refs) -> Any:
            return guarded_correction(model.predict, wl, g, grid, a.precision, refs)

        curve = absolute_on_grid(prior, correction, 4 * max(a.batch, b.batch), token_slope=True)
        scaled = _core.anchor_to_measurements(curve, [_core.Measurement(a.batch, a.per_sample_s * a.batch)])
        predicted = (scaled.compute_s(b.batch) + scaled.optimizer_s) / b.batch
        out[source].append((math.log(b.per_sample_s / predicted), abs(math.log(b.batch / a.batch))))
    return {s: np.asarray(v, dtype=np.float64) for s, v in out.items()}


def batch_pairs(rows: list[Any]) -> list[tuple[str, Any, Any]]:
    """(source, a, b): every ordered pair of `rows` (ComputeRows; GPU rows whose sample is the
    zoo model's) of one source, workload, GPU and precision at two batches, a measured and b
    predicted, in a fixed order."""
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for r in rows:
        if r.units_match and r.source != "cpu":
            groups[(r.source, r.workload, r.gpu, r.precision)].append(r)
    return [(key[0], a, b) for key, members in sorted(groups.items()) for a in members for b in members
            if a.batch != b.batch]


def _quantiles(values: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(values, 0.1)), float(np.quantile(values, 0.9))


def fit_measured_band(noise: np.ndarray, other_batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """The "measured_band" record of compute_absolute.json (note "measured band"): p10 / p90
    factors of the noise and per e-fold, with their data, and each source's pairs' coverage by
    the band of the other source(s)."""
    noise = np.asarray(noise, dtype=np.float64)
    if noise.size < 2 or not np.all(np.isfinite(noise)):
        raise ValueError(f"noise: expected two or more finite log residuals, got {noise.size}")
    per_fold = {}
    for source, v in other_batch.items():
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != 2 or not np.all(np.isfinite(v)) or np.any(v[:, 1] <= 0):
            raise ValueError(f"other_batch[{source!r}]: expected (log residual, e-folds > 0) rows")
        per_fold[source] = v[:, 0] / v[:, 1]
    if not per_fold or sum(x.size for x in per_fold.values()) < 2:
        raise ValueError("other_batch: expected two or more pairs of batches")
    n_lo, n_hi = _quantiles(noise)
    f_lo, f_hi = _quantiles(np.concatenate(list(per_fold.values())))
    coverage = {}
    for source, v in other_batch.items():
        others = [per_fold[s] for s in per_fold if s != source]
        if not others:
            continue
        lo, hi = _quantiles(np.concatenate(others))
        r, d = v[:, 0], v[:, 1]
        coverage[source] = {"inside_p10_p90": float(np.mean((r >= lo * d) & (r <= hi * d))), "n": int(len(r)),
                            "band_p10": math.exp(lo), "band_p90": math.exp(hi)}
    return {
        "noise": {"p10": math.exp(n_lo), "p90": math.exp(n_hi), "n": int(noise.size),
                  "data": "Lambda's repeated 1-GPU throughputs, each against the median of its group's others"},
        "per_e_fold": {"p10": math.exp(f_lo), "p90": math.exp(f_hi),
                       "n": {s: int(v.size) for s, v in sorted(per_fold.items())},
                       "data": "pairs of 1-GPU rows at two batches (one source, model, GPU, precision), the "
                               "no-measurement model's batch curve, the absolute model held out by the pair's GPU chip",
                       "coverage_from_other_source": coverage},
    }


def validate_measured_band(doc: Any) -> tuple[tuple[float, float], tuple[float, float]]:
    """((noise p10, p90), (per e-fold p10, p90)) factors of a "measured_band" record; a clear
    ValueError naming the field when it is missing or out of range (p10 in (0, 1], p90 >= 1)."""
    if not isinstance(doc, dict):
        raise ValueError(f"compute_absolute: measured_band must be an object (retrain with `srift train`), got {doc!r}")
    out = []
    for part in ("noise", "per_e_fold"):
        rec = doc.get(part)
        if not isinstance(rec, dict):
            raise ValueError(f"compute_absolute: measured_band.{part} must be an object, got {rec!r}")
        p10, p90 = rec.get("p10"), rec.get("p90")
        for name, v in (("p10", p10), ("p90", p90)):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"compute_absolute: measured_band.{part}.{name} must be a finite number, got {v!r}")
        if not (0 < p10 <= 1 <= p90):
            raise ValueError(f"compute_absolute: measured_band.{part} must have 0 < p10 <= 1 <= p90, "
                             f"got p10={p10!r}, p90={p90!r}")
        out.append((float(p10), float(p90)))
    return out[0], out[1]
