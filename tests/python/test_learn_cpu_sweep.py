"""CPU compute measurements taken here (srift.learn.cpu_sweep) and their rows and peaks."""
from __future__ import annotations

import json
import math

import pytest

from srift.learn.cpu_sweep import SCHEMA, device_key, measure_workload, validate_sweep
from srift.learn.datasets import chip_of, cpu_peaks, cpu_rows, device_peaks, load_cpu_sweep
from srift.learn.features import ratio_features
from srift.learn.workloads import load_workloads


def _doc() -> dict:
    return {"schema": SCHEMA,
            "devices": {"CPU-1T": {"threads": 1, "fp32_flops": 1e11, "memory_bytes_s": 5e10, "memory_gib": 24.0},
                        "CPU-2T": {"threads": 2, "fp32_flops": 2e11, "memory_bytes_s": 7e10, "memory_gib": 24.0}},
            "rows": [{"workload": "resnet18_cifar", "device": "CPU-1T", "batches": [16, 64], "iteration_s": [0.4, 1.2]},
                     {"workload": "resnet18_cifar", "device": "CPU-2T", "batches": [16, 64], "iteration_s": [0.25, 0.7]}]}


def test_sweep_documents_are_validated_field_by_field() -> None:
    good = _doc()
    assert validate_sweep(good) is good
    with pytest.raises(ValueError, match="schema"):
        validate_sweep({**good, "schema": "srift.allreduce-sweep/1"})
    cases = [
        (("devices", "CPU-2T", "fp32_flops"), 0, r"devices\.CPU-2T\.fp32_flops"),
        (("rows", 1, "device"), "GPU-9", r"rows\[1\]\.device"),
        (("rows", 0, "batches", 1), 0, r"rows\[0\]\.batches\[1\]"),
        (("rows", 0, "iteration_s", 0), float("nan"), r"rows\[0\]\.iteration_s\[0\]"),
    ]
    for path, value, match in cases:
        bad = json.loads(json.dumps(good))
        node = bad
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        with pytest.raises(ValueError, match=match):
            validate_sweep(bad)
    bad = json.loads(json.dumps(good))
    bad["rows"][0]["iteration_s"].pop()
    with pytest.raises(ValueError, match="equal"):
        validate_sweep(bad)


def test_rows_and_peaks_from_a_sweep() -> None:
    doc = _doc()
    peaks = cpu_peaks(doc)
    assert peaks["CPU-2T"].fp32_tflops == pytest.approx(0.2) and peaks["CPU-2T"].memory_gbytes_s == pytest.approx(70)
    assert peaks["CPU-1T"].peak_tflops("fp32") == pytest.approx(0.1)
    rows = cpu_rows(doc)
    assert len(rows) == 4 and {r.source for r in rows} == {"cpu"}
    r = next(r for r in rows if r.gpu == "CPU-1T" and r.batch == 64)
    assert r.per_sample_s == pytest.approx(1.2 / 64) and r.group == "cpu/resnet18_cifar/b64" and r.units_match
    # the two thread counts are two devices: they pair across "chips" like two GPUs do
    assert chip_of("CPU-1T") != chip_of("CPU-2T")
    w = load_workloads()["resnet18_cifar"]
    f = ratio_features(w, peaks["CPU-1T"], 64, peaks["CPU-2T"], 64, "fp32")
    assert f[1] == pytest.approx(math.log(2)) and f[3] == pytest.approx(math.log(1.4))


def test_unknown_workload_is_named() -> None:
    doc = _doc()
    doc["rows"][0]["workload"] = "alexnet"
    with pytest.raises(ValueError, match="alexnet"):
        cpu_rows(doc)
    with pytest.raises(ValueError, match="alexnet"):
        measure_workload("alexnet", 1, [1])


def test_shipped_sweep_is_real() -> None:
    doc = load_cpu_sweep()
    assert doc["measured_at"] and doc["torch"] and set(doc["devices"]) == {device_key(1), device_key(2)}
    peaks = device_peaks()
    one, two = peaks[device_key(1)], peaks[device_key(2)]
    # two threads: more FLOP/s than one, at most twice; the memory system is shared
    assert one.fp32_tflops < two.fp32_tflops <= 2.2 * one.fp32_tflops
    by = {(r.workload, r.gpu, r.batch): r.per_sample_s for r in cpu_rows(doc)}
    workloads = {k[0] for k in by}
    assert len(workloads) >= 8
    for (wl, dev, b), t in by.items():
        if dev == device_key(2):
            # a second thread never makes an iteration slower than 1.15x, nor more than 2.2x faster
            t1 = by[(wl, device_key(1), b)]
            assert t1 / 2.2 < t < 1.15 * t1, (wl, b)


def test_measure_workload_times_a_real_model() -> None:
    r = measure_workload("ncf_ml1m", 1, [64, 256], warmup=1, repeats=2)
    assert r["device"] == "CPU-1T" and r["batches"] == [64, 256] and r["zoo"] == "ncf"
    assert all(t > 0 for t in r["iteration_s"])
    validate_sweep({"schema": SCHEMA, "devices": {"CPU-1T": {"fp32_flops": 1.0, "memory_bytes_s": 1.0}}, "rows": [r]})
