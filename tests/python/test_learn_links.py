"""The learned TCP link model: its data, its fit, its export and its use by the engine."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import srift
from srift.engine import EngineConfig
from srift.learn.allreduce_sweep import SCHEMA, validate_sweep
from srift.learn.links import LinkConfig, fit_link, load_sweep, ring_allreduce_s

SIZES = [4096 * 4**k for k in range(8)]


def _config_doc(hosts: int, rph: int, gbps: float, eff: float, lat: float) -> dict:
    n = hosts * rph
    t = ring_allreduce_s(np.asarray(SIZES, float), n, gbps * 1e9 / 8 * eff, lat)
    return {"hosts": hosts, "ranks_per_host": rph, "nic_gbps": gbps, "message_bytes": SIZES,
            "seconds": [float(x) for x in t]}


def test_alpha_beta_fit_recovers_an_exact_ring() -> None:
    d = _config_doc(3, 2, 2.0, 0.9, 80e-6)
    bw, lat = fit_link(LinkConfig(3, 2, 2.0, tuple(d["message_bytes"]), tuple(d["seconds"])))
    assert bw == pytest.approx(2e9 / 8 * 0.9, rel=1e-9)
    assert lat == pytest.approx(80e-6, rel=1e-9)


def test_sweep_documents_are_validated_field_by_field() -> None:
    good = {"schema": SCHEMA, "configs": [_config_doc(2, 1, 1.0, 0.9, 1e-4)]}
    assert validate_sweep(good) is good
    with pytest.raises(ValueError, match="schema"):
        validate_sweep({**good, "schema": "other/1"})
    bad = json.loads(json.dumps(good))
    bad["configs"][0]["nic_gbps"] = 0
    with pytest.raises(ValueError, match=r"configs\[0\]\.nic_gbps"):
        validate_sweep(bad)
    bad = json.loads(json.dumps(good))
    bad["configs"][0]["seconds"][3] = -1.0
    with pytest.raises(ValueError, match=r"configs\[0\]\.seconds\[3\]"):
        validate_sweep(bad)


def test_shipped_sweep_is_real_and_covers_the_features() -> None:
    doc = load_sweep()
    shapes = {(c["hosts"], c["ranks_per_host"]) for c in doc["configs"]}
    rates = {c["nic_gbps"] for c in doc["configs"]}
    assert len(rates) >= 4 and len(shapes) >= 4 and doc["measured_at"]
    for c in doc["configs"]:
        # from 1 MiB on bytes dominate: every 4x larger message takes longer (below, single
        # timings carry millisecond scheduler hiccups, which is why the fit takes a median there)
        t = [x for s, x in zip(c["message_bytes"], c["seconds"]) if s >= 1 << 20]
        assert len(t) >= 3 and all(b > a for a, b in zip(t, t[1:]))


def test_training_recovers_a_known_link(tmp_path: Path) -> None:
    from srift.learn.loader import load_model
    from srift.learn.train import train_links

    configs = [_config_doc(h, k, g, 0.85, 120e-6) for g in (0.5, 1.0, 2.0, 4.0) for h, k in ((2, 1), (3, 1), (2, 2))]
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"schema": SCHEMA, "measured_at": "2026-11-21T00:00:00+00:00", "configs": configs}))
    docs = train_links(tmp_path, verbose=False, sweep=sweep)
    scores = docs["link_tcp_efficiency"]["training"]["selection"]["scores"]["leave-one-NIC-rate-out"]
    assert scores["learned"]["p90_ape"] < 1e-3 and scores["v0"]["median_ape"] > 1.0
    core, _ = load_model(tmp_path / "link_tcp_efficiency.json")
    assert float(core.predict(np.array([[math.log(0.25), 0.0]]))[0]) == pytest.approx(math.log(0.85), abs=1e-4)
    core, _ = load_model(tmp_path / "link_tcp_latency.json")
    assert float(core.predict(np.array([[math.log(0.25), 0.0]]))[0]) == pytest.approx(math.log(120e-6), abs=1e-4)


def test_shipped_link_model_stays_physical() -> None:
    from srift.learn.models import default_models

    m = default_models()
    rng = m.tcp_efficiency.doc["training"]["feature_range"]
    top = math.exp(rng["max"][0]) * 1e9
    for nominal in (0.1e9, 1.25e9, 3.1e9, 12.5e9):
        bw, lat = m.tcp_link(nominal, 1)
        assert 0 < bw <= nominal and 0 < lat < 0.01
    # beyond the measured range the efficiency is the edge's: no extrapolated trend
    assert m.tcp_link(12.5e9, 1)[0] / 12.5e9 == pytest.approx(m.tcp_link(top, 1)[0] / top, rel=1e-9)
    assert m.tcp_link(12.5e9, 1)[1] == pytest.approx(m.tcp_link(top, 1)[1], rel=1e-9)
    with pytest.raises(ValueError, match="nominal_bytes_s"):
        m.tcp_link(0.0, 1)


def test_engine_uses_the_learned_link_for_tcp_only(resnet50_profile, catalog) -> None:
    from srift.learn.models import default_models

    learned = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256,
                            config=EngineConfig(comm_model="learned"))
    v0 = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256)  # the default
    bw, _ = default_models().tcp_link(25e9 / 8, 8)
    assert learned.ring_gbytes_s == pytest.approx(bw / 1e9, rel=1e-9)
    assert v0.ring_gbytes_s == pytest.approx(25 / 8 * 0.80, rel=1e-9)
    # EFA links keep the assumed efficiency either way
    efa = [srift.predict(resnet50_profile, "2x p4d.24xlarge", global_batch=512, config=EngineConfig(comm_model=m))
           for m in ("learned", "v0")]
    assert efa[0].ring_gbytes_s == efa[1].ring_gbytes_s
    # a measured link wins over the model
    patched = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 2.5}}})
    assert srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, catalog=patched,
                         config=EngineConfig(comm_model="learned")).ring_gbytes_s == pytest.approx(2.5)
    with pytest.raises(ValueError, match="comm_model must be"):
        srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, config=EngineConfig(comm_model="magic"))


def test_allreduce_worker_mode_times_every_size() -> None:
    from srift.validate.launcher import run_ranks

    cfg = {"mode": "allreduce", "local_batches": [1, 1], "message_bytes": [4096, 1 << 20], "repeats": 3}
    run = run_ranks(cfg, ranks_per_host=[1, 1], mode="loopback", launcher="direct", timeout_s=120,
                    measure_latency=False)
    for r in run.ranks:
        assert r["mode"] == "allreduce" and r["backend"] == "gloo"
        assert len(r["allreduce_s"]) == 2 and all(t > 0 for t in r["allreduce_s"])
