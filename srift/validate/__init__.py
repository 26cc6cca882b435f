"""srift.validate: check srift's predictions against real DistributedDataParallel training.

``validate(model, global_batch, clusters, ...) -> ValidationReport`` launches real DDP training
(torchrun or one process per rank; gloo on CPU, NCCL on GPU) on emulated hosts - network
namespaces with tc-limited NICs (root) - or on loopback, measures iterations after warm-up,
predicts the same cluster with ``srift.predict`` and reports APE (per run, median, p90).

Modules: ``netemu`` (namespaces, veth, bridge, tc), ``launcher`` (ranks, timeouts, cgroups),
``worker`` (one rank), ``runner`` (calibrate, catalog entries, predict, run, compare),
``report`` (APE, summaries, the measurements file).
"""
from __future__ import annotations

from srift.validate.report import (
    MEASUREMENT_SCHEMA,
    ValidationReport,
    ValidationRun,
    ape,
    append_measurements,
    load_measurements,
    summarize,
)
from srift.validate.runner import HostSpec, WorkerSpec, emulated_cluster, validate

__all__ = ["validate", "HostSpec", "WorkerSpec", "emulated_cluster", "ValidationReport", "ValidationRun", "ape",
           "summarize", "append_measurements", "load_measurements", "MEASUREMENT_SCHEMA"]
