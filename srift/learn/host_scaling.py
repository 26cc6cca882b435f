"""One host from 1 to 2, 4 and 8 GPUs: Lambda's multi-GPU rows, an out-of-sample check of links.

Note "host scaling". Lambda benchmarks each model on 1, 2, 4 and 8 GPUs of one host (weak
scaling: the per-GPU batch stays the 1-GPU batch). Given the host's 1-GPU row, the simulator
predicts the n-GPU iteration from the model's gradient buckets and the host's intra-node link;
nothing here is fitted, so every link model is checked on hosts it never saw. The hosts are
PCIe 4.0/5.0 workstations and servers (RTX 3090/4090/A6000/6000 Ada, A100 PCIe, H100 PCIe)
and NVLink/NVSwitch servers (V100 SXM2, A100 SXM4, H100 SXM5), where Sia's PCIe clusters are
PCIe 3.0 (srift.learn.pcie_link note "pcie class"). Median / p90 APE of the n-GPU iteration
(bench/accuracy.py multi_gpu_single_host_lambda/*):
    PCIe hosts (140 steps)           linear 3.1 / 12   v0 6.8 / 27   Sia's PCIe line 9.4 / 106
      of which 8 GPUs (28 steps)     linear 2.5 / 13   v0 7.9 / 28   Sia's PCIe line 37.5 / 177
Lambda's PCIe hosts scale close to linearly (comm-heavy BERT-large: 0.98-1.13x linear on 8x RTX
6000 Ada), where Sia's line, extrapolated to 8 GPUs, asks for 1.7-1.9x. That is why the engine
keeps the line to the PCIe generation it was fitted on (CostModels.pcie_link_applies).
Rows left out, each for a stated reason:
  - models srift has no workload for (gnmt, tacotron2, ...); Transformer-XL's tokens/s are
    read as sequences/s of its tgt_len (srift.learn.datasets.lambda_samples_per_s);
  - rows more than 1.5x *faster* per GPU than the host's own 1-GPU row, which synchronous data
    parallelism cannot be: Lambda's NCF on the vendor H100 SXM5 hosts reads 1.9-48x;
  - hosts without a 1-GPU row of their own ("LambdaCloud 8x H100 80GB SXM5").
The batch: the per-GPU batch is the 1-GPU batch except NCF on 2x RTX 3090/4090 (5.0 M against
4.3 M), where the 1-GPU time per sample is used at the n-GPU row's batch.
Noise: Lambda's 1-GPU and n-GPU rows are separate runs; the kept rows still range 0.68-1.6x
linear on PCIe hosts and up to 2.4x on the others (BERT-large FP32 on 8x A100 SXM4), so a p90
below ~15% is not to be expected from any link model.
Lambda's v2 tables add NVSwitch hosts of the newest GPUs (lambda_v2_host_cases: 2-8 H100 SXM5 on
one machine of a fleet, 8x H200, 2-8x B200), each n-GPU cell predicted from its own machine's
1-GPU run where the table has one (the fleet's median 1-GPU cell where not: 21 of the 35 H200
cells, on the ASUS, Lenovo and Supermicro hosts): 361 steps, v0 1.7 / 12, linear 1.8 / 12 (bench/accuracy.py
multi_gpu_single_host_lambda_v2/*; BERT-base's 8-GPU cells read 1.15-1.49x linear per GPU, the
8-GPU p90 of 36%).
The interconnect is read from the host's name (_HOST_LINKS): a PCIe workstation with NVLink
bridges between GPU pairs (possible on RTX 3090/A6000, A100/H100 PCIe) would be misfiled, and
server GPUs with peer-to-peer over PCIe differ from Sia's GeForce/Quadro hosts in more than the
PCIe generation; the data does not say which of the two the engine's rule really separates.
"""
from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Callable

import numpy as np

from srift.learn.comm import LATENCY, _node_spec, _workload
from srift.learn.datasets import _LAMBDA_UNITS_OK, data_dir, lambda_samples_per_s
from srift.learn.workloads import DATA_MODELS, WorkloadInfo

__all__ = ["HostCase", "host_link", "lambda_host_cases", "lambda_v2_host_cases", "simulate_host_case", "host_steps",
           "MAX_SUPERLINEAR"]

# A row this much faster per GPU than one GPU alone is a data error, not a measurement.
MAX_SUPERLINEAR = 1.5

# (substring of Lambda's host name, interconnect, nominal per-GPU one-direction GB/s), first match
# wins. NVIDIA datasheets: NVLink 4 / NVSwitch on HGX H100 (450), NVLink 3 on HGX A100 (300),
# NVLink 2 on V100 SXM2 (150: Lambda's V100 servers are SXM2), PCIe 5.0 / 4.0 x16 (63 / 31.5).
_HOST_LINKS = [("SXM5", "nvswitch", 450.0), ("SXM4", "nvswitch", 300.0), ("V100", "nvlink", 150.0),
               ("PCIe Gen5", "pcie", 63.0), ("PCIe", "pcie", 31.5), ("RTX", "pcie", 31.5)]
_COUNT = re.compile(r"^(?P<vendor>.*?)\s*(?P<gpus>\d+)x\s*(?P<gpu>.+)$")


@dataclass(frozen=True)
class HostCase:
    """One n-GPU row of one host, with the 1-GPU row it is predicted from."""

    host: str               # Lambda's config, e.g. "8x RTX 6000 Ada"
    family: str             # the host without its GPU count: "RTX 6000 Ada", "Dell H100 80GB SXM5"
    interconnect: str       # pcie | nvlink | nvswitch
    nominal_gbytes_s: float  # per GPU, one direction
    gpus: int
    model: str              # Lambda's model name
    workload: str           # key into workloads.json
    precision: str          # fp16 | fp32, as Lambda labels it
    local_bsz: float
    step_time: float        # s, the n-GPU iteration
    one_gpu_per_sample: float  # s per sample on one GPU of the family

    @property
    def linear_step(self) -> float:
        """Perfect linear scaling: the 1-GPU time at the local batch (s)."""
        return self.local_bsz * self.one_gpu_per_sample


def host_link(host: str) -> tuple[str, float]:
    """(interconnect, nominal per-GPU GB/s) of a Lambda host from its name."""
    for key, interconnect, gbytes_s in _HOST_LINKS:
        if key in host:
            return interconnect, gbytes_s
    raise ValueError(f"host: no interconnect known for Lambda host {host!r}")


def lambda_host_cases(d: Path | None = None) -> list[HostCase]:
    """Every n-GPU row (n > 1) of Lambda's benchmark that note "host scaling" keeps."""
    path = (d or data_dir()) / "lambda_pytorch_train.csv"
    if not path.is_file():
        raise FileNotFoundError(f"Lambda's benchmark not found: {path} (set SRIFT_DATA_DIR to .../shared/data/measured)")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    one: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["num_gpu"] == "1":
            one[(r["config"], r["precision"], r["model"])].append(lambda_samples_per_s(r["model"], float(r["throughput"])))
    cases = []
    for r in rows:
        gpus = int(r["num_gpu"])
        if gpus == 1 or ("lambda", r["model"]) not in DATA_MODELS or not _LAMBDA_UNITS_OK.get(r["model"], False):
            continue
        m = _COUNT.match(r["config"])
        if m is None:
            raise ValueError(f"config: expected Lambda's '<n>x <GPU>' host name, got {r['config']!r}")
        if int(m["gpus"]) != gpus:
            raise ValueError(f"config: {r['config']!r} names {m['gpus']} GPUs but num_gpu is {gpus}")
        family = f"{m['vendor']} {m['gpu']}".strip()
        ref = one.get((family, r["precision"], r["model"]))
        if not ref:
            continue
        per_sample = 1.0 / median(ref)
        local = float(r["global_batch_size"]) / gpus
        step = float(r["global_batch_size"]) / lambda_samples_per_s(r["model"], float(r["throughput"]))
        if step * MAX_SUPERLINEAR < local * per_sample:
            continue
        interconnect, nominal = host_link(r["config"])
        cases.append(HostCase(r["config"], family, interconnect, nominal, gpus, r["model"],
                              DATA_MODELS[("lambda", r["model"])][0], r["precision"], local, step, per_sample))
    return cases


# Lambda's v2 hosts (srift.learn.lambda_v2): HGX H100 and H200 on NVLink 4 / NVSwitch (450 GB/s
# per GPU and direction), HGX B200 on NVLink 5 (900).
_V2_LINKS = {"H100-80GB": ("nvswitch", 450.0), "H200-141GB": ("nvswitch", 450.0), "B200": ("nvswitch", 900.0)}


def lambda_v2_host_cases(d: Path | None = None) -> list[HostCase]:
    """The v2 tables' n-GPU cells (n > 1) of NVSwitch hosts, each with the 1-GPU time it is
    predicted from: the same machine's own 1-GPU run where the table has one (Lambda's
    "LambdaOD_4x_Texas_2xH100_..." is two GPUs of the 4-GPU machine whose "..._1xH100_..." row is
    one), else the median of every 1-GPU cell of that GPU at that batch. The superlinear rule
    of note "host scaling" applies (B200's BERT-base reads 1.5-2.7x linear on 4 and 8 GPUs)."""
    from srift.learn.lambda_v2 import v2_rows

    d = d or data_dir()
    cells = v2_rows(d, gpus=None)
    own: dict[tuple, float] = {}
    fleet: dict[tuple, list[float]] = defaultdict(list)
    for host, prec, model, batch, thr in cells:
        if host.gpus == 1:
            own[(host.name, prec, model)] = batch / thr
            fleet[(host.gpu, prec, model, batch)].append(batch / thr)
    cases = []
    for host, prec, model, batch, thr in cells:
        if host.gpus == 1 or host.gpu not in _V2_LINKS or ("lambda", model) not in DATA_MODELS:
            continue
        sibling = re.sub(rf"_{host.gpus}x(H100|H200|B200)_", r"_1x\1_", host.name, count=1)
        one_step = own.get((sibling, prec, model))
        if one_step is None:
            ref = fleet.get((host.gpu, prec, model, batch))
            if not ref:
                continue
            one_step = median(ref)
        step = batch * host.gpus / thr
        if step * MAX_SUPERLINEAR < one_step:
            continue
        interconnect, nominal = _V2_LINKS[host.gpu]
        cases.append(HostCase(host.name, host.gpu, interconnect, nominal, host.gpus, model,
                              DATA_MODELS[("lambda", model)][0], "fp16" if prec == "amp" else "fp32", batch, step,
                              one_step / batch))
    return cases


def simulate_host_case(case: HostCase, w: WorkloadInfo, intra_bytes_s: float) -> float:
    """Simulated n-GPU iteration (s): each rank's compute the 1-GPU time at the local batch
    (split 1:2 forward:backward), DDP's buckets allreduced over the intra-node link."""
    from srift import _core

    if not intra_bytes_s > 0:
        raise ValueError(f"intra_bytes_s: expected a bandwidth > 0 bytes/s, got {intra_bytes_s!r}")
    cm = _core.ComputeModel()
    cm.forward_per_sample_s, cm.backward_per_sample_s = case.one_gpu_per_sample / 3, 2 * case.one_gpu_per_sample / 3
    lat = LATENCY["pcie" if case.interconnect == "pcie" else "nvlink"]
    # One host: the network link is never used; any positive bandwidth will do.
    spec = _node_spec(case.family, case.gpus, _core.LinkSpec(intra_bytes_s, lat), _core.LinkSpec(1e9, LATENCY["network"]))
    res, _, why = _core.simulate(_workload(w), [(spec, 1, cm, 0.0)], int(round(case.local_bsz * case.gpus)))
    if why:
        raise ValueError(why)
    return float(res.iteration_s)


def host_steps(cases: list[HostCase], workloads: dict[str, WorkloadInfo],
               intra_bytes_s: Callable[[HostCase], float]) -> np.ndarray:
    """simulate_host_case of every case with its intra-node bandwidth from `intra_bytes_s`."""
    return np.array([simulate_host_case(c, workloads[c.workload], intra_bytes_s(c)) for c in cases])
