"""Achieved PCIe bandwidth inside an instance, learned from the Sia clusters whose GPUs talk
over PCIe (rtx: 8x RTX 2080Ti; quad: 4x Quadro RTX 6000).

Note "pcie class". v0 assumes a PCIe ring reaches half its nominal bandwidth. Calibrated through
the simulator (srift.learn.comm note "probe calibration": the bandwidth that best reproduces
every model's steps at one placement), Sia's two PCIe clusters reach a tenth of it, and they
agree with each other placement by placement, although their GPUs, hosts and models' batch
grids differ (log achieved / nominal; 16 GB/s nominal on both):
    GPUs in the instance        2       3       4       5-8
    quad                      -1.96   -2.30   -2.42      -
    rtx                       -1.84   -2.07   -2.07   -2.53 .. -2.65
so the link class carries across clusters where nothing else in Sia's data does (azure's
NVLink calibrates to ~1 GB/s, dgx's NVSwitch to 30-300 GB/s: one cluster each, and they
disagree by 30x). The model is one line,
    log(achieved / nominal) = w0 + w1 * log(GPUs in the instance)
fitted to those calibration points; the engine evaluates it for a PCIe instance of that PCIe
generation without a measured link (EngineConfig.pcie_model = "learned"; the domain below), the
bandwidth at most nominal. The line is
extrapolated in the GPU count, not clamped to the counts it was fitted on: a host shared by
more GPUs gives each less, and held out, quad's 2-4 GPU line predicts rtx's 5-8 GPU nodes
better extrapolated than clamped (rtx multi-node 8.5 / 21 against 12.6 / 27, the clamped figure
measured before the refit that moved DeepSpeech2's bucket ready times). Leave-one-cluster-out (the line fitted on
the other PCIe cluster alone, network links at v0), median / p90 APE of the step time
(bench/accuracy.py multi_gpu_leave_one_cluster_out, column learned_pcie_links):
    rtx, every multi-node placement (1,897 steps)   v0 25.1 / 50  ->  8.5 / 21
    quad, single-node placements (195 steps)        v0 17.2 / 39  ->  6.4 / 25
What the line stands for is the simulator's whole exposed-communication error on these hosts
(no P2P between GeForce/Quadro GPUs, so the ring goes through host memory, and whatever host
contention grows with the GPUs sharing it), not a link microbenchmark. It is a fraction of
nominal: both clusters are PCIe 3.0 x16, so whether a PCIe 4.0/5.0 host (g5, g6, g7e) keeps
the fraction or the absolute bandwidth is not in the data; the fraction is the assumption.
Lambda's PCIe 4.0/5.0 hosts answered that (srift.learn.host_scaling note "host scaling"): they
scale close to linearly, and the line extrapolated to their 8-GPU servers overpredicts the
iteration (8 GPUs, 28 steps: 37.5 / 177 against v0's 7.9 / 28). So the line applies within the PCIe generation it
was fitted on (DOMAIN_FACTOR: up to sqrt(2) x the fastest nominal link in its data, halfway to
the next generation in log): g4dn, g3, g5g and p2 (PCIe 3.0) use it; g5, g6, g6e and g7e keep v0.
Gavel's K80 and P100 servers (PCIe 3.0 datacenter boards, a source the line never saw) check it:
2-8 GPUs in one server, given the 1-GPU step, 8.4 / 22 against v0's 12.6 / 31 (srift.learn.gavel_scaling
note "gavel scaling"; refitted with their calibrations the line is no better held out, so it
stays Sia's). A prediction on such a cluster carries the held-out step residuals of both clusters in its
p10-p90 band (x0.88-x1.24); nested, each cluster's band holds 68% (rtx, from quad's x0.95-x1.31:
27% of rtx's steps fall below it) and 78% (quad, from rtx's) of the other's steps
(bench/accuracy.py interval_coverage/multi_gpu_learned_pcie_links_*).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from srift.learn.comm import SIA_LINKS, ClusterCase, _calibrate, simulate_case, site, v0_log_eff
from srift.learn.workloads import WorkloadInfo

__all__ = ["PCIE_FEATURES", "DOMAIN_FACTOR", "trained_nominal_gbytes_s", "pcie_sites", "calibration_points", "fit_pcie_efficiency", "pcie_log_efficiency",
           "held_out_pcie_steps"]

PCIE_FEATURES = ["log_gpus_per_instance"]
# PCIe generations double the bandwidth: a link within sqrt(2) x of the fitted ones is the same
# generation (note "pcie class").
DOMAIN_FACTOR = math.sqrt(2.0)


def pcie_sites(cases: list[ClusterCase]) -> list[str]:
    """The sites (srift.learn.comm.site) whose GPUs talk over PCIe inside a node."""
    return sorted({site(c.cluster) for c in cases if SIA_LINKS[c.cluster].interconnect == "pcie"})


def trained_nominal_gbytes_s(points: list[tuple[str, int, float]]) -> float:
    """The fastest nominal per-GPU PCIe bandwidth (GB/s) among the sites of `points`."""
    if not points:
        raise ValueError("points: expected at least one calibration point, got none")
    return max(SIA_LINKS[s].intra_gbytes_s for s in {p[0] for p in points})


def calibration_points(cases: list[ClusterCase], workloads: dict[str, WorkloadInfo]) -> list[tuple[str, int, float]]:
    """(site, GPUs in the node, log(achieved / nominal)) for every single-node placement of a
    PCIe cluster: the intra-node bandwidth that best reproduces all its models' steps there."""
    by: dict[tuple[str, str], list[ClusterCase]] = defaultdict(list)
    for c in cases:
        if SIA_LINKS[c.cluster].interconnect == "pcie" and len(c.placement) == 1:
            by[(site(c.cluster), c.placement)].append(c)
    return [(s, int(p), _calibrate(cs, workloads, False, 0.0)) for (s, p), cs in sorted(by.items())]


def fit_pcie_efficiency(points: list[tuple[str, int, float]]):
    """LinearRegression of log(achieved / nominal) on log(GPUs in the instance)."""
    from sklearn.linear_model import LinearRegression

    gpus = {p[1] for p in points}
    if len(gpus) < 2:
        raise ValueError(f"points: need calibrations at two or more GPU counts to fit a line, got {sorted(gpus)}")
    X = np.log([[float(p[1])] for p in points])
    return LinearRegression().fit(X, np.array([p[2] for p in points]))


def pcie_log_efficiency(predict: Any, gpus: int) -> float:
    """log(achieved / nominal) for an instance of `gpus` GPUs, at most 0 (never above
    nominal). predict: [[features]] -> values."""
    if not isinstance(gpus, (int, np.integer)) or isinstance(gpus, bool) or gpus < 1:
        raise ValueError(f"gpus: expected a GPU count >= 1, got {gpus!r}")
    value = float(np.asarray(predict(np.array([[math.log(gpus)]]))).ravel()[0])
    if not math.isfinite(value):
        raise ValueError(f"link_pcie_efficiency: the prediction at gpus={gpus} is {value!r}")
    return min(value, 0.0)


def held_out_pcie_steps(cases: list[ClusterCase], workloads: dict[str, WorkloadInfo],
                        points: list[tuple[str, int, float]]) -> np.ndarray:
    """Simulated step of every case on a PCIe site with its intra-node link from the line
    fitted on the *other* PCIe sites' points (as the engine evaluates it) and its network link
    at v0; NaN elsewhere and where no other PCIe site has two GPU counts."""
    out = np.full(len(cases), np.nan)
    for g in pcie_sites(cases):
        train = [p for p in points if p[0] != g]
        if len({p[1] for p in train}) < 2:
            continue
        est = fit_pcie_efficiency(train)
        for i, c in enumerate(cases):
            if site(c.cluster) != g:
                continue
            gpus = max(int(ch) for ch in c.placement)
            intra = pcie_log_efficiency(est.predict, gpus) if gpus > 1 else 0.0
            net = v0_log_eff(SIA_LINKS[c.cluster], True)
            out[i] = simulate_case(c, workloads[c.workload], lambda f, v=intra: v, lambda f, v=net: v)
    return out
