"""The p10-p90 band of a prediction with no measurement: a new GPU chip, and a new lab.

Note "lab band". Without a measurement, srift predicts a GPU from the profile alone with the
absolute model (features.py note "new models"), which learns the level of the labs that timed
its training rows. Its held-out residuals leaving a GPU chip out (train_compute note "band
rows") say how far a new chip lands from the model when its lab is one the model learned from:
the lab's software stack (framework version, kernels, memory format, fused optimizers, input
pipeline) is already in the training rows of its other chips. A user's stack is not: a user
who has measured nothing is a new lab. So the band shipped for the absolute model is the
chip-out residuals convolved with the lab shifts (every sum r_i + d_s, its p10 / p50 / p90):
  lab shift d_s   the median residual of lab s's rows predicted by the absolute model fitted
                  with lab s held out (train.loco_errors by "source", the dominance guard as
                  applied), on the (GPU chip, precision class) cells another lab also timed,
                  so that the shift is the lab's level and not an extrapolation to a chip or
                  precision no other lab covers.
The labs are those timed the way srift's profiler times (a batch in memory: Lambda, Gavel and
srift's own GPU sweeps, srift.learn.gpu_sweep, when a lent GPU has taken one; not Sia's
host-bound harness, not the CPU rows measured here, whose only chip no lab shares).
With the shipped data (srift train; bench/accuracy.py interval_coverage/compute_absolute_lab_band):
    Gavel's V100 FP32 rows against the model without Gavel     x1.08 (9 rows)
    Lambda's V100 FP32 rows against the model without Lambda   x0.72 (7 rows)
and the band widens from the chip-out x0.81-x1.30 to x0.62-x1.30. Each side is the wider of the
convolution's quantile and the chip-out band's (train_lab_band): with one lab far below the
model and the other near it, the convolution's upper side (x1.29) fell inside the chip-out
band's, and a new lab is no better known than a known one. (Before Lambda's v2 rows, x1.13 and
x0.72, and x0.84-x1.31 widened to x0.63-x1.36.) Two labs are a thin sample of labs: the band is
a floor on the stack uncertainty, not an estimate of its tails. Outside
the data, NVIDIA's DeepLearningExamples (bench/external_nvidia.py one_gpu_no_measurement) run
its tuned AMP stack 30-60% faster than Lambda's level; the chip-out band held 50% of those
rows, this band holds 85% (86% before Lambda's v2 rows).
A measured GPU carries its own lab's level and keeps its own band (note "measured band").
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LAB_SOURCES", "precision_class", "on_shared_cells", "lab_shifts", "convolved_band"]

# Labs timed the way srift's profiler times (train_compute note "band rows"); "srift": the GPU
# sweeps srift took (srift.learn.gpu_sweep note "GPU rows").
LAB_SOURCES = ("gavel", "lambda", "srift")


def precision_class(precision: str) -> str:
    """"amp" for mixed precision, "fp32" otherwise: a chip without TF32 runs "tf32" as FP32,
    and one lab calls it "fp32" where another calls it "tf32"."""
    return "amp" if precision == "amp" else "fp32"


def on_shared_cells(meta: list[tuple[Any, Any]], source: str) -> np.ndarray:
    """Mask of `source`'s rows on a (chip, precision class) cell another lab of LAB_SOURCES
    also timed."""
    src = [b.source for _, b in meta]
    cells = [(b.chip, precision_class(b.precision)) for _, b in meta]
    shared = {c for c, s in zip(cells, src) if s != source and s in LAB_SOURCES}
    return np.array([s == source and c in shared for c, s in zip(cells, src)], dtype=bool)


def lab_shifts(y: np.ndarray, meta: list[tuple[Any, Any]], pred: np.ndarray,
               mask: np.ndarray) -> dict[str, dict[str, Any]]:
    """source -> {"log_shift", "factor", "rows", "cells"} for every lab of LAB_SOURCES with
    rows on a (chip, precision class) cell another lab also timed (note "lab band"). `pred`,
    `mask`: train.loco_errors(..., by="source"), each row predicted with its lab held out.
    Raises ValueError when no lab shares a cell with another."""
    y, pred, mask = (np.asarray(v) for v in (y, pred, mask))
    if not (len(y) == len(meta) == len(pred) == len(mask)):
        raise ValueError(f"meta, pred, mask: expected {len(y)} rows each (one per y), "
                         f"got {len(meta)}, {len(pred)}, {len(mask)}")
    cells = [(b.chip, precision_class(b.precision)) for _, b in meta]
    out: dict[str, dict[str, Any]] = {}
    for s in LAB_SOURCES:
        sel = on_shared_cells(meta, s) & mask.astype(bool) & np.isfinite(pred)
        if not sel.any():
            continue
        d = float(np.median(y[sel] - pred[sel]))
        out[s] = {"log_shift": d, "factor": math.exp(d), "rows": int(sel.sum()),
                  "cells": sorted({f"{c} {p}" for (c, p), m in zip(cells, sel) if m})}
    if not out:
        raise ValueError("meta: no lab of " + ", ".join(LAB_SOURCES) +
                         " timed a (GPU chip, precision) cell another lab timed; no lab shift")
    return out


def convolved_band(within: np.ndarray, shifts: list[float]) -> dict[str, float]:
    """p10 / p50 / p90 (log) of every sum of a within-lab residual and a lab shift."""
    r = np.asarray(within, dtype=np.float64).ravel()
    d = np.asarray(shifts, dtype=np.float64).ravel()
    if r.size < 2 or not np.all(np.isfinite(r)):
        raise ValueError(f"within: expected two or more finite log residuals, got {r.size}")
    if d.size < 1 or not np.all(np.isfinite(d)):
        raise ValueError(f"shifts: expected one or more finite log shifts, got {d.tolist()}")
    s = (r[:, None] + d[None, :]).ravel()
    return {"p10": float(np.quantile(s, 0.1)), "p50": float(np.quantile(s, 0.5)), "p90": float(np.quantile(s, 0.9))}
