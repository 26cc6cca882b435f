"""Measured rows for training and evaluation, read from ../shared/data/measured.

Compute rows (single GPU): one per (source, model, GPU, precision, batch) with the
per-sample iteration time. Lambda gives throughput at one batch per GPU (fp32 runs in NGC
containers, where TF32 is on: recorded as "tf32"), in its v1 table and its v2 tables of H100,
H200, GH200 and B200 hosts (srift.learn.lambda_v2); Gavel gives steps/s at several batches
(fp32 on K80/P100/V100); Sia's 1-GPU placements give step_time at many batches (mixed
precision, says the data README). Multi-GPU rows: Sia's placements with ranks > 1, and Gavel's
2/4/8-GPU runs in one server or one GPU per server (gavel_scaling_rows). CPU rows (source "cpu"): the same models
profiled here on this machine's CPU at 1 and 2 threads (srift.learn.cpu_sweep, shipped in
srift/data/measurements/compute_cpu.json), with that CPU's measured peaks as the device.
"""
from __future__ import annotations

import csv
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from srift.learn.gpus import DATA_GPU_NAMES, TRAINING_GPUS, GpuPeaks
from srift.learn.lambda_v2 import v2_rows
from srift.learn.workloads import DATA_MODELS

__all__ = ["ComputeRow", "SiaRow", "data_dir", "lambda_gpu", "lambda_samples_per_s", "LAMBDA_TOKENS_PER_SAMPLE",
           "compute_rows", "sia_rows", "chip_of", "SIA_CLUSTERS", "CPU_SWEEP", "load_cpu_sweep", "cpu_peaks",
           "cpu_rows", "device_peaks", "GavelScalingRow", "gavel_scaling_rows", "load_gpu_sweeps", "gpu_sweep_rows"]

CPU_SWEEP = Path(__file__).resolve().parent.parent / "data" / "measurements" / "compute_cpu.json"


def data_dir() -> Path:
    """../shared/data/measured relative to the repository, or $SRIFT_DATA_DIR."""
    env = os.environ.get("SRIFT_DATA_DIR")
    if env:
        path = Path(env)
        # ../shared/data itself, the folder the README names, holds the measurements one down
        if not (path / "lambda_pytorch_train.csv").is_file() and (path / "measured" / "lambda_pytorch_train.csv").is_file():
            return path / "measured"
        if not (path / "lambda_pytorch_train.csv").is_file():
            raise FileNotFoundError(f"SRIFT_DATA_DIR={env}: no lambda_pytorch_train.csv there or in its measured/; "
                                    "set it to .../shared/data/measured")
        return path
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "data" / "measured"
        if cand.is_dir():
            return cand
    raise FileNotFoundError("measured data not found: set SRIFT_DATA_DIR to .../shared/data/measured")


def chip_of(gpu_key: str) -> str:
    """GPU family for leave-one-type-out splits (variants of one chip leave together)."""
    for prefix in ("V100", "A100", "H100", "QuadroRTX"):
        if gpu_key.startswith(prefix):
            return prefix
    return gpu_key


@dataclass
class ComputeRow:
    source: str       # lambda | gavel | sia | cpu (measured here) | srift (GPUs srift swept)
    workload: str     # key into workloads.json
    gpu: str          # key into device_peaks(): gpus.TRAINING_GPUS or a measured CPU
    precision: str    # fp32 | tf32 | amp
    batch: float      # local batch (samples of the data's unit)
    per_sample_s: float
    units_match: bool  # the data's sample is the zoo model's sample (absolute times comparable)
    group: str = ""   # rows that may anchor each other (same source, model, precision)

    @property
    def chip(self) -> str:
        return chip_of(self.gpu)


# Lambda throughput units that count the zoo model's samples.
_LAMBDA_UNITS_OK = {"resnet50": True, "bert_base_squad": True, "bert_large_squad": True, "ncf": True,
                    "ssd": True, "transformerxlbase": True, "transformerxllarge": True}
# Lambda reports Transformer-XL in tokens/s; its batch counts sequences of tgt_len tokens (the
# benchmark's --tgt_len, also the zoo model's default), the zoo model's sample.
LAMBDA_TOKENS_PER_SAMPLE = {"transformerxlbase": 192, "transformerxllarge": 256}


def lambda_samples_per_s(model: str, throughput: float) -> float:
    """A Lambda throughput in the zoo model's samples per second."""
    return throughput / LAMBDA_TOKENS_PER_SAMPLE.get(model, 1)


def lambda_repeats(d: Path | None = None) -> dict[tuple, list[float]]:
    """(GPU, model, precision, batch) -> the throughputs Lambda reports for it (1 GPU, in the zoo
    model's samples/s): the same benchmark run on several hosts or dates, whose spread is the
    data's own noise. The v1 table only: the v2 table's 39 H100 SXM5 hosts of one fleet would
    make three residuals in four one GPU's (srift.learn.lambda_v2 note "v2 rows")."""
    return _lambda_throughputs(d or data_dir(), v2=False)


def lambda_gpu(config: str) -> str | None:
    """The TRAINING_GPUS key of a Lambda 1-GPU host name (its config, or a host family without
    the GPU count); None for hosts srift has no peaks for."""
    name = next((n for n in DATA_GPU_NAMES if config == n), None)
    if name is None and "H100 80GB SXM5" in config:
        name = "H100 80GB SXM5"  # vendor-prefixed H100 SXM hosts
    return None if name is None else DATA_GPU_NAMES[name]


def _lambda_throughputs(d: Path, v2: bool = True) -> dict[tuple, list[float]]:
    acc: dict[tuple, list[float]] = defaultdict(list)
    with open(d / "lambda_pytorch_train.csv", newline="") as f:
        for r in csv.DictReader(f):
            if int(r["num_gpu"]) != 1:
                continue
            gpu = lambda_gpu(r["config"])
            if gpu is None or ("lambda", r["model"]) not in DATA_MODELS:
                continue
            prec = "amp" if r["precision"] == "fp16" else "tf32"
            key = (gpu, r["model"], prec, float(r["global_batch_size"]))
            acc[key].append(lambda_samples_per_s(r["model"], float(r["throughput"])))
    # srift.learn.lambda_v2 note "v2 rows": the same benchmark on H100, H200, GH200 and B200
    # hosts; its H100 cells repeat the v1 rows' (GPU, model, precision, batch)
    for host, prec, model, batch, thr in (v2_rows(d, gpus=1) if v2 else []):
        if ("lambda", model) in DATA_MODELS:
            acc[(host.gpu, model, prec, batch)].append(lambda_samples_per_s(model, thr))
    return acc


def _lambda_rows(d: Path) -> list[ComputeRow]:
    acc = _lambda_throughputs(d)
    rows = []
    for (gpu, model, prec, batch), thr in acc.items():
        wl = DATA_MODELS[("lambda", model)][0]
        rows.append(ComputeRow("lambda", wl, gpu, prec, batch, 1.0 / median(thr),
                               _LAMBDA_UNITS_OK.get(model, False), f"lambda/{model}/{prec}"))
    return rows


def _gavel_rows(d: Path) -> list[ComputeRow]:
    rows = []
    with open(d / "gavel_isolated.csv", newline="") as f:
        for r in csv.DictReader(f):
            if int(r["num_gpus"]) != 1 or ("gavel", r["model"]) not in DATA_MODELS:
                continue
            if float(r["steps_per_sec"]) <= 0:  # did not run (out of memory)
                continue
            wl, _, _, stand_in = DATA_MODELS[("gavel", r["model"])]
            b = float(r["batch_size_per_gpu"])
            rows.append(ComputeRow("gavel", wl, DATA_GPU_NAMES[r["gpu"]], "fp32", b,
                                   1.0 / float(r["steps_per_sec"]) / b, not stand_in,
                                   f"gavel/{r['model']}/b{int(b)}"))
    return rows


SIA_CLUSTERS = ("azure", "dgx", "dgx-ext", "rtx", "quad")


@dataclass
class SiaRow:
    model: str
    workload: str
    cluster: str
    gpu: str
    gpus_per_node: int
    placement: str
    num_nodes: int
    replicas: int
    local_bsz: float
    step_time: float
    sync_time: float

    @property
    def max_per_node(self) -> int:
        return max(int(c) for c in self.placement)


def sia_rows(d: Path | None = None) -> list[SiaRow]:
    d = d or data_dir()
    rows = []
    with open(d / "sia_profiles_non_ec2.csv", newline="") as f:
        for r in csv.DictReader(f):
            placement = r["placement"].split(".")[0]
            rows.append(SiaRow(r["model"], DATA_MODELS[("sia", r["model"])][0], r["cluster"],
                               DATA_GPU_NAMES[r["cluster"]], int(r["gpus_per_node"]), placement,
                               int(r["num_nodes"]), int(r["num_replicas"]), float(r["local_bsz"]),
                               float(r["step_time"]), float(r["sync_time"])))
    return rows


def _sia_compute_rows(d: Path) -> list[ComputeRow]:
    # One row per (cluster, model, batch): median over repeats. dgx-ext repeats dgx's GPU.
    acc: dict[tuple, list[float]] = defaultdict(list)
    for r in sia_rows(d):
        if r.replicas == 1:
            acc[(r.cluster, r.model, r.workload, r.gpu, r.local_bsz)].append(r.step_time)
    return [ComputeRow("sia", wl, gpu, "amp", b, median(t) / b, True, f"sia/{model}/b{int(b)}")
            for (cluster, model, wl, gpu, b), t in acc.items()]


@dataclass(frozen=True)
class GavelScalingRow:
    """One of Gavel's isolated runs of a model it profiled exactly (no stand-in), 1-8 GPUs."""

    gpu: str             # TRAINING_GPUS key (K80, P100, V100-16GB)
    model: str           # Gavel's name (ResNet-18, ResNet-50)
    workload: str        # key into workloads.json
    batch: float         # per-GPU batch (samples)
    gpus: int            # data-parallel workers
    consolidated: bool   # all workers in one server (else one worker per server)
    step_s: float        # one synchronous iteration: num_gpus / steps_per_sec (summed over workers)


def gavel_scaling_rows(d: Path | None = None) -> list[GavelScalingRow]:
    """Gavel's single- and multi-GPU rows of the models the zoo builds as Gavel trained them
    (srift.learn.gavel_scaling); runs that did not happen (steps_per_sec <= 0) are left out."""
    d = d or data_dir()
    rows = []
    with open(d / "gavel_isolated.csv", newline="") as f:
        for r in csv.DictReader(f):
            spec = DATA_MODELS.get(("gavel", r["model"]))
            if spec is None or spec[3] or float(r["steps_per_sec"]) <= 0:
                continue
            n = int(r["num_gpus"])
            rows.append(GavelScalingRow(DATA_GPU_NAMES[r["gpu"]], r["model"], spec[0], float(r["batch_size_per_gpu"]),
                                        n, r["consolidated"] == "1", n / float(r["steps_per_sec"])))
    return rows


def _merge_repeats(rows: list[ComputeRow]) -> list[ComputeRow]:
    """One row per (source, group, GPU, precision, batch), the median of its repeats.

    Repeats are the same measurement taken twice: Gavel lists every 1-GPU job under both
    consolidated=1 and consolidated=0 (a placement flag that means nothing for one GPU), and
    Sia's dgx-ext repeats dgx's GPU at the same batches. Left apart they count twice in the
    training pairs and pair a GPU with its own repeat's noise."""
    acc: dict[tuple, list[ComputeRow]] = defaultdict(list)
    for r in rows:
        acc[(r.source, r.group, r.workload, r.gpu, r.precision, r.batch)].append(r)
    out = []
    for rs in acc.values():
        r = rs[0]
        out.append(r if len(rs) == 1 else ComputeRow(r.source, r.workload, r.gpu, r.precision, r.batch,
                                                     median(x.per_sample_s for x in rs), r.units_match, r.group))
    return out


def load_cpu_sweep(path: str | Path = CPU_SWEEP) -> dict:
    from srift.learn.cpu_sweep import validate_sweep
    from srift.learn.loader import read_json

    return validate_sweep(read_json(path), str(path))


def cpu_peaks(doc: dict | None = None) -> dict[str, GpuPeaks]:
    """The measured CPU devices of a compute sweep as GpuPeaks (fp32 only: no tensor units)."""
    doc = load_cpu_sweep() if doc is None else doc
    return {k: GpuPeaks(k, d["fp32_flops"] / 1e12, None, None, d["memory_bytes_s"] / 1e9,
                        float(d.get("memory_gib", 0.0)))
            for k, d in doc["devices"].items()}


def cpu_rows(doc: dict | None = None) -> list[ComputeRow]:
    """One ComputeRow per (workload, device, batch) of a compute sweep; rows at the same
    workload and batch anchor each other across thread counts."""
    from srift.learn.workloads import load_workloads

    doc = load_cpu_sweep() if doc is None else doc
    known = load_workloads()
    rows = []
    for r in doc["rows"]:
        if r["workload"] not in known:
            raise ValueError(f"compute sweep: rows.workload: {r['workload']!r} has no cached profile "
                             "(srift/data/models/workloads.json)")
        for b, t in zip(r["batches"], r["iteration_s"]):
            rows.append(ComputeRow("cpu", r["workload"], r["device"], "fp32", float(b), t / b, True,
                                   f"cpu/{r['workload']}/b{int(b)}"))
    return rows


def load_gpu_sweeps(files: list[Path] | None = None) -> list[dict]:
    """The GPU sweeps srift took on lent GPUs (srift.learn.gpu_sweep note "GPU rows"),
    validated; none where no GPU was ever lent."""
    from srift.learn.gpu_sweep import sweep_files, validate_gpu_sweep
    from srift.learn.loader import read_json

    return [validate_gpu_sweep(read_json(f), str(f)) for f in (sweep_files() if files is None else files)]


def gpu_sweep_rows(docs: list[dict] | None = None) -> list[ComputeRow]:
    """One ComputeRow (source "srift") per (workload, precision, batch) of each GPU sweep; rows of
    one workload and precision anchor each other across the sweeps' GPUs."""
    from srift.learn.workloads import load_workloads

    docs = load_gpu_sweeps() if docs is None else docs
    known, peaks = load_workloads(), device_peaks(docs)
    rows = []
    for doc in docs:
        if doc["gpu"] not in peaks:
            raise ValueError(f"GPU compute sweep: gpu: {doc['gpu']!r} is not a catalog GPU")
        for r in doc["rows"]:
            if r["workload"] not in known:
                raise ValueError(f"GPU compute sweep: rows.workload: {r['workload']!r} has no cached profile "
                                 "(srift/data/models/workloads.json)")
            for b, t in zip(r["batches"], r["iteration_s"]):
                rows.append(ComputeRow("srift", r["workload"], doc["gpu"], r["precision"], float(b), t / b, True,
                                       f"srift/{r['workload']}/{r['precision']}"))
    return rows


def device_peaks(gpu_sweeps: list[dict] | None = None) -> dict[str, GpuPeaks]:
    """Peaks of every device a ComputeRow may name: the data's GPUs, the measured CPUs, and the
    GPUs srift swept (the catalog's peaks where the data has none)."""
    out = dict(TRAINING_GPUS)
    if CPU_SWEEP.exists():
        out.update(cpu_peaks())
    swept = {d["gpu"] for d in (load_gpu_sweeps() if gpu_sweeps is None else gpu_sweeps)} - set(out)
    if swept:
        from srift.catalog import Catalog
        from srift.learn.gpus import peaks_from_catalog

        catalog = Catalog.default()
        for key in sorted(swept):
            if key in catalog.gpu_keys():
                out[key] = peaks_from_catalog(catalog, key)
    return out


def compute_rows(d: Path | None = None, cpu: bool = False, gpu_sweeps: bool = True) -> list[ComputeRow]:
    """The public single-GPU rows and the GPU sweeps srift took (gpu_sweeps); with `cpu`, also
    the CPU rows measured here."""
    d = d or data_dir()
    return _merge_repeats(_lambda_rows(d) + _gavel_rows(d) + _sia_compute_rows(d) + (cpu_rows() if cpu else [])
                          + (gpu_sweep_rows() if gpu_sweeps else []))
