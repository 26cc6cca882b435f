"""The learned TCP link model: achieved allreduce bandwidth and per-step latency of a network
link without OS bypass, learned from allreduce sweeps measured here (srift.learn.allreduce_sweep).

Note "link model". One allreduce of S bytes over n ranks in a ring takes
    t(S) = 2(n-1)/n * S / B + 2(n-1) * a
(the core's ring_allreduce_s), so a link is two numbers: the achieved bandwidth B and the
per-step latency a. Every measured configuration (hosts x ranks per host x NIC rate) gives
both by a relative-error least-squares fit over its message sizes (4 KiB-64 MiB), and two
linear models carry them to configurations nobody measured:
    log(B / nominal) = w . phi      log(a) = v . phi
    phi = [log nominal GB/s, log ranks per host]
Ranks in the ring are not a feature: the engine sets a link per instance type, before the
cluster size is known (the ring formula carries n). Features are
clamped to the measured range before evaluation: the measurements cover 0.5-8 Gbit/s on a
2-core host, and a linear model must not extrapolate a trend to a 100 Gbit/s NIC (beyond the
range the prediction is the edge's). What the sweep shows: large messages reach ~99% of the
shaped rate until the two cores saturate (4 hosts x 2 ranks at 8 Gbit/s: 42%), and gloo's
per-step latency on CPU ranks is 0.15-1.5 ms, far above NCCL's tens of microseconds. So the
model describes gloo on CPU hosts and is opt-in (EngineConfig(comm_model="learned")); EC2
links keep the engine's NCCL-based assumptions, and EFA and NVLink links always do: no
measurement of them was possible here (the public NCCL reports in ../shared are anecdotal and
disagree with each other; bench/accuracy.py prints them beside v0). PCIe links inside an
instance are learned from Sia's PCIe clusters instead (srift.learn.pcie_link note "pcie class").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LINK_FEATURES", "MEASUREMENTS", "LinkConfig", "load_sweep", "configs_from_sweep", "fit_link",
           "link_features", "ring_allreduce_s"]

MEASUREMENTS = Path(__file__).resolve().parent.parent / "data" / "measurements" / "allreduce_gloo.json"
LINK_FEATURES = ["log_nominal_gbytes_s", "log_ranks_per_node"]


@dataclass(frozen=True)
class LinkConfig:
    """One measured configuration of the sweep."""

    hosts: int
    ranks_per_host: int
    nic_gbps: float
    message_bytes: tuple[float, ...]
    seconds: tuple[float, ...]

    @property
    def ranks(self) -> int:
        return self.hosts * self.ranks_per_host

    @property
    def nominal_bytes_s(self) -> float:
        return self.nic_gbps * 1e9 / 8


def load_sweep(path: str | Path = MEASUREMENTS) -> dict[str, Any]:
    from srift.learn.allreduce_sweep import validate_sweep
    from srift.learn.loader import read_json

    return validate_sweep(read_json(path), str(path))


def configs_from_sweep(doc: dict[str, Any]) -> list[LinkConfig]:
    """Configurations whose traffic crosses a NIC (more than one host)."""
    return [LinkConfig(int(c["hosts"]), int(c["ranks_per_host"]), float(c["nic_gbps"]),
                       tuple(float(s) for s in c["message_bytes"]), tuple(float(t) for t in c["seconds"]))
            for c in doc["configs"] if int(c["hosts"]) > 1]


def ring_allreduce_s(nbytes: np.ndarray | float, ranks: int, bandwidth: float, latency: float) -> Any:
    """Seconds of a ring allreduce (the core's ring_allreduce_s)."""
    if ranks <= 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    return 2 * (ranks - 1) / ranks * np.asarray(nbytes, dtype=float) / bandwidth + 2 * (ranks - 1) * latency


def fit_link(c: LinkConfig) -> tuple[float, float]:
    """(bandwidth bytes/s, latency s per ring step) of one configuration. Bandwidth: least
    squares over the messages of 1 MiB and more (where bytes dominate); latency: the median,
    over the messages below 1 MiB, of what the bandwidth term leaves per ring step (a median,
    because single small-message timings carry millisecond scheduler hiccups)."""
    s, t, n = np.asarray(c.message_bytes), np.asarray(c.seconds), c.ranks
    steps, traffic = 2 * (n - 1), 2 * (n - 1) / n * s
    big = s >= 1 << 20
    if big.sum() >= 2:
        slope, _ = np.polyfit(traffic[big], t[big], 1)
        if slope <= 0:
            slope = float(t[big][-1] / traffic[big][-1])
    else:
        slope = float(t[-1] / traffic[-1])
    small = ~big if (~big).any() else np.ones_like(big)
    lat = float(np.median((t[small] - traffic[small] * slope) / steps))
    return 1.0 / float(slope), max(lat, 1e-7)


def link_features(nominal_bytes_s: float, ranks_per_node: int) -> list[float]:
    return [math.log(nominal_bytes_s / 1e9), math.log(max(ranks_per_node, 1))]


def link_dataset(configs: list[LinkConfig]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (LINK_FEATURES), log(achieved/nominal bandwidth), log(latency) per configuration."""
    X, y_eff, y_lat = [], [], []
    for c in configs:
        bw, lat = fit_link(c)
        X.append(link_features(c.nominal_bytes_s, c.ranks_per_host))
        y_eff.append(math.log(bw / c.nominal_bytes_s))
        y_lat.append(math.log(lat))
    return np.asarray(X), np.asarray(y_eff), np.asarray(y_lat)


def make_linear():
    from sklearn.linear_model import HuberRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), HuberRegressor(epsilon=1.35, alpha=1e-3, max_iter=2000))


def clamp(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(X, lo), hi)


def predict_link(eff_model: Any, lat_model: Any, lo: np.ndarray, hi: np.ndarray, nominal_bytes_s: float,
                 ranks_per_node: int) -> tuple[float, float]:
    """(bandwidth bytes/s, latency s) of a TCP link from fitted sklearn models; achieved
    bandwidth never above nominal."""
    x = clamp(np.asarray([link_features(nominal_bytes_s, ranks_per_node)]), lo, hi)
    eff = min(float(eff_model.predict(x)[0]), 0.0)
    return nominal_bytes_s * math.exp(eff), math.exp(float(lat_model.predict(x)[0]))


def _held_out_fits(X: np.ndarray, y_eff: np.ndarray, y_lat: np.ndarray, keys: list[Any]):
    """For every group g of `keys`: (mask of g's rows, efficiency model, latency model, and the
    feature range) fitted on the other groups' rows."""
    import warnings

    for g in sorted(set(keys)):
        test = np.array([k == g for k in keys])
        if test.all():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            em, lm = make_linear().fit(X[~test], y_eff[~test]), make_linear().fit(X[~test], y_lat[~test])
        yield test, em, lm, X[~test].min(axis=0), X[~test].max(axis=0)


def held_out_errors(configs: list[LinkConfig], by: str = "rate") -> dict[str, np.ndarray]:
    """APE (%) of every (configuration, message size) predicted with the configuration's NIC
    rate ("rate") or host shape ("shape") held out: learned, v0 and the per-config alpha-beta
    fit (the form's own floor, not a prediction)."""
    from srift.engine import EngineConfig

    v0 = EngineConfig()  # the engine's TCP assumptions: network_efficiency, network_latency_s
    X, y_eff, y_lat = link_dataset(configs)
    keys = [c.nic_gbps if by == "rate" else (c.hosts, c.ranks_per_host) for c in configs]
    out: dict[str, list[float]] = {"learned": [], "v0": [], "alpha_beta_fit": []}
    for test, em, lm, lo, hi in _held_out_fits(X, y_eff, y_lat, keys):
        for i in np.flatnonzero(test):
            c = configs[i]
            s, t = np.asarray(c.message_bytes), np.asarray(c.seconds)
            bw, lat = predict_link(em, lm, lo, hi, c.nominal_bytes_s, c.ranks_per_host)
            fb, fl = fit_link(c)
            for name, (b, a) in (("learned", (bw, lat)),
                                 ("v0", (c.nominal_bytes_s * v0.network_efficiency, v0.network_latency_s)),
                                 ("alpha_beta_fit", (fb, fl))):
                out[name].extend(np.abs(ring_allreduce_s(s, c.ranks, b, a) / t - 1) * 100)
    return {k: np.asarray(v) for k, v in out.items()}


def held_out_residuals(configs: list[LinkConfig]) -> tuple[np.ndarray, np.ndarray]:
    """Residuals (target - prediction) of the efficiency and the latency model with each
    configuration's NIC rate held out (for their p10/p90)."""
    X, y_eff, y_lat = link_dataset(configs)
    r_eff, r_lat = np.full(len(configs), np.nan), np.full(len(configs), np.nan)
    for test, em, lm, lo, hi in _held_out_fits(X, y_eff, y_lat, [c.nic_gbps for c in configs]):
        x = clamp(X[test], lo, hi)
        r_eff[test] = y_eff[test] - em.predict(x)
        r_lat[test] = y_lat[test] - lm.predict(x)
    return r_eff[~np.isnan(r_eff)], r_lat[~np.isnan(r_lat)]
