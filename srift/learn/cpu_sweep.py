"""Compute measurements taken here on the CPU: the training data's models timed by srift.profile.

Note "CPU rows". The issue's compute model learns from public GPU data and "from CPU
measurements you take here". A CPU is one more processor with a peak and a memory bandwidth,
and the same host at 1 and at 2 threads is two of them: twice the FLOP/s over (nearly) the same
memory system, the ratio the compute features exist to explain (how much of a model is
bandwidth-bound decides how much of a faster peak it gets). So every workload of the data that
fits in a few seconds per iteration is profiled (srift.profile, fp32, Adam, the zoo's batch)
at two local batches and both thread counts, and the processor's peaks are measured the same
way rather than looked up: sgemm FLOP/s at 4096^2 and a 512 MiB copy's bytes/s, per thread
count. Each (workload, batch) gives a pair of rows whose devices are "CPU-1T" and "CPU-2T";
srift.learn.datasets turns them into ComputeRows (source "cpu") and srift.learn.gpus-style
peaks. Whether they help the GPU models is measured, not assumed (bench/accuracy.py,
"compute_leave_one_gpu_out" with and without them; srift.learn.train note "CPU rows").

The sweep is a JSON document (schema srift.compute-sweep/1) that
scripts/measure_cpu_compute.py writes to srift/data/measurements/compute_cpu.json.
"""
from __future__ import annotations

import os
import platform
import time
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

__all__ = ["SCHEMA", "DEFAULT_PLAN", "THREADS", "measure_peaks", "measure_workload", "measure_sweep",
           "validate_sweep", "device_key"]

SCHEMA = "srift.compute-sweep/1"
THREADS = (1, 2)
# workload key (srift.learn.workloads.DATA_MODELS) -> two local batches. Batches are chosen so an
# iteration takes ~0.1-5 s on one thread of a 2-core VM; bert_large and transformer_xl_large
# (minutes per iteration) are left out.
DEFAULT_PLAN: dict[str, tuple[int, int]] = {
    "ncf_ml1m": (1024, 4096),
    "ncf": (1024, 4096),
    "resnet18_cifar": (16, 64),
    "resnet50": (4, 8),
    "bert_base_128": (2, 8),
    "bert_base": (1, 4),
    "deepspeech2": (1, 4),
    "vgg16_300": (1, 2),
    "yolov3": (1, 2),
    "gpt2_512": (1, 2),
    # Added after the shipped sweep (2026-11-21): re-run on 2026-11-22, the VM measured 31% less
    # memory bandwidth at 1 thread and every iteration 1.0-1.6x slower than the night before
    # (neighbours on the host), so that sweep was not shipped; the next idle run includes these.
    "ssd300": (2, 4),  # its BatchNorm on the 1x1 map needs two samples
    "transformer_xl_base": (1, 2),
}


def device_key(threads: int) -> str:
    return f"CPU-{threads}T"


def _zoo_entry(key: str) -> tuple[str, dict[str, Any]]:
    from srift.learn.workloads import CPU_ONLY_MODELS, DATA_MODELS

    for wkey, name, options, _ in DATA_MODELS.values():
        if wkey == key:
            return name, dict(options)
    if key in CPU_ONLY_MODELS:
        name, options = CPU_ONLY_MODELS[key]
        return name, dict(options)
    raise ValueError(f"workload: {key!r} is not a model of the training data (srift.learn.workloads.DATA_MODELS)")


def measure_peaks(threads: int, repeats: int = 5) -> dict[str, float]:
    """Measured fp32 sgemm FLOP/s (4096 x 4096) and copy bytes/s (512 MiB, read + write) at
    `threads` intra-op threads: the medians of `repeats` runs."""
    import statistics

    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n = 4096
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        mm = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            mm.append(2 * n**3 / (time.perf_counter() - t0))
        del a, b
        src = torch.empty(512 << 20 >> 2)
        dst = torch.empty_like(src)
        dst.copy_(src)
        cp = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            dst.copy_(src)
            cp.append(2 * src.numel() * 4 / (time.perf_counter() - t0))
        return {"fp32_flops": statistics.median(mm), "memory_bytes_s": statistics.median(cp)}
    finally:
        torch.set_num_threads(prev)


def measure_workload(key: str, threads: int, batches: Sequence[int], warmup: int = 2,
                     repeats: int = 5) -> dict[str, Any]:
    """srift.profile of one workload on the CPU at `threads` threads: iteration seconds
    (median, p10, p90 over `repeats`) per local batch."""
    import torch

    import srift
    from srift import zoo

    name, options = _zoo_entry(key)
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model, batch, loss_fn = zoo.build(name, int(max(batches)), device="cpu", **options)
        prof = srift.profile(model, batch, loss_fn, device="cpu", precision="fp32", warmup=warmup,
                             repeats=repeats, batch_sizes=[int(b) for b in batches], name=key)
    finally:
        torch.set_num_threads(prev)
    t = prof.timings
    return {"workload": key, "zoo": name, "options": options, "threads": threads, "device": device_key(threads),
            "batches": list(t.batch_sizes), "iteration_s": list(t.iteration_s),
            "iteration_p10": list(t.iteration_p10), "iteration_p90": list(t.iteration_p90)}


def measure_sweep(plan: dict[str, tuple[int, int]] | None = None, threads: Sequence[int] = THREADS,
                  repeats: int = 5, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    import torch

    from srift.hostinfo import cpu_name, memory_gib

    plan = DEFAULT_PLAN if plan is None else plan
    devices = {}
    for th in threads:
        if progress:
            progress(f"peaks at {th} thread(s)")
        devices[device_key(th)] = {"threads": th, **measure_peaks(th), "memory_gib": memory_gib()}
    rows = []
    for key, batches in plan.items():
        for th in threads:
            if progress:
                progress(f"{key} at batches {list(batches)}, {th} thread(s)")
            rows.append(measure_workload(key, th, batches, repeats=repeats))
    return {"schema": SCHEMA, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"node": platform.node(), "cpus": os.cpu_count(), "processor": cpu_name()},
            "torch": torch.__version__, "precision": "fp32", "optimizer": "adam", "repeats": repeats,
            "devices": devices, "rows": rows}


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == v and v != float("inf")


def validate_sweep(doc: Any, origin: str = "compute sweep") -> dict[str, Any]:
    """The document if it is a well-formed sweep, else ValueError naming the field."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{origin}: schema: expected {SCHEMA!r}, got {doc.get('schema') if isinstance(doc, dict) else doc!r}")
    devices = doc.get("devices")
    if not isinstance(devices, dict) or not devices:
        raise ValueError(f"{origin}: devices: expected a non-empty object")
    for k, d in devices.items():
        for field in ("fp32_flops", "memory_bytes_s"):
            if not isinstance(d, dict) or not _positive(d.get(field)):
                raise ValueError(f"{origin}: devices.{k}.{field}: expected a number > 0, "
                                 f"got {d.get(field) if isinstance(d, dict) else d!r}")
    for where, r in timed_rows(doc, origin):
        if r.get("device") not in devices:
            raise ValueError(f"{where}.device: expected one of {sorted(devices)}, got {r.get('device')!r}")
        if not isinstance(r.get("workload"), str):
            raise ValueError(f"{where}.workload: expected a workload key, got {r.get('workload')!r}")
        check_timings(r, where)
    return doc


def timed_rows(doc: dict[str, Any], origin: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of a sweep's rows: a non-empty list of objects, else ValueError naming the
    field (the CPU and GPU sweeps share the rule)."""
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{origin}: rows: expected a non-empty list")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ValueError(f"{origin}: rows[{i}]: expected an object, got {r!r}")
    return [(f"{origin}: rows[{i}]", r) for i, r in enumerate(rows)]


def check_timings(row: dict[str, Any], where: str) -> None:
    """A sweep row's batches (integers >= 1) and iteration_s (seconds > 0), lists of one length;
    ValueError naming the field (the CPU and GPU sweeps share the rule)."""
    b, t = row.get("batches"), row.get("iteration_s")
    if not isinstance(b, list) or not isinstance(t, list) or len(b) != len(t) or not b:
        raise ValueError(f"{where}: batches and iteration_s: expected lists of equal, non-zero length")
    for j, (bj, tj) in enumerate(zip(b, t)):
        if not (isinstance(bj, int) and not isinstance(bj, bool) and bj >= 1):
            raise ValueError(f"{where}.batches[{j}]: expected an integer >= 1, got {bj!r}")
        if not _positive(tj):
            raise ValueError(f"{where}.iteration_s[{j}]: expected a number > 0, got {tj!r}")
