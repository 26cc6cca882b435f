"""The learned PCIe link (srift.learn.pcie_link note "pcie class") and the engine's use of it."""
from __future__ import annotations

import math

import numpy as np
import pytest

import srift
from srift.engine import EngineConfig


def _simulated_cases(site_efficiency: dict[str, dict[int, float]]):
    """Sia-like single-node cases whose steps the simulator produced with known PCIe
    efficiencies: {cluster: {GPUs: log efficiency}}."""
    from srift.learn.comm import ClusterCase, simulate_case
    from srift.learn.workloads import load_workloads

    w = load_workloads()
    cases = []
    for cluster, by_gpus in site_efficiency.items():
        for gpus, log_eff in by_gpus.items():
            for model, wl in (("bert", "bert_base"), ("imagenet", "resnet50")):
                for bsz in (8.0, 32.0):
                    c = ClusterCase(cluster, model, wl, str(gpus), bsz, 0.0, 0.02 + 0.004 * bsz, 0.02, 0.004)
                    c.step_time = simulate_case(c, w[wl], lambda f, v=log_eff: v, lambda f: 0.0)
                    cases.append(c)
    return cases, w


def test_calibration_recovers_the_efficiencies_and_the_other_cluster_predicts_the_held_out_one() -> None:
    from srift.learn.comm import PROBE_EFFICIENCY_GRID
    from srift.learn.pcie_link import calibration_points, fit_pcie_efficiency, held_out_pcie_steps, pcie_sites

    grid = np.log(PROBE_EFFICIENCY_GRID)
    truth = {2: float(grid[40]), 4: float(grid[34])}  # both clusters on one line in log(GPUs)
    cases, w = _simulated_cases({"rtx": truth, "quad": truth})
    assert pcie_sites(cases) == ["quad", "rtx"]
    points = calibration_points(cases, w)
    assert sorted(points) == sorted((s, g, pytest.approx(e, abs=1e-12)) for s in ("quad", "rtx") for g, e in truth.items())
    est = fit_pcie_efficiency(points)
    assert est.coef_[0] == pytest.approx((truth[4] - truth[2]) / math.log(2), rel=1e-9)
    # each cluster predicted from the other's line alone: the steps it was simulated with
    np.testing.assert_allclose(held_out_pcie_steps(cases, w, points), [c.step_time for c in cases], rtol=1e-9)


def test_a_cluster_with_no_other_pcie_cluster_is_not_guessed() -> None:
    from srift.learn.pcie_link import calibration_points, held_out_pcie_steps

    cases, w = _simulated_cases({"rtx": {2: -2.0, 4: -2.4}})
    assert np.isnan(held_out_pcie_steps(cases, w, calibration_points(cases, w))).all()


def test_fit_and_evaluation_reject_what_cannot_be_a_line() -> None:
    from srift.learn.pcie_link import fit_pcie_efficiency, pcie_log_efficiency

    with pytest.raises(ValueError, match="two or more GPU counts"):
        fit_pcie_efficiency([("rtx", 4, -2.0), ("quad", 4, -2.2)])
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="gpus"):
            pcie_log_efficiency(lambda X: X[:, 0], bad)
    assert pcie_log_efficiency(lambda X: -X[:, 0], 1) == 0.0
    assert pcie_log_efficiency(lambda X: X[:, 0], 8) == 0.0  # never above nominal


def test_shipped_line_beats_v0_on_every_held_out_pcie_cluster() -> None:
    from srift.learn.models import default_models

    doc = default_models().pcie_efficiency.doc
    scores = doc["training"]["selection"]["scores"]
    assert {k.split("/")[0] for k in scores} == {"quad", "rtx"}
    for split, s in scores.items():
        assert s["learned"]["median_ape"] < s["v0"]["median_ape"], split
        assert s["learned"]["p90_ape"] < s["v0"]["p90_ape"], split
    assert doc["model"]["coef"][0] < 0  # a host shared by more GPUs gives each less
    assert doc["residuals"]["p10"] < doc["residuals"]["p50"] < doc["residuals"]["p90"]


def test_engine_uses_the_learned_pcie_link_unless_told_or_measured(resnet50_profile, catalog) -> None:
    from srift.learn.models import default_models

    doc = default_models().pcie_efficiency.doc
    expected = 15.75 * math.exp(doc["model"]["intercept"] + doc["model"]["coef"][0] * math.log(4))
    learned = srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128)  # the default
    assert learned.ring_gbytes_s == pytest.approx(expected, rel=1e-9)
    assert default_models().pcie_link(15.75e9, 4) == pytest.approx(expected * 1e9, rel=1e-9)
    v0 = srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128, config=EngineConfig(pcie_model="v0"))
    assert v0.ring_gbytes_s == pytest.approx(15.75 * 0.5, rel=1e-9)
    assert learned.iteration_s > v0.iteration_s
    # a probed link wins over the model
    patched = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "g4dn.12xlarge": {"measured_intra_gbytes_s": 6.0}}})
    assert srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128,
                         catalog=patched).ring_gbytes_s == pytest.approx(6.0)
    # NVLink keeps the assumed efficiency
    p3 = [srift.predict(resnet50_profile, "1x p3.16xlarge", global_batch=256, config=EngineConfig(pcie_model=m))
          for m in ("learned", "v0")]
    assert p3[0].ring_gbytes_s == p3[1].ring_gbytes_s == pytest.approx(150 * 0.75)
    with pytest.raises(ValueError, match="pcie_model must be"):
        srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128, config=EngineConfig(pcie_model="fast"))


def test_learned_pcie_link_is_the_bottleneck_of_a_g4dn_cluster(resnet50_profile) -> None:
    # v0's PCIe (half of 15.75 GB/s) outruns the 50 Gbit/s EFA NIC; the learned one does not
    learned = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256)
    v0 = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256, config=EngineConfig(pcie_model="v0"))
    assert (learned.bottleneck, v0.bottleneck) == ("intra-node", "network")


def test_band_of_a_pcie_cluster_is_at_least_the_links_held_out_error(resnet50_profile, catalog) -> None:
    from srift.learn.models import default_models

    r = default_models().pcie_efficiency.doc["residuals"]
    pred = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256)
    assert pred.iteration_p10_s <= pred.iteration_s * math.exp(r["p10"]) * (1 + 1e-12)
    assert pred.iteration_p90_s >= pred.iteration_s * math.exp(r["p90"]) * (1 - 1e-12)
    # told to use v0's PCIe assumption, or on one GPU, the band is the compute's alone
    from srift.engine import Engine

    for cluster, cfg in (("2x g4dn.12xlarge", EngineConfig(pcie_model="v0")), ("2x g4dn.xlarge", EngineConfig())):
        other = srift.predict(resnet50_profile, cluster, global_batch=256, config=cfg)
        engine = Engine(resnet50_profile, catalog, cfg)
        instance = other.groups[0].instance_type
        assert engine.link_interval(instance) == (1.0, 1.0)
        f10, f90 = engine.instance_interval(instance, 2)
        slow = other.groups[0].compute_s
        assert other.iteration_p90_s == pytest.approx(other.iteration_s + slow * (f90 - 1), rel=1e-9)
        assert other.iteration_p10_s == pytest.approx(other.iteration_s - slow * (1 - f10), rel=1e-9)
