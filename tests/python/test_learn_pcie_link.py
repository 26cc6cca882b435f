"""The learned PCIe link (srift.learn.pcie_link note "pcie class") and the engine's use of it."""
from __future__ import annotations

import math

import numpy as np
import pytest
from measured_data import MEASURED

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


def test_calibration_recovers_the_efficiencies_and_each_cluster_is_predicted_from_the_other() -> None:
    from srift.learn.comm import PROBE_EFFICIENCY_GRID, simulate_case
    from srift.learn.pcie_link import calibration_points, fit_pcie_efficiency, held_out_pcie_steps, pcie_sites

    grid = np.log(PROBE_EFFICIENCY_GRID)
    lines = {"rtx": {2: float(grid[40]), 4: float(grid[34])}, "quad": {2: float(grid[30]), 4: float(grid[28])}}
    cases, w = _simulated_cases(lines)
    assert pcie_sites(cases) == ["quad", "rtx"]
    points = calibration_points(cases, w)
    assert sorted(points) == sorted((s, g, pytest.approx(e, abs=1e-12)) for s, by in lines.items() for g, e in by.items())
    est = fit_pcie_efficiency([p for p in points if p[0] == "rtx"])
    assert est.coef_[0] == pytest.approx((lines["rtx"][4] - lines["rtx"][2]) / math.log(2), rel=1e-9)
    # each cluster is predicted by the other's line alone (its own never leaks in): the steps
    # the other cluster's efficiencies give
    held = held_out_pcie_steps(cases, w, points)
    for i, c in enumerate(cases):
        other = lines["quad" if c.cluster == "rtx" else "rtx"][int(c.placement)]
        expected = simulate_case(c, w[c.workload], lambda f, v=other: v, lambda f: math.log(0.8))
        assert held[i] == pytest.approx(expected, rel=1e-9)
        assert abs(held[i] / c.step_time - 1) > 1e-3


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
    with pytest.raises(ValueError, match="link_pcie_efficiency: the prediction at gpus=2 is nan"):
        pcie_log_efficiency(lambda X: X[:, 0] * math.nan, 2)


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
    # under the learned link, pcie_efficiency sets the PCIe links beyond its generation only
    tuned = EngineConfig(pcie_efficiency=0.9)
    assert srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128,
                         config=tuned).ring_gbytes_s == pytest.approx(expected, rel=1e-9)
    assert srift.predict(resnet50_profile, "1x g5.12xlarge", global_batch=128,
                         config=tuned).ring_gbytes_s == pytest.approx(31.5 * 0.9, rel=1e-9)
    told = srift.predict(resnet50_profile, "1x g4dn.12xlarge", global_batch=128,
                         config=EngineConfig(pcie_model="v0", pcie_efficiency=0.9))
    assert told.ring_gbytes_s == pytest.approx(15.75 * 0.9, rel=1e-9)
    assert learned.groups[0].intra_gbytes_s == pytest.approx(expected, rel=1e-9)


def test_learned_pcie_link_is_the_bottleneck_of_a_g4dn_cluster(resnet50_profile, catalog) -> None:
    from srift import report

    # v0's PCIe (half of 15.75 GB/s) outruns the 50 Gbit/s EFA NIC; the learned one does not
    learned = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256)
    v0 = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256, config=EngineConfig(pcie_model="v0"))
    assert (learned.bottleneck, v0.bottleneck) == ("intra-node", "network")
    # the report names the slowest *achieved* link, not the lowest nominal one: g5.48xlarge
    # (31.5 GB/s nominal) probed at 1 GB/s against g5g.16xlarge's learned link (15.75 nominal)
    probed = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "g5.48xlarge": {"measured_intra_gbytes_s": 1.0}}})
    mixed = srift.predict(resnet50_profile, "1x g5.48xlarge + 1x g5g.16xlarge", global_batch=256, catalog=probed)
    assert mixed.bottleneck == "intra-node"
    by = {g.instance_type: g.intra_gbytes_s for g in mixed.groups}
    assert by["g5.48xlarge"] == pytest.approx(1.0) and 1.0 < by["g5g.16xlarge"] < 15.75
    assert mixed.ring_gbytes_s == pytest.approx(1.0)
    assert "pcie inside g5.48xlarge" in report.bottleneck_link(mixed, probed)


@pytest.mark.parametrize("spelling", ["g4dn.12xlarge", "G4DN.12xlarge"])
def test_a_measured_whole_instance_has_no_learned_link_band(fresh_profile, catalog, spelling: str) -> None:
    from srift.engine import Engine

    fresh_profile.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.16, gpus=4)
    engine = Engine(fresh_profile, catalog)
    assert engine.link_interval(spelling) == (1.0, 1.0)
    pred = srift.predict(fresh_profile, f"1x {spelling}", global_batch=128)
    assert pred.groups[0].compute_source == "measured-instance" and math.isnan(pred.groups[0].intra_gbytes_s)
    assert pred.to_dict()["groups"][0]["intra_gbytes_s"] is None  # JSON has no NaN
    # the measured instance's own noise, not the link's x1.24
    assert pred.iteration_p90_s <= pred.iteration_s * engine.measured_band()[0][1] * (1 + 1e-12)


@pytest.mark.skipif(not all((MEASURED / f).is_file() for f in ("sia_profiles_non_ec2.csv", "lambda_pytorch_train.csv")),
                    reason=f"Sia's and Lambda's measured data not present at {MEASURED}")
def test_shipped_pcie_model_is_what_training_rebuilds(monkeypatch) -> None:
    monkeypatch.setenv("SRIFT_DATA_DIR", str(MEASURED))
    from srift.learn.loader import validate_model_dict
    from srift.learn.models import default_models
    from srift.learn.train import train_pcie_link

    shipped = default_models().pcie_efficiency.doc
    rebuilt = train_pcie_link(None, verbose=False)
    validate_model_dict(rebuilt)  # what `srift train` writes passes the (closed) schema
    assert rebuilt["model"]["intercept"] == pytest.approx(shipped["model"]["intercept"], rel=1e-12)
    assert rebuilt["model"]["coef"] == pytest.approx(shipped["model"]["coef"], rel=1e-12)
    for k in ("p10", "p50", "p90", "n"):
        assert rebuilt["residuals"][k] == pytest.approx(shipped["residuals"][k], rel=1e-12)
    assert rebuilt["training"]["data"]["points"] == shipped["training"]["data"]["points"]
    # the domain the engine reads, and the scores beyond it that justify it
    assert _same(rebuilt["training"]["domain"], shipped["training"]["domain"])


def _same(a, b) -> bool:
    """Nested JSON equality with floats compared to 1e-12 relative."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == pytest.approx(b, rel=1e-12)
    return a == b


def test_band_of_a_pcie_cluster_is_at_least_the_links_held_out_error(resnet50_profile, catalog) -> None:
    from srift.learn.models import default_models

    r = default_models().pcie_efficiency.doc["residuals"]
    pred = srift.predict(resnet50_profile, "2x g4dn.12xlarge", global_batch=256)
    assert pred.iteration_p10_s <= pred.iteration_s * math.exp(r["p10"]) * (1 + 1e-12)
    assert pred.iteration_p90_s >= pred.iteration_s * math.exp(r["p90"]) * (1 - 1e-12)
    # told to use v0's PCIe assumption, or on one GPU, no PCIe band: the compute's, widened by
    # the band of modelled links over two instances (srift.learn.scaling_band note "scaling band")
    from srift.engine import Engine

    for cluster, cfg in (("2x g4dn.12xlarge", EngineConfig(pcie_model="v0")), ("2x g4dn.xlarge", EngineConfig())):
        other = srift.predict(resnet50_profile, cluster, global_batch=256, config=cfg)
        engine = Engine(resnet50_profile, catalog, cfg)
        instance = other.groups[0].instance_type
        assert engine.link_interval(instance) == (1.0, 1.0)
        f10, f90 = engine.instance_interval(instance, 2)
        s10, s90 = default_models().scaling_interval(2, other.groups[0].gpus_per_instance)
        assert engine.scaling_interval([(instance, 2)]) == (s10, s90)
        slow = other.groups[0].compute_s
        it = other.iteration_s
        # compute and link bands add in quadrature in log space (srift.prediction)
        hi = math.hypot(math.log((it + slow * (f90 - 1)) / it), math.log(s90))
        lo = math.hypot(math.log((it - slow * (1 - f10)) / it), math.log(s10))
        assert other.iteration_p90_s == pytest.approx(it * math.exp(hi), rel=1e-9)
        assert other.iteration_p10_s == pytest.approx(it * math.exp(-lo), rel=1e-9)


def test_learned_pcie_link_stays_within_the_pcie_generation_it_was_fitted_on(resnet50_profile, catalog) -> None:
    """note "host scaling": PCIe 4.0/5.0 instances keep v0's link and band; PCIe 3.0 ones learn."""
    from srift.engine import Engine
    from srift.learn.models import default_models
    from srift.learn.pcie_link import DOMAIN_FACTOR

    models = default_models()
    domain = models.pcie_efficiency.doc["training"]["domain"]
    assert domain["max_nominal_gbytes_s"] == 16.0 and domain["factor"] == pytest.approx(math.sqrt(2))
    assert models.pcie_link_applies(15.75e9) and models.pcie_link_applies(16e9 * DOMAIN_FACTOR)
    assert not models.pcie_link_applies(31.5e9) and not models.pcie_link_applies(63e9)
    with pytest.raises(ValueError, match="outside the PCIe generation"):
        models.pcie_link(31.5e9, 8)
    with pytest.raises(ValueError, match="nominal_bytes_s: expected a bandwidth > 0"):
        models.pcie_link_applies(0.0)
    engine = Engine(resnet50_profile, catalog, EngineConfig())
    for name in ("g5.48xlarge", "g6e.48xlarge", "g5.12xlarge"):
        it = catalog.instance(name)
        assert it.interconnect == "pcie" and it.intra_node_gbytes_s > 16 * DOMAIN_FACTOR
        pred = srift.predict(resnet50_profile, f"1x {name}", global_batch=256)
        v0 = srift.predict(resnet50_profile, f"1x {name}", global_batch=256, config=EngineConfig(pcie_model="v0"))
        assert pred.ring_gbytes_s == pytest.approx(it.intra_node_gbytes_s * 0.5, rel=1e-12)
        assert pred.iteration_s == v0.iteration_s and pred.iteration_p90_s == v0.iteration_p90_s
        assert engine.link_interval(name) == (1.0, 1.0)
    assert engine.link_interval("g4dn.12xlarge") == models.pcie_link_interval()
    # the record says why: beyond its data the line loses to v0 on Lambda's 8-GPU PCIe hosts
    beyond = domain["beyond"]["lambda_pcie_hosts/8_gpus"]
    assert beyond["learned"]["p90_ape"] > beyond["v0"]["p90_ape"]


@pytest.mark.parametrize("domain, message", [
    (None, "training.domain must be an object, got None"),
    ({"max_nominal_gbytes_s": 16.0}, "training.domain.factor must be a number > 0, got None"),
    ({"max_nominal_gbytes_s": -1.0, "factor": math.sqrt(2)}, "max_nominal_gbytes_s must be a number > 0, got -1.0"),
    ({"max_nominal_gbytes_s": 16.0, "factor": 2.0}, "training.domain.factor is 2.0, but this srift applies"),
])
def test_a_model_file_with_a_bad_pcie_domain_does_not_load(tmp_path, domain, message) -> None:
    import json
    import shutil

    from srift.learn.models import MODELS_DIR, CostModels

    for f in MODELS_DIR.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    doc = json.loads((tmp_path / "link_pcie_efficiency.json").read_text())
    if domain is None:
        del doc["training"]["domain"]
    else:
        doc["training"]["domain"] = domain
    (tmp_path / "link_pcie_efficiency.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CostModels(tmp_path)
