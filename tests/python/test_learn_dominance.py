"""srift.learn.dominance note "dominance": a no-measurement prediction is clipped by the
absolute model's predictions of the reference GPUs the target beats, or is beaten by, on every
spec."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from measured_data import MEASURED
from srift.learn.datasets import ComputeRow
from srift.learn.dominance import clip_to_bounds, dominance_bounds, dominates, guarded_log_times, reference_gpus
from srift.learn.gpus import TRAINING_GPUS, GpuPeaks, peaks_from_catalog

G = TRAINING_GPUS


def test_dominance_needs_every_spec_and_one_strictly() -> None:
    assert dominates(G["H100-80GB"], G["A100-40GB"], "amp")
    assert dominates(G["A100-80GB"], G["A100-40GB"], "tf32")          # bandwidth alone
    assert not dominates(G["A100-40GB"], G["A100-40GB-PCIe"], "amp")  # identical specs
    # RTX 4090 has 4x the A100's FP32 peak, the A100 1.5x its bandwidth: neither.
    assert not dominates(G["RTX4090"], G["A100-40GB"], "fp32")
    assert not dominates(G["A100-40GB"], G["RTX4090"], "fp32")
    assert dominates(G["A100-40GB"], G["V100-16GB"], "fp32")
    # PyTorch's FP32 runs convolutions on TF32: more FP32 and bandwidth but less TF32 is no longer ahead
    assert not dominates(G["RTX3090"], G["A10"], "fp32")
    assert not dominates(G["RTX3090"], G["A10"], "amp")  # the A10's FP16 tensor peak is the higher
    # A V100 in TF32 mode runs FP32: its peak is its FP32 peak, which the P100 does not reach.
    assert dominates(G["V100-16GB"], G["P100"], "tf32")


def test_dominance_refuses_an_unknown_precision() -> None:
    with pytest.raises(ValueError, match="precision.*'fp8'"):
        dominates(G["H100-80GB"], G["A100-40GB"], "fp8")


def test_reference_gpus_drop_every_variant_of_a_held_out_chip() -> None:
    keys = {g.key for g in reference_gpus({"A100"})}
    assert not keys & {"A100-40GB", "A100-40GB-PCIe", "A100-80GB", "A100-80GB-PCIe"}
    assert "H100-80GB" in keys and len(keys) == len(TRAINING_GPUS) - 4
    assert {g.key for g in reference_gpus()} == set(TRAINING_GPUS)


def test_bounds_of_a_gpu_between_others() -> None:
    below, above = dominance_bounds(G["A100-40GB"], list(G.values()), "amp")
    assert {"V100-16GB", "P100", "K80"} <= {g.key for g in below}
    assert {g.key for g in above} == {"A100-80GB", "A100-80GB-PCIe", "H100-PCIe", "H100-80GB", "H200-141GB",
                                      "GH200-96GB", "B200"}


def test_clip_to_bounds_exact_values() -> None:
    t = np.array([0.0, 1.0, 2.0, 3.0])
    upper = np.array([[2.5, 2.5, 2.5, 2.5], [2.2, 9.0, 9.0, 9.0]])
    lower = np.array([[0.5, -1.0, -1.0, 2.8]])
    assert clip_to_bounds(t, upper, lower).tolist() == [0.5, 1.0, 2.0, 2.5]  # last: bounds cross, upper wins
    assert clip_to_bounds(t, np.zeros((0, 4)), np.zeros((0, 4))).tolist() == t.tolist()


def test_guarded_log_times_refuse_non_finite_times() -> None:
    with pytest.raises(ValueError, match="log times of H100-80GB"):
        guarded_log_times(lambda g: np.array([math.nan]), G["H100-80GB"], [G["A100-40GB"]], "amp")


def _shipped_absolute():
    from srift.learn.models import default_models

    return default_models()


def test_shipped_absolute_model_records_its_guard() -> None:
    from srift.learn.models import MODELS_DIR

    doc = json.loads((MODELS_DIR / "compute_absolute.json").read_text())
    assert doc["dominance_guard"]["references"] == sorted(TRAINING_GPUS)


def test_a_guard_naming_an_unknown_gpu_is_refused() -> None:
    from srift.learn.models import _guard_references

    with pytest.raises(ValueError, match="compute_absolute: dominance_guard.references.*'Z9000'"):
        _guard_references({"dominance_guard": {"references": ["A100-40GB", "Z9000"]}}, "compute_absolute")
    with pytest.raises(ValueError, match="dominance_guard.references must be a list"):
        _guard_references({"dominance_guard": {"references": []}}, "compute_absolute")
    assert _guard_references({}, "compute_absolute") == []


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp"])
def test_no_measurement_times_respect_every_reference(precision: str) -> None:
    """For every catalog GPU and every workload of the training data, the shipped prediction
    at every batch of the engine's grid is no slower than any reference GPU it dominates, and
    no faster than any that dominates it, by the model's own predictions of those GPUs."""
    from srift.catalog import Catalog
    from srift.learn.features import absolute_features, roofline_per_sample
    from srift.learn.models import batch_grid
    from srift.learn.workloads import load_workloads

    models, catalog = _shipped_absolute(), Catalog.default()
    refs = reference_gpus()
    grid = batch_grid(None)
    for w in load_workloads().values():
        def raw(g: GpuPeaks) -> np.ndarray:
            roof = np.log([roofline_per_sample(w, g, precision, b) for b in grid])
            return roof + models.absolute.core.predict(np.asarray([absolute_features(w, g, b, precision) for b in grid]))

        for key in catalog.gpu_keys():
            target = peaks_from_catalog(catalog, key)
            roof = np.log([roofline_per_sample(w, target, precision, b) for b in grid])
            t = roof + models.absolute_corrections(w, target, grid, precision)
            below, above = dominance_bounds(target, refs, precision)
            for g in below:
                assert np.all(t <= raw(g) + 1e-12), (w.key, key, g.key)
            if below:
                cap = np.min([raw(g) for g in below], axis=0)
                for g in above:  # a lower bound holds wherever it does not cross the upper one
                    lo = raw(g)
                    assert np.all((t >= lo - 1e-12) | (lo > cap)), (w.key, key, g.key)


def test_a_dominating_gpu_is_not_slower_at_a_small_batch() -> None:
    """The case that motivated the guard: ResNet-18 (CIFAR) at AMP and batch 8, where the
    unguarded model put an L40S 1.4x behind the A10 it beats on every spec."""
    from srift.catalog import Catalog
    from srift.learn.features import absolute_features, roofline_per_sample
    from srift.learn.workloads import load_workloads

    w = load_workloads()["resnet18_cifar"] if "resnet18_cifar" in load_workloads() else None
    if w is None:
        pytest.skip("resnet18_cifar is not a training workload")
    models, catalog = _shipped_absolute(), Catalog.default()
    l40s, a10 = peaks_from_catalog(catalog, "L40S"), G["A10"]
    assert dominates(l40s, a10, "amp")
    for b in (8.0, 64.0, 256.0):
        t_l40s = math.log(roofline_per_sample(w, l40s, "amp", b)) + models.absolute_corrections(w, l40s, [b], "amp")[0]
        t_a10 = math.log(roofline_per_sample(w, a10, "amp", b)) + float(
            models.absolute.core.predict(np.asarray([absolute_features(w, a10, b, "amp")]))[0])
        assert t_l40s <= t_a10 + 1e-12, b


def test_shipped_anchored_blend_records_its_guard() -> None:
    from srift.learn.models import MODELS_DIR

    blend = json.loads((MODELS_DIR / "compute_ratio.json").read_text())["absolute_blend"]
    guard = blend["dominance_guard"]
    assert guard["references"] == sorted(TRAINING_GPUS)
    # train.py select_blend scored the clipped blend as applied, on both held-out splits.
    assert set(guard["scores"]) == {"leave_one_gpu_chip_out", "leave_one_model_out"}


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp"])
def test_anchored_predictions_respect_the_measurement(precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a measurement on one GPU, a catalog GPU that beats it on every spec is predicted no
    slower than the measurement, and one it beats no faster, at the measured batch."""
    from srift import _core
    from srift.catalog import Catalog
    from srift.learn.blend import has_fp16_path
    from srift.learn.workloads import load_workloads

    import srift.learn.models as learned

    models, catalog = _shipped_absolute(), Catalog.default()
    workloads = load_workloads()
    # The training data's workloads stand in for profiles (compute_model reads a profile only
    # through workload_from_profile).
    monkeypatch.setattr(learned, "workload_from_profile", lambda w: w)
    for name in ("resnet50", "bert_large", "ncf", "gpt2_512"):
        w = workloads[name]
        for anchor_key in ("T4", "A10G", "V100-16GB", "A100-40GB", "H100-80GB"):
            anchor = peaks_from_catalog(catalog, anchor_key)
            seconds = 0.05 * (1 + catalog.gpu_keys().index(anchor_key))
            for key in catalog.gpu_keys():
                target = peaks_from_catalog(catalog, key)
                if not has_fp16_path(anchor, target, precision):
                    continue  # the roofline ratio, no learned correction to clip
                m, *_ = models.compute_model(w, key, catalog, precision,
                                             anchor=(anchor_key, [_core.Measurement(32, seconds)]))
                t = m.compute_s(32) + m.optimizer_s
                if dominates(target, anchor, precision):
                    assert t <= seconds * (1 + 1e-12), (name, anchor_key, key)
                if dominates(anchor, target, precision):
                    assert t >= seconds * (1 - 1e-12), (name, anchor_key, key)



def _row(gpu: str, batch: float, per_sample_s: float, group: str = "lab/model") -> ComputeRow:
    return ComputeRow("lab", "resnet50", gpu, "amp", batch, per_sample_s, True, group)


def test_dominance_contradictions_bound_a_pair_measured_against_its_specs() -> None:
    """An A100 measured 1.25x a V100's time at one batch: a prediction that keeps dominance
    misses the A100 from the V100 by 20% at least, and the V100 from the A100 by 25%."""
    from srift.learn.dominance import dominance_contradictions

    v100, a100 = _row("V100-16GB", 32, 1.0), _row("A100-40GB", 32, 1.25)
    within = _row("A100-40GB", 32, 1.019, group="lab/other"), _row("V100-16GB", 32, 1.0, group="lab/other")
    neither = _row("RTX4090", 32, 2.0, group="lab/third"), _row("A100-40GB", 32, 1.0, group="lab/third")
    pairs = [(v100, a100), (a100, v100), within, within[::-1], neither, neither[::-1]]
    assert dominance_contradictions(pairs, G).tolist() == pytest.approx([20.0, 25.0, 0.0, 0.0, 0.0, 0.0])
    # anchored at another batch than the target's, and not measured at the target's: nothing forced
    other_batch = _row("V100-16GB", 64, 0.5, group="lab/fourth"), _row("A100-40GB", 32, 1.25, group="lab/fourth")
    assert dominance_contradictions([other_batch], G).tolist() == [0.0]
    # measured at both batches: the anchor's time at the target's batch is the one compared
    measured_there = _row("V100-16GB", 32, 1.0, group="lab/fourth")
    assert dominance_contradictions([other_batch, (measured_there, other_batch[1])], G).tolist() == \
        pytest.approx([20.0, 20.0])
    with pytest.raises(ValueError, match="per_sample_s of A100-40GB in group 'lab/model' at batch 32: expected a "
                                         "finite time > 0, got 0.0"):
        dominance_contradictions([(v100, _row("A100-40GB", 32, 0.0))], G)


def test_dominance_contradictions_read_the_anchors_own_gpu_not_its_chip() -> None:
    """Rows were keyed by chip, so of two variants of one chip measured at one batch (Lambda's
    H100 SXM and PCIe, 28 such keys in the training pairs) the anchor's time was whichever came
    last: an H100 SXM measured faster than an A100 was scored with the PCIe card's time, a
    contradiction that is not there (33% least error), and a real one was missed."""
    from srift.learn.dominance import dominance_contradictions, dominates

    assert dominates(G["H100-80GB"], G["A100-80GB"], "amp")  # the premise
    sxm, pcie = _row("H100-80GB", 32, 1.0), _row("H100-PCIe", 32, 2.0)
    a100 = _row("A100-80GB", 32, 1.5)
    # the SXM card is faster than the A100, as its specs say: nothing forced, in any order
    assert dominance_contradictions([(sxm, a100), (pcie, a100)], G).tolist() == [0.0, 0.0]
    assert dominance_contradictions([(pcie, a100), (sxm, a100)], G).tolist() == [0.0, 0.0]
    # an SXM card measured slower than the A100 is forced, whatever the PCIe card ran
    slow_sxm = _row("H100-80GB", 32, 1.8)
    for pairs in ([(slow_sxm, a100), (_row("H100-PCIe", 32, 1.0), a100)],
                  [(_row("H100-PCIe", 32, 1.0), a100), (slow_sxm, a100)]):
        bound = dominance_contradictions(pairs, G)
        assert bound[[p[0].gpu for p in pairs].index("H100-80GB")] == pytest.approx((1.8 / 1.5 - 1) * 100)


def test_dominance_contradictions_refuse_times_and_gpus_they_cannot_read() -> None:
    """Two negative times passed (their ratio is positive), and a GPU missing from `peaks`
    raised a bare KeyError."""
    from srift.learn.dominance import dominance_contradictions

    with pytest.raises(ValueError, match=r"per_sample_s of V100-16GB in group 'lab/model' at batch 32: .*got -1.0"):
        dominance_contradictions([(_row("V100-16GB", 32, -1.0), _row("A100-40GB", 32, -1.25))], G)
    with pytest.raises(ValueError, match=r"per_sample_s of A100-40GB .*got nan"):
        dominance_contradictions([(_row("V100-16GB", 32, 1.0), _row("A100-40GB", 32, math.nan))], G)
    with pytest.raises(ValueError, match=r"peaks: no GpuPeaks for GPU 'A100-40GB'"):
        dominance_contradictions([(_row("V100-16GB", 32, 1.0), _row("A100-40GB", 32, 1.25))],
                                 {"V100-16GB": G["V100-16GB"]})


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured data not beside the checkout")
def test_dominance_contradictions_in_the_training_data() -> None:
    """Note "dominance" counts the data's contradictions: none of Lambda's pairs, 3 of Gavel's
    (V100 against P100) and 66 of Sia's, each in both directions; every one is at one batch."""
    from srift.learn.datasets import compute_rows, device_peaks
    from srift.learn.dominance import dominance_contradictions
    from srift.learn.train import ratio_dataset
    from srift.learn.workloads import load_workloads

    rows = [r for r in compute_rows(MEASURED) if r.source in ("lambda", "gavel", "sia")]
    meta = ratio_dataset(rows, load_workloads())[4]
    bound = dominance_contradictions(meta, device_peaks())
    by_source = {s: int(sum(1 for (a, b), x in zip(meta, bound) if x > 0 and b.source == s))
                 for s in ("lambda", "gavel", "sia")}
    assert by_source == {"lambda": 0, "gavel": 6, "sia": 132}
    assert all(a.batch == b.batch for (a, b), x in zip(meta, bound) if x > 0)
    gavel = sorted({(a.chip, b.chip) for (a, b), x in zip(meta, bound) if x > 0 and b.source == "gavel"})
    assert gavel == [("P100", "V100"), ("V100", "P100")]
