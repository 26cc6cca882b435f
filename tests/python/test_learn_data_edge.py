"""srift.learn.data_edge note "data edge": GPUs newer than every GPU the models learned from."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from srift.learn.data_edge import (MIN_TRAINING_CHIPS, counted_years, edge_band, edge_quantiles, edge_record,
                                   weighted_quantile)


def test_weighted_quantile_weighs_each_group_the_same():
    # one row against one: halfway; one against three, the single row still carries half the
    # weight (midpoints 1/12, 3/12, 5/12 for the zeros, 3/4 for the 10: 2.5; pooled rows: 0)
    assert weighted_quantile([np.array([10.0]), np.array([0.0])], 0.5) == pytest.approx(5.0)
    assert weighted_quantile([np.array([10.0]), np.array([0.0, 0.0, 0.0])], 0.5) == pytest.approx(2.5)
    assert weighted_quantile([np.array([1.0, 2.0, 3.0, 4.0])], 0.5) == pytest.approx(2.5)
    # below the first midpoint and above the last: the extreme values
    assert weighted_quantile([np.array([1.0, 2.0])], 0.0) == 1.0
    assert weighted_quantile([np.array([1.0, 2.0])], 1.0) == 2.0
    with pytest.raises(ValueError, match="groups"):
        weighted_quantile([np.array([])], 0.5)
    with pytest.raises(ValueError, match="finite"):
        weighted_quantile([np.array([1.0, math.nan])], 0.5)


def test_counted_years_need_enough_training_chips():
    chips = {f"c{i}": 2010 + i for i in range(12)}  # one chip a year, 2010-2021
    first = 2010 + MIN_TRAINING_CHIPS  # the first year with MIN_TRAINING_CHIPS older chips
    assert counted_years(chips, [2012, first - 1, first, 2021]) == [first, 2021]


def test_edge_quantiles_and_record():
    by_year = {2021: np.array([0.1, 0.2, 0.3]), 2022: np.array([0.0])}
    q = edge_quantiles(by_year)
    assert q["n"] == 4 and set(q["years"]) == {"2021", "2022"}
    assert q["years"]["2021"]["p50"] == pytest.approx(0.2)
    assert q["p10"] <= q["p50"] <= q["p90"]
    rec = edge_record(by_year, 2024, "test")
    assert rec["launch_year"] == 2024 and rec["lean_factor"] == pytest.approx(math.exp(q["p50"]))
    with pytest.raises(ValueError, match="edge_year"):
        edge_record(by_year, 0, "test")
    with pytest.raises(ValueError, match="residuals_by_year"):
        edge_quantiles({2021: np.array([])})


def test_edge_band_directions_mirror():
    edge = {"p10": -0.05, "p50": 0.15, "p90": 0.5}
    assert edge_band((-0.2, 0.25), edge, 1) == pytest.approx((0.15, -0.2, 0.35))
    assert edge_band((-0.2, 0.25), edge, -1) == pytest.approx((-0.15, -0.35, 0.25))
    assert edge_band((-0.2, 0.25), edge, 0) == pytest.approx((0.0, -0.35, 0.35))
    with pytest.raises(ValueError, match="direction"):
        edge_band((-0.2, 0.25), edge, 2)


def _core_config(edge: dict, in_range: tuple[float, float]):
    from srift import _core

    cfg = _core.LearnedComputeConfig()
    cfg.anchored_p10, cfg.anchored_p90 = in_range
    cfg.absolute_p10, cfg.absolute_p90 = in_range
    cfg.edge_year = 2024
    cfg.edge_anchored_p10, cfg.edge_anchored_p50, cfg.edge_anchored_p90 = edge["p10"], edge["p50"], edge["p90"]
    cfg.edge_absolute_p10, cfg.edge_absolute_p50, cfg.edge_absolute_p90 = edge["p10"], edge["p50"], edge["p90"]
    return cfg


def test_the_core_applies_the_rule_the_python_backtest_scores():
    """bench/accuracy.py compute_data_edge_backtest scores edge_band; the engine applies
    srift::LearnedCompute's own copy: the two agree, both directions."""
    from srift import _core
    from srift.learn import default_models
    from srift.learn.features import core_precision, core_workload_stats, gpu_spec
    from srift.learn.gpus import TRAINING_GPUS
    from srift.learn.workloads import load_workloads

    edge, in_range = {"p10": -0.05, "p50": 0.15, "p90": 0.5}, (-0.2, 0.25)
    lc = _core.LearnedCompute(default_models().ratio.core, default_models().absolute.core, _core_config(edge, in_range))
    plain_cfg = _core_config(edge, in_range)
    plain_cfg.edge_year = 0
    plain = _core.LearnedCompute(default_models().ratio.core, default_models().absolute.core, plain_cfg)
    stats = core_workload_stats(load_workloads()["resnet50"])
    old, new = gpu_spec(TRAINING_GPUS["V100-16GB"]), gpu_spec(TRAINING_GPUS["H100-80GB"])
    old.launch_year, new.launch_year = 2017, 2026
    prec = core_precision("amp")
    for anchor, target, direction in ((old, new, 1), (new, old, -1)):
        meas = [_core.Measurement(64.0, 0.2)]
        got, base = lc.predict_anchored(stats, anchor, meas, target, prec, 0.0), \
            plain.predict_anchored(stats, anchor, meas, target, prec, 0.0)
        lean, lo, hi = edge_band(in_range, edge, direction)
        assert got.past_data_edge and not base.past_data_edge
        t, t0 = got.model.compute_s(64.0) + got.model.optimizer_s, base.model.compute_s(64.0) + base.model.optimizer_s
        assert t == pytest.approx(math.exp(lean) * t0, rel=1e-9)
        assert (got.p10_factor, got.p90_factor) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)
    got = lc.predict_absolute(stats, new, prec, 0.0)
    lean, lo, hi = edge_band(in_range, edge, 1)
    base = plain.predict_absolute(stats, new, prec, 0.0)
    # (the total: the lean moves the corrected times the line is fitted to, and the roofline
    # splits the line's fixed time between the terms)
    for batch in (1.0, 32.0, 1024.0):
        assert got.model.compute_s(batch) + got.model.optimizer_s == pytest.approx(
            math.exp(lean) * (base.model.compute_s(batch) + base.model.optimizer_s), rel=1e-9)
    assert (got.p10_factor, got.p90_factor) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)


def test_the_shipped_models_record_the_edge_of_their_data():
    from srift.learn import default_models
    from srift.learn.gpus import CHIP_LAUNCH_YEAR

    year, anchored, absolute = default_models().data_edge()
    assert year == max(CHIP_LAUNCH_YEAR.values())
    for q in (anchored, absolute):
        assert q[0] <= q[1] <= q[2]
    # every counted year of the forward split leaned the same way: new GPUs slower than said
    doc = default_models().ratio.doc["data_edge"]
    assert doc["min_training_chips"] == MIN_TRAINING_CHIPS
    assert all(v["p50"] > 0 for v in doc["years"].values())


def test_catalog_launch_years_agree_with_the_training_chips():
    from srift.catalog import _default_catalog
    from srift.learn.datasets import chip_of
    from srift.learn.gpus import CHIP_LAUNCH_YEAR

    cat = _default_catalog()
    for key in ("K80", "V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200"):
        assert cat.gpu(key).launch_year == CHIP_LAUNCH_YEAR[chip_of(key)], key
    assert all(isinstance(cat.gpu(k).launch_year, int) for k in cat.to_dict()["gpus"])


def test_a_gpu_past_the_edge_is_predicted_with_the_lean():
    """The g7e's RTX PRO 6000 (2025) is past the shipped models' edge (2024) with specs of its
    own: with no measurement its compute is the absolute model's times the recorded lean, within
    the dominance clip. p6-b300's B300 (2025) has the B200's specs, and B200, a training GPU, is
    inside the data: neither is moved (test_a_b300_is_predicted_as_the_b200_whose_specs_it_has)."""
    import srift
    from srift.learn import default_models
    from srift.learn.features import core_precision, core_workload_stats, gpu_spec
    from srift.learn.workloads import load_workloads

    model, batch, loss = srift.zoo.build("resnet50", batch_size=8, device="meta")
    prof = srift.profile(model, batch, loss_fn=loss, device="meta")
    sources = {c: srift.predict(prof, c, global_batch=64).groups[0].compute_source
               for c in ("1x g7e.2xlarge", "1x p6-b300.48xlarge", "1x p6-b200.48xlarge", "1x p5.48xlarge")}
    assert sources == {"1x g7e.2xlarge": "learned-past-edge", "1x p6-b300.48xlarge": "learned",
                       "1x p6-b200.48xlarge": "learned", "1x p5.48xlarge": "learned"}
    # against the same models with no data_edge: the lean, added before the dominance clip,
    # which holds the RTX PRO 6000 no slower than the RTX 4090 it beats on every spec at small
    # batches; at the grid's far end the clip does not bind and the lean is whole, to the line
    # fit's 2%
    from srift import _core

    models = default_models()
    lean = math.exp(models.data_edge()[2][1])
    cfg = _shipped_config()
    cfg.edge_year = 0
    plain = _core.LearnedCompute(models.ratio.core, models.absolute.core, cfg)
    pro = gpu_spec(_catalog_peaks("RTX-PRO-6000"))
    for key in ("resnet50", "bert_base"):
        stats = core_workload_stats(load_workloads()[key])
        for prec in ("fp32", "tf32", "amp"):
            got = models.learned_compute.predict_absolute(stats, pro, core_precision(prec), 0.0)
            base = plain.predict_absolute(stats, pro, core_precision(prec), 0.0)
            assert got.past_data_edge and not base.past_data_edge
            t, t0 = ((m.model.compute_s(1024.0) + m.model.optimizer_s) for m in (got, base))
            assert t == pytest.approx(lean * t0, rel=0.02)
    from srift.report import explain_prediction

    text = explain_prediction(srift.predict(prof, "1x g7e.2xlarge", global_batch=64), srift.catalog._default_catalog())
    assert "past the data: RTX-PRO-6000 on g7e.2xlarge (announced 2025)" in text


def _catalog_peaks(key: str):
    from srift.catalog import Catalog
    from srift.learn.gpus import peaks_from_catalog

    return peaks_from_catalog(Catalog.default(), key)


def _shipped_config():
    """The shipped documents' LearnedComputeConfig, a fresh one to change."""
    from srift import _core
    from srift.learn.models import MODELS_DIR

    return _core.learned_compute_config((MODELS_DIR / "compute_ratio.json").read_text(),
                                        (MODELS_DIR / "compute_absolute.json").read_text())


def test_a_b300_is_predicted_as_the_b200_whose_specs_it_has():
    """Note "data edge": the catalog's B300 (2025, past the edge) has exactly the B200's specs,
    and B200 is a GPU the models learned from. The models read nothing of the B300 they did not
    read of the B200, so it is inside the data: with no measurement, anchored on an older GPU,
    and measured on it predicting an older GPU, its prediction is the B200's, term for term, with
    the B200's band. With the lean it was x1.00-x1.17 the B200's time (bench/edge_same_specs.py)."""
    from srift import _core
    from srift.learn import default_models
    from srift.learn.data_edge import past_the_edge
    from srift.learn.dominance import same_specs
    from srift.learn.features import PRECISIONS, core_precision, core_workload_stats, gpu_spec
    from srift.learn.workloads import load_workloads

    models = default_models()
    lc, year = models.learned_compute, models.data_edge()[0]
    peaks = {k: _catalog_peaks(k) for k in ("B200", "B300", "T4", "A10G", "H100-80GB", "RTX-PRO-6000")}
    assert peaks["B300"].launch_year > year >= peaks["B200"].launch_year
    assert peaks["B300"].memory_gib > peaks["B200"].memory_gib
    g = {k: gpu_spec(p) for k, p in peaks.items()}
    refs = [*models._ratio_references, *models._references]
    w = load_workloads()

    def terms(r):
        m = r.model
        return (m.forward_fixed_s, m.forward_per_sample_s, m.backward_fixed_s, m.backward_per_sample_s, m.optimizer_s,
                r.p10_factor, r.p90_factor, r.past_data_edge)

    for prec in PRECISIONS:
        p = core_precision(prec)
        assert same_specs(peaks["B300"], peaks["B200"], prec)
        assert not past_the_edge(peaks["B300"], year, refs, prec)
        assert past_the_edge(peaks["RTX-PRO-6000"], year, refs, prec)
        for key in ("resnet50", "bert_large", "gpt2_512", "ncf", "deepspeech2"):
            stats = core_workload_stats(w[key])
            for max_batch in (0.0, 5000.0):
                b300, b200 = (lc.predict_absolute(stats, g[k], p, max_batch) for k in ("B300", "B200"))
                assert terms(b300) == terms(b200) and not b300.past_data_edge
            for anchor in ("T4", "A10G", "H100-80GB"):
                run = [_core.Measurement(32.0, 1.2 * lc.predict_absolute(stats, g[anchor], p, 0.0).model.compute_s(32.0))]
                assert terms(lc.predict_anchored(stats, g[anchor], run, g["B300"], p, 0.0)) == \
                    terms(lc.predict_anchored(stats, g[anchor], run, g["B200"], p, 0.0))
                assert terms(lc.predict_anchored(stats, g["B300"], run, g[anchor], p, 0.0)) == \
                    terms(lc.predict_anchored(stats, g["B200"], run, g[anchor], p, 0.0))
            assert lc.predict_absolute(stats, g["RTX-PRO-6000"], p, 0.0).past_data_edge


def test_bad_data_edge_documents_are_refused(tmp_path):
    from srift.learn.models import MODELS_DIR, CostModels

    for f in MODELS_DIR.glob("*.json"):
        (tmp_path / f.name).write_text(f.read_text())
    ratio = json.loads((tmp_path / "compute_ratio.json").read_text())
    for change, match in ((lambda d: d.pop("data_edge"), "compute_ratio.data_edge: expected an object"),
                          (lambda d: d["data_edge"].update(launch_year=2023), "compute_absolute.data_edge.launch_year"),
                          (lambda d: d["data_edge"].update(p10=5.0), "p10 <= p50 <= p90"),
                          # a band past the edge of exp(1e14): refused by its path (note "log factor"),
                          # where the core named only its configuration's edge_anchored_p90
                          (lambda d: d["data_edge"].update(p90=1e14),
                           r"compute_ratio\.json: \$\.data_edge\.p90 must be a log factor whose exp\(\) is a finite"),
                          # each quantile in range, the spread at_data_edge takes exp() of not
                          (lambda d: d["data_edge"].update(p10=-400.0, p50=400.0, p90=400.0),
                           r"compute_ratio\.data_edge: expected p50 - p10 to be a log factor")):
        d = copy.deepcopy(ratio)
        change(d)
        (tmp_path / "compute_ratio.json").write_text(json.dumps(d))
        with pytest.raises(ValueError, match=match):
            CostModels(tmp_path).data_edge()


def test_training_gpus_have_launch_years(monkeypatch):
    from srift.learn import gpus, train

    assert train.launch_year("cpu-epyc") == 0
    monkeypatch.delitem(gpus.CHIP_LAUNCH_YEAR, "B200")
    with pytest.raises(ValueError, match="no launch year"):
        train.launch_year("B200")
