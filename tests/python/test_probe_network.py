"""srift probe-network: a real gloo allreduce sweep on loopback becomes a catalog override
that predictions use as measured."""
from __future__ import annotations

import pytest

import srift
from srift.cli_learn import probe_network


@pytest.fixture(scope="module")
def probe():
    return probe_network("g4dn.xlarge", min_bytes=1024, max_bytes=1 << 20, ranks=2, repeats=3, loopback=True)


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


def test_a_single_host_gloo_probe_is_not_stored_as_the_nic_unless_asked(monkeypatch):
    """Without NCCL on the ranks' GPUs the probe times gloo over loopback on one host. Stored as
    the instance's network link it made a 4x p3.16xlarge ResNet-50 step 6x slower; it is now
    refused unless --loopback says it is wanted (tests, emulated hosts)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # a 1-GPU instance, two ranks
    with pytest.raises(ValueError, match=r"needs NCCL on 2 GPUs of this instance \(found 1\).*--loopback"):
        probe_network("g5.xlarge", ranks=2)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"instance_type": "g5.xlarg"}, "unknown EC2 instance type.*did you mean 'g5.xlarge'"),
    ({"min_bytes": 0}, "min_bytes must be an integer in 1.."),  # the size loop never ended
    ({"min_bytes": -5}, "min_bytes must be an integer in 1.."),
    ({"min_bytes": 1 << 24, "max_bytes": 1 << 22}, "max_bytes must be an integer in 16777216.."),  # wrote Infinity
    ({"max_bytes": 4096}, "max_bytes must be an integer in 1048576.."),  # no message for the bandwidth
    ({"repeats": 0}, "repeats must be an integer in 1.."),  # a traceback from the workers
])
def test_probe_arguments_are_checked_before_any_process_starts(kwargs, message):
    args = {"instance_type": "g5.xlarge", "ranks": 2, "loopback": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        probe_network(**args)
