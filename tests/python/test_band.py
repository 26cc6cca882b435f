"""The core's iteration band (csrc/band.hpp) through Python: the scaling table the engine hands
it, the deadline probability's closed form, and recommend's deadline confidence over the band."""
from __future__ import annotations

import math
from statistics import NormalDist

import pytest

import srift
from srift import _core
from srift.engine import EngineConfig
from srift.learn import default_models
from srift.learn.scaling_band import BUCKETS, SCOPES

TYPES = ["p4d.24xlarge", "p3.16xlarge", "p3.8xlarge", "p3.2xlarge", "g4dn.12xlarge", "g5.xlarge"]
Z90 = NormalDist().inv_cdf(0.9)


def test_scaling_table_is_the_model_files_band():
    models = default_models()
    table = models.scaling_table()
    for scope in SCOPES:
        for bucket, (key, lo, _) in enumerate(BUCKETS):
            cell = table.cell(getattr(_core.ScalingScope, scope), bucket)
            instances = 1 if scope.endswith("single_instance") else 2
            if instances == 1 and lo == 1:
                continue  # one GPU on one instance has no link: (1, 1) by rule, not by cell
            p10, p90 = models.scaling_interval(instances, lo, probed=scope.startswith("probed"))
            assert (cell.p10, cell.p90) == (min(1.0, p10), max(1.0, p90))


def test_deadline_probability_closed_form():
    spot = _core.SpotParams()
    band = _core.BandFactors(0.8, 1.5)
    for ratio in (0.7, 0.9, 1.0, 1.2, 1.5, 2.0):
        sigma = (math.log(1.5) if ratio >= 1 else -math.log(0.8)) / Z90
        expected = NormalDist().cdf(math.log(ratio) / sigma)
        assert _core.deadline_probability(100.0, band, 0.0, spot, 100.0 * ratio) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match=r"band\.p90"):
        _core.BandFactors(0.8, 0.9).validate("band")


def _rec(profile, **kw):
    return srift.recommend(profile, global_batch=256, iterations=100_000, regions=["us-east-1"],
                           instance_types=TYPES, max_instances_per_type=4, **kw)


def test_confidence_holds_the_plans_band_on_demand(resnet50_profile):
    """On demand, P(meet) >= 0.9 is exactly 'the band's p90 run fits': the search's band and
    predict()'s are one computation."""
    plain = _rec(resnet50_profile, deadline_hours=12)
    sure = _rec(resnet50_profile, deadline_hours=12, deadline_confidence=0.9)
    assert plain.best is not None and sure.best is not None
    for plan in [sure.best, *sure.alternatives]:
        lo, hi = plan.band_hours()
        assert hi <= 12 * (1 + 1e-9)
        f90 = plan.prediction.iteration_p90_s / plan.iteration_s
        expected = NormalDist().cdf(Z90 * math.log(12 / plan.total_hours) / math.log(f90))
        assert plan.deadline_probability == pytest.approx(expected, rel=1e-9)
        assert plan.deadline_probability >= 0.9
    assert sure.best.total_usd >= plain.best.total_usd
    if plain.best.band_hours()[1] > 12:  # the plain answer's band reaches past the deadline
        assert plain.best.deadline_probability < 0.9
        assert str(sure.best.cluster) != str(plain.best.cluster)


def test_no_band_means_no_probability_and_no_confidence(resnet50_profile):
    """The roofline compute model has no held-out spread: a plan's chance of meeting the
    deadline is unknown (NaN, null in JSON), not 1, and a confidence cannot be met."""
    roofline = EngineConfig(compute_model="roofline")
    plain = _rec(resnet50_profile, deadline_hours=12, config=roofline)
    assert math.isnan(plain.best.band_hours()[1])
    assert math.isnan(plain.best.deadline_probability)
    d = plain.best.to_dict()
    assert d["deadline_probability"] is None and d["total_hours_p90"] is None
    with pytest.raises(ValueError, match=r"deadline_confidence=0.9 needs every offer's p10-p90 band, and \S+ "
                                         r"\(on-demand, us-east-1\) has none"):
        _rec(resnet50_profile, deadline_hours=12, config=roofline, deadline_confidence=0.9)


def test_nothing_fits_says_the_probability(resnet50_profile):
    rec = _rec(resnet50_profile, deadline_hours=0.5, deadline_confidence=0.95)
    assert rec.best is None and rec.closest is not None
    assert "with probability 0.95" in rec.why_none
    # the closest plan's chance is against the real deadline (it takes longer than 0.5 h)
    assert rec.closest.total_hours > 0.5 and rec.closest.deadline_probability < 0.5
    assert f"meets it with probability {rec.closest.deadline_probability:.2g}" in rec.why_none


def test_no_learned_model_where_no_band_needs_one(resnet50_profile, monkeypatch):
    """Under the roofline compute model a measured GPU on one instance has its measurement's
    band and no link band: predicting it loads no learned model."""
    import copy

    import srift.learn.models as models

    prof = copy.deepcopy(resnet50_profile)
    prof.add_measurement("V100-16GB", local_batch=32, iteration_s=0.1)

    def refuse():
        raise AssertionError("a learned model was loaded")

    monkeypatch.setattr(models, "default_models", refuse)
    monkeypatch.setattr("srift.learn.default_models", refuse)
    p = srift.predict(prof, "1x p3.2xlarge", 32, config=EngineConfig(compute_model="roofline"))
    assert p.iteration_s == pytest.approx(0.1)
    assert p.iteration_p10_s < 0.1 < p.iteration_p90_s
