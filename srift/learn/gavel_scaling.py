"""Gavel's multi-GPU runs: an out-of-source check of srift's links through the simulator.

Note "gavel scaling". Gavel (../shared/data/measured/gavel_isolated.csv) ran each model alone on
1, 2, 4 and 8 K80, P100 or V100 GPUs, either consolidated (all workers in one server) or spread
(one worker per server), at four or five per-GPU batches, in FP32. Two of its models are built by
the zoo exactly as Gavel trained them (ResNet-18 on CIFAR-10, ResNet-50 on ImageNet: 44.7 and
102.2 MB of gradients); its Transformer is a stand-in whose gradient bytes are not Gavel's, so
its rows stay out. Each multi-GPU run becomes a ClusterCase whose workers compute for the
measured 1-GPU step at the same per-GPU batch (the median of Gavel's two listings of it): the
question is the one a user asks after profiling one GPU.

What the data does not say: Gavel's servers' interconnect and network are not published with the
throughputs. K80 and P100 boards sit on PCIe 3.0 x16 (every P100 in the data is the PCIe part;
the K80 has no other), so the consolidated K80 and P100 runs are what srift's learned PCIe line
(srift.learn.pcie_link note "pcie class", fitted on Sia's GeForce/Quadro servers only) predicts
for a PCIe 3.0 instance such as p2.8xlarge: never fitted on Gavel, it is a held-out source. The
V100 servers may be NVLink or PCIe, so their consolidated runs get no engine prediction. Across
servers the NIC is unknown: the spread runs are predicted the way `srift probe-network` would
calibrate them, the network bandwidth that best reproduces the *other* model's two-server steps
(srift.learn.comm note "probe calibration"), applied at 2, 4 and 8 servers; v0 is shown at an
assumed 10 Gbit/s (the calibration lands at 0.6-1.3 GB/s, a 10 Gbit/s Ethernet's range).

Rows dropped: a synchronous step cannot beat one GPU's step at the same per-GPU batch; a run
more than SUPERLINEAR_TOLERANCE faster than its 1-GPU step is not a DDP step (6 rows: V100
ResNet-18 consolidated at 2 and 8 GPUs, 0.64-0.75x the 1-GPU step; the rest of that server's
runs are erratic as well: 1.87x at 2 GPUs, 1.10x at 8 for batch 128).

Median / p90 APE of the step time, held out (bench/accuracy.py gavel_multi_gpu/*):
  one server (PCIe)     n    linear        v0 (PCIe 50%)   engine (Sia's line)   probe
  K80                  24    11.8 / 25     11.4 / 24       10.4 / 20             13.5 / 95
  P100                 27    14.0 / 38     13.0 / 36        6.8 / 26             10.1 / 34
  both                 51    13.5 / 34     12.6 / 31        8.4 / 22             11.7 / 89
  one GPU per server   n    linear        v0 (10 Gb/s assumed)                  probe (2 servers)
  K80                  21     5.9 / 17      4.1 / 11                              4.7 / 10
  P100                 27    32.9 / 64     12.1 / 18                              9.9 / 17
  V100                 27    45.5 / 71     23.6 / 36                             27.6 / 42
  all                  75    30.7 / 68     11.8 / 30                             12.3 / 34
The PCIe line that never saw these servers predicts them better than v0 and linear scaling, and
its shipped band (x0.88-x1.24) holds 80.4% of their steps (calibrated: 80%). Calibrated on one
other model, the probe inside a K80 server is noisy (K80's slow steps hide most of the traffic).
V100's one-server runs, interconnect unknown: linear 31.1 / 56, probe 50.2 / 254. The
probe path brings the spread runs from 31 / 68 (linear) to 12 / 34. V100's spread steps grow
faster with servers than a ring's 2(n-1)/n (1.8x, 3.2x, 4.0x the 1-GPU step at 2, 4, 8 for
ResNet-18 at batch 16), which no link bandwidth reproduces at every server count.
Refitting the PCIe line with Gavel's K80 and P100 server calibrations beside Sia's (leave one of
the four PCIe sites out) helps rtx (8.5 / 22 -> 7.2 / 18) and costs P100 (6.8 / 26 -> 9.1 / 50):
the slope moves from -0.68 to -0.27 on 16 points, and the mean over sites of median + p90 / 4
is worse (15.2 against 14.6), so the shipped line stays fitted on Sia's servers
(bench/accuracy.py multi_gpu_pcie_line_sites/*).
"""
from __future__ import annotations

import math
from collections import defaultdict
from statistics import median
from typing import Callable

import numpy as np

from srift.learn.comm import ClusterCase, LinkClass, _calibrate, simulate_case, v0_log_eff
from srift.learn.datasets import GavelScalingRow
from srift.learn.workloads import WorkloadInfo

__all__ = ["GAVEL_LINKS", "SUPERLINEAR_TOLERANCE", "gavel_cases", "one_server", "pcie_known", "v0_steps",
           "pcie_line_steps", "probe_calibrated_gavel_steps", "gavel_pcie_points"]

# Nominal links of Gavel's servers: PCIe 3.0 x16 for the K80 and P100 boards; the V100 servers'
# interconnect is not published ("unknown": no engine or v0 prediction inside a server); the NIC
# is not published either: 10 Gbit/s is an assumption used by the v0 column alone.
GAVEL_LINKS = {
    "K80": LinkClass("pcie", 16.0, 10.0, False),
    "P100": LinkClass("pcie", 16.0, 10.0, False),
    "V100-16GB": LinkClass("unknown", 16.0, 10.0, False),
}
SUPERLINEAR_TOLERANCE = 1.10  # the data's noise between neighbouring points (Sia README: 10-20%)


def gavel_cases(rows: list[GavelScalingRow]) -> tuple[list[ClusterCase], list[ClusterCase]]:
    """(kept, dropped) ClusterCases of every multi-GPU row with a 1-GPU step at its batch.
    cluster "gavel/<GPU>"; placement "<n>" (one server) or "1" * n (one worker per server);
    one_gpu_time the median 1-GPU step at the same batch, all of it per-sample compute."""
    ones: dict[tuple[str, str, float], list[float]] = defaultdict(list)
    for r in rows:
        if r.gpus == 1:
            ones[(r.gpu, r.model, r.batch)].append(r.step_s)
    kept, dropped = [], []
    for r in rows:
        if r.gpus == 1 or (r.gpu, r.model, r.batch) not in ones:
            continue
        if r.gpu not in GAVEL_LINKS:
            raise ValueError(f"gavel rows: gpu {r.gpu!r} has no entry in GAVEL_LINKS")
        t1 = median(ones[(r.gpu, r.model, r.batch)])
        case = ClusterCase(f"gavel/{r.gpu}", r.model, r.workload, str(r.gpus) if r.consolidated else "1" * r.gpus,
                           r.batch, r.step_s, t1, 0.0, t1 / r.batch, GAVEL_LINKS[r.gpu])
        (kept if r.step_s * SUPERLINEAR_TOLERANCE >= t1 else dropped).append(case)
    return kept, dropped


def one_server(case: ClusterCase) -> bool:
    return len(case.placement) == 1


def pcie_known(case: ClusterCase) -> bool:
    return case.links.interconnect == "pcie"


def v0_steps(cases: list[ClusterCase], workloads: dict[str, WorkloadInfo]) -> np.ndarray:
    """The simulated step at v0's links (PCIe at 50% of nominal, the network at 80% of its
    assumed 10 Gbit/s); NaN for one-server runs whose interconnect is unknown."""
    out = np.full(len(cases), np.nan)
    for i, c in enumerate(cases):
        if one_server(c) and not pcie_known(c):
            continue
        intra, net = v0_log_eff(c.links, False), v0_log_eff(c.links, True)
        out[i] = simulate_case(c, workloads[c.workload], lambda f: intra, lambda f: net)
    return out


def pcie_line_steps(cases: list[ClusterCase], workloads: dict[str, WorkloadInfo],
                    log_efficiency: Callable[[int], float]) -> np.ndarray:
    """The simulated step of every one-server PCIe run with the intra-server link the engine
    takes from the learned PCIe line (log_efficiency: GPUs in the instance -> log(achieved /
    nominal)); NaN elsewhere."""
    out = np.full(len(cases), np.nan)
    for i, c in enumerate(cases):
        if one_server(c) and pcie_known(c):
            le = log_efficiency(int(c.placement))
            out[i] = simulate_case(c, workloads[c.workload], lambda f: le, lambda f: 0.0)
    return out


def probe_calibrated_gavel_steps(cases: list[ClusterCase],
                                 workloads: dict[str, WorkloadInfo]) -> tuple[np.ndarray, dict[tuple, float]]:
    """Every run predicted with its link calibrated on the *other* models' runs on the same GPU
    type (srift.learn.comm note "probe calibration"): inside a server, the intra-server
    bandwidth at the same GPU count; across servers, the network bandwidth of two servers,
    applied at every server count. Returns (steps, {(GPU cluster, model, placement or "network"):
    achieved bytes/s}); NaN where no other model ran there."""
    out = np.full(len(cases), np.nan)
    links: dict[tuple, float] = {}
    calibrated: dict[tuple, float | None] = {}  # (cluster, model, link) -> log efficiency, once each
    for i, c in enumerate(cases):
        network = not one_server(c)
        key = (c.cluster, c.model, "network" if network else c.placement)
        if key not in calibrated:
            probe_placement = "11" if network else c.placement
            others = [o for o in cases if o.cluster == c.cluster and o.model != c.model and o.placement == probe_placement]
            calibrated[key] = _calibrate(others, workloads, network, 0.0) if others else None
            if others:
                link = c.links
                nominal = link.network_gbps / 8 * 1e9 if network else link.intra_gbytes_s * 1e9
                links[key] = nominal * math.exp(calibrated[key])
        le = calibrated[key]
        if le is None:
            continue
        intra, net = (0.0, le) if network else (le, 0.0)
        out[i] = simulate_case(c, workloads[c.workload], lambda f: intra, lambda f: net)
    return out, links


def gavel_pcie_points(cases: list[ClusterCase], workloads: dict[str, WorkloadInfo]) -> list[tuple[str, int, float]]:
    """(site, GPUs in the server, log(achieved / nominal)) of every one-server PCIe placement: the
    intra-server bandwidth reproducing all its runs (srift.learn.pcie_link.calibration_points'
    form, for the experiment of refitting the line with Gavel's servers)."""
    by: dict[tuple[str, str], list[ClusterCase]] = defaultdict(list)
    for c in cases:
        if one_server(c) and pcie_known(c):
            by[(c.cluster, c.placement)].append(c)
    return [(s, int(p), _calibrate(cs, workloads, False, 0.0)) for (s, p), cs in sorted(by.items())]
