"""Gavel's multi-GPU runs as ClusterCases, and the predictions checked against them
(srift.learn.gavel_scaling note "gavel scaling")."""
from __future__ import annotations

import csv
import math
from statistics import median

import numpy as np
import pytest
from measured_data import MEASURED

from srift.learn.comm import PROBE_EFFICIENCY_GRID, simulate_case
from srift.learn.datasets import GavelScalingRow
from srift.learn.gavel_scaling import (SUPERLINEAR_TOLERANCE, gavel_cases, gavel_pcie_points, pcie_line_steps,
                                       probe_calibrated_gavel_steps, v0_steps)

GRID = np.log(PROBE_EFFICIENCY_GRID)
MODELS = (("ResNet-18", "resnet18_cifar"), ("ResNet-50", "resnet50"))


def _rows(gpu: str = "P100") -> list[GavelScalingRow]:
    """1-GPU rows listed twice (as Gavel lists them) and placeholder 2/4/8-GPU rows."""
    rows = []
    for model, wl in MODELS:
        for b in (16.0, 64.0):
            t1 = 0.01 + 0.002 * b
            rows += [GavelScalingRow(gpu, model, wl, b, 1, True, t1), GavelScalingRow(gpu, model, wl, b, 1, False, t1 * 1.02)]
            rows += [GavelScalingRow(gpu, model, wl, b, n, cons, 2 * t1) for n in (2, 4, 8) for cons in (True, False)]
    return rows


def _with_simulated_steps(cases, intra: dict[int, float], network: float):
    """The cases' steps as the simulator gives them at known log efficiencies (intra by GPUs in
    the server, one network efficiency)."""
    from srift.learn.workloads import load_workloads

    w = load_workloads()
    for c in cases:
        n = len(c.placement) == 1 and int(c.placement)
        c.step_time = simulate_case(c, w[c.workload], lambda f, v=intra.get(n, 0.0): v, lambda f: network)
    return w


def test_cases_take_the_median_one_gpu_step_at_their_batch_and_drop_superlinear_runs() -> None:
    rows = _rows()
    t1 = median([0.01 + 0.002 * 16, (0.01 + 0.002 * 16) * 1.02])
    fast = GavelScalingRow("P100", "ResNet-18", "resnet18_cifar", 16.0, 4, True, t1 / (SUPERLINEAR_TOLERANCE + 0.01))
    edge = GavelScalingRow("P100", "ResNet-18", "resnet18_cifar", 16.0, 8, True, t1 / SUPERLINEAR_TOLERANCE)
    kept, dropped = gavel_cases(rows + [fast, edge])
    assert len(kept) == 2 * 2 * 6 + 1 and [(c.placement, c.step_time) for c in dropped] == [("4", fast.step_s)]
    c = next(c for c in kept if c.model == "ResNet-18" and c.local_bsz == 16.0 and c.placement == "11111111")
    assert c.cluster == "gavel/P100" and c.links.interconnect == "pcie"
    assert c.one_gpu_time == pytest.approx(t1, rel=1e-12) and c.fixed == 0.0
    assert c.per_sample * c.local_bsz == pytest.approx(t1, rel=1e-12)
    with pytest.raises(ValueError, match="gpu 'A100' has no entry in GAVEL_LINKS"):
        gavel_cases(_rows("A100"))


def test_the_probe_path_recovers_links_from_the_other_model_only() -> None:
    intra = {2: float(GRID[40]), 4: float(GRID[35]), 8: float(GRID[30])}
    kept, _ = gavel_cases(_rows())
    w = _with_simulated_steps(kept, intra, float(GRID[45]))
    steps, links = probe_calibrated_gavel_steps(kept, w)
    # both models ran on links the grid holds: each is reproduced from the other's calibration
    np.testing.assert_allclose(steps, [c.step_time for c in kept], rtol=1e-9)
    assert links[("gavel/P100", "ResNet-50", "8")] == pytest.approx(16e9 * math.exp(intra[8]), rel=1e-9)
    assert links[("gavel/P100", "ResNet-18", "network")] == pytest.approx(10e9 / 8 * PROBE_EFFICIENCY_GRID[45], rel=1e-9)
    # held out: a model's own steps never reach its prediction
    for c in kept:
        if c.model == "ResNet-18":
            c.step_time *= 3.0
    again, _ = probe_calibrated_gavel_steps(kept, w)
    r50 = np.array([c.model == "ResNet-50" for c in kept])
    np.testing.assert_allclose(again[~r50], steps[~r50], rtol=1e-9)
    # one model alone: nothing to calibrate on
    alone = [c for c in kept if c.model == "ResNet-50"]
    assert np.isnan(probe_calibrated_gavel_steps(alone, w)[0]).all()


def test_engine_and_v0_columns_cover_what_the_links_are_known_for() -> None:
    from srift.learn.workloads import load_workloads

    w = load_workloads()
    kept, _ = gavel_cases(_rows("P100") + _rows("V100-16GB"))
    server = np.array([len(c.placement) == 1 for c in kept])
    v100 = np.array([c.cluster == "gavel/V100-16GB" for c in kept])
    line = pcie_line_steps(kept, w, lambda n: -0.5 * math.log(n))
    assert np.isnan(line[~server | v100]).all() and not np.isnan(line[server & ~v100]).any()
    for i in np.flatnonzero(server & ~v100):
        c = kept[i]
        expected = simulate_case(c, w[c.workload], lambda f: -0.5 * math.log(int(c.placement)), lambda f: 0.0)
        assert line[i] == pytest.approx(expected, rel=1e-12)
    v0 = v0_steps(kept, w)
    assert np.isnan(v0[server & v100]).all() and not np.isnan(v0[~(server & v100)]).any()
    # more GPUs sharing the line's falling bandwidth never make a step shorter
    by = {(c.model, c.local_bsz, int(c.placement)): line[i] for i, c in enumerate(kept) if server[i] and not v100[i]}
    assert all(by[(m, b, 2)] <= by[(m, b, 4)] <= by[(m, b, 8)] for m, _ in MODELS for b in (16.0, 64.0))
    points = gavel_pcie_points(kept, w)
    assert [(s, g) for s, g, _ in points] == [("gavel/P100", 2), ("gavel/P100", 4), ("gavel/P100", 8)]


@pytest.mark.skipif(not MEASURED.is_dir(), reason="measured data not beside the checkout")
def test_gavel_runs_as_measured_and_the_shipped_pcie_line_beats_v0_on_them() -> None:
    from srift.learn import default_models
    from srift.learn.datasets import gavel_scaling_rows
    from srift.learn.pcie_link import pcie_log_efficiency
    from srift.learn.workloads import load_workloads

    rows = gavel_scaling_rows(MEASURED)
    kept, dropped = gavel_cases(rows)
    assert (len(kept), len(dropped)) == (147, 6)
    assert {(c.cluster, c.model, c.placement) for c in dropped} == {("gavel/V100-16GB", "ResNet-18", "2"),
                                                                    ("gavel/V100-16GB", "ResNet-18", "8")}
    with open(MEASURED / "gavel_isolated.csv", newline="") as f:
        listed = [1 / float(r["steps_per_sec"]) for r in csv.DictReader(f)
                  if (r["gpu"], r["model"], r["batch_size_per_gpu"], r["num_gpus"]) == ("k80", "ResNet-18", "16", "1")]
    c = next(c for c in kept if (c.cluster, c.model, c.local_bsz, c.placement) == ("gavel/K80", "ResNet-18", 16.0, "8"))
    assert len(listed) == 2 and c.one_gpu_time == pytest.approx(median(listed), rel=1e-12)
    w = load_workloads()
    models = default_models()
    line = pcie_line_steps(kept, w, lambda n: pcie_log_efficiency(models.pcie_efficiency.core.predict, n))
    v0 = v0_steps(kept, w)
    m = ~np.isnan(line)
    truth = np.array([c.step_time for c in kept])[m]
    one = np.array([c.one_gpu_time for c in kept])[m]

    def median_ape(p: np.ndarray) -> float:
        return float(np.median(np.abs(p / truth - 1)))

    assert m.sum() == 51
    assert median_ape(line[m]) < median_ape(v0[m]) < median_ape(one)
