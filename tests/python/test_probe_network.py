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


# ---- across instances: srift probe-network --distributed under torchrun --------------------

def _torchrun_probe(tmp_path, prefixes, master, extra=(), env_extra=None, timeout=180, max_bytes=4 << 20):
    """One torchrun agent per host (argv prefix per host), each running the srift CLI with
    --distributed; (return codes, rank 0's output document or None, the agents' logs)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from srift.validate.launcher import free_port

    srift_exe = str(Path(sys.executable).parent / "srift")
    out = tmp_path / "probe.json"
    port = free_port()
    procs = []
    for node, prefix in enumerate(prefixes):
        argv = [*prefix, sys.executable, "-m", "torch.distributed.run", f"--nnodes={len(prefixes)}",
                f"--node_rank={node}", "--nproc_per_node=1", f"--master_addr={master}", f"--master_port={port}",
                "--max_restarts=0", "--monitor_interval=0.5", "--no-python", srift_exe, "probe-network",
                "--instance-type", "g5.xlarge", "--distributed", "--max-bytes", str(max_bytes), "--repeats", "3",
                "--out", str(out), *extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      cwd=str(tmp_path)))
    logs = [p.communicate(timeout=timeout)[0] for p in procs]
    doc = json.loads(out.read_text()) if out.exists() else None
    return [p.returncode for p in procs], doc, logs


def test_distributed_probe_outside_torchrun_says_how_to_launch(monkeypatch):
    from srift.cli_learn import probe_network_distributed

    for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match=r"runs under torchrun.*WORLD_SIZE.*torchrun --nnodes N"):
        probe_network_distributed("g5.xlarge")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with pytest.raises(ValueError, match="WORLD_SIZE=3 ranks of LOCAL_WORLD_SIZE=2 per node"):
        probe_network_distributed("g5.xlarge")
    with pytest.raises(ValueError, match="unknown EC2 instance type"):  # arguments first, before any rendezvous
        probe_network_distributed("g5.xlarg")


def test_distributed_probe_on_one_host_is_loopback_and_refused_unless_asked(tmp_path):
    """Two torchrun nodes on this one host: their ring is loopback, not a NIC, so it is refused;
    with --loopback it is stored as the link between instances, measured over both ranks."""
    codes, doc, logs = _torchrun_probe(tmp_path, [[], []], "127.0.0.1")
    assert all(c != 0 for c in codes) and doc is None
    assert "the 2 torchrun nodes run on 1 host(s)" in logs[0]
    # loopback moves ~GB/s: messages up to 64 MiB so the bandwidth term outgrows a busy host's noise
    codes, doc, logs = _torchrun_probe(tmp_path, [[], []], "127.0.0.1", extra=["--loopback"], max_bytes=64 << 20)
    assert codes == [0, 0], logs
    entry = doc["instances"]["g5.xlarge"]
    assert entry["measured_network_gbytes_s"] > 0 and entry["measured_network_latency_us"] >= 0
    assert "gloo allreduce over 2 ranks on 2 instances (1 each), 1024-67108864 B" in entry["note"]
    assert "measurements" not in doc  # the file is a valid overrides document
    import srift

    srift.Catalog.default().with_overrides(doc)


NETNS_REASON = None
try:
    from srift.validate import netemu

    NETNS_REASON = netemu.unavailable_reason()
except Exception as exc:  # noqa: BLE001 - any reason the emulation cannot run here
    NETNS_REASON = str(exc)


@pytest.mark.skipif(NETNS_REASON is not None, reason=f"emulated hosts unavailable: {NETNS_REASON}")
def test_distributed_probe_across_emulated_hosts_measures_their_nic(tmp_path, resnet50_profile):
    """Two emulated hosts (network namespaces) with 0.5 Gbit/s NICs, one torchrun node each: the
    probe finds the NIC (a 2-rank ring's bus bandwidth is the NIC's rate, 0.0625 GB/s), needs no
    --loopback, and a 2-instance prediction then runs its ring at the measured bandwidth."""
    import srift
    from srift.validate import netemu

    with netemu.emulate([0.5, 0.5]) as emu:
        prefixes = [h.exec_prefix() for h in emu.hosts]
        codes, doc, logs = _torchrun_probe(tmp_path, prefixes, emu.hosts[0].address,
                                           env_extra={"GLOO_SOCKET_IFNAME": "eth0"})
    assert codes == [0, 0], logs
    gbytes = doc["instances"]["g5.xlarge"]["measured_network_gbytes_s"]
    assert 0.5 * 0.0625 < gbytes < 1.1 * 0.0625
    catalog = srift.Catalog.default().with_overrides(doc)
    pred = srift.predict(resnet50_profile, "2x g5.xlarge", global_batch=64, catalog=catalog)
    assert pred.ring_gbytes_s == pytest.approx(gbytes)
