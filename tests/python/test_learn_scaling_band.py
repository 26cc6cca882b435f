"""The band of multi-GPU iterations over modelled links (srift.learn.scaling_band note "scaling band")."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from measured_data import MEASURED

import srift
from srift.learn.scaling_band import (BUCKETS, SCOPES, ScalingResidual, balanced_quantiles, band_factors, bucket_of,
                                      coverage_by_source, fit_scaling_band, validate_scaling_band)


def test_buckets_of_gpus_per_instance() -> None:
    assert [bucket_of(n) for n in (1, 2, 3, 4, 5, 8, 16)] == ["1", "2", "3-4", "3-4", "5+", "5+", "5+"]
    assert [k for k, _, _ in BUCKETS] == ["1", "2", "3-4", "5+"]
    for bad in (0, -1, True, 2.5, "2"):
        with pytest.raises(ValueError, match="gpus_per_instance"):
            bucket_of(bad)


def test_balanced_quantiles_weigh_each_source_the_same() -> None:
    # source a: four values weighing 1/4 each; source b: one value weighing 1
    values = [0.0, 1.0, 2.0, 3.0, 10.0]
    sources = ["a", "a", "a", "a", "b"]
    assert balanced_quantiles(values, sources, (0.1, 0.25, 0.5, 0.51, 0.9)) == [0.0, 1.0, 3.0, 10.0, 10.0]
    # unweighted, the 90th percentile would sit between 3 and 10
    assert np.quantile(values, 0.9) < 10.0
    # one source: the inverse empirical CDF
    assert balanced_quantiles([3.0, 1.0, 2.0, 4.0], ["x"] * 4, (0.25, 0.5, 0.75, 1.0)) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="values"):
        balanced_quantiles([], [])
    with pytest.raises(ValueError, match="values"):
        balanced_quantiles([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match=r"values\[1\]: expected a finite value, got nan"):
        balanced_quantiles([1.0, math.nan], ["a", "a"])
    for bad in (1.5, "0.5", None):
        with pytest.raises(ValueError, match="qs"):
            balanced_quantiles([1.0], ["a"], (bad,))


def _residuals() -> list[ScalingResidual]:
    out = []
    for v in np.linspace(-0.1, 0.3, 11):                     # source "p": 11 steps on 2-GPU instances
        out.append(ScalingResidual("single_instance", 2, "p", float(v)))
    for v in (0.0, 0.5, 1.0):                                # source "q": 3 steps on 8-GPU instances
        out.append(ScalingResidual("single_instance", 8, "q", v))
    out.append(ScalingResidual("single_instance", 8, "p", 0.2))
    for v in (-0.2, 0.0, 0.2, 0.4):
        out.append(ScalingResidual("multi_instance", 4, "q", v))
    out.append(ScalingResidual("probed_single_instance", 8, "q", 0.1))
    out.append(ScalingResidual("probed_multi_instance", 8, "q", -0.1))
    return out


def test_fit_scaling_band_by_scope_and_bucket_with_borrowed_cells() -> None:
    band = fit_scaling_band(_residuals())
    s = band["single_instance"]
    assert s["2"]["n"] == 11 and s["2"]["sources"] == {"p": 11}
    # eleven steps 0.04 apart from -0.1: the 2nd (cumulative 2/11 >= 0.1) and the 10th (10/11 >= 0.9)
    assert s["2"]["p10"] == pytest.approx(-0.06) and s["2"]["p90"] == pytest.approx(0.26)
    # 8 GPUs: q's three steps weigh 1/3 each, p's one step weighs 1
    assert s["5+"]["sources"] == {"p": 1, "q": 3}
    assert (s["5+"]["p10"], s["5+"]["p50"], s["5+"]["p90"]) == (0.0, 0.2, 1.0)
    # empty cells borrow the nearest filled bucket below, else above
    assert s["1"]["borrowed_from"] == "2" and s["1"]["p90"] == s["2"]["p90"]
    assert s["1"]["n"] == 0 and s["1"]["sources"] == {}
    assert s["3-4"]["borrowed_from"] == "2"
    m = band["multi_instance"]
    assert m["3-4"]["p10"] == -0.2 and m["3-4"]["p90"] == 0.4
    assert m["1"]["borrowed_from"] == m["2"]["borrowed_from"] == "3-4" and m["5+"]["borrowed_from"] == "3-4"
    assert validate_scaling_band(band)["single_instance"]["5+"] == (0.0, 1.0)
    assert band["probed_single_instance"]["2"]["borrowed_from"] == "5+"  # none below: the nearest above
    for scope in ("multi_instance", "probed_multi_instance"):
        with pytest.raises(ValueError, match=scope):
            fit_scaling_band([r for r in _residuals() if r.scope != scope])


def test_coverage_by_source_uses_only_the_other_sources() -> None:
    cov = coverage_by_source(_residuals())
    # q's three 8-GPU steps against p's single 8-GPU step (band 0.2..0.2): one below, two above
    assert cov["single_instance/q"] == {"inside_p10_p90": 0.0, "below_p10": 1 / 3, "above_p90": 2 / 3, "n": 3}
    # p's 8-GPU step against q's band (0..1): inside; p's 2-GPU steps have no other source
    assert cov["single_instance/p"] == {"inside_p10_p90": 1.0, "below_p10": 0.0, "above_p90": 0.0, "n": 1}
    assert "multi_instance/q" not in cov  # a single source: nothing to hold it out against


def test_band_factors_pick_the_scope_and_bucket() -> None:
    band = validate_scaling_band(fit_scaling_band(_residuals()))
    assert band_factors(band, 1, 1) == (1.0, 1.0)
    assert band_factors(band, 1, 8) == (pytest.approx(math.exp(0.0)), pytest.approx(math.exp(1.0)))
    assert band_factors(band, 3, 4) == (pytest.approx(math.exp(-0.2)), pytest.approx(math.exp(0.4)))
    assert band_factors(band, 2, 1) == band_factors(band, 2, 4)  # borrowed from 3-4
    assert band_factors(band, 1, 8, probed=True) == (pytest.approx(math.exp(0.1)), pytest.approx(math.exp(0.1)))
    assert band_factors(band, 2, 2, probed=True) == (pytest.approx(math.exp(-0.1)), pytest.approx(math.exp(-0.1)))
    assert band_factors(band, 1, 1, probed=True) == (1.0, 1.0)
    for bad in (0, -2, True):
        with pytest.raises(ValueError, match="instances"):
            band_factors(band, bad, 2)
    with pytest.raises(ValueError, match="gpus_per_instance"):
        band_factors(band, 2, 0)


@pytest.mark.parametrize("mutate, field", [
    (lambda b: b.pop("multi_instance"), "scaling_band.multi_instance"),
    (lambda b: b["single_instance"].pop("3-4"), "scaling_band.single_instance.3-4"),
    (lambda b: b["single_instance"]["2"].update(p90=math.inf), "scaling_band.single_instance.2.p90"),
    (lambda b: b["multi_instance"]["5+"].update(p10=True), "scaling_band.multi_instance.5\\+.p10"),
    (lambda b: b["multi_instance"]["1"].update(p10=1.0, p90=0.5), "p10 1.0 is above p90 0.5"),
    (lambda b: b.pop("probed_single_instance"), "scaling_band.probed_single_instance"),
    # a factor exp() of which is inf or 0: band_factors raised a bare OverflowError (note "log factor")
    (lambda b: b["multi_instance"]["5+"].update(p90=1e14), "scaling_band.multi_instance.5\\+.p90 must be a log "
                                                           "factor whose exp\\(\\) is a finite number > 0"),
    (lambda b: b["single_instance"]["2"].update(p10=-800.0), "scaling_band.single_instance.2.p10 must be a log factor"),
])
def test_malformed_bands_do_not_load(mutate, field) -> None:
    band = fit_scaling_band(_residuals())
    mutate(band)
    with pytest.raises(ValueError, match=field):
        validate_scaling_band(band)
    with pytest.raises(ValueError, match="scaling_band must be an object"):
        validate_scaling_band(None)


def test_a_shipped_model_without_a_band_does_not_load(tmp_path) -> None:
    import json
    import shutil

    from srift.learn.models import MODELS_DIR, CostModels

    for f in MODELS_DIR.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    doc = json.loads((tmp_path / "iteration_overhead.json").read_text())
    doc.pop("scaling_band")
    (tmp_path / "iteration_overhead.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="scaling_band must be an object"):
        CostModels(tmp_path)


def test_engine_applies_the_band_only_over_modelled_links(resnet50_profile, catalog) -> None:
    from srift.engine import Engine, EngineConfig
    from srift.learn.models import default_models

    models = default_models()
    engine = Engine(resnet50_profile, catalog)
    # one 8-GPU NVSwitch instance, two of them, four 1-GPU instances over the network
    assert engine.scaling_interval([("p4d.24xlarge", 1)]) == models.scaling_interval(1, 8)
    assert engine.scaling_interval([("p4d.24xlarge", 2)]) == models.scaling_interval(2, 8)
    assert engine.scaling_interval([("p3.2xlarge", 4)]) == models.scaling_interval(4, 1)
    assert engine.scaling_interval([("p3.2xlarge", 1), ("p3.16xlarge", 1)]) == models.scaling_interval(2, 8)
    lo, hi = models.scaling_interval(1, 8)
    assert lo < 1.0 < hi and models.scaling_interval(1, 2)[1] < hi  # wider with more GPUs sharing a host
    # no link, or links with evidence of their own
    assert engine.scaling_interval([("p3.2xlarge", 1)]) == (1.0, 1.0)
    assert engine.scaling_interval([("g4dn.12xlarge", 1)]) == (1.0, 1.0)  # the learned PCIe line's band
    assert engine.scaling_interval([("g4dn.12xlarge", 2)]) == models.scaling_interval(2, 4)
    probed = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_intra_gbytes_s": 60.0, "measured_network_gbytes_s": 2.0}}})
    probed_engine = Engine(resnet50_profile, probed)
    assert probed_engine.scaling_interval([("p3.16xlarge", 1)]) == models.scaling_interval(1, 8, probed=True)
    assert probed_engine.scaling_interval([("p3.16xlarge", 3)]) == models.scaling_interval(3, 8, probed=True)
    assert models.scaling_interval(1, 8, probed=True)[1] < models.scaling_interval(1, 8)[1]  # evidence narrows it
    # a type whose network nobody probed keeps the modelled band
    assert probed_engine.scaling_interval([("p3.16xlarge", 1), ("p4d.24xlarge", 1)]) == models.scaling_interval(2, 8)
    # the network alone probed (srift validate): the link inside the 8-GPU instances is still modelled
    network_only = Engine(resnet50_profile, catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 2.0}, "p3.2xlarge": {"measured_network_gbytes_s": 1.0}}}))
    assert network_only.scaling_interval([("p3.16xlarge", 2)]) == models.scaling_interval(2, 8)
    assert network_only.scaling_interval([("p3.2xlarge", 3)]) == models.scaling_interval(3, 1, probed=True)
    # a probed PCIe 3.0 instance leaves the learned line: the probed band
    pcie_probed = Engine(resnet50_profile, catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "g4dn.12xlarge": {"measured_intra_gbytes_s": 6.0}}}))
    assert pcie_probed.scaling_interval([("g4dn.12xlarge", 1)]) == models.scaling_interval(1, 4, probed=True)
    # told to use v0's PCIe assumption, a PCIe 3.0 instance is modelled
    v0_pcie = Engine(resnet50_profile, catalog, EngineConfig(pcie_model="v0"))
    assert v0_pcie.scaling_interval([("g4dn.12xlarge", 1)]) == models.scaling_interval(1, 4)
    with pytest.raises(ValueError, match="probed"):
        models.scaling_interval(1, 8, probed="yes")
    with pytest.raises(ValueError, match="groups"):
        engine.scaling_interval([])
    with pytest.raises(ValueError, match="groups"):
        engine.scaling_interval([("p4d.24xlarge", 0)])


def test_prediction_band_widens_to_the_scaling_band(resnet50_profile, catalog) -> None:
    from srift.engine import Engine
    from srift.learn.models import default_models

    engine = Engine(resnet50_profile, catalog)
    for cluster, instances, gpus in (("1x p4d.24xlarge", 1, 8), ("2x p4d.24xlarge", 2, 8), ("4x p3.2xlarge", 4, 1)):
        pred = srift.predict(resnet50_profile, cluster, global_batch=256)
        lo, hi = default_models().scaling_interval(instances, gpus)
        it = pred.iteration_s
        assert pred.iteration_p10_s <= it * lo * (1 + 1e-12)
        assert pred.iteration_p90_s >= it * hi * (1 - 1e-12)
        # exactly: the compute band (of the slowest group's compute) and the scaling band in quadrature
        g = pred.groups[0]
        f10, f90 = engine.instance_interval(g.instance_type, instances)
        c_hi = math.log((it + g.compute_s * (f90 - 1)) / it)
        c_lo = math.log((it - g.compute_s * (1 - f10)) / it)
        assert pred.iteration_p90_s == pytest.approx(it * math.exp(math.hypot(c_hi, math.log(hi))), rel=1e-9)
        assert pred.iteration_p10_s == pytest.approx(it * math.exp(-math.hypot(c_lo, math.log(lo))), rel=1e-9)


def test_a_whole_instance_measurement_keeps_its_own_band(fresh_profile) -> None:
    fresh_profile.add_measurement("p3.16xlarge", local_batch=32, iteration_s=0.16, gpus=8)
    one = srift.predict(fresh_profile, "1x p3.16xlarge", global_batch=256)
    assert one.iteration_p90_s / one.iteration_s < 1.1  # the measurement's noise, not the scaling band
    from srift.engine import Engine

    engine = Engine(fresh_profile, srift.Catalog.default())
    assert engine.scaling_interval([("p3.16xlarge", 2)]) == (1.0, 1.0)  # note "instance anchor" band instead
    # beside a type nobody measured, the modelled band still holds
    from srift.learn.models import default_models

    assert engine.scaling_interval([("p3.16xlarge", 1), ("p4d.24xlarge", 1)]) == default_models().scaling_interval(2, 8)


@pytest.mark.skipif(not all((MEASURED / f).is_file() for f in ("sia_profiles_non_ec2.csv", "lambda_pytorch_train.csv")),
                    reason=f"Sia's and Lambda's measured data not present at {MEASURED}")
def test_shipped_band_is_what_training_rebuilds(monkeypatch) -> None:
    monkeypatch.setenv("SRIFT_DATA_DIR", str(MEASURED))
    from srift.learn.models import default_models
    from srift.learn.scaling_band import scaling_residuals
    from srift.learn.workloads import load_workloads

    workloads = load_workloads()
    residuals = scaling_residuals(workloads)
    counts = {}
    for r in residuals:
        counts[(r.scope, r.source)] = counts.get((r.scope, r.source), 0) + 1
    assert counts == {("single_instance", "lambda"): 391, ("single_instance", "azure"): 473,
                      ("single_instance", "dgx"): 872, ("multi_instance", "azure"): 2306,
                      ("multi_instance", "dgx"): 4300, ("multi_instance", "rtx"): 1897,
                      # quad has no two-node placement to calibrate a network on
                      ("probed_single_instance", "azure"): 473, ("probed_single_instance", "dgx"): 872,
                      ("probed_single_instance", "rtx"): 385, ("probed_multi_instance", "azure"): 2306,
                      ("probed_multi_instance", "dgx"): 4300, ("probed_multi_instance", "rtx"): 1897}
    rebuilt = fit_scaling_band(residuals)
    shipped = copy.deepcopy(default_models().overhead.doc["scaling_band"])
    assert set(shipped) == {*SCOPES, "coverage_leave_one_source_out", "split"}
    for scope in SCOPES:
        for key, _, _ in BUCKETS:
            for q in ("p10", "p50", "p90"):
                assert rebuilt[scope][key][q] == pytest.approx(shipped[scope][key][q], abs=1e-9), (scope, key, q)
    # held out, the source unlike the rest (azure) mostly lands above the others' band
    cov = coverage_by_source(residuals)
    assert set(cov) == set(shipped["coverage_leave_one_source_out"])
    for key, shares in cov.items():
        assert shares == pytest.approx(shipped["coverage_leave_one_source_out"][key]), key
    assert cov["multi_instance/azure"]["above_p90"] > 0.5
    assert cov["single_instance/lambda"]["inside_p10_p90"] > 0.8


def test_prediction_says_what_its_band_is_made_of(resnet50_profile) -> None:
    from srift.report import explain_prediction, prediction_text

    pred = srift.predict(resnet50_profile, "1x p4d.24xlarge", global_batch=256)
    assert len(pred.band_from) == 2
    assert pred.band_from[0].startswith("compute on p4d.24xlarge (learned): x")
    assert pred.band_from[1].startswith("modelled links, one instance of up to 8 GPUs")
    assert pred.to_dict()["band_from"] == pred.band_from
    text = prediction_text(pred)
    assert any(line.startswith("iteration") and "p10-p90" in line for line in text.splitlines())
    assert "p10-p90 band from: compute on p4d.24xlarge" in explain_prediction(pred)
    assert "nan" not in " ".join(pred.band_from)
    four = srift.predict(resnet50_profile, "4x p3.2xlarge", global_batch=256)
    assert four.band_from[-1].startswith("modelled links, 4 instances of up to 1 GPU: ")
    # one GPU: the compute's band alone
    one = srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=8)
    assert len(one.band_from) == 1 and one.band_from[0].startswith("compute on p3.2xlarge")
    # bad groups name the field
    from srift.engine import Engine

    engine = Engine(resnet50_profile, srift.Catalog.default())
    for bad in ([("p4d.24xlarge", -1)], [("p4d.24xlarge", 1.5)], [("p4d.24xlarge", True)], ["p4d.24xlarge"],
                [("p4d.24xlarge", 1, 2)]):
        with pytest.raises(ValueError, match=r"groups\[0\]"):
            engine.scaling_band(bad)
    with pytest.raises(ValueError):
        engine.scaling_band([("p4d.24xlarge", 1), ("no-such.type", 0)])
    assert engine.scaling_band([("p4d.24xlarge", 1), ("p3.2xlarge", 0)])[:2] == engine.scaling_interval(
        [("p4d.24xlarge", 1)])
