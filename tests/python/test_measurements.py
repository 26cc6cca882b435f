"""Measurements as the core reads them (csrc/include/srift/measurements.hpp): a run's precision,
refused by a prediction at another one (compute.hpp note "measurement precision"), and repeated
runs of one configuration merged by the core (note "repeated measurements") exactly as
srift/engine.py merged them before the core did (the old code is kept below as the reference)."""
from __future__ import annotations

import itertools
import random
import re
import warnings
from dataclasses import dataclass

import pytest

from srift import _core
from srift.engine import REPEAT_SPREAD_SHARE, Engine, EngineConfig

# ---- the engine's rule before the core had it (srift/engine.py, 0.x): the reference ----------


@dataclass
class _OldRepeat:
    key: tuple[int, int]
    point: _core.Measurement
    seconds: float


def _old_median_point(points):
    ordered = sorted(points, key=lambda p: p.iteration_s)
    n = len(ordered)
    middle = ordered[(n - 1) // 2:n // 2 + 1]
    split = all(p.forward_s >= 0 and p.backward_s >= 0 for p in points)

    def mean(values):
        return sum(values) / len(values)

    return _core.Measurement(ordered[0].local_batch, mean([p.iteration_s for p in middle]),
                             mean([p.forward_s for p in middle]) if split else -1.0,
                             mean([p.backward_s for p in middle]) if split else -1.0)


def _old_merged_repeats(repeats):
    groups: dict = {}
    for i, r in enumerate(repeats):
        groups.setdefault(r.key, []).append(i)
    points = [r.point for r in repeats]
    for members in groups.values():
        if len(members) >= 3:
            median = _old_median_point([repeats[i].point for i in members])
            for i in members:
                points[i] = median
    return points


def _old_disagreeing(repeats, share=0.20):
    """(members, spread, used) of each group the old warning named, in its order."""
    groups: dict = {}
    for i, r in enumerate(repeats):
        groups.setdefault(r.key, []).append(i)
    out = []
    for members in groups.values():
        times = [repeats[i].seconds for i in members]
        if len(members) < 2 or max(times) <= (1 + share) * min(times):
            continue
        ordered = sorted(times)
        n = len(ordered)
        out.append((members, max(times) / min(times) - 1, (ordered[(n - 1) // 2] + ordered[n // 2]) / 2))
    return out


def _fields(p: _core.Measurement) -> tuple:
    return (p.local_batch, p.iteration_s, p.forward_s, p.backward_s)


def _core_merge(repeats, share=0.20):
    runs = [_core.MeasuredRun(r.point, r.key[1], r.seconds) for r in repeats]
    return _core.merge_repeats(runs, share)


def _assert_same_as_before(repeats, share=0.20):
    merged = _core_merge(repeats, share)
    assert [_fields(p) for p in merged.points] == [_fields(p) for p in _old_merged_repeats(repeats)]
    got = [(list(g.members), g.spread, g.used_s) for g in merged.disagreeing]
    assert got == _old_disagreeing(repeats, share)
    for g in merged.disagreeing:
        assert (int(g.local_batch), g.accumulation_steps) == repeats[g.members[0]].key


def _repeat(batch, seconds, forward=-1.0, backward=-1.0, steps=1, measured=None):
    return _OldRepeat((batch, steps), _core.Measurement(float(batch), seconds, forward, backward),
                      seconds if measured is None else measured)


# ---- repeats: the core against the old rule -------------------------------------------------


@pytest.mark.parametrize("repeats", [
    pytest.param([], id="none"),
    pytest.param([_repeat(32, 0.2)], id="one"),
    pytest.param([_repeat(32, 0.2), _repeat(32, 0.5)], id="two-disagree"),
    pytest.param([_repeat(32, 0.2), _repeat(32, 0.21)], id="two-agree"),
    pytest.param([_repeat(32, 0.2), _repeat(32, 0.24)], id="two-at-the-share"),
    pytest.param([_repeat(32, 0.3, 0.1, 0.15), _repeat(32, 0.1, 0.03, 0.05), _repeat(32, 0.2, 0.06, 0.1)],
                 id="three-with-phases"),
    pytest.param([_repeat(32, 0.3, 0.1, 0.15), _repeat(32, 0.1), _repeat(32, 0.2, 0.06, 0.1)],
                 id="three-one-without-phases"),
    pytest.param([_repeat(32, 0.3, 0.1, -1.0), _repeat(32, 0.1, 0.03, 0.05), _repeat(32, 0.2, 0.06, 0.1)],
                 id="three-one-without-backward"),
    pytest.param([_repeat(8, 0.4, 0.1, 0.2), _repeat(8, 0.1, 0.02, 0.05), _repeat(8, 0.3, 0.09, 0.15),
                  _repeat(8, 0.2, 0.05, 0.1)], id="four-mean-of-middle-two"),
    pytest.param([_repeat(8, 0.2, 0.05, 0.1), _repeat(8, 0.2, 0.07, 0.11), _repeat(8, 0.2, 0.06, 0.12)],
                 id="ties-keep-their-order"),
    pytest.param([_repeat(8, 0.3, 0.1, 0.1), _repeat(8, 0.2, 0.05, 0.1), _repeat(8, 0.2, 0.07, 0.11),
                  _repeat(8, 0.2, 0.06, 0.12)], id="ties-in-the-middle-two"),
    pytest.param([_repeat(32, 0.3), _repeat(64, 0.5), _repeat(32, 0.1), _repeat(16, 0.07), _repeat(32, 0.2),
                  _repeat(64, 0.9), _repeat(16, 0.07)], id="interleaved-order-kept"),
    pytest.param([_repeat(32, 0.3, steps=2), _repeat(32, 0.1), _repeat(32, 0.2, steps=2), _repeat(32, 0.25, steps=2),
                  _repeat(32, 0.11)], id="micro-steps-are-a-configuration"),
    pytest.param([_repeat(32, 0.05, steps=4, measured=0.3), _repeat(32, 0.06, steps=4, measured=0.2),
                  _repeat(32, 0.07, steps=4, measured=0.25)], id="spread-of-the-measured-times"),
])
def test_merge_repeats_is_the_engines_old_rule_bit_for_bit(repeats):
    _assert_same_as_before(repeats)


def test_merge_repeats_agrees_with_the_old_rule_on_random_runs():
    rng = random.Random(20240611)
    for _ in range(300):
        n = rng.randint(1, 9)
        repeats = []
        for _ in range(n):
            batch, steps = rng.choice((8, 16, 32)), rng.choice((1, 1, 2))
            seconds = rng.choice((0.1, 0.2, round(rng.uniform(0.05, 0.5), rng.choice((2, 17)))))
            phases = rng.random() < 0.7
            forward = seconds * rng.uniform(0.2, 0.4) if phases else -1.0
            backward = seconds * rng.uniform(0.3, 0.6) if phases and rng.random() < 0.9 else -1.0
            repeats.append(_repeat(batch, seconds, forward, backward, steps, measured=seconds * rng.uniform(0.9, 1.5)))
        _assert_same_as_before(repeats, rng.choice((0.0, 0.1, 0.2, 0.5)))


def test_repeat_spread_share_is_the_cores():
    assert REPEAT_SPREAD_SHARE == _core.REPEAT_SPREAD_SHARE == 0.20


def test_merge_repeats_carries_the_precision_and_keeps_precisions_apart():
    amp, fp32 = _core.Precision.amp, _core.Precision.fp32
    runs = [_core.MeasuredRun(_core.Measurement(32.0, t, precision=p)) for t, p in
            ((0.1, amp), (0.3, amp), (0.2, amp), (0.5, fp32), (0.9, None))]
    merged = _core.merge_repeats(runs)
    assert [(p.iteration_s, p.precision) for p in merged.points] == [
        (0.2, amp), (0.2, amp), (0.2, amp), (0.5, fp32), (0.9, None)]
    [g] = merged.disagreeing
    assert (list(g.members), g.precision, g.used_s) == ([0, 1, 2], amp, 0.2)


def test_merge_repeats_refusals_are_value_errors_naming_the_field():
    with pytest.raises(ValueError, match=r"^runs\[1\]\.point\.iteration_s must be finite and > 0, got -0\.1"):
        _core.merge_repeats([_core.MeasuredRun(_core.Measurement(8.0, 0.1)), _core.MeasuredRun(_core.Measurement(8.0, -0.1))])
    with pytest.raises(ValueError, match=r"^runs\[0\]\.accumulation_steps must be >= 1, got 0"):
        _core.merge_repeats([_core.MeasuredRun(_core.Measurement(8.0, 0.1), 0)])
    with pytest.raises(ValueError, match=r"^runs\[0\]\.measured_s"):
        _core.merge_repeats([_core.MeasuredRun(_core.Measurement(8.0, 0.1), 1, float("nan"))])
    with pytest.raises(ValueError, match=r"^spread_share must be finite and >= 0, got -1"):
        _core.merge_repeats([], -1.0)


# ---- a run's precision ------------------------------------------------------------------------


def test_a_core_measurement_has_an_optional_precision():
    m = _core.Measurement(32.0, 0.1)
    assert m.precision is None and m.forward_s == -1.0
    m.precision = _core.Precision.tf32
    assert m.precision == _core.Precision.tf32
    m.precision = None
    assert m.precision is None
    assert _core.Measurement(32.0, 0.1, 0.03, 0.05, _core.Precision.amp).precision == _core.Precision.amp
    assert _core.Measurement(32.0, 0.1, precision=_core.Precision.fp32).precision == _core.Precision.fp32
    assert [_core.precision_name(p) for p in (_core.Precision.fp32, _core.Precision.tf32, _core.Precision.amp)] == [
        "fp32", "tf32", "amp"]


def test_require_precision_and_the_filter():
    ms = [_core.Measurement(8.0, 0.05), _core.Measurement(16.0, 0.08, precision=_core.Precision.amp),
          _core.Measurement(32.0, 0.14, precision=_core.Precision.fp32)]
    _core.require_precision(ms[:2], _core.Precision.amp)
    with pytest.raises(ValueError, match=r"^measurements\[2\]\.precision: the run was timed at fp32, the prediction is "
                                         r"at amp"):
        _core.require_precision(ms, _core.Precision.amp)
    assert [m.local_batch for m in _core.measurements_at(ms, _core.Precision.amp)] == [8.0, 16.0]
    assert [m.local_batch for m in _core.measurements_at(ms, _core.Precision.tf32)] == [8.0]


def _stats_and_gpus(catalog):
    from srift.learn.features import core_workload_stats, gpu_spec
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.workloads import load_workloads

    stats = core_workload_stats(load_workloads()["resnet50"])
    return stats, gpu_spec(peaks_from_catalog(catalog, "V100-16GB")), gpu_spec(peaks_from_catalog(catalog, "A10G"))


def test_the_core_refuses_a_run_at_another_precision_than_it_predicts(catalog):
    from srift.learn.models import default_models

    lc = default_models().learned_compute
    stats, v100, a10g = _stats_and_gpus(catalog)
    amp, fp32 = _core.Precision.amp, _core.Precision.fp32
    unset = [_core.Measurement(32.0, 0.1), _core.Measurement(64.0, 0.18)]
    at_amp = [_core.Measurement(m.local_batch, m.iteration_s, precision=amp) for m in unset]
    # unset (vouched for) and set to the predicted precision give one answer
    for p in (fp32, _core.Precision.tf32, amp):
        for m in at_amp:
            m.precision = p
        a = lc.predict_anchored(stats, v100, unset, a10g, p, 256.0).model
        b = lc.predict_anchored(stats, v100, at_amp, a10g, p, 256.0).model
        assert (a.forward_fixed_s, a.backward_per_sample_s, a.optimizer_s) == (
            b.forward_fixed_s, b.backward_per_sample_s, b.optimizer_s)
    roof = stats.roofline(v100, fp32)
    at_amp[0].precision, at_amp[1].precision = fp32, amp
    with pytest.raises(ValueError, match=r"^measurements\[1\]\.precision: the run was timed at amp, the prediction is "
                                         r"at fp32"):
        lc.predict_anchored(stats, v100, at_amp, a10g, fp32, 0.0)
    with pytest.raises(ValueError, match=r"^measurements\[1\]\.precision: the run was timed at amp"):
        lc.measured_model(stats, v100, roof, at_amp, fp32, 0.0)
    with pytest.raises(ValueError, match=r"^anchors\[1\]\.measurements\[1\]\.precision: the run was timed at amp"):
        lc.predict_anchored_several(stats, [_core.Anchor(a10g, unset), _core.Anchor(v100, at_amp)], v100, fp32, 0.0)


# ---- the engine passes what it knows ----------------------------------------------------------


def test_the_engine_passes_each_points_precision_to_the_core(fresh_profile, catalog):
    """The engine's filter (note "measurement precision") keeps only runs at the predicted
    precision, and the points it hands the core say so, so the core's check holds too."""
    p = fresh_profile
    p.add_measurement("T4", 32, 0.2, precision="AMP")
    p.add_measurement("T4", 32, 0.21, precision="amp")
    p.add_measurement("T4", 32, 0.5)  # the profile's (fp32)
    p.add_measurement("T4", 64, 0.9, precision="fp32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        amp = Engine(p, catalog, EngineConfig(precision="amp"))
        fp32 = Engine(p, catalog, EngineConfig(precision="fp32"))
    points = amp._measurements_for("T4")
    assert [(m.local_batch, m.iteration_s, m.precision) for m in points] == [
        (32.0, 0.2, _core.Precision.amp), (32.0, 0.21, _core.Precision.amp)]
    assert {m.precision for m in fp32._measurements_for("T4")} == {_core.Precision.fp32}
    for engine in (amp, fp32):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, source = engine.compute_model("T4")
        assert source == "measured" and model.per_sample_s() > 0
    # three repeats: their median point in each place, at their precision
    p.add_measurement("T4", 32, 0.4, precision="amp")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e = Engine(p, catalog, EngineConfig(precision="amp"))
        e.compute_model("T4")
    said = [str(w.message) for w in caught if "disagree" in str(w.message)]
    assert len(said) == 1 and re.match(r"measurements on T4 at local batch 32 disagree: 0\.2 s \(measurements\[0\]\), "
                                       r"0\.21 s \(measurements\[1\]\), 0\.4 s \(measurements\[4\]\).*their median, "
                                       r"0\.21 s", said[0]), said
    assert [(m.iteration_s, m.precision) for m in e._measurements_for("T4")] == [(0.21, _core.Precision.amp)] * 3


def test_no_run_combination_changes_with_the_core_doing_the_merge():
    """Every subset order of one configuration's runs gives the old answer (ties included)."""
    base = [_repeat(16, t, f, b) for t, f, b in ((0.2, 0.05, 0.1), (0.2, 0.06, 0.1), (0.1, -1.0, -1.0),
                                                 (0.3, 0.1, 0.12), (0.2, 0.07, 0.08))]
    for k in range(1, len(base) + 1):
        for combo in itertools.permutations(base, k):
            _assert_same_as_before(list(combo))


def test_an_engine_takes_a_precision_in_any_case_as_add_measurement_does(fresh_profile, catalog):
    """EngineConfig(precision="AMP") is the engine at "amp", as --precision and
    add_measurement(precision="AMP") read it; a name that is no precision is still refused."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert Engine(fresh_profile, catalog, EngineConfig(precision=" AMP ")).precision == "amp"
        assert Engine(fresh_profile, catalog, EngineConfig(precision="TF32")).precision == "tf32"
    with pytest.raises(ValueError, match=r"precision must be one of fp32, tf32, amp, got 'fp16'"):
        Engine(fresh_profile, catalog, EngineConfig(precision="fp16"))


@pytest.mark.parametrize("bad", [0, "", [], {}, False, ["amp"]])
def test_an_engine_precision_that_is_empty_or_zero_is_refused_not_read_as_the_profiles(fresh_profile, catalog, bad):
    """EngineConfig(precision=0), "", [] or {} read as absent (`config.precision or
    profile.precision`): a prediction at the profile's precision where the caller asked for
    something that is none; ["amp"] raised a bare TypeError (unhashable). Only None means "the
    profile's"."""
    with pytest.raises(ValueError, match=rf"^precision must be one of fp32, tf32, amp, got {re.escape(repr(bad))}$"):
        Engine(fresh_profile, catalog, EngineConfig(precision=bad))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert Engine(fresh_profile, catalog, EngineConfig(precision=None)).precision == fresh_profile.precision


def test_the_engine_merges_a_gpus_and_an_instances_repeats_once_for_points_and_warning(fresh_profile, catalog,
                                                                                       monkeypatch):
    """One core merge gives both the points srift fits and the groups it warns about: the
    engine merged each GPU's (and each instance type's) repeats twice, once for each field."""
    import srift.engine as engine_module

    calls: list[int] = []
    real_merge = _core.merge_repeats
    real_warn = engine_module._warn_if_repeats_disagree
    merges_at_warning: list[int] = []

    def counting_merge(*args, **kwargs):
        calls.append(1)
        return real_merge(*args, **kwargs)

    def watched_warn(*args, **kwargs):
        real_warn(*args, **kwargs)
        merges_at_warning.append(len(calls))  # the merges so far, the warning's own included

    p = fresh_profile
    for seconds in (0.2, 0.21, 0.4):
        p.add_measurement("T4", 32, seconds)
    p.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.3, gpus=4)
    p.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.45, gpus=4)
    monkeypatch.setattr(_core, "merge_repeats", counting_merge)
    monkeypatch.setattr(engine_module, "_warn_if_repeats_disagree", watched_warn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e = Engine(p, catalog)
        assert len(calls) == 1  # the instance type's repeats, merged once when the engine is built
        calls.clear()
        e.compute_model("T4")
        assert merges_at_warning == [1]  # the T4's points, and nothing more for its warning
        merges_at_warning.clear()
        calls.clear()
        e._instance_entry("g4dn.12xlarge")
        assert merges_at_warning == [0]  # the instance's warning reads the merge made at start
    said = [str(w.message) for w in caught if "disagree" in str(w.message)]
    assert len(said) == 2 and "measurements on T4 at local batch 32 disagree" in said[0], said
    assert "measurements on g4dn.12xlarge (T4) at local batch 32 disagree" in said[1], said
