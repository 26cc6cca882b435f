"""GPUs newer than every GPU the models learned from: the lean and band of a new generation.

Note "data edge". The learned compute models are fitted on GPU chips launched up to one year
(the data's edge: 2024, B200, with the shipped data). A catalog GPU launched after it (the RTX
PRO 6000 Blackwell of g7e, B300) is a generation the models never saw. The forward split
(srift.learn.train note "forward") asks what the models would have said of each past generation
on its arrival, trained only on the GPUs announced before it, and every year with enough
training chips answers the same way: the new generation runs slower than the models say, its
datasheet lead only partly realised (anchored on an older GPU, as shipped, the median of
measured over predicted time: 2021 x1.13, 2022 x1.07, 2023 x1.19, 2024 x1.25; with no
measurement x1.08, x1.00, x1.20, x1.24), and the in-range band misses it (2024's anchored rows:
55% inside the x0.81-x1.28 band, against 80% for a chip inside the data).

So a prediction for a GPU past the edge is moved by the forward split's lean (its median
residual, each year weighing the same), before the dominance clip (srift.learn.dominance: a GPU
that beats another on every spec stays no slower than it), and carries the wider of the in-range
band and the forward residuals' p10-p90 around that lean (edge_band). An anchored prediction from a GPU past
the edge to one inside it is the same ratio read the other way, so it takes the mirrored lean
and band; with both past the edge the two leans cancel and the band is the wider of both
(srift::LearnedCompute note "data edge"). A GPU launched after the edge with, at the precision
predicted, the specs of a GPU the models learned from is not past it (past_the_edge): the lean
is what a new generation's unseen specs cost, and the models read nothing of such a GPU they
did not read of that one. The catalog's B300 has the B200's specs; moved by the lean it came out
x1.00-x1.17 the B200's time for every shipped workload, anchored or not (bench/edge_same_specs.py),
and is now the B200's prediction. Only years whose models trained on at least
MIN_TRAINING_CHIPS GPU chips count: with fewer (2016-2020: one to five chips, no Ampere-class
tensor cores) the forward models are a different regime from the shipped ones, which train on
fifteen (2020's anchored rows: median x6.9).

Backtest (bench/accuracy.py compute_data_edge_backtest): each year 2022-2024 moved (before the
clip) and banded by the rule fitted on the earlier years only. Anchored median / p90 APE
12.4 / 32 -> 12.8 / 37 (2022), 16.1 / 27 -> 9.4 / 20 (2023), 20.0 / 47 -> 11.4 / 40 (2024);
band coverage 74%, 70%, 55% -> 76%, 92%, 70%. Moved after the clip instead: 12.8 / 38 for 2022,
the same elsewhere, and a B300 up to 15% behind the H200 it beats on every spec.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["MIN_TRAINING_CHIPS", "counted_years", "weighted_quantile", "edge_quantiles", "edge_band", "edge_record",
           "forward_residuals", "training_edge_year", "past_the_edge"]

# Years whose forward models trained on fewer GPU chips are a different regime (module note).
MIN_TRAINING_CHIPS = 8


def past_the_edge(gpu: Any, edge_year: int, references: Any, precision: str) -> bool:
    """Whether a prediction of `gpu` (GpuPeaks) at `precision` carries the lean and band of a GPU
    past the data's edge (module note; srift::LearnedCompute's past_edge): launched after
    `edge_year` (> 0; 0: no edge recorded) with specs none of `references` (the GPUs the models
    learned from: the compute documents' dominance references) has at that precision."""
    from srift.learn.dominance import with_training_specs

    return edge_year > 0 and gpu.launch_year > edge_year and not with_training_specs(gpu, references, precision)


def counted_years(chip_years: dict[str, int], years: list[int] | set[int]) -> list[int]:
    """The launch years of `years` whose forward models train on at least MIN_TRAINING_CHIPS of
    the chips in `chip_years` (chip -> launch year), ascending."""
    return sorted(y for y in set(years) if sum(cy < y for cy in chip_years.values()) >= MIN_TRAINING_CHIPS)


def weighted_quantile(groups: list[np.ndarray], q: float) -> float:
    """The q-quantile of the values of `groups` pooled, each group weighing the same (its rows
    1/n each): the midpoint rule of the weighted empirical distribution."""
    parts = [np.asarray(g, dtype=float) for g in groups if np.asarray(g).size]
    if not parts:
        raise ValueError("groups: expected at least one non-empty group, got none")
    x = np.concatenate(parts)
    if not np.all(np.isfinite(x)):
        raise ValueError("groups: expected finite log residuals, got a NaN or infinity")
    weight = np.concatenate([np.full(p.size, 1.0 / p.size) for p in parts])
    order = np.argsort(x, kind="stable")
    w = weight[order] / weight.sum()
    mid = np.cumsum(w) - w / 2
    return float(np.interp(q, mid, x[order]))


def edge_quantiles(residuals_by_year: dict[int, np.ndarray]) -> dict[str, Any]:
    """p10 / p50 / p90 of the log residuals log(measured / predicted) of the forward split's
    counted years (`residuals_by_year`: year -> that year's held-out residuals), each year
    weighing the same, with each year's own quantiles and row count."""
    years = sorted(y for y, r in residuals_by_year.items() if np.asarray(r).size)
    if not years:
        raise ValueError("residuals_by_year: expected at least one year with residuals, got none")
    groups = [np.asarray(residuals_by_year[y], dtype=float) for y in years]
    per_year = {str(y): {"n": int(g.size), **{k: float(np.quantile(g, q)) for k, q in (("p10", .1), ("p50", .5),
                                                                                      ("p90", .9))}}
                for y, g in zip(years, groups)}
    return {"p10": weighted_quantile(groups, 0.1), "p50": weighted_quantile(groups, 0.5),
            "p90": weighted_quantile(groups, 0.9), "n": int(sum(g.size for g in groups)), "years": per_year}


def edge_band(in_range: tuple[float, float], edge: dict[str, float], direction: int = 1) -> tuple[float, float, float]:
    """(log shift, log p10, log p90) of a prediction past the data's edge (module note): the
    forward lean, and the wider of the in-range band `in_range` (log p10, log p90 around the
    prediction) and the forward residuals around the lean. direction 1: the target is past the
    edge; -1: the anchor is (the mirrored lean and band); 0: both are (no lean, the band wide
    enough for either)."""
    lo, hi = in_range
    up = (edge["p10"] - edge["p50"], edge["p90"] - edge["p50"])
    down = (-up[1], -up[0])
    if direction == 1:
        return edge["p50"], min(lo, up[0]), max(hi, up[1])
    if direction == -1:
        return -edge["p50"], min(lo, down[0]), max(hi, down[1])
    if direction == 0:
        return 0.0, min(lo, up[0], down[0]), max(hi, up[1], down[1])
    raise ValueError(f"direction: expected 1, -1 or 0, got {direction!r}")


def edge_record(residuals_by_year: dict[int, np.ndarray], edge_year: int, what: str) -> dict[str, Any]:
    """The `data_edge` entry of a compute document: the newest training chip's launch year and
    the forward split's quantiles (edge_quantiles) of `what` (the prediction they are residuals
    of)."""
    if not (isinstance(edge_year, int) and edge_year > 0):
        raise ValueError(f"edge_year: expected a launch year > 0, got {edge_year!r}")
    q = edge_quantiles(residuals_by_year)
    return {"launch_year": edge_year, **q,
            "lean_factor": math.exp(q["p50"]),
            "min_training_chips": MIN_TRAINING_CHIPS,
            "split": f"forward (srift.learn.train note \"forward\"): {what} of each launch year's GPU chips "
                     f"from models trained only on chips announced before it, years whose models train on at "
                     f"least {MIN_TRAINING_CHIPS} GPU chips, each year weighing the same; rows timed without "
                     f"the Sia harness (note \"band rows\"); log(measured / predicted)"}


def training_edge_year(meta: list[tuple[Any, Any]]) -> int:
    """The launch year of the newest GPU chip among the rows of `meta` (a dataset's meta: the
    data's edge); 0 where no row is on a chip with a launch year."""
    from srift.learn.train import launch_year

    return max((launch_year(r.chip) for pair in meta for r in pair if r is not None), default=0)


def forward_residuals(workloads: dict[str, Any], ratio: tuple, absolute: tuple, make_ratio: Any, make_absolute: Any,
                      blend: tuple[float, float],
                      leans: tuple[dict[int, float], dict[int, float]] | None = None
                      ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """The forward split's held-out log residuals log(measured / predicted), by the target's
    launch year, of ({year: anchored on an older GPU chip, as shipped: the blend, shrunk,
    clipped}, {year: no measurement, clipped}), on rows timed the way srift's profiler times (no
    Sia, no CPU target). `ratio`, `absolute`: train.ratio_dataset and train.absolute_dataset
    tuples; make_*: the shipped candidates' factories; blend: (weight, shrink). Every year is
    returned; counted_years says which count. leans: ({year: anchored log lean}, {year: no
    measurement's}), each year's chips moved by its lean before the dominance clip, as the core
    moves a GPU past the data's edge (the backtest); None: not moved (the residuals the lean is
    fitted to)."""
    from srift.learn.blend import held_out_guarded_corrections, observed_anchor_error
    from srift.learn.train import absolute_guard, launch_year, loco_errors

    X, y, _, _, meta = ratio
    Xa, ya, _, _, meta_a = absolute
    by_group = ({str(y_): v for y_, v in leans[0].items()}, {str(y_): v for y_, v in leans[1].items()}) if leans \
        else (None, None)
    corr = held_out_guarded_corrections(meta, workloads, X, y, Xa, ya, meta_a, make_ratio, make_absolute, "forward",
                                        [blend], observed_anchor_error(meta, workloads), by_group[0])[blend]
    pred, mask, _ = loco_errors(Xa, ya, meta_a, make_absolute, "forward",
                                absolute_guard(meta_a, workloads, "forward", by_group[1]))
    anchored: dict[int, list[float]] = {}
    for i, (a, b) in enumerate(meta):
        year = launch_year(b.chip)
        if year > 0 and launch_year(a.chip) < year and b.source not in ("sia", "cpu") and not math.isnan(corr[i]):
            anchored.setdefault(year, []).append(float(y[i] - corr[i]))
    alone: dict[int, list[float]] = {}
    for i, (_, r) in enumerate(meta_a):
        year = launch_year(r.chip)
        if year > 0 and mask[i] and r.source not in ("sia", "cpu"):
            alone.setdefault(year, []).append(float(ya[i] - pred[i]))
    return ({y_: np.asarray(v) for y_, v in anchored.items()}, {y_: np.asarray(v) for y_, v in alone.items()})
