"""GPU compute sweeps (srift.learn.gpu_sweep note "GPU rows"): taken on a lent GPU, read as
training rows. The timing itself is srift.profile's; here it runs on the CPU standing in for a
catalog GPU, which exercises everything but CUDA."""
from __future__ import annotations

import json

import pytest
from measured_data import MEASURED

import srift.learn.gpu_sweep as gs
from srift.learn.datasets import device_peaks, gpu_sweep_rows, load_gpu_sweeps


def _sweep(tmp_path, monkeypatch, gpu_key: str = "L4"):
    doc = gs.measure_gpu_sweep({"ncf_ml1m": [64, 256]}, precisions=("fp32",), device="cpu", gpu_key=gpu_key,
                               warmup=1, repeats=2)
    monkeypatch.setattr(gs, "SWEEP_DIR", tmp_path)
    path = gs.sweep_path(doc["gpu"])
    path.write_text(json.dumps(doc))
    return doc, path


def test_a_sweep_is_a_valid_document_of_timed_rows(tmp_path, monkeypatch) -> None:
    doc, path = _sweep(tmp_path, monkeypatch)
    assert path.name == "compute_gpu_L4.json" and gs.sweep_files() == [path]
    assert gs.validate_gpu_sweep(doc) is doc
    (row,) = doc["rows"]
    assert row["workload"] == "ncf_ml1m" and row["batches"] == [64, 256] and row["precision"] == "fp32"
    assert all(p10 <= t <= p90 for t, p10, p90 in zip(row["iteration_s"], row["iteration_p10"], row["iteration_p90"]))
    assert doc["skipped"] == [] and doc["machine"]["device_name"] == "cpu"


def test_sweep_rows_train_the_compute_models_with_the_catalogs_peaks(tmp_path, monkeypatch) -> None:
    doc, _ = _sweep(tmp_path, monkeypatch)
    rows = gpu_sweep_rows(load_gpu_sweeps())
    assert [(r.source, r.gpu, r.batch) for r in rows] == [("srift", "L4", 64.0), ("srift", "L4", 256.0)]
    assert rows[0].per_sample_s == pytest.approx(doc["rows"][0]["iteration_s"][0] / 64, rel=1e-12)
    assert rows[0].group == rows[1].group == "srift/ncf_ml1m/fp32"  # they anchor other GPUs' sweeps
    peaks = device_peaks()
    assert "L4" in peaks and peaks["L4"].fp32_tflops > 0  # not a GPU of the public data: the catalog's


@pytest.mark.skipif(not (MEASURED / "lambda_pytorch_train.csv").is_file(), reason="needs ../shared/data/measured")
def test_compute_rows_and_the_absolute_dataset_take_the_sweep(tmp_path, monkeypatch) -> None:
    from srift.learn.datasets import compute_rows
    from srift.learn.train import absolute_dataset
    from srift.learn.workloads import load_workloads

    before = compute_rows(MEASURED)
    assert not any(r.source == "srift" for r in before)  # no GPU was ever lent: nothing shipped
    _sweep(tmp_path, monkeypatch)
    after = compute_rows(MEASURED)
    assert len(after) == len(before) + 2 and sum(r.source == "srift" for r in after) == 2
    assert compute_rows(MEASURED, gpu_sweeps=False) == before
    X, y, base, truth, meta = absolute_dataset(after, load_workloads())
    assert sum(b.source == "srift" for _, b in meta) == 2


def test_a_batch_that_runs_out_of_memory_is_skipped_with_the_larger_ones(monkeypatch) -> None:
    import srift

    real = srift.profile

    def small_gpu(model, batch, loss_fn, **kw):
        if kw["batch_sizes"][0] > 100:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model, batch, loss_fn, **kw)

    monkeypatch.setattr(srift, "profile", small_gpu)
    row, skipped = gs.measure_workload("ncf_ml1m", [64, 256, 1024], "fp32", "cpu", warmup=1, repeats=2)
    assert row["batches"] == [64]
    assert [(s["batch"], s["why"]) for s in skipped] == [(256, "out of memory"),
                                                         (1024, "a smaller batch ran out of memory")]
    # any other error is the caller's to see
    monkeypatch.setattr(srift, "profile", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("shape mismatch")))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        gs.measure_workload("ncf_ml1m", [64], "fp32", "cpu")


@pytest.mark.parametrize("change, field", [
    ({"schema": "srift.compute-sweep/1"}, "schema"),
    ({"gpu": ""}, "gpu"),
    ({"rows": []}, "rows"),
    ({"rows": [{"workload": "ncf", "precision": "bf16", "batches": [1], "iteration_s": [0.1]}]}, r"rows\[0\].precision"),
    ({"rows": [{"workload": "ncf", "precision": "amp", "batches": [1, 2], "iteration_s": [0.1]}]}, "equal"),
    ({"rows": [{"workload": "ncf", "precision": "amp", "batches": [0], "iteration_s": [0.1]}]}, r"batches\[0\]"),
    ({"rows": [{"workload": "ncf", "precision": "amp", "batches": [4], "iteration_s": [float("nan")]}]},
     r"iteration_s\[0\]"),
])
def test_a_bad_sweep_is_refused_naming_the_field(change, field: str) -> None:
    doc = {"schema": gs.SCHEMA, "gpu": "H100-80GB",
           "rows": [{"workload": "ncf", "precision": "amp", "batches": [4], "iteration_s": [0.1]}], **change}
    with pytest.raises(ValueError, match=field):
        gs.validate_gpu_sweep(doc)


def test_the_plan_and_the_device_are_checked_before_any_timing() -> None:
    with pytest.raises(ValueError, match="gpu_key"):
        gs.measure_gpu_sweep({"ncf": [4]}, device="cpu")  # "cpu" is no catalog GPU
    with pytest.raises(ValueError, match="not a model of the training data"):
        gs.measure_gpu_sweep({"alexnet": [4]}, device="cpu", gpu_key="L4")
    with pytest.raises(ValueError, match=r"plan\['ncf'\]"):
        gs.measure_gpu_sweep({"ncf": [0]}, device="cpu", gpu_key="L4")
    with pytest.raises(ValueError, match="precisions"):
        gs.measure_gpu_sweep({"ncf": [4]}, precisions=("int8",), device="cpu", gpu_key="L4")
    assert gs.precisions_for(True) == ("tf32", "amp") and gs.precisions_for(False) == ("fp32", "amp")
    assert set(gs.GPU_PLAN) <= set(__import__("srift.learn.workloads", fromlist=["x"]).load_workloads())
