"""srift probe-network: a real gloo allreduce sweep on loopback becomes a catalog override
that predictions use as measured."""
from __future__ import annotations

import pytest

import srift
from srift.cli_learn import probe_network


@pytest.fixture(scope="module")
def probe():
    return probe_network("g4dn.xlarge", min_bytes=1024, max_bytes=1 << 20, ranks=2, repeats=3)


def test_probe_writes_a_valid_measured_link(probe):
    entry = probe["instances"]["g4dn.xlarge"]
    assert entry["measured_network_gbytes_s"] > 0
    assert entry["measured_network_latency_us"] >= 0
    assert "gloo allreduce" in entry["note"]
    m = probe["measurements"]
    assert m["backend"] == "gloo" and m["ranks"] == 2
    assert len(m["message_bytes"]) == len(m["seconds"]) == 6  # 1 KiB .. 1 MiB by x4
    assert all(t > 0 for t in m["seconds"])


def test_predictions_use_the_probe(probe, resnet50_profile):
    overrides = {k: v for k, v in probe.items() if k != "measurements"}
    catalog = srift.Catalog.default().with_overrides(overrides)
    pred = srift.predict(resnet50_profile, "2x g4dn.xlarge", global_batch=64, catalog=catalog)
    measured = probe["instances"]["g4dn.xlarge"]["measured_network_gbytes_s"]
    assert pred.ring_gbytes_s == pytest.approx(measured)


def test_probe_ranks_default_to_every_gpu_and_reject_fewer_than_two(monkeypatch):
    """srift.learn.comm note "probe calibration": the probe runs on every visible GPU by default
    (srift plans whole instances), 2 gloo processes without GPUs; fewer than 2 is a ValueError."""
    import torch

    from srift.cli_learn import default_probe_ranks

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert default_probe_ranks() == 8
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert default_probe_ranks() == 2
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_probe_ranks() == 2
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="ranks"):
            probe_network("g4dn.xlarge", ranks=bad)
