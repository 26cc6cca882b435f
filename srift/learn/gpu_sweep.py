"""Compute measurements taken on a GPU lent to srift: the training data's models timed by srift.profile.

Note "GPU rows". The compute models learn from public GPU data, from CPU measurements taken on
the build machine (srift.learn.cpu_sweep), and "from GPU measurements whenever a GPU machine is
available". This module takes those: every workload of the data (srift.learn.workloads
DATA_MODELS and CPU_ONLY_MODELS) profiled by srift.profile on one CUDA device at three local
batches and at the precisions the training rows use on that GPU: "amp", and "tf32" (TF32
matmuls and convolutions) on a GPU with TF32, else strict "fp32". srift.profile's own "fp32"
on a TF32 GPU (cuDNN's TF32 on, matmuls FP32) is a mix no training row describes, so it is not
swept. Each (workload, precision) gives one row of iteration times per batch (median, p10 and
p90 of `repeats`), CUDA events around forward, backward and the optimizer as the profiler
always times a GPU; a batch that does not fit the GPU's memory is recorded in `skipped`.

The device's catalog key (srift.catalog resolve_gpu of torch's device name, e.g. "NVIDIA H100
80GB HBM3" -> "H100-80GB") names the row's GPU, so its peaks are the catalog's. A sweep is a
JSON document (schema srift.gpu-compute-sweep/1) that scripts/measure_gpu_compute.py writes to
srift/data/measurements/compute_gpu_<key>.json; srift.learn.datasets reads every such file as
ComputeRows of source "srift" (timed the way a user's profile is timed, so in the band rows
too: srift.learn.train note "band rows"), and `srift train` learns from them.
"""
from __future__ import annotations

import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from srift.learn.cpu_sweep import _zoo_entry, check_timings, timed_rows

__all__ = ["SCHEMA", "GPU_PLAN", "SWEEP_DIR", "sweep_path", "precisions_for", "measure_gpu_sweep",
           "validate_gpu_sweep", "sweep_files"]

SCHEMA = "srift.gpu-compute-sweep/1"
SWEEP_DIR = Path(__file__).resolve().parent.parent / "data" / "measurements"
# workload key -> three local batches, from what a 16 GiB GPU holds at FP32 (the smallest the
# sweep is meant for) to what saturates an 80 GiB one; a batch that does not fit is skipped.
GPU_PLAN: dict[str, tuple[int, int, int]] = {
    "resnet18_cifar": (32, 128, 512),
    "resnet50": (16, 64, 256),
    "bert_base_128": (8, 32, 128),
    "bert_base": (4, 16, 64),
    "bert_large": (2, 8, 32),
    "ncf": (65536, 262144, 1048576),
    "ncf_ml1m": (1024, 8192, 65536),
    "yolov3": (2, 8, 32),
    "deepspeech2": (4, 16, 64),
    "ssd300": (8, 32, 128),
    "transformer_xl_base": (8, 32, 64),
    "transformer_xl_large": (2, 8, 16),
    "gpt2_512": (2, 8, 16),
    "vgg16_300": (4, 16, 32),
}
PRECISIONS = ("fp32", "tf32", "amp")


def sweep_path(gpu_key: str, directory: Path | None = None) -> Path:
    """Where scripts/measure_gpu_compute.py writes the sweep of catalog GPU `gpu_key`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in gpu_key)
    return Path(SWEEP_DIR if directory is None else directory) / f"compute_gpu_{safe}.json"


def sweep_files(directory: Path | None = None) -> list[Path]:
    """The GPU sweeps shipped in `directory` (default SWEEP_DIR: compute_gpu_*.json), sorted."""
    return sorted(Path(SWEEP_DIR if directory is None else directory).glob("compute_gpu_*.json"))


def precisions_for(has_tf32: bool) -> tuple[str, ...]:
    """The precisions a sweep takes on a GPU (note "GPU rows"): AMP, and TF32 where the GPU
    has it, else strict FP32."""
    return ("tf32", "amp") if has_tf32 else ("fp32", "amp")


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or "out of memory" in str(exc).lower()


def measure_workload(key: str, batches: Sequence[int], precision: str, device: str, warmup: int = 3,
                     repeats: int = 10) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(row, skipped) of one workload at one precision on `device`: srift.profile at each of
    `batches` that fits (a batch that runs out of memory is skipped, and so are the larger
    ones); row is None when none fits."""
    import torch

    import srift
    from srift import zoo

    name, options = _zoo_entry(key)
    done: list[tuple[int, float, float, float]] = []
    skipped: list[dict[str, Any]] = []
    for b in sorted(int(x) for x in batches):
        model = None
        try:
            model, batch, loss_fn = zoo.build(name, b, device=device, **options)
            prof = srift.profile(model, batch, loss_fn, device=device, precision=precision, warmup=warmup,
                                 repeats=repeats, batch_sizes=[b], name=key)
        except (RuntimeError, MemoryError) as exc:  # torch's OOM is a RuntimeError
            if not _is_oom(exc):
                raise
            skipped.append({"workload": key, "precision": precision, "batch": b, "why": "out of memory"})
            skipped += [{"workload": key, "precision": precision, "batch": int(x), "why": "a smaller batch ran out of memory"}
                        for x in sorted(batches) if x > b]
            break
        finally:
            del model
            if str(device).startswith("cuda"):
                torch.cuda.empty_cache()
        t = prof.timings
        done.append((b, t.iteration_s[0], t.iteration_p10[0], t.iteration_p90[0]))
    if not done:
        return None, skipped
    return {"workload": key, "zoo": name, "options": options, "precision": precision,
            "batches": [d[0] for d in done], "iteration_s": [d[1] for d in done],
            "iteration_p10": [d[2] for d in done], "iteration_p90": [d[3] for d in done]}, skipped


def measure_gpu_sweep(plan: dict[str, Sequence[int]] | None = None, precisions: Sequence[str] | None = None,
                      device: str = "cuda", gpu_key: str | None = None, warmup: int = 3, repeats: int = 10,
                      progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Profile `plan` (workload -> local batches; GPU_PLAN) on `device` at `precisions`
    (default: precisions_for the GPU) and return the sweep document. gpu_key: the catalog GPU
    the device is (default: resolved from torch's device name; a name the catalog does not
    know, or knows several of, is a ValueError: pass gpu_key)."""
    import torch

    from srift.catalog import Catalog

    plan = dict(GPU_PLAN if plan is None else plan)
    catalog = Catalog.default()
    dev = torch.device(device)
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev)
    if gpu_key is None:
        keys = catalog.resolve_gpu(device_name)
        if len(keys) != 1:
            raise ValueError(f"gpu_key: the device {device_name!r} matches catalog GPUs {keys}: pass gpu_key")
        gpu_key = keys[0]
    gpu = catalog.gpu(gpu_key)  # an unknown key fails here, naming it
    if precisions is None:
        precisions = precisions_for(bool(getattr(gpu, "tf32_tflops", 0)))
    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"precisions: expected some of {PRECISIONS}, got {p!r}")
    for key, batches in plan.items():
        _zoo_entry(key)  # an unknown workload fails before any timing
        if not batches or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in batches):
            raise ValueError(f"plan[{key!r}]: expected local batches >= 1, got {batches!r}")
    t0 = time.perf_counter()
    rows, skipped = [], []
    for key, batches in plan.items():
        for p in precisions:
            if progress:
                progress(f"[{time.perf_counter() - t0:6.0f} s] {key} {p} at batches {list(batches)}")
            row, skip = measure_workload(key, batches, p, device, warmup=warmup, repeats=repeats)
            skipped += skip
            if row is not None:
                rows.append(row)
    return {"schema": SCHEMA, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"node": platform.node(), "device_name": device_name, "torch": torch.__version__,
                        "cuda": getattr(torch.version, "cuda", None)},
            "gpu": gpu_key, "optimizer": "adam", "warmup": warmup, "repeats": repeats,
            "rows": rows, "skipped": skipped}


def validate_gpu_sweep(doc: Any, origin: str = "GPU compute sweep") -> dict[str, Any]:
    """The document if it is a well-formed GPU sweep, else ValueError naming the field."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else doc
        raise ValueError(f"{origin}: schema: expected {SCHEMA!r}, got {got!r}")
    if not isinstance(doc.get("gpu"), str) or not doc["gpu"]:
        raise ValueError(f"{origin}: gpu: expected a catalog GPU key, got {doc.get('gpu')!r}")
    for where, r in timed_rows(doc, origin):
        if not isinstance(r.get("workload"), str):
            raise ValueError(f"{where}.workload: expected a workload key, got {r.get('workload')!r}")
        if r.get("precision") not in PRECISIONS:
            raise ValueError(f"{where}.precision: expected one of {PRECISIONS}, got {r.get('precision')!r}")
        check_timings(r, where)
    return doc
