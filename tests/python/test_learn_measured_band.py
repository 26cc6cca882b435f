"""The band of a GPU type the profile measured (srift.learn.measured_band note "measured band"):
fitted by `srift train`, shipped in compute_absolute.json, read by the core and the engine."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from measured_data import MEASURED

from srift.learn.measured_band import (fit_measured_band, other_batch_residuals, repeat_residuals,
                                       validate_measured_band)


def test_repeat_residuals_are_each_repeat_against_the_median_of_the_others() -> None:
    # throughputs 100, 100, 80: the slow host's time is 1.25x the others'; each fast one is
    # against the median of (100, 80) in time, (0.01 + 0.0125) / 2; a lone run has no residual
    r = repeat_residuals({"a": [100.0, 100.0, 80.0], "b": [50.0]})
    other = (0.01 + 0.0125) / 2
    assert r == pytest.approx([math.log(0.01 / other), math.log(0.01 / other), math.log(1.25)], rel=1e-12)
    with pytest.raises(ValueError, match=r"repeats\['c'\]"):
        repeat_residuals({"c": [10.0, 0.0]})


def test_fit_takes_the_quantiles_per_e_fold_over_both_sources_and_checks_each_against_the_other() -> None:
    noise = np.log(np.linspace(0.95, 1.10, 11))
    # residual per e-fold: log(2) over 2 e-folds -> log(2) / 2 per e-fold
    gavel = np.array([[math.log(2.0), 2.0], [-0.2, 1.0], [0.1, 0.5], [0.0, 1.0]])
    sia = np.array([[0.3, 1.0], [-0.3, 1.0], [0.05, 1.0], [-0.05, 1.0], [0.0, 2.0]])
    doc = fit_measured_band(noise, {"gavel": gavel, "sia": sia})
    assert doc["noise"]["p10"] == pytest.approx(math.exp(np.quantile(noise, 0.1)), rel=1e-12)
    assert doc["noise"]["p90"] == pytest.approx(math.exp(np.quantile(noise, 0.9)), rel=1e-12)
    per_fold = np.concatenate([gavel[:, 0] / gavel[:, 1], sia[:, 0] / sia[:, 1]])
    assert doc["per_e_fold"]["p10"] == pytest.approx(math.exp(np.quantile(per_fold, 0.1)), rel=1e-12)
    assert doc["per_e_fold"]["p90"] == pytest.approx(math.exp(np.quantile(per_fold, 0.9)), rel=1e-12)
    assert doc["per_e_fold"]["n"] == {"gavel": 4, "sia": 5}
    # Gavel's pairs against Sia's band alone (per e-fold p10 / p90 of sia, scaled by each pair's folds)
    cov = doc["per_e_fold"]["coverage_from_other_source"]["gavel"]
    lo, hi = np.quantile(sia[:, 0] / sia[:, 1], [0.1, 0.9])
    expected = np.mean([(lo * d <= r <= hi * d) for r, d in gavel])
    assert cov["inside_p10_p90"] == pytest.approx(expected) and cov["n"] == 4
    assert cov["band_p10"] == pytest.approx(math.exp(lo)) and cov["band_p90"] == pytest.approx(math.exp(hi))
    json.dumps(doc, allow_nan=False)  # the record goes into a JSON document as is
    (n10, n90), (e10, e90) = validate_measured_band(doc)
    assert n10 <= 1 <= n90 and e10 <= 1 <= e90


@pytest.mark.parametrize("bad, field", [
    (None, "measured_band must be an object"),
    ({"noise": {"p10": 0.9, "p90": 1.1}}, "measured_band.per_e_fold must be an object"),
    ({"noise": {"p10": 1.01, "p90": 1.1}, "per_e_fold": {"p10": 0.7, "p90": 1.5}}, "measured_band.noise must have"),
    ({"noise": {"p10": 0.9, "p90": 1.1}, "per_e_fold": {"p10": 0.7, "p90": float("inf")}},
     "measured_band.per_e_fold.p90 must be a finite number"),
    ({"noise": {"p10": True, "p90": 1.1}, "per_e_fold": {"p10": 0.7, "p90": 1.5}}, "measured_band.noise.p10"),
])
def test_a_bad_record_is_refused_naming_the_field(bad, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        validate_measured_band(bad)


def test_fit_refuses_data_it_cannot_take_quantiles_of() -> None:
    with pytest.raises(ValueError, match="noise"):
        fit_measured_band(np.array([0.0]), {"sia": np.array([[0.1, 1.0], [0.2, 1.0]])})
    with pytest.raises(ValueError, match="other_batch"):
        fit_measured_band(np.zeros(4), {})
    with pytest.raises(ValueError, match=r"other_batch\['sia'\]"):
        fit_measured_band(np.zeros(4), {"sia": np.array([[0.1, 0.0], [0.2, 1.0]])})


def test_the_core_and_the_engine_read_the_shipped_band() -> None:
    from srift import _core
    from srift.learn import default_models
    from srift.learn.models import MODELS_DIR

    models = default_models()
    (n10, n90), (e10, e90) = models.measured_band()
    doc = json.loads((MODELS_DIR / "compute_absolute.json").read_text())["measured_band"]
    assert (n10, n90, e10, e90) == (doc["noise"]["p10"], doc["noise"]["p90"], doc["per_e_fold"]["p10"],
                                    doc["per_e_fold"]["p90"])
    cfg = _core.learned_compute_config((MODELS_DIR / "compute_ratio.json").read_text(),
                                       (MODELS_DIR / "compute_absolute.json").read_text())
    assert (cfg.measured_p10, cfg.measured_p90, cfg.measured_per_e_fold_p10, cfg.measured_per_e_fold_p90) == (
        n10, n90, e10, e90)
    from srift.learn.models import shipped_measured_band

    assert shipped_measured_band() == models.measured_band()  # what a roofline engine reads
    used = models.learned_compute.config
    assert (used.measured_p10, used.measured_per_e_fold_p90) == (n10, e90)
    # a band at all: wider than nothing, and the batch band wider per e-fold than the noise
    assert n10 < 1 < n90 and e10 < n10 and e90 > n90


@pytest.mark.skipif(not (MEASURED / "lambda_pytorch_train.csv").is_file(), reason="needs ../shared/data/measured")
def test_the_shipped_noise_is_lambdas_repeats_as_train_fits_them() -> None:
    from srift.learn import default_models
    from srift.learn.datasets import lambda_repeats

    r = repeat_residuals(lambda_repeats(MEASURED))
    (n10, n90), _ = default_models().measured_band()
    assert r.size >= 80
    assert n10 == pytest.approx(math.exp(np.quantile(r, 0.1)), rel=1e-12)
    assert n90 == pytest.approx(math.exp(np.quantile(r, 0.9)), rel=1e-12)


@pytest.mark.skipif(not (MEASURED / "gavel_isolated.csv").is_file(), reason="needs ../shared/data/measured")
def test_other_batch_residuals_follow_the_engines_measured_batch_curve() -> None:
    """One Gavel pair predicted by the module as the engine predicts a GPU measured at one batch
    (the halfway curve through the measurement), with a stand-in absolute model."""
    from srift import _core
    from srift.learn.datasets import compute_rows, device_peaks
    from srift.learn.features import roofline
    from srift.learn.models import absolute_on_grid
    from srift.learn.workloads import load_workloads

    class Constant:
        def predict(self, X):
            return np.full(len(X), 0.3)

    rows = [r for r in compute_rows(MEASURED) if r.source == "gavel"]
    by = {}
    for r in rows:
        by.setdefault((r.workload, r.gpu, r.precision), []).append(r)
    group = next(v for v in by.values() if len({r.batch for r in v}) >= 2 and all(r.units_match for r in v))
    a = group[0]
    b = next(r for r in group if r.batch != a.batch)
    w = load_workloads()
    out = other_batch_residuals([a, b], w, lambda chip: Constant())
    assert list(out) == ["gavel"] and out["gavel"].shape == (2, 2)
    # with no dominance clip binding a constant correction, the model's curve is the roofline's
    # shape raised by exp(0.3): through the measurement, the roofline's batch curve
    prior = roofline(w[a.workload], device_peaks()[a.gpu], a.precision)
    curve = absolute_on_grid(prior, lambda grid: np.full(len(grid), 0.3), 4 * max(a.batch, b.batch), token_slope=True)
    scaled = _core.anchor_to_measurements(curve, [_core.Measurement(a.batch, a.per_sample_s * a.batch)])
    predicted = (scaled.compute_s(b.batch) + scaled.optimizer_s) / b.batch
    resid, folds = out["gavel"][0]
    assert folds == pytest.approx(abs(math.log(b.batch / a.batch)), rel=1e-12)
    assert resid == pytest.approx(math.log(b.per_sample_s / predicted), abs=0.02)
