"""The core's learned compute (srift::LearnedCompute) against the Python twin the training code
uses: features, the anchored blend with its dominance clip, and the absolute model on its batch
grid, with the shipped models, equal to 1e-9 (csrc/include/srift/learned_compute.hpp note
"learned compute")."""
from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import srift
from srift import _core
from srift.catalog import Catalog
from srift.learn.blend import anchored_log_ratio, has_fp16_path
from srift.learn.datasets import device_peaks
from srift.learn.dominance import (dominates, guarded_correction, guarded_log_ratio, line_in_order, same_specs,
                                   with_training_specs)
from srift.learn.features import (PRECISIONS, absolute_features, core_precision, core_workload_stats, gpu_spec,
                                  peak_floor_per_sample, ratio_features, roofline)
from srift.learn.gpus import peaks_from_catalog
from srift.learn.models import MODELS_DIR, absolute_line_in_order, absolute_on_grid, default_models, split_like
from srift.learn.workloads import load_workloads

WORKLOADS = ("resnet50", "bert_base", "ncf", "transformer_xl_base", "deepspeech2")


def _model_terms(m) -> list[float]:
    return [m.forward_fixed_s, m.forward_per_sample_s, m.backward_fixed_s, m.backward_per_sample_s, m.optimizer_s]


@pytest.fixture(scope="module")
def catalog_gpus():
    cat = Catalog.default()
    return [peaks_from_catalog(cat, k) for k in cat.gpu_keys()]


def test_features_equal_the_python_twin_on_every_training_device() -> None:
    w, peaks = load_workloads(), list(device_peaks().values())
    for key, prec in itertools.product(sorted(w), PRECISIONS):
        stats = core_workload_stats(w[key])
        for a, b in itertools.product(peaks[::3], peaks[1::4]):
            for ba, bb in ((1.0, 1.0), (24.0, 6.0)):
                np.testing.assert_allclose(_core.ratio_features(stats, gpu_spec(a), ba, gpu_spec(b), bb, core_precision(prec)),
                                           ratio_features(w[key], a, ba, b, bb, prec), rtol=1e-12, atol=1e-15)
        for g, batch in itertools.product(peaks, (1.0, 300.0)):
            np.testing.assert_allclose(_core.absolute_features(stats, gpu_spec(g), batch, core_precision(prec)),
                                       absolute_features(w[key], g, batch, prec), rtol=1e-12, atol=1e-15)


def _edge(models, kind: str, anchor, target, in_range, prec: str) -> tuple[float, float, float]:
    """(log lean, log p10, log p90) srift.learn.data_edge gives a prediction of `target` (from
    `anchor`, None: no measurement) at `prec` with the shipped data_edge; no lean inside the
    data (a GPU with a training GPU's specs included: past_the_edge)."""
    from srift.learn.data_edge import edge_band, past_the_edge

    year, anchored, absolute = models.data_edge()
    q = dict(zip(("p10", "p50", "p90"), anchored if kind == "anchored" else absolute))
    refs = [*models._ratio_references, *models._references]
    past_b = past_the_edge(target, year, refs, prec)
    past_a = anchor is not None and past_the_edge(anchor, year, refs, prec)
    if not (past_a or past_b):
        return 0.0, in_range[0], in_range[1]
    return edge_band(in_range, q, 0 if past_a and past_b else 1 if past_b else -1)


def _lean(models, kind: str):
    """gpu -> the log lean srift.learn.data_edge gives it by its launch year (0 inside the data),
    as the dominance clip's twin takes it (the core adds it before the clip; the twin, as the
    core, adds none to a GPU with a reference's specs: with_training_specs)."""
    year, anchored, absolute = models.data_edge()
    p50 = (anchored if kind == "anchored" else absolute)[1]
    return lambda g: p50 if year > 0 and g.launch_year > year else 0.0


def test_anchored_prediction_equals_the_python_composition(catalog_gpus) -> None:
    models = default_models()
    blend = models.ratio.doc["absolute_blend"]
    weight, shrink = float(blend["weight"]), float(blend["shrink"])
    refs = models._ratio_references
    w = load_workloads()
    checked = clipped = guarded = same = 0
    lines: dict = {}
    for key, prec in itertools.product(WORKLOADS, ("amp", "fp32")):
        wl, stats = w[key], core_workload_stats(w[key])
        for a, b in itertools.product(catalog_gpus[::2], catalog_gpus):
            if a == b or not has_fp16_path(a, b, prec):
                continue
            meas = [_core.Measurement(16.0, 0.05 + 0.004 * 16), _core.Measurement(64.0, 0.05 + 0.004 * 64)]
            batch = 40.0
            roof = roofline(wl, a, prec)
            anchored = _core.anchor_to_measurements(roof, meas)
            observed = math.log((anchored.compute_s(batch) + anchored.optimizer_s) / (roof.compute_s(batch) + roof.optimizer_s))

            def log_ratio(g):
                return anchored_log_ratio(models.ratio.core.predict, models.absolute.core.predict, wl, a, batch, g, batch,
                                          prec, observed, weight, shrink)

            lean = _lean(models, "anchored")
            expected = guarded_log_ratio(log_ratio, a, b, refs, prec, lean)
            moved = [0.0 if with_training_specs(g, refs, prec) else lean(g) for g in (a, b)]
            clipped += not math.isclose(expected, log_ratio(b) + moved[1] - moved[0], rel_tol=1e-12)
            got = models.learned_compute.guarded_log_ratio(stats, gpu_spec(a), gpu_spec(b), batch, core_precision(prec),
                                                           observed)
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
            if prec == "fp32" and (a.tf32_tflops or b.tf32_tflops):
                continue  # PyTorch's FP32 on a TF32 GPU: test_pytorch_default_fp32_*
            r = models.learned_compute.predict_anchored(stats, gpu_spec(a), meas, gpu_spec(b), core_precision(prec))
            if same_specs(a, b, prec):
                # note "same specs": the anchor's measured curve itself, with the anchored band
                own = models.learned_compute.measured_model(stats, gpu_spec(a), roof, meas, core_precision(prec), 64.0)
                np.testing.assert_allclose(_model_terms(r.model), _model_terms(own), rtol=1e-12)
                assert (r.p10_factor, r.p90_factor) == pytest.approx(
                    (math.exp(blend["residuals"]["p10"]), math.exp(blend["residuals"]["p90"])), rel=1e-12)
                same += 1
                continue
            # note "anchored batch shape": at each batch of the grid, the anchor's measured line
            # times the guarded ratio at that batch; the line fitted through them as the
            # target's roofline splits its terms
            target_roof = roofline(wl, b, prec)

            def line_of(key, prec, a, g, reference=True):
                """(fixed, per-sample) of g's line anchored on `a` before the lines are put in
                order; as a reference, the anchor's measured line for the anchor and a GPU with
                its specs."""
                if reference and (g is a or same_specs(g, a, prec)):
                    return (anchored.forward_fixed_s + anchored.backward_fixed_s + anchored.optimizer_s,
                            anchored.per_sample_s())
                if (key, prec, a.key, g.key) not in lines:
                    g_roof = roofline(wl, g, prec)

                    def log_corrections(grid):
                        out = []
                        for x in grid:
                            on_anchor = anchored.compute_s(x) + anchored.optimizer_s
                            seen = math.log(on_anchor / (roof.compute_s(x) + roof.optimizer_s))
                            ratio = guarded_log_ratio(lambda h: anchored_log_ratio(
                                models.ratio.core.predict, models.absolute.core.predict, wl, a, x, h, x, prec, seen,
                                weight, shrink), a, g, refs, prec, lean)
                            out.append(math.log(on_anchor / (g_roof.compute_s(x) + g_roof.optimizer_s)) + ratio)
                        return out

                    m = absolute_on_grid(g_roof, log_corrections, 64.0, 0.01 * g_roof.per_sample_s(),
                                         floor_per_sample=peak_floor_per_sample(wl, g, prec, a, meas))
                    lines[(key, prec, a.key, g.key)] = (m.forward_fixed_s + m.backward_fixed_s + m.optimizer_s,
                                                        m.per_sample_s())
                return lines[(key, prec, a.key, g.key)]

            # note "lines in order": the references (and the anchor) the target dominates bound its
            # line from above at the grid's ends, those that dominate it from below
            upper = [g for g in [*refs, a] if dominates(b, g, prec)]
            lower = [g for g in [*refs, a] if dominates(g, b, prec)]

            # note "peak floor": no grid point faster than the target's FLOPs at its peaks, scaled
            # by as much as the measurements beat the anchor's own
            want = lines_in_order(line_of(key, prec, a, b, False), [line_of(key, prec, a, g) for g in upper],
                                  [line_of(key, prec, a, g) for g in lower], target_roof,
                                  peak_floor_per_sample(wl, b, prec, a, meas))
            # srift.learn.data_edge note "data edge": a GPU past the models' data moved by the
            # lean (divided, anchored from one) before the clip, and banded
            _, lo, hi = _edge(models, "anchored", a, b, (blend["residuals"]["p10"], blend["residuals"]["p90"]), prec)
            # the order guard: a target that dominates the anchor is no slower than the anchor's
            # measured line at the measured batches, one the anchor dominates no faster
            factor = 1.0
            for m in meas:
                ratio = (anchored.compute_s(m.local_batch) + anchored.optimizer_s) / (
                    want.compute_s(m.local_batch) + want.optimizer_s)
                if dominates(b, a, prec):
                    factor = min(factor, ratio)
                elif dominates(a, b, prec):
                    factor = max(factor, ratio)
            guarded += factor != 1.0
            np.testing.assert_allclose(_model_terms(r.model), [factor * x for x in _model_terms(want)], rtol=1e-9)
            assert (r.p10_factor, r.p90_factor) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)
            checked += 1
    # the clip, the order guard and the same-specs rule are exercised, not only the blend
    assert checked > 400 and clipped > 0 and guarded > 0 and same > 0


def lines_in_order(own, upper, lower, roof, floor_per_sample: float):
    """srift.learn.dominance.line_in_order on the grid of 64, split as `roof` splits its terms."""
    from srift.learn.models import batch_grid, split_like

    return split_like(roof, *line_in_order(own, upper, lower, [float(x) for x in batch_grid(64.0)], floor_per_sample))


def test_absolute_prediction_equals_the_python_composition(catalog_gpus) -> None:
    models = default_models()
    refs = models._references
    w = load_workloads()
    for key, prec, g in itertools.product(WORKLOADS, PRECISIONS, catalog_gpus):
        wl = w[key]
        if prec == "fp32" and g.tf32_tflops:
            continue  # PyTorch's FP32 on a TF32 GPU: test_pytorch_default_fp32_*
        for max_batch in (None, 5000.0):
            # each GPU's line through its clipped times on the grid, then the target's held
            # between the references' own lines at the grid's ends (note "lines in order")
            expected = absolute_line_in_order(models.absolute.core.predict, wl, g, prec, refs, max_batch,
                                              _lean(models, "absolute"))
            r = models.learned_compute.predict_absolute(core_workload_stats(wl), gpu_spec(g), core_precision(prec),
                                                        max_batch or 0.0)
            _, lo, hi = _edge(models, "absolute", None, g, (models.absolute.p10, models.absolute.p90), prec)
            np.testing.assert_allclose(_model_terms(r.model), _model_terms(expected), rtol=1e-9, atol=1e-15)
            assert (r.p10_factor, r.p90_factor) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)


def test_absolute_line_follows_its_curve_even_where_the_curve_is_flat(catalog_gpus) -> None:
    """The line of a prediction with no measurement stays near the corrected times it is fitted
    to, over the default grid (no memory limit known), for every shipped workload. Launch-bound
    models (NCF) are flat there; the mean per-sample time through the origin they were given
    before was up to 178x off at the grid's ends."""
    from srift.learn.models import batch_grid

    models = default_models()
    refs = models._references
    w = load_workloads()
    grid = batch_grid(None)
    worst = 0.0
    for key, prec, g in itertools.product(sorted(w), PRECISIONS, catalog_gpus):
        if prec == "fp32" and g.tf32_tflops:
            continue
        wl, prior = w[key], roofline(w[key], g, prec)
        t = np.array([prior.compute_s(b) + prior.optimizer_s for b in grid]) * np.exp(
            guarded_correction(models.absolute.core.predict, wl, g, grid, prec, refs))
        m = models.learned_compute.predict_absolute(core_workload_stats(wl), gpu_spec(g), core_precision(prec), 0.0).model
        line = np.array([m.compute_s(b) + m.optimizer_s for b in grid])
        worst = max(worst, float(np.max(np.abs(np.log(line / t)))))
    assert worst < math.log(1.6)  # 1.42x with the models shipped at b57efa5: curvature no line follows


def _termwise(a, b, pick):
    return [pick(x, y) for x, y in zip(_model_terms(a), _model_terms(b))]


def _held_between(model, below, above, grid, floor: float):
    """The core's note "across the fp32 paths", line by line: `model` (a _core.ComputeModel)
    held at the grid's ends under the lines of `below` (the references the target beats, as
    the core predicts them; note "lines in order") and over those of `above` (the references
    that beat it: note "across the fp32 paths, from below"; the core bounds with each one's
    model held from above only, whose highest end is the highest of their predictions'), the
    upper bound winning, split as `model` splits, or `model` itself where it is already in order."""
    def line(m):
        return (m.compute_s(0.0) + m.optimizer_s, m.per_sample_s())

    own = line(model)
    held = line_in_order(own, [line(m) for m in below], [line(m) for m in above], grid, floor)
    return model if held == own else split_like(model, *held)


def _strict(g):
    """The GPU without its TF32 units: what strict FP32 runs on; inside the data's edge where g is
    (learned_compute.cpp strict_fp32: a B300 has the B200's specs, its strict bound none)."""
    s = gpu_spec(g)
    s.tf32_flops = 0.0
    models = default_models()
    if with_training_specs(g, [*models._ratio_references, *models._references], "fp32"):
        s.launch_year = 0
    return s


def test_pytorch_default_fp32_on_a_tf32_gpu_is_the_tf32_prediction_at_the_defaults_cost(catalog_gpus) -> None:
    # learned_compute.cpp note "fp32 via tf32": TF32 prediction x roofline(default)/roofline(all TF32),
    # term by term, no faster than all-TF32 and no slower than strict FP32
    lc = default_models().learned_compute
    w = load_workloads()
    tf32_gpus = [g for g in catalog_gpus if g.tf32_tflops]
    assert len(tf32_gpus) >= 5
    for key, g in itertools.product(WORKLOADS, tf32_gpus):
        stats = core_workload_stats(w[key])
        spec = gpu_spec(g)
        got = _model_terms(lc.predict_absolute(stats, spec, _core.Precision.fp32, 0.0).model)
        tf32 = lc.predict_absolute(stats, spec, _core.Precision.tf32, 0.0).model
        strict = lc.predict_absolute(stats, _strict(g), _core.Precision.fp32, 0.0).model
        d, t = _model_terms(roofline(w[key], g, "fp32")), _model_terms(roofline(w[key], g, "tf32"))
        scaled = [x * (dd / tt if tt > 0 else 1.0) for x, dd, tt in zip(_model_terms(tf32), d, t)]
        expected = [max(lo, min(mid, hi)) for lo, mid, hi in zip(_model_terms(tf32), scaled, _model_terms(strict))]
        # note "across the fp32 paths": its line no slower at the grid's ends than the
        # references it beats (with TF32 or without), as the core predicts each
        others = [lc.predict_absolute(stats, gpu_spec(r), _core.Precision.fp32, 0.0).model
                  for r in default_models()._references if dominates(g, r, "fp32")]
        # and no faster than those that beat it (note "across the fp32 paths, from below")
        above = [lc.predict_absolute(stats, gpu_spec(r), _core.Precision.fp32, 0.0).model
                 for r in default_models()._references if dominates(r, g, "fp32")]
        m = _core.ComputeModel()
        (m.forward_fixed_s, m.forward_per_sample_s, m.backward_fixed_s, m.backward_per_sample_s,
         m.optimizer_s) = expected
        expected = _model_terms(_held_between(m, others, above, _core.batch_grid(0.0),
                                              peak_floor_per_sample(w[key], g, "fp32")))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-18)
        # no faster than all-TF32 (term by term where no reference's line held it; held, its
        # line is split as its own, so the terms move but not the times)
        fp32 = lc.predict_absolute(stats, spec, _core.Precision.fp32, 0.0).model
        if fp32.compute_s(0.0) == m.compute_s(0.0) and fp32.per_sample_s() == m.per_sample_s():
            assert all(lo <= x * (1 + 1e-12) for lo, x in zip(_model_terms(tf32), got)), (key, g.key)
        for b in _core.batch_grid(0.0):
            assert tf32.compute_s(b) + tf32.optimizer_s <= (1 + 1e-9) * (fp32.compute_s(b) + fp32.optimizer_s), (key, g.key, b)
    # a conv net runs as it would under TF32 (its one linear layer aside); a transformer's FP32
    # matmuls cost more than TF32 on an A100
    a100 = next(g for g in tf32_gpus if g.key.startswith("A100"))
    for key, lo_ratio, hi_ratio in (("resnet50", 1.0, 1.01), ("bert_base", 1.5, 10.0)):
        stats = core_workload_stats(w[key])
        fp32 = lc.predict_absolute(stats, gpu_spec(a100), _core.Precision.fp32, 0.0).model
        tf32 = lc.predict_absolute(stats, gpu_spec(a100), _core.Precision.tf32, 0.0).model
        assert lo_ratio <= fp32.compute_s(64.0) / tf32.compute_s(64.0) <= hi_ratio, key


def test_pytorch_default_fp32_measurement_on_a_tf32_gpu_anchors_as_its_tf32_equivalent(catalog_gpus) -> None:
    lc = default_models().learned_compute
    models_refs = default_models()._ratio_references
    w = load_workloads()
    a100 = next(g for g in catalog_gpus if g.key.startswith("A100"))
    v100 = next(g for g in catalog_gpus if g.key.startswith("V100"))
    h100 = next(g for g in catalog_gpus if g.key.startswith("H100"))
    meas = [_core.Measurement(32.0, 0.1), _core.Measurement(64.0, 0.18)]

    def total(m, batch):
        return m.compute_s(batch) + m.optimizer_s

    def order_guarded(model, no_slower: bool) -> float:
        """The factor srift::LearnedCompute's order guard scales a prediction by: a target that
        dominates the A100 (H100) is no slower than its measured line at the measured batches,
        one it dominates (V100) no faster; the measured line is the one through both points."""
        factor = 1.0
        for m in meas:
            ratio = m.iteration_s / total(model, m.local_batch)
            factor = min(factor, ratio) if no_slower else max(factor, ratio)
        return factor

    for key in WORKLOADS:
        wl, stats = w[key], core_workload_stats(w[key])
        d, t = roofline(wl, a100, "fp32"), roofline(wl, a100, "tf32")
        as_tf32 = [_core.Measurement(m.local_batch, m.iteration_s * total(t, m.local_batch) / total(d, m.local_batch))
                   for m in meas]
        # to a GPU without TF32: the TF32-equivalent measurement predicted as TF32 (V100 runs it on
        # FP32, so the default costs what all-TF32 does), held (note "fp32 via tf32, the anchor's
        # side") at least at the run read as the A100's strict-FP32 time (the A100 without TF32)
        # and at most at the run read as its all-TF32 time, the upper bound winning; a line
        # through those on the grid, split as the V100's roofline
        got = lc.predict_anchored(stats, gpu_spec(a100), meas, gpu_spec(v100), _core.Precision.fp32).model
        route = lc.predict_anchored(stats, gpu_spec(a100), as_tf32, gpu_spec(v100), _core.Precision.tf32).model
        as_strict = lc.predict_anchored(stats, _strict(a100), meas, gpu_spec(v100), _core.Precision.fp32).model
        unrestated = lc.predict_anchored(stats, gpu_spec(a100), meas, gpu_spec(v100), _core.Precision.tf32).model
        v100_roof = roofline(wl, v100, "fp32")

        def held(grid):
            return [math.log(min(max(total(route, g), total(as_strict, g)), total(unrestated, g))
                             / total(v100_roof, g)) for g in grid]

        want = absolute_on_grid(v100_roof, held, 64.0, 0.01 * v100_roof.per_sample_s())
        # ... no faster than the A100's own FP32 default measurement (the order guard binds where
        # the TF32 equivalent's ratio puts the V100 ahead: bert_base at batch 32, by 3%)
        factor = order_guarded(want, no_slower=False)
        np.testing.assert_allclose(_model_terms(got), [factor * x for x in _model_terms(want)], rtol=1e-9,
                                   err_msg=key)
        # to a TF32 GPU: at each batch of the grid, the all-TF32 prediction times the default's
        # roofline cost, held between all-TF32 and strict FP32 (both GPUs without TF32 units, the
        # measurement restated to strict FP32); a line through those, split as the default's roofline
        got = lc.predict_anchored(stats, gpu_spec(a100), meas, gpu_spec(h100), _core.Precision.fp32).model
        lo = lc.predict_anchored(stats, gpu_spec(a100), as_tf32, gpu_spec(h100), _core.Precision.tf32).model
        strict_roof = roofline(wl, dataclasses.replace(a100, tf32_tflops=None), "fp32")
        as_strict = [_core.Measurement(m.local_batch, m.iteration_s * total(strict_roof, m.local_batch)
                                       / total(d, m.local_batch)) for m in meas]
        hi = lc.predict_anchored(stats, _strict(a100), as_strict, _strict(h100), _core.Precision.fp32).model
        default, all_tf32 = roofline(wl, h100, "fp32"), roofline(wl, h100, "tf32")

        # note "across the fp32 paths": no slower than a reference the H100 beats on every spec
        # (with TF32 or without), as the core predicts that reference
        below = [lc.predict_anchored(stats, gpu_spec(a100), meas, gpu_spec(r), _core.Precision.fp32, 64.0).model
                 for r in models_refs if dominates(h100, r, "fp32")]

        def log_corrections(grid):
            return [math.log(min([max(total(lo, g), min(total(lo, g) * total(default, g) / total(all_tf32, g),
                                                        total(hi, g)))] + [total(m, g) for m in below])
                             / total(default, g)) for g in grid]

        want = absolute_on_grid(default, log_corrections, 64.0, 0.01 * default.per_sample_s())
        # ... and no faster than a reference that beats it (note "across the fp32 paths, from below")
        above = [lc.predict_anchored(stats, gpu_spec(a100), meas, gpu_spec(r), _core.Precision.fp32, 64.0).model
                 for r in models_refs if dominates(r, h100, "fp32")]
        assert above  # the H200, GH200 and B200
        want = _held_between(want, below, above, _core.batch_grid(64.0),
                             peak_floor_per_sample(wl, h100, "fp32", a100, meas))
        factor = order_guarded(want, no_slower=True)
        np.testing.assert_allclose(_model_terms(got), [factor * x for x in _model_terms(want)], rtol=1e-9, err_msg=key)


def _dominance_breaks(lc, stats, anchor, meas, gpus, prec: str, batch: float, tolerance: float = 1.02):
    """The (faster-on-paper, slower-on-paper, time ratio) of catalog GPU pairs whose anchored
    predictions at `batch` put the GPU that beats the other on every spec more than
    `tolerance` behind it (srift.learn.dominance: measured, never more than 2% behind)."""
    def total(m):
        return m.compute_s(batch) + m.optimizer_s

    t = {g.key: total(lc.predict_anchored(stats, gpu_spec(anchor), meas, gpu_spec(g), core_precision(prec), 0.0).model)
         for g in gpus}
    return [(x.key, y.key, round(t[x.key] / t[y.key], 3)) for x, y in itertools.permutations(gpus, 2)
            if dominates(x, y, prec) and t[x.key] > tolerance * t[y.key]]


def test_anchored_fp32_keeps_dominance_across_the_tf32_and_strict_routes(catalog_gpus) -> None:
    """Note "across the fp32 paths": at PyTorch's FP32 from a measurement on a TF32 GPU, a GPU
    without TF32 takes the TF32 route and one with it the strict bound too; each route's clip
    ordered only its own GPUs. A review found an A100 predicted 522 ms against a V100's 421 ms
    (BERT-base, batch 32, an H100 measured at 0.182 s); anchored on the H100 or A100 at
    0.7-1.4x the models' own time, up to 1.34x (GPT-2)."""
    models = default_models()
    lc, w = models.learned_compute, load_workloads()
    by_key = {g.key: g for g in catalog_gpus}
    stats = core_workload_stats(w["bert_base_128"])
    a100, v100 = (lc.predict_anchored(stats, gpu_spec(by_key["H100-80GB"]), [_core.Measurement(32.0, 0.182)],
                                      gpu_spec(by_key[k]), _core.Precision.fp32, 0.0).model
                  for k in ("A100-40GB", "V100-16GB"))
    assert a100.compute_s(32.0) + a100.optimizer_s <= (1 + 1e-9) * (v100.compute_s(32.0) + v100.optimizer_s)
    breaks = []
    for key, anchor_key, batch, factor in itertools.product(("gpt2_512", "bert_base_128", "resnet50"),
                                                           ("H100-80GB", "A100-40GB"), (8.0, 128.0), (0.7, 1.4)):
        stats, anchor = core_workload_stats(w[key]), by_key[anchor_key]
        own = lc.predict_absolute(stats, gpu_spec(anchor), _core.Precision.fp32, batch).model
        meas = [_core.Measurement(batch, factor * (own.compute_s(batch) + own.optimizer_s))]
        breaks += _dominance_breaks(lc, stats, anchor, meas, catalog_gpus, "fp32", batch)
    assert breaks == []


def test_fp32_keeps_dominance_between_two_gpus_with_tf32(catalog_gpus) -> None:
    """Note "across the fp32 paths": at PyTorch's FP32 a GPU with TF32 was bounded only by the
    references without TF32 it beats, so two GPUs with TF32 met nowhere. bench/dominance_scan.py
    --small found an RTX PRO 6000 (FP32 120, TF32 240 TFLOPS, 1,597 GB/s) 1.18x behind an
    A100-40GB (19.5, 156, 1,555), BERT-base at batch 1 anchored on an L4 at 0.7x its own
    no-measurement time, each on its memory grid (1..366 and 1..145): the A100's FP32 line,
    fitted through a curve flat at small batches and steep at large ones, sat 18% under its
    all-TF32 time at batch 1. A reference with TF32 now bounds it as one without does."""
    lc = default_models().learned_compute
    by_key = {g.key: g for g in catalog_gpus}
    pro, a100, l4 = (gpu_spec(by_key[k]) for k in ("RTX-PRO-6000", "A100-40GB", "L4"))
    stats = core_workload_stats(load_workloads()["bert_base"])
    fp32 = _core.Precision.fp32

    def total(m, b):
        return m.compute_s(b) + m.optimizer_s

    own = lc.predict_absolute(stats, l4, fp32, 75.0).model  # the L4's memory grid
    for factor in (0.7, 1.0, 1.4):
        run = [_core.Measurement(1.0, factor * total(own, 1.0))]
        # the scan's case, each GPU on its own grid
        got = total(lc.predict_anchored(stats, l4, run, pro, fp32, 366.0).model, 1.0)
        assert got <= total(lc.predict_anchored(stats, l4, run, a100, fp32, 145.0).model, 1.0), factor
        # on one grid, at every batch of it (two lines in order at both ends)
        for span in (145.0, 366.0):
            p, a = (lc.predict_anchored(stats, l4, run, g, fp32, span).model for g in (pro, a100))
            for b in (1.0, 2.0, 8.0, 32.0, span):
                assert total(p, b) <= (1 + 1e-9) * total(a, b), (factor, span, b)
    # with no measurement too, on one grid
    for span in (145.0, 366.0):
        p, a = (lc.predict_absolute(stats, g, fp32, span).model for g in (pro, a100))
        for b in (1.0, 2.0, 8.0, 32.0, span):
            assert total(p, b) <= (1 + 1e-9) * total(a, b), (span, b)


def test_fp32_a_reference_that_beats_a_gpu_bounds_it_from_below(catalog_gpus) -> None:
    """Note "across the fp32 paths, from below": at PyTorch's FP32 a GPU with TF32 was held under
    the references it beats and over none, not even the measured GPU's line. BERT-base anchored
    on an H100-80GB at 1.4x its own time at batch 32 put the H100-80GB, the measurement itself,
    1.10x behind an H100-PCIe and an RTX 3090 at batch 1 (on the grid 1..1024); anchored on a
    V100 at 0.7x, an RTX A6000 1.02x behind an A10G. Now no reference (nor the anchor) that beats
    a GPU on every spec at FP32 is predicted slower than it at any batch of its grid, anchored
    or with no measurement."""
    models = default_models()
    lc, refs = models.learned_compute, {g.key: g for g in models._ratio_references}
    gpus = {**refs, **{g.key: g for g in catalog_gpus}}
    stats = core_workload_stats(load_workloads()["bert_base"])
    fp32 = _core.Precision.fp32

    def total(m, b):
        return m.compute_s(b) + m.optimizer_s

    def behind(preds, span):
        return [(r, t, b) for r, t in itertools.permutations(gpus, 2) if r in refs
                and dominates(gpus[r], gpus[t], "fp32") for b in _core.batch_grid(span)
                if total(preds[r], b) > (1 + 1e-9) * total(preds[t], b)]

    checked = 0
    for span in (0.0, 4096.0):
        own = {k: lc.predict_absolute(stats, gpu_spec(g), fp32, span).model for k, g in gpus.items()}
        assert behind(own, span) == [], span
        for anchor, factor in (("H100-80GB", 1.4), ("H100-80GB", 0.7), ("V100-16GB", 0.7), ("A100-40GB", 1.4)):
            run = [_core.Measurement(32.0, factor * total(own[anchor], 32.0))]
            preds = {k: lc.predict_anchored(stats, gpu_spec(gpus[anchor]), run, gpu_spec(g), fp32, span).model
                     for k, g in gpus.items()}
            assert behind(preds, span) == [], (span, anchor, factor)
            checked += 1
    assert checked == 8


def test_a_shared_cache_keeps_a_bounding_model_apart_from_the_gpus_own_at_fp32(catalog_gpus) -> None:
    """Notes "memo by inputs" and "across the fp32 paths, from below": a reference predicted to
    bound another GPU is held from above only, which is not its own prediction (held from below
    too). One cache, shared by every GPU in either order (a GPU's own prediction first, then its
    use as a bound, and the other way round), gives each GPU exactly what a fresh call gives. (On
    the shipped models no GPU's own no-measurement FP32 prediction is held from below over the
    zoo's workloads, so the two coincide there; the cache keeps them apart regardless.)"""
    models = default_models()
    lc = models.learned_compute
    gpus = [gpu_spec(g) for g in models._ratio_references] + [gpu_spec(g) for g in catalog_gpus]
    stats = core_workload_stats(load_workloads()["bert_base"])
    fp32 = _core.Precision.fp32

    def terms(r):
        return (_model_terms(r.model), r.p10_factor, r.p90_factor)

    checked = 0
    for span in (0.0, 4096.0):
        fresh = [terms(lc.predict_absolute(stats, g, fp32, span)) for g in gpus]
        for order in (gpus, gpus[::-1]):
            cache = _core.LearnedComputeCache(stats)
            got = {g.name: terms(lc.predict_absolute_cached(cache, g, fp32, span)) for g in order}
            assert [got[g.name] for g in gpus] == fresh, span
            checked += 1
        anchor = next(g for g in gpus if g.name == "H100-80GB")
        own = lc.predict_absolute(stats, anchor, fp32, span).model
        anchors = [_core.Anchor(anchor, [_core.Measurement(32.0, 1.4 * (own.compute_s(32.0) + own.optimizer_s))])]
        fresh = [terms(lc.predict_anchored_several(stats, anchors, g, fp32, span)) for g in gpus]
        for order in (gpus, gpus[::-1]):
            cache = _core.LearnedComputeCache(stats)
            got = {g.name: terms(lc.predict_anchored_several_cached(cache, anchors, g, fp32, span)) for g in order}
            assert [got[g.name] for g in gpus] == fresh, (span, "anchored")
            checked += 1
    assert checked == 8


def test_a_shared_cache_keeps_apart_reference_models_of_runs_that_differ_only_in_their_phases(catalog_gpus) -> None:
    """Notes "memo by inputs" and "across the fp32 paths": a reference's FP32 model anchored on
    the runs reads their forward_s and backward_s (anchor_to_measurements fits forward +
    backward where every run timed them), so it is kept by them too. Keyed by the batch and the
    iteration alone, a cache that had seen a run without its phases handed that run's reference
    models to the same run with them (BERT-base anchored on an H100-80GB: an A100-80GB's FP32
    line up to 70% off a fresh call), in either order."""
    models = default_models()
    lc = models.learned_compute
    gpus = [gpu_spec(g) for g in models._ratio_references] + [gpu_spec(g) for g in catalog_gpus]
    stats = core_workload_stats(load_workloads()["bert_base"])
    fp32 = _core.Precision.fp32
    anchor = next(g for g in gpus if g.name == "H100-80GB")
    own = lc.predict_absolute(stats, anchor, fp32, 1024.0).model
    t = own.compute_s(32.0) + own.optimizer_s
    plain = _core.Measurement(32.0, 1.4 * t)
    phased = _core.Measurement(32.0, 1.4 * t)
    phased.forward_s, phased.backward_s = 0.3 * t, 0.6 * t
    runs = ([plain], [phased])
    for span in (0.0, 1024.0):
        fresh = {i: [_model_terms(lc.predict_anchored_several(stats, [_core.Anchor(anchor, ms)], g, fp32, span).model)
                     for g in gpus] for i, ms in enumerate(runs)}
        assert fresh[0] != fresh[1]  # the phases change the prediction
        for order in ((0, 1), (1, 0)):
            cache = _core.LearnedComputeCache(stats)
            for i in order:
                got = [_model_terms(lc.predict_anchored_several_cached(cache, [_core.Anchor(anchor, runs[i])], g, fp32,
                                                                       span).model) for g in gpus]
                assert got == fresh[i], (span, order, i)


def test_a_gpu_past_the_data_edge_stays_ahead_of_the_gpus_it_beats(catalog_gpus) -> None:
    """Note "data edge": the lean moves a GPU past the edge before the dominance clip. Moved
    after it, a B300 came out up to 15% behind an H200 (ResNet-18 at batch 8) and an RTX PRO
    6000 up to 10% behind an A100 (NCF, AMP)."""
    models = default_models()
    lc, w = models.learned_compute, load_workloads()
    year = models.data_edge()[0]
    past = [g for g in catalog_gpus if g.launch_year > year]
    assert {g.key for g in past} == {"B300", "RTX-PRO-6000"}
    by_key = {g.key: g for g in catalog_gpus}
    breaks = []
    for key, prec in itertools.product(("resnet18_cifar", "ncf_ml1m", "deepspeech2", "bert_base_128"), PRECISIONS):
        stats = core_workload_stats(w[key])
        for batch in (8.0, 128.0):
            t = {g.key: lc.predict_absolute(stats, gpu_spec(g), core_precision(prec), batch).model for g in catalog_gpus}
            breaks += [(key, prec, batch, x.key, y.key) for x in past for y in catalog_gpus
                       if dominates(x, y, prec) and t[x.key].compute_s(batch) + t[x.key].optimizer_s
                       > 1.02 * (t[y.key].compute_s(batch) + t[y.key].optimizer_s)]
            anchor = by_key["H100-80GB"]
            own = t["H100-80GB"]
            meas = [_core.Measurement(batch, 1.4 * (own.compute_s(batch) + own.optimizer_s))]
            breaks += [(key, prec, batch, *b) for b in _dominance_breaks(lc, stats, anchor, meas, catalog_gpus, prec,
                                                                          batch) if b[0] in {"B300", "RTX-PRO-6000"}]
    assert breaks == []


def test_a_pair_without_fp16_path_gets_the_roofline_ratio_and_its_interval(catalog_gpus) -> None:
    models = default_models()
    k80 = next(g for g in catalog_gpus if not g.fp16_tflops)
    v100 = next(g for g in catalog_gpus if g.key.startswith("V100"))
    wl = load_workloads()["resnet50"]
    stats = core_workload_stats(wl)
    meas = [_core.Measurement(32.0, 0.2)]
    r = models.learned_compute.predict_anchored(stats, gpu_spec(v100), meas, gpu_spec(k80), core_precision("amp"))
    # the V100's measured curve (note "measured batch shape") times the roofline ratio at each batch
    roof_v100, roof_k80 = roofline(wl, v100, "amp"), roofline(wl, k80, "amp")
    measured = models.learned_compute.measured_model(stats, gpu_spec(v100), roof_v100, meas, core_precision("amp"), 32.0)
    want = absolute_on_grid(roof_k80, lambda grid: [math.log((measured.compute_s(g) + measured.optimizer_s)
                                                             / (roof_v100.compute_s(g) + roof_v100.optimizer_s))
                                                    for g in grid], 32.0, 0.01 * roof_k80.per_sample_s())
    assert r.roofline_ratio_only
    np.testing.assert_allclose(_model_terms(r.model), _model_terms(want), rtol=1e-9)
    at_32 = r.model.compute_s(32.0) + r.model.optimizer_s
    roof_ratio = ratio_features(wl, v100, 32.0, k80, 32.0, "amp")[0]
    # at the measured batch, up to the line fitted through the grid (the learned curve the V100
    # moves along bends more than the roofline ratio: 5.6% here)
    assert at_32 == pytest.approx(0.2 * math.exp(roof_ratio), rel=0.07)
    lo, hi = models.ratio.roofline_interval()
    assert (r.p10_factor, r.p90_factor) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)


def test_bad_inputs_name_the_field() -> None:
    models = default_models()
    stats = core_workload_stats(load_workloads()["resnet50"])
    gpu = gpu_spec(device_peaks()["V100-16GB"])
    with pytest.raises(ValueError, match="batch must be finite and > 0, got 0"):
        _core.absolute_features(stats, gpu, 0.0, _core.Precision.fp32)
    with pytest.raises(ValueError, match="measurements must not be empty"):
        models.learned_compute.predict_anchored(stats, gpu, [], gpu, _core.Precision.fp32)
    with pytest.raises(ValueError, match="precision: expected one of fp32, tf32, amp, got 'fp64'"):
        core_precision("fp64")
    cfg = _core.LearnedComputeConfig()
    cfg.shrink = 1.5
    with pytest.raises(ValueError, match="shrink must be in \\[0, 1\\], got 1.5"):
        _core.LearnedCompute(models.ratio.core, models.absolute.core, cfg)
    with pytest.raises(ValueError, match="ratio model must take 32 features, got 9"):
        _core.LearnedCompute(models.absolute.core, models.absolute.core, _core.LearnedComputeConfig())
    with pytest.raises(ValueError, match="layers must not be empty"):
        _core.WorkloadStats([], [], [], [], [], 0.0)


def test_the_core_reads_the_same_combination_from_the_shipped_documents() -> None:
    from srift.learn.models import MODELS_DIR

    ratio, absolute = ((MODELS_DIR / f"compute_{k}.json").read_text() for k in ("ratio", "absolute"))
    got = _core.learned_compute_config(ratio, absolute)
    want = default_models().learned_compute.config

    def specs(gpus):
        return [(g.name, g.fp32_flops, g.tf32_flops, g.fp16_flops, g.memory_bandwidth, g.memory_bytes) for g in gpus]

    for field in ("blend", "blend_weight", "shrink", "anchored_p10", "anchored_p90", "roofline_p10", "roofline_p90",
                  "absolute_p10", "absolute_p90"):
        assert getattr(got, field) == getattr(want, field), field
    assert specs(got.ratio_references) == specs(want.ratio_references) and len(got.ratio_references) == 21
    assert specs(got.absolute_references) == specs(want.absolute_references)
    stats = core_workload_stats(load_workloads()["bert_base"])
    gpu = gpu_spec(device_peaks()["A10"])
    r = _core.LearnedCompute.from_documents(ratio, absolute).predict_absolute(stats, gpu, _core.Precision.amp, 0.0)
    s = default_models().learned_compute.predict_absolute(stats, gpu, _core.Precision.amp, 0.0)
    assert _model_terms(r.model) == _model_terms(s.model)


def test_an_engine_with_runs_on_two_gpu_types_averages_both_anchors(fresh_profile, catalog) -> None:
    """srift::LearnedCompute note "several anchors": each measured GPU type predicts the target
    and the engine takes the geometric mean (fitted affine on the batch grid)."""
    from srift.engine import Engine

    prof = fresh_profile
    prof.add_measurement("T4", local_batch=32, iteration_s=0.21)
    prof.add_measurement("A10G", local_batch=32, iteration_s=0.12)
    e = Engine(prof, catalog)
    model, source = e.compute_model("L4")
    assert source == "learned"
    models = default_models()

    def single(key: str, t: float):
        return models.compute_model(prof, "L4", catalog, e.precision, anchor=(key, [_core.Measurement(32, t)]))[0]

    t4, a10g = single("T4", 0.21), single("A10G", 0.12)
    for batch in (8.0, 32.0, 128.0):
        ta, tb = (m.compute_s(batch) + m.optimizer_s for m in (t4, a10g))
        t = model.compute_s(batch) + model.optimizer_s
        assert t == pytest.approx(math.sqrt(ta * tb), rel=0.05), batch
        assert min(ta, tb) < t < max(ta, tb)
    # the measured types themselves stay measured
    assert e.compute_model("T4")[1] == "measured" and e.compute_model("A10G")[1] == "measured"


def test_batch_grid_and_relative_fit_equal_the_python_twin() -> None:
    from srift.learn.models import affine_relative_fit, batch_grid

    for max_batch in (None, 0.0, 1.0, 100.0, 1024.0, 1025.0, 3000.0, 65536.0, 1e6, -5.0, 12345.6):
        assert _core.batch_grid(max_batch if max_batch is not None else 0.0) == list(batch_grid(max_batch)), max_batch
    for bad in (float("inf"), float("nan")):  # no batch: both refuse it (note "max_batch")
        for grid in (_core.batch_grid, batch_grid):
            with pytest.raises(ValueError, match=r"^max_batch must be finite"):
                grid(bad)
    rng = np.random.default_rng(0)
    for _ in range(100):
        b = np.unique(np.round(rng.uniform(1, 500, rng.integers(2, 12))))
        t = rng.uniform(0.01, 2, b.size) if rng.random() < 0.3 else 0.02 + 0.003 * b * rng.uniform(0.8, 1.2, b.size)
        np.testing.assert_allclose(_core.affine_relative_fit(list(b), list(t)), affine_relative_fit(b, t),
                                   rtol=1e-9, atol=1e-15)
        floor = float(rng.choice([1e-6, 1e-3, 0.003, 0.05]))
        np.testing.assert_allclose(_core.affine_relative_fit(list(b), list(t), floor), affine_relative_fit(b, t, floor),
                                   rtol=1e-9, atol=1e-15)


def _stats_with_kinds(kinds) -> _core.WorkloadStats:
    n = len(kinds)
    return _core.WorkloadStats(kinds, np.full(n, 1e9), np.full(n, 2e9), np.full(n, 1e7), np.full(n, 1e6), 1e6)


def test_layer_kinds_are_refused_unless_they_are_integer_op_kinds() -> None:
    # An int32 forcecast read 2**32 as matmul and 1.7 as conv.
    for bad, shown in ((np.array([2**32], dtype=np.int64), "4294967296"), (np.array([1.7]), "1.7"),
                       ([float("nan")], "nan"), (np.array([2**63], dtype=np.uint64), "9223372036854775808"),
                       ([-2**31 - 1], "-2147483649")):
        with pytest.raises(ValueError, match=f"kind\\[0\\] must be an integer OpKind value, got {shown}"):
            _stats_with_kinds(bad)
    with pytest.raises(ValueError, match="kind\\[1\\] must be an integer OpKind value, got 'conv'"):
        _stats_with_kinds(np.array([0, "conv"], dtype=object))
    with pytest.raises(ValueError, match="kind must hold integer OpKind values, got an array of dtype <U4"):
        _stats_with_kinds(["0", "conv"])
    with pytest.raises(ValueError, match="kind must be 1-D"):
        _stats_with_kinds(np.zeros((1, 1), dtype=np.int32))
    with pytest.raises(ValueError, match="layers\\[0\\].kind must be a known op kind, got 9"):  # the core's check
        _stats_with_kinds(np.array([9], dtype=np.int64))
    for kinds in ([1], np.array([1], dtype=np.int32), np.array([1], dtype=np.uint8), np.array([1.0]),
                  [_core.OpKind.conv]):
        stats = _stats_with_kinds(kinds)
        assert stats.flop_share(_core.OpKind.conv) == 1.0, kinds
    with pytest.raises(ValueError, match="kind\\[0\\] must be an integer OpKind value, got 4294967296"):
        _core.roofline_compute(np.array([2**32]), [1e9], [2e9], [1e7], [1e6], _core.GpuSpec(), _core.Precision.fp32,
                               0.0)


def test_workload_features_refuse_a_gpu_or_batch_they_cannot_use() -> None:
    stats = _stats_with_kinds([0])
    g = _core.GpuSpec()
    g.name, g.fp32_flops, g.memory_bandwidth, g.memory_bytes = "g", 1e13, 0.0, 1e10
    with pytest.raises(ValueError, match="gpu 'g'.memory_bandwidth must be finite and >= 1, got 0"):
        stats.membound_share(g, _core.Precision.fp32)  # was NaN
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ValueError, match="batch must be finite and >= 0"):
            stats.log_work(bad)


def test_relative_fit_holds_at_any_magnitude() -> None:
    for scale in (1e300, 1.0, 1e-300):  # 1e300 gave (inf, 0.001): the squares underflowed
        fixed, per = _core.affine_relative_fit([1.0, 2.0], [1.0 * scale, 1.5 * scale], 1e-3 * scale)
        assert fixed / scale == pytest.approx(0.5, rel=1e-12) and per / scale == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ValueError, match="span too wide a range"):
        _core.affine_relative_fit([1.0, 2.0], [1e-300, 1e300])


def test_learned_model_type_names_the_shipped_mean_model() -> None:
    from srift.learn.models import MODELS_DIR

    absolute = _core.LearnedModel.from_json((MODELS_DIR / "compute_absolute.json").read_text())
    assert absolute.type == "mean"  # was "unknown"
    ratio = _core.LearnedModel.from_json((MODELS_DIR / "compute_ratio.json").read_text())
    assert ratio.type in ("linear", "tree_ensemble", "mlp", "mean")


def test_model_documents_decode_unicode_as_pythons_json() -> None:
    import json

    doc = {"schema": "srift.learned-model/1", "name": "latency \U0001F680 model", "features": ["x\U0001F680"],
           "model": {"type": "linear", "coef": [1.0], "intercept": 0.0}}
    for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False)):  # surrogate pairs, raw UTF-8
        m = _core.LearnedModel.from_json(text)
        assert m.name == doc["name"] and m.feature_names == doc["features"]
        with pytest.raises(ValueError, match="model 'latency \U0001F680 model' takes 1"):
            m.predict([1.0, 2.0])  # the message quotes the name: it was a UnicodeDecodeError
    base = json.dumps(doc).replace("latency \\ud83d\\ude80 model", "%s")
    for esc in ("\\uZZZZ", "\\u-001", "\\u 41x", "\\u+041"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(base % esc)  # what Python's json refuses ...
        with pytest.raises(ValueError, match="learned model JSON: \\\\u escape needs four hex digits"):
            _core.LearnedModel.from_json(base % esc)  # ... the core refuses (it read "A" or NUL)
    for esc in ("\\ud83d", "\\ude80", "\\ud83d\\u0041"):  # Python's json keeps a lone surrogate in a str
        with pytest.raises(ValueError, match="surrogate"):  # which no UTF-8 can hold
            _core.LearnedModel.from_json(base % esc)
    with pytest.raises(ValueError, match="invalid UTF-8"):
        _core.LearnedModel.from_json(b'{"schema": "\xff\xfe"}')


def test_a_model_file_whose_correction_is_out_of_range_is_named(catalog_gpus) -> None:
    """An intercept of +1000 in compute_absolute.json loaded, then every time overflowed to an
    error about seconds[0] that named no model; now the model file is named at the batch."""
    import json

    from srift.learn.models import MODELS_DIR

    absolute = json.loads((MODELS_DIR / "compute_absolute.json").read_text())

    def bump(m):
        if m["type"] == "linear":
            m["intercept"] += 1000
        elif m["type"] == "tree_ensemble":
            m["base"] += 1000
        else:
            for member in m["members"]:
                bump(member["model"])

    bump(absolute["model"])
    lc = _core.LearnedCompute.from_documents((MODELS_DIR / "compute_ratio.json").read_text(), json.dumps(absolute))
    wl = load_workloads()[WORKLOADS[0]]
    g = catalog_gpus[0]
    with pytest.raises(ValueError, match=r"compute_absolute\.json\) log correction of .* must be within \+-50"):
        lc.predict_absolute(core_workload_stats(wl), gpu_spec(g), core_precision("amp"), 0.0)


def test_the_core_names_the_features_it_computes_as_the_python_twin() -> None:
    # csrc/learned_compute.cpp note "feature names": the lists the core checks documents against
    from srift.learn.features import ABSOLUTE_FEATURES, RATIO_FEATURES

    assert _core.ratio_feature_names() == list(RATIO_FEATURES)
    assert _core.absolute_feature_names() == list(ABSOLUTE_FEATURES)


@pytest.mark.parametrize("name, edit, message", [
    ("ratio", lambda f: f.__setitem__(slice(3, 5), f[3:5][::-1]),
     r"compute_ratio\.features\[3\]: expected 'log_bw_ratio', got 'log_batch_ratio'"),
    ("ratio", lambda f: f.__setitem__(18, "share_matmul_times_log_peak_ratio"),
     r"compute_ratio\.features\[18\]: expected 'share_matmul_x_log_peak_ratio', got "
     r"'share_matmul_times_log_peak_ratio'"),
    ("absolute", lambda f: f.reverse(), r"compute_absolute\.features\[0\]: expected 'log_roof', got 'fixed_share'"),
], ids=["swapped", "renamed", "reversed"])
def test_compute_documents_with_other_features_are_refused_by_the_core(name: str, edit, message: str) -> None:
    # A document whose features were reordered or renamed was evaluated by the core with each
    # value in the slot the core computes it for (the Python loader refused it; a C++ embedder's
    # from_documents did not).
    import json

    from srift.learn.models import MODELS_DIR

    docs = {k: json.loads((MODELS_DIR / f"compute_{k}.json").read_text()) for k in ("ratio", "absolute")}
    edit(docs[name]["features"])
    texts = {k: json.dumps(d) for k, d in docs.items()}
    _core.LearnedModel.from_json(texts[name])  # a valid model document in itself
    with pytest.raises(ValueError, match=message):
        _core.LearnedCompute.from_documents(texts["ratio"], texts["absolute"])
    with pytest.raises(ValueError, match=message):
        _core.LearnedCompute(*(_core.LearnedModel.from_json(texts[k]) for k in ("ratio", "absolute")),
                             _core.LearnedComputeConfig())


def test_the_measured_gpus_own_curve_is_no_faster_than_its_peak() -> None:
    """Note "measured floor": NCF run on a T4 at batch 8 at 3x its peak floor (PyTorch's FP32)
    scaled the learned curve, flat at ~32 ms, through the run and took its slope down with it:
    0.024x the floor at batch 1024. Held, it is on the floor there, through the run, and equal to
    the Python twin (srift.learn.models.measured_held_to_floor) that the bench backtests."""
    from srift.learn.models import batch_grid, measured_held_to_floor, split_like

    cat = Catalog.default()
    wl, t4 = load_workloads()["ncf"], peaks_from_catalog(cat, "T4")
    lc, stats = default_models().learned_compute, core_workload_stats(wl)
    for prec in ("fp32", "amp"):
        floor = peak_floor_per_sample(wl, t4, prec)
        roof = roofline(wl, t4, prec)
        learned = lc.predict_absolute(stats, gpu_spec(t4), core_precision(prec), 1024.0).model
        for batch, k in ((8.0, 3.0), (1.0, 1.0), (32.0, 1.3), (64.0, 400.0), (8.0, 0.5)):
            run = [_core.Measurement(batch, k * floor * batch)]
            m = lc.measured_model(stats, gpu_spec(t4), roof, run, core_precision(prec), 1024.0)
            scaled = _core.anchor_to_measurements(
                split_like(roof, learned.forward_fixed_s + learned.backward_fixed_s + learned.optimizer_s,
                           learned.per_sample_s()), run)
            total = lambda c, b: c.compute_s(b) + c.optimizer_s  # noqa: E731
            assert total(m, batch) == pytest.approx(k * floor * batch, rel=1e-12)
            if k < 1:  # a run faster than its floor: no floor, the scaled curve as it was
                assert _model_terms(m) == _model_terms(scaled)
                continue
            for b in batch_grid(1024.0):
                assert total(m, b) >= floor * b * (1 - 1e-12), (prec, batch, k, b)
            twin = measured_held_to_floor(scaled, wl, t4, prec, run, 1024.0)
            np.testing.assert_allclose(_model_terms(m), _model_terms(twin), rtol=1e-12, atol=1e-18)
            if total(scaled, 1024.0) < floor * 1024:  # bound: on the floor at the grid's end
                assert total(m, 1024.0) == pytest.approx(floor * 1024, rel=1e-9)
            else:
                assert _model_terms(m) == _model_terms(scaled)
    # the brief's case, as it read before the floor
    floor = peak_floor_per_sample(wl, t4, "fp32")
    run = [_core.Measurement(8.0, 3.0 * floor * 8.0)]
    roof = roofline(wl, t4, "fp32")
    learned = lc.predict_absolute(stats, gpu_spec(t4), core_precision("fp32"), 1024.0).model
    scaled = _core.anchor_to_measurements(
        split_like(roof, learned.forward_fixed_s + learned.backward_fixed_s + learned.optimizer_s,
                   learned.per_sample_s()), run)
    assert (scaled.compute_s(1024.0) + scaled.optimizer_s) / (floor * 1024) == pytest.approx(0.0237, abs=5e-4)


def test_a_whole_instances_fit_is_held_as_the_python_twin_holds_it() -> None:
    """srift::hold_to_measured_floor, what the engine holds a whole instance's fit with (note
    "measured floor"): on instance runs through the GPU's no-measurement curve, at 0.25-4x it and
    two flat batches, the core's answer is the Python twin's (measured_held_to_floor), on or
    above the floor on the grid, and through a single run."""
    from srift.learn.models import batch_grid, measured_held_to_floor

    cat = Catalog.default()
    lc = default_models().learned_compute
    total = lambda c, b: c.compute_s(b) + c.optimizer_s  # noqa: E731
    moved = 0
    for key in ("ncf", "resnet50", "bert_large"):
        wl = load_workloads()[key]
        stats = core_workload_stats(wl)
        for gpu_key in ("T4", "V100-16GB", "H100-80GB"):
            g = peaks_from_catalog(cat, gpu_key)
            for prec in ("fp32", "amp"):
                floor = peak_floor_per_sample(wl, g, prec)
                single = lc.predict_absolute(stats, gpu_spec(g), core_precision(prec), 4096.0).model
                for batch in (8.0, 256.0):
                    cases = [[(batch, k * total(single, batch))] for k in (0.25, 1.0, 4.0)]
                    cases += [[(batch, 2 * floor * batch), (2 * batch, 2.2 * floor * batch)]]
                    for points in cases:
                        ms = [_core.Measurement(b, t) for b, t in points]
                        fit = _core.anchor_to_measurements(single, ms)
                        held = _core.hold_to_measured_floor(stats, gpu_spec(g), fit, ms, core_precision(prec), 4096.0)
                        twin = measured_held_to_floor(fit, wl, g, prec, ms, 4096.0)
                        np.testing.assert_allclose(_model_terms(held), _model_terms(twin), rtol=1e-12, atol=1e-18)
                        if any(t < floor * b for b, t in points):  # no floor
                            assert _model_terms(held) == _model_terms(fit)
                            continue
                        for b in batch_grid(4096.0):
                            assert total(held, b) >= floor * b * (1 - 1e-12), (key, gpu_key, prec, points, b)
                        if len(points) == 1:
                            assert total(held, batch) == pytest.approx(points[0][1], rel=1e-12)
                        moved += _model_terms(held) != _model_terms(fit)
    assert moved >= 10  # the floor binds on these fits (the engine's before it held them)


def test_hold_to_measured_floor_refuses_a_max_batch_that_is_no_number() -> None:
    """A NaN or infinite max_batch read as "not known": the Python wrapper made it 0 and the
    core took any non-finite value for it, so the curve was held to batch 1024 alone (ResNet-50
    on a T4 at AMP, one run at 1.05x its floor at batch 4: 0.9998x the floor at batch 1e6,
    where max_batch=1e6 holds it there). Both refuse it, naming max_batch."""
    from srift.learn.models import hold_to_measured_floor

    model, batch, loss_fn = srift.zoo.build("resnet50", batch_size=4, device="meta")
    profile = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name="resnet50")
    cat = Catalog.default()
    wl = load_workloads()["resnet50"]
    stats, g = core_workload_stats(wl), peaks_from_catalog(cat, "T4")
    f = peak_floor_per_sample(wl, g, "amp")
    single = default_models().learned_compute.predict_absolute(stats, gpu_spec(g), core_precision("amp"), 1024.0).model
    runs = [_core.Measurement(4.0, 1.05 * f * 4)]
    fit = _core.anchor_to_measurements(single, runs)
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match=r"^max_batch must be finite .*got (nan|inf)$"):
            _core.hold_to_measured_floor(stats, gpu_spec(g), fit, runs, core_precision("amp"), bad)
        with pytest.raises(ValueError, match=r"^max_batch must be finite"):
            hold_to_measured_floor(profile, "T4", cat, "amp", fit, runs, bad)
    held = hold_to_measured_floor(profile, "T4", cat, "amp", fit, runs, 1e6)
    assert held.compute_s(1e6) + held.optimizer_s >= (1 - 1e-12) * f * 1e6
    unknown = hold_to_measured_floor(profile, "T4", cat, "amp", fit, runs, None)  # the measured batches' grid
    assert _model_terms(unknown) == _model_terms(hold_to_measured_floor(profile, "T4", cat, "amp", fit, runs, 0.0))


def test_every_learned_compute_call_refuses_a_max_batch_that_is_no_number() -> None:
    """Note "max_batch" (csrc/learned_compute.cpp): NaN or an infinity is no largest batch. The
    core's predictions, batch_grid and the Python wrappers read it as "not known" (the grid to
    1024), so inf, "every batch", held a measured curve to batch 1024 alone (ResNet-50 on a T4
    at AMP, one run at 1.05x its floor at batch 4: 0.9998x the floor at batch 1e6). Every one
    refuses it, naming max_batch; None and <= 0 stay "not known"."""
    from srift.learn.models import batch_grid, measured_held_to_floor

    model, batch, loss_fn = srift.zoo.build("resnet50", batch_size=4, device="meta")
    profile = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name="resnet50")
    cat = Catalog.default()
    wl = load_workloads()["resnet50"]
    stats, t4, v100 = core_workload_stats(wl), peaks_from_catalog(cat, "T4"), peaks_from_catalog(cat, "V100-16GB")
    amp = core_precision("amp")
    f = peak_floor_per_sample(wl, t4, "amp")
    runs = [_core.Measurement(4.0, 1.05 * f * 4)]
    models = default_models()
    lc = models.learned_compute
    cache = models.compute_cache(profile)
    roof = stats.roofline(gpu_spec(t4), amp)
    anchors = [_core.Anchor(gpu_spec(v100), runs)]
    calls = {
        "_core.batch_grid": lambda mb: _core.batch_grid(mb),
        "batch_grid (twin)": lambda mb: batch_grid(mb),
        "predict_absolute": lambda mb: lc.predict_absolute(stats, gpu_spec(t4), amp, mb),
        "predict_anchored": lambda mb: lc.predict_anchored(stats, gpu_spec(v100), runs, gpu_spec(t4), amp, mb),
        "predict_anchored (same specs)": lambda mb: lc.predict_anchored(stats, gpu_spec(t4), runs, gpu_spec(t4), amp, mb),
        "predict_anchored_several": lambda mb: lc.predict_anchored_several(stats, anchors, gpu_spec(t4), amp, mb),
        "measured_model": lambda mb: lc.measured_model(stats, gpu_spec(t4), roof, runs, amp, mb),
        "predict_absolute_cached": lambda mb: lc.predict_absolute_cached(cache, gpu_spec(t4), amp, mb),
        "predict_anchored_several_cached": lambda mb: lc.predict_anchored_several_cached(cache, anchors, gpu_spec(t4),
                                                                                         amp, mb),
        "measured_model_cached": lambda mb: lc.measured_model_cached(cache, gpu_spec(t4), roof, runs, amp, mb),
        "Models.compute_model": lambda mb: models.compute_model(profile, "T4", cat, "amp", max_batch=mb),
        "Models.compute_model (anchored)": lambda mb: models.compute_model(profile, "T4", cat, "amp",
                                                                          anchor=("V100-16GB", runs), max_batch=mb),
        "Models.measured_model": lambda mb: models.measured_model(profile, "T4", cat, "amp", roof, runs, max_batch=mb),
        "measured_held_to_floor (twin)": lambda mb: measured_held_to_floor(roof, wl, t4, "amp", runs, mb),
    }
    for name, call in calls.items():
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(ValueError, match=r"^max_batch must be finite .*got (nan|inf|-inf)$") as err:
                call(bad)
            assert str(err.value).endswith(f"got {bad}"), name
        call(-1.0)  # <= 0: not known, as before
        call(0.0)
    assert list(batch_grid(None)) == list(_core.batch_grid(0.0)) == list(_core.batch_grid(-5.0))
    assert _core.batch_grid(0.0)[-1] == 1024.0
    unknown = models.compute_model(profile, "T4", cat, "amp")[0]
    assert _model_terms(unknown) == _model_terms(models.compute_model(profile, "T4", cat, "amp", max_batch=0.0)[0])


def test_several_measured_batches_hold_the_floor_as_the_python_twin(catalog_gpus) -> None:
    """Note "measured floor" with two runs whose own line is shallower than the floor: turned
    about their mean batch, through their mean time, as the twin turns it."""
    from srift.learn.models import batch_grid, measured_held_to_floor

    wl = load_workloads()["resnet50"]
    lc, stats = default_models().learned_compute, core_workload_stats(wl)
    for g in catalog_gpus[:6]:
        floor = peak_floor_per_sample(wl, g, "amp")
        runs = [_core.Measurement(16.0, 3.0 * floor * 16), _core.Measurement(64.0, 1.2 * floor * 64)]
        roof = roofline(wl, g, "amp")
        m = lc.measured_model(stats, gpu_spec(g), roof, runs, core_precision("amp"), 512.0)
        line = _core.anchor_to_measurements(roof, runs)
        twin = measured_held_to_floor(line, wl, g, "amp", runs, 512.0)
        np.testing.assert_allclose(_model_terms(m), _model_terms(twin), rtol=1e-12, atol=1e-18)
        assert m.compute_s(40.0) + m.optimizer_s == pytest.approx((3.0 * 16 + 1.2 * 64) / 2 * floor, rel=1e-12)
        for b in batch_grid(512.0):
            assert m.compute_s(b) + m.optimizer_s >= floor * b * (1 - 1e-12)
        end = batch_grid(512.0)[-1]  # the grid spans at least GRID_MIN_SPAN
        assert m.compute_s(end) + m.optimizer_s == pytest.approx(end * floor, rel=1e-9)


def test_the_measured_floor_keeps_a_measured_optimizer_step(catalog_gpus) -> None:
    """Note "measured floor" with every run's forward and backward timed (a profile's own
    timings): the optimizer step is measured and the turn keeps it, in the core and its twin.
    Before, the turn capped it at half the lowered fixed cost (ResNet-50 at AMP, a step of 30%
    of the runs: 0.77x of it kept) and moved the rest into the forward and backward, which k
    accumulation micro-steps count k times. A run whose forward + backward beats the floor
    beats its own: no floor."""
    from srift.learn.models import batch_grid, measured_held_to_floor

    wl = load_workloads()["resnet50"]
    lc, stats = default_models().learned_compute, core_workload_stats(wl)
    for g in catalog_gpus[:6]:
        floor = peak_floor_per_sample(wl, g, "amp")
        runs = []
        for b, k in ((16.0, 3.0), (64.0, 1.5)):  # compute 0.7 f per sample: the floor binds
            t = k * floor * b
            runs.append(_core.Measurement(b, t, 0.7 * t / 3, 0.7 * t * 2 / 3))  # 30% of it the step
        step = sum(0.3 * r.iteration_s for r in runs) / 2
        roof = roofline(wl, g, "amp")
        m = lc.measured_model(stats, gpu_spec(g), roof, runs, core_precision("amp"), 512.0)
        assert m.optimizer_s == pytest.approx(step, rel=1e-12), g
        assert m.forward_fixed_s >= 0 and m.backward_fixed_s >= 0
        line = _core.anchor_to_measurements(roof, runs)
        assert line.per_sample_s() < floor  # the premise: the floor binds
        twin = measured_held_to_floor(line, wl, g, "amp", runs, 512.0)
        np.testing.assert_allclose(_model_terms(m), _model_terms(twin), rtol=1e-12, atol=1e-18)
        for b in batch_grid(512.0):
            assert m.compute_s(b) + m.optimizer_s >= floor * b * (1 - 1e-12)
        # through the runs' mean, as without the phases
        assert m.compute_s(40.0) + m.optimizer_s == pytest.approx((3.0 * 16 + 1.5 * 64) / 2 * floor, rel=1e-12)
        # forward + backward under the floor at batch 64 (0.9x), the iteration above it: no floor
        quick = [runs[0], _core.Measurement(64.0, 1.2 * floor * 64, 0.3 * floor * 64, 0.6 * floor * 64)]
        q = lc.measured_model(stats, gpu_spec(g), roof, quick, core_precision("amp"), 512.0)
        assert _model_terms(q) == _model_terms(_core.anchor_to_measurements(roof, quick))


def test_a_shared_cache_predicts_bit_for_bit_as_fresh_calls(catalog_gpus) -> None:
    """Note "shared memo" (srift::LearnedCompute::Cache): one cache per workload, shared by every
    catalog GPU, every precision, several grids (max_batch) and anchors, in an order that
    interleaves them, gives exactly what a fresh call gives; a key that assumed one target,
    grid or precision per call would hand one call's evaluation to another. A GPU identical to
    a reference but for its launch year (the data edge's lean) and one with a reference's name
    but other specs must not take the reference's entries either."""
    lc = default_models().learned_compute
    workloads = load_workloads()
    names = sorted(workloads)[:: max(1, len(workloads) // 6)][:6]
    specs = [gpu_spec(p) for p in catalog_gpus]

    def spec_like(g, name: str, scale: float = 1.0, launch_year: int | None = None):
        out = _core.GpuSpec()
        out.name, out.memory_bytes, out.fp32_flops = name, g.memory_bytes, g.fp32_flops * scale
        out.tf32_flops, out.fp16_flops = g.tf32_flops, g.fp16_flops
        out.memory_bandwidth = g.memory_bandwidth * scale
        out.launch_year = g.launch_year if launch_year is None else launch_year
        return out

    ref = lc.config.absolute_references[0]
    specs.append(spec_like(ref, ref.name + "-later", launch_year=2099))  # past the data's edge
    specs.append(spec_like(ref, ref.name, scale=1.37))  # a reference's name, other specs
    def same(a, b) -> bool:
        return (_model_terms(a.model) == _model_terms(b.model) and a.p10_factor == b.p10_factor
                and a.p90_factor == b.p90_factor and a.roofline_ratio_only == b.roofline_ratio_only
                and a.past_data_edge == b.past_data_edge)

    checked = 0
    for name in names:
        stats = core_workload_stats(workloads[name])
        cache = _core.LearnedComputeCache(stats)
        anchor_sets = [[_core.Anchor(specs[0], [_core.Measurement(32, 0.05)])],
                       [_core.Anchor(specs[3], [_core.Measurement(8, 0.02), _core.Measurement(64, 0.09)])],
                       [_core.Anchor(specs[1], [_core.Measurement(16, 0.03)]),
                        _core.Anchor(specs[-3], [_core.Measurement(16, 0.011)])]]
        for precision in ("fp32", "amp", "tf32"):
            prec = core_precision(precision)
            for max_batch in (0.0, 96.0, 3000.0):
                for target in specs:
                    fresh = lc.predict_absolute(stats, target, prec, max_batch)
                    assert same(lc.predict_absolute_cached(cache, target, prec, max_batch), fresh), (name, target.name)
                    for anchors in anchor_sets:
                        try:
                            fresh = lc.predict_anchored_several(stats, anchors, target, prec, max_batch)
                        except ValueError:
                            with pytest.raises(ValueError):
                                lc.predict_anchored_several_cached(cache, anchors, target, prec, max_batch)
                            continue
                        got = lc.predict_anchored_several_cached(cache, anchors, target, prec, max_batch)
                        assert same(got, fresh), (name, precision, max_batch, target.name, anchors[0].gpu.name)
                        checked += 1
    assert checked > 1000


def test_a_cache_is_bound_to_its_models() -> None:
    """A cache holds one LearnedCompute's model evaluations: another (other models) refuses it;
    a copy of the same one does not."""
    m = default_models()
    stats = core_workload_stats(next(iter(load_workloads().values())))
    target = m.learned_compute.config.absolute_references[0]
    cache = _core.LearnedComputeCache(stats)
    m.learned_compute.predict_absolute_cached(cache, target, core_precision("fp32"), 0.0)
    ratio_json = (Path(MODELS_DIR) / "compute_ratio.json").read_text()
    absolute_json = (Path(MODELS_DIR) / "compute_absolute.json").read_text()
    other = _core.LearnedCompute.from_documents(ratio_json, absolute_json)
    with pytest.raises(ValueError, match="another LearnedCompute"):
        other.predict_absolute_cached(cache, target, core_precision("fp32"), 0.0)


def _bert_base_128_profile():
    """BERT-base at 128 tokens profiled on meta, as srift.learn.workloads profiles it."""
    import warnings

    from srift.learn.workloads import DATA_MODELS, PROFILE_BATCH

    name, options = next((n, o) for key, n, o, _ in DATA_MODELS.values() if key == "bert_base_128")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, batch, loss_fn = srift.zoo.build(name, PROFILE_BATCH.get(name, 2), device="meta", **options)
        return srift.profile(model, batch, loss_fn, device="meta", name="bert_base_128")


def test_a_reference_bounds_a_gpu_with_its_own_line_on_its_own_grid() -> None:
    """srift::LearnedCompute note "own grids": each GPU's grid ends at what fits its memory, and
    a reference bounding a target was refitted on the target's grid, not its own prediction.
    BERT-base at 128 tokens at FP32 anchored on an L4 at batch 1 (0.7x its own time), as
    bench/dominance_scan.py --small predicts it: the RTX PRO 6000 (grid 1..1,098), ahead of the
    A100-40GB (1..1,024, 435 fit) on every spec, came out 1.014x behind it at batch 1. With the
    engine's grid ends, each reference's own line bounds it, and it is in order."""
    import warnings

    from srift.engine import Engine, EngineConfig

    profile = _bert_base_128_profile()
    cat = Catalog.default()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(profile, cat, EngineConfig(precision="fp32"))
    ends = eng.grid_ends()
    # every catalog GPU's memory with its memory_max_batch, each memory once
    table = dict(ends)
    assert len(table) == len(ends)
    for k in cat.gpu_keys():
        assert table[float(cat.gpu(k).memory_gib) * 2**30] == eng.memory_max_batch(k)
    assert (eng.memory_max_batch("L4"), eng.memory_max_batch("A100-40GB"), eng.memory_max_batch("RTX-PRO-6000")) == \
        (226.0, 435.0, 1098.0)
    models = default_models()

    def at_1(key: str, anchor, grid_ends) -> float:
        m = models.compute_model(profile, key, cat, "fp32", anchor=anchor, max_batch=eng.memory_max_batch(key),
                                 grid_ends=grid_ends)[0]
        return m.compute_s(1.0) + m.optimizer_s

    run = [_core.Measurement(1.0, 0.7 * at_1("L4", None, ends))]
    before = at_1("RTX-PRO-6000", ("L4", run), None) / at_1("A100-40GB", ("L4", run), None)
    after = at_1("RTX-PRO-6000", ("L4", run), ends) / at_1("A100-40GB", ("L4", run), ends)
    assert before > 1.01  # 1.0143
    assert after <= 1 + 1e-12
    assert at_1("RTX-PRO-6000", None, ends) <= at_1("A100-40GB", None, ends) * (1 + 1e-12)


def test_no_grid_ends_or_the_targets_own_change_no_prediction(catalog_gpus) -> None:
    """Note "own grids": a caller passing no grid ends (None or []) gets the prediction as before
    them, bit for bit, and so does one listing every memory with the target's own max_batch (every
    reference on the target's grid, as before); fresh calls and through one shared cache."""
    profile = _bert_base_128_profile()
    cat = Catalog.default()
    models = default_models()
    cfg = models.learned_compute.config
    memories = sorted({g.memory_gib * 2**30 for g in catalog_gpus} |
                      {g.memory_bytes for g in [*cfg.ratio_references, *cfg.absolute_references]})
    cache = models.compute_cache(profile)
    run = ("T4", [_core.Measurement(8.0, 0.05)])
    for prec, key, anchor, max_batch in itertools.product(("fp32", "amp"), ("RTX-PRO-6000", "H100-80GB", "A10G"),
                                                          (None, run), (300.0, 1098.0)):
        bare = _model_terms(models.compute_model(profile, key, cat, prec, anchor=anchor, max_batch=max_batch)[0])
        for grid_ends in (None, [], [(m, max_batch) for m in memories]):
            for c in (None, cache):
                got = models.compute_model(profile, key, cat, prec, anchor=anchor, max_batch=max_batch, cache=c,
                                           grid_ends=grid_ends)[0]
                assert _model_terms(got) == bare, (prec, key, anchor is None, max_batch, grid_ends is None, c is None)


def test_absolute_prediction_with_grid_ends_equals_the_python_composition(catalog_gpus) -> None:
    """The twin of note "own grids" with no measurement (srift.learn.models.absolute_line_in_order
    with grid_ends): each reference's own line on its own grid bounds the target's, at the target's
    grid ends; equal to the core's to 1e-9, and unlike the lines on the target's grid somewhere.
    Also with every other memory's end not known (-1: the least grid, 1..1,024) and with every
    other memory left out of the table (that reference on the target's grid)."""
    models = default_models()
    refs = models._references
    w = load_workloads()
    memories = sorted({g.memory_gib * 2**30 for g in catalog_gpus} | {g.memory_gib * 2**30 for g in refs})
    # a grid end per memory unlike any other's: 12 samples per GiB
    table = {m: float(math.floor(12 * m / 2**30)) for m in memories}
    unknown = {m: -1.0 if i % 2 else float(math.floor(40 * m / 2**30)) for i, m in enumerate(memories)}
    missing = {m: float(math.floor(30 * m / 2**30)) for i, m in enumerate(memories) if i % 2}
    moved = 0
    for (name, table), key, prec, g in itertools.product((("12/GiB", table), ("unknown", unknown),
                                                          ("missing", missing)), ("bert_base", "resnet50"),
                                                         PRECISIONS, catalog_gpus):
        if prec == "fp32" and g.tf32_tflops:
            continue  # PyTorch's FP32 on a TF32 GPU: no twin (test_pytorch_default_fp32_*)
        wl, max_batch = w[key], table.get(g.memory_gib * 2**30, 2000.0)
        expected = absolute_line_in_order(models.absolute.core.predict, wl, g, prec, refs, max_batch,
                                          _lean(models, "absolute"), grid_ends=table)
        r = models.learned_compute.predict_absolute(core_workload_stats(wl), gpu_spec(g), core_precision(prec),
                                                    max_batch, sorted(table.items()))
        np.testing.assert_allclose(_model_terms(r.model), _model_terms(expected), rtol=1e-9, atol=1e-15)
        on_targets = models.learned_compute.predict_absolute(core_workload_stats(wl), gpu_spec(g),
                                                             core_precision(prec), max_batch)
        moved += _model_terms(on_targets.model) != _model_terms(r.model)
    assert moved > 0
