"""The band of a prediction with no measurement (srift.learn.lab_band note "lab band"): the
chip-out residuals convolved with the leave-one-lab-out shifts, fitted by `srift train`,
shipped in compute_absolute.json and read by the core."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from measured_data import MEASURED

from srift.learn.lab_band import LAB_SOURCES, convolved_band, lab_shifts, on_shared_cells, precision_class


def _row(source: str, chip: str, precision: str) -> tuple[None, SimpleNamespace]:
    return None, SimpleNamespace(source=source, chip=chip, precision=precision)


def test_precision_class_joins_fp32_and_tf32() -> None:
    assert [precision_class(p) for p in ("amp", "fp32", "tf32")] == ["amp", "fp32", "fp32"]


def test_convolved_band_is_the_quantiles_of_every_sum() -> None:
    within = np.array([-0.2, -0.1, 0.0, 0.1, 0.3])
    shifts = [-0.5, 0.25]
    sums = np.array([r + d for r in within for d in shifts])
    band = convolved_band(within, shifts)
    for q, k in ((0.1, "p10"), (0.5, "p50"), (0.9, "p90")):
        assert band[k] == pytest.approx(float(np.quantile(sums, q)), rel=1e-12)
    # one shift of zero leaves the band as it was
    assert convolved_band(within, [0.0])["p90"] == pytest.approx(float(np.quantile(within, 0.9)), rel=1e-12)


def test_lab_shifts_take_the_median_on_cells_another_lab_timed() -> None:
    meta = [_row("gavel", "V100", "fp32"), _row("gavel", "V100", "fp32"), _row("gavel", "V100", "fp32"),
            _row("gavel", "K80", "fp32"),        # no other lab timed a K80: not a level
            _row("lambda", "V100", "tf32"),      # a V100 runs "tf32" as FP32: the same cell
            _row("lambda", "V100", "tf32"),
            _row("lambda", "V100", "amp"),       # no other lab timed AMP
            _row("lambda", "A10", "tf32"),
            _row("sia", "V100", "fp32"),         # not a lab timed the way the profiler times
            _row("cpu", "cpu", "fp32")]
    y = np.array([0.1, 0.2, 0.6, 5.0, -0.3, -0.1, 9.0, 9.0, 9.0, 9.0])
    pred = np.zeros(len(y))
    mask = np.ones(len(y), bool)
    out = lab_shifts(y, meta, pred, mask)
    assert list(out) == ["gavel", "lambda"]  # no srift sweep in these rows
    assert out["gavel"]["log_shift"] == pytest.approx(0.2) and out["gavel"]["rows"] == 3
    assert out["gavel"]["factor"] == pytest.approx(math.exp(0.2))
    assert out["lambda"]["log_shift"] == pytest.approx(-0.2) and out["lambda"]["cells"] == ["V100 fp32"]
    # rows the held-out fit did not predict do not count
    mask[2] = False
    assert lab_shifts(y, meta, pred, mask)["gavel"]["log_shift"] == pytest.approx(0.15)


def test_srifts_own_gpu_sweeps_are_a_lab() -> None:
    # a lent GPU's sweep (source "srift") shares a cell with Lambda: both get a shift
    assert "srift" in LAB_SOURCES
    meta = [_row("lambda", "H100", "amp"), _row("srift", "H100", "amp"), _row("sia", "H100", "amp")]
    assert on_shared_cells(meta, "srift").tolist() == [False, True, False]
    assert on_shared_cells(meta, "lambda").tolist() == [True, False, False]
    out = lab_shifts(np.array([0.1, -0.4, 3.0]), meta, np.zeros(3), np.ones(3, bool))
    assert {s: v["log_shift"] for s, v in out.items()} == pytest.approx({"lambda": 0.1, "srift": -0.4})


def test_bad_input_is_refused_naming_it() -> None:
    meta = [_row("gavel", "V100", "fp32"), _row("lambda", "A10", "tf32")]
    with pytest.raises(ValueError, match="no lab shift"):
        lab_shifts(np.zeros(2), meta, np.zeros(2), np.ones(2, bool))
    with pytest.raises(ValueError, match="meta, pred, mask"):
        lab_shifts(np.zeros(3), meta, np.zeros(2), np.ones(2, bool))
    with pytest.raises(ValueError, match="within"):
        convolved_band([0.1], [0.0])
    with pytest.raises(ValueError, match="shifts"):
        convolved_band([0.1, 0.2], [])
    with pytest.raises(ValueError, match="shifts"):
        convolved_band([0.1, 0.2], [float("nan")])


def test_the_core_reads_the_lab_widened_band() -> None:
    from srift import _core
    from srift.learn.models import MODELS_DIR

    doc = json.loads((MODELS_DIR / "compute_absolute.json").read_text())["residuals"]
    cfg = _core.learned_compute_config((MODELS_DIR / "compute_ratio.json").read_text(),
                                       (MODELS_DIR / "compute_absolute.json").read_text())
    assert (cfg.absolute_p10, cfg.absolute_p90) == (doc["p10"], doc["p90"])
    within = doc["within_lab"]
    # a lab faster and a lab slower than the model: the band is no narrower on either side, each
    # side the wider of the convolution's and the chip-out band's
    factors = [v["factor"] for v in doc["lab_shifts"].values()]
    assert min(factors) < 1 < max(factors)
    assert doc["p10"] <= within["p10"] < 0 < within["p90"] <= doc["p90"]
    assert doc["p10"] == min(doc["convolved"]["p10"], within["p10"])
    assert doc["p90"] == max(doc["convolved"]["p90"], within["p90"])
    assert doc["p10"] < within["p10"]  # Lambda's stack, x0.7 of the model without it
    assert doc["n"] == within["n"] * len(factors)


@pytest.mark.skipif(not (MEASURED / "gavel_isolated.csv").is_file(), reason="needs ../shared/data/measured")
def test_the_shipped_lab_shifts_are_what_train_fits() -> None:
    from srift.learn.datasets import compute_rows
    from srift.learn.models import MODELS_DIR
    from srift.learn.train import absolute_dataset, absolute_guard, candidates, loco_errors
    from srift.learn.workloads import load_workloads

    doc = json.loads((MODELS_DIR / "compute_absolute.json").read_text())
    chosen = doc["training"]["selection"]["chosen"]
    kind, cpu = (chosen[:-4], True) if chosen.endswith("+cpu") else (chosen, False)
    w = load_workloads()
    X, y, _, _, meta = absolute_dataset(compute_rows(MEASURED, cpu=cpu), w)
    pred, mask, _ = loco_errors(X, y, meta, candidates()[kind], "source", absolute_guard(meta, w, "source"))
    out = lab_shifts(y, meta, pred, mask)
    shipped = doc["residuals"]["lab_shifts"]
    assert set(out) == set(shipped)
    for s, v in out.items():
        assert v["log_shift"] == pytest.approx(shipped[s]["log_shift"], rel=1e-9)
        assert (v["rows"], v["cells"]) == (shipped[s]["rows"], shipped[s]["cells"])
