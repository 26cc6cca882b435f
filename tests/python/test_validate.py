"""srift validate: APE arithmetic, measurement records, cleanup, clear errors, and a tiny real
2-rank DDP run on loopback (and in network namespaces when root). No timing asserts."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from srift.validate import netemu
from srift.validate.launcher import LaunchError, run_ranks
from srift.validate.report import (
    MEASUREMENT_SCHEMA,
    ValidationReport,
    ValidationRun,
    ape,
    append_measurements,
    load_measurements,
    percentile,
    summarize,
)
from srift.validate.runner import Calibrator, HostSpec, WorkerSpec, emulated_cluster, validate

TINY = {"model": "resnet18_cifar", "options": {}, "warmup": 1, "iterations": 2, "threads": 1, "probe": True,
        "optimizer": "sgd"}
NETNS_REASON = netemu.unavailable_reason()


# ---- arithmetic ---------------------------------------------------------------------------
def test_ape_and_summary() -> None:
    assert ape(1.1, 1.0) == pytest.approx(10.0)
    assert ape(0.9, 1.0) == pytest.approx(10.0)
    assert ape(2.0, 2.0) == 0.0
    assert percentile([1, 2, 3, 4, 5], 0.5) == 3
    assert percentile([0, 10], 0.9) == pytest.approx(9.0)
    s = summarize([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0])
    assert s["runs"] == 10 and s["median_ape"] == pytest.approx(55.0) and s["p90_ape"] == pytest.approx(91.0)
    assert summarize([])["median_ape"] is None


@pytest.mark.parametrize("pred,meas,field", [(1.0, 0.0, "measured"), (float("nan"), 1.0, "predicted"),
                                             (1.0, -2.0, "measured"), ("x", 1.0, "predicted")])
def test_ape_rejects_bad_input(pred: object, meas: object, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ape(pred, meas)  # type: ignore[arg-type]


def test_measurements_file_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    assert append_measurements(path, [{"kind": "ddp", "iteration_s": 1.0}, {"kind": "compute"}]) == 2
    append_measurements(path, [{"kind": "ddp"}])
    recs = load_measurements(path)
    assert len(recs) == 3 and all(r["schema"] == MEASUREMENT_SCHEMA for r in recs)
    path.write_text(path.read_text() + '{"schema": "other/9"}\n')
    with pytest.raises(ValueError, match=r":4: schema"):
        load_measurements(path)
    with pytest.raises(ValueError, match="does not exist"):
        append_measurements(tmp_path / "nope" / "m.jsonl", [{}])


def test_report_table_and_json() -> None:
    run = ValidationRun(model="m", cluster="2x emu", global_batch=4, local_batches=[2, 2],
                        hosts=[{"nic_gbps": 1.0}, {"nic_gbps": 1.0}], mode="netns", launcher="direct",
                        measured_iteration_s=2.0, measured_p10_s=1.9, measured_p90_s=2.2,
                        predicted_iteration_s=2.2, ape=ape(2.2, 2.0), predicted={}, measured={},
                        iterations=3, warmup=1, label="m homo 1G")
    rep = ValidationReport(runs=[run], failures=[{"label": "x", "error": "rank 1 failed: boom"}])
    text = rep.format_table()
    assert "m homo 1G" in text and "10.0" in text and "rank 1 failed" in text
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["summary"]["median_ape"] == pytest.approx(10.0) and d["runs"][0]["local_batches"] == [2, 2]


# ---- specs and errors -----------------------------------------------------------------------
def test_specs_validate_input() -> None:
    assert WorkerSpec(1, 0.5).key == "emu-cpu-t1-q50"
    assert HostSpec(2.0, (WorkerSpec(),)).instance_name() == "emu-cpu-t1-x1-2g"
    assert len(emulated_cluster(3, 1.0, ranks_per_host=2)) == 3
    with pytest.raises(ValueError, match="threads"):
        WorkerSpec(0)
    with pytest.raises(ValueError, match="speed class"):
        HostSpec(1.0, (WorkerSpec(1), WorkerSpec(1, 0.5)))
    with pytest.raises(ValueError, match="cpu_quota"):
        emulated_cluster(2, 1.0, cpu_quota=[None])
    with pytest.raises(ValueError, match="global_batch"):
        validate("resnet18_cifar", 0, [emulated_cluster(2)])
    with pytest.raises(ValueError, match="ranks need global_batch"):
        validate("resnet18_cifar", 1, [emulated_cluster(2)])
    with pytest.raises(ValueError, match="mode"):
        validate("resnet18_cifar", 4, [emulated_cluster(2)], mode="wifi")


def test_launcher_rejects_bad_config() -> None:
    with pytest.raises(ValueError, match="local_batches"):
        run_ranks({**TINY, "local_batches": [2]}, ranks_per_host=[1, 1])
    with pytest.raises(ValueError, match="same number of ranks"):
        run_ranks({**TINY, "local_batches": [2, 2, 2]}, ranks_per_host=[1, 2], launcher="torchrun")
    with pytest.raises(ValueError, match="mode"):
        run_ranks({**TINY, "local_batches": [2]}, ranks_per_host=[1], mode="tcp")


def test_emulate_rejects_bad_rates() -> None:
    with pytest.raises(ValueError, match=r"nic_gbps\[1\]"):
        with netemu.emulate([1.0, -1.0]):
            pass


# ---- real DDP runs --------------------------------------------------------------------------
def test_failing_rank_is_named_and_group_killed() -> None:
    with pytest.raises(LaunchError, match="rank 1 failed.*on purpose") as info:
        run_ranks({**TINY, "local_batches": [2, 2], "fail_rank": 1}, ranks_per_host=[1, 1], mode="loopback",
                  launcher="direct", timeout_s=120)
    assert info.value.rank == 1


def test_hanging_run_times_out() -> None:
    # rank 1 hangs: its own deadline (or the launcher's) ends the run, naming a rank
    with pytest.raises(LaunchError, match=r"rank \d+ failed.*deadline|timed out") as info:
        run_ranks({**TINY, "local_batches": [2, 2], "hang_rank": 1, "collective_timeout_s": 3},
                  ranks_per_host=[1, 1], mode="loopback", launcher="direct", timeout_s=4, measure_latency=False)
    assert info.value.rank in (0, 1)


@pytest.fixture(scope="module")
def calibrator() -> Calibrator:
    return Calibrator("resnet18_cifar", {}, optimizer="sgd", warmup=1, iterations=2, timeout_s=120)


def test_validate_loopback_end_to_end(tmp_path: Path, calibrator: Calibrator) -> None:
    meas = tmp_path / "meas.jsonl"
    rep = validate("resnet18_cifar", 5, [emulated_cluster(2, None)], mode="loopback", launcher="direct",
                   warmup=1, iterations=2, optimizer="sgd", measurements_path=meas, raise_on_failure=True,
                   timeout_s=120, calibrator=calibrator, compute_iterations=1)
    assert len(rep.runs) == 1 and not rep.failures
    run = rep.runs[0]
    assert sum(run.local_batches) == 5 and len(run.local_batches) == 2
    assert run.ape == pytest.approx(ape(run.predicted_iteration_s, run.measured_iteration_s))
    assert run.ape_inrun == pytest.approx(ape(run.predicted_inrun_s, run.measured_iteration_s))
    assert math.isfinite(run.measured_iteration_s) and run.measured_iteration_s > 0
    assert run.measured_p10_s <= run.measured_iteration_s <= run.measured_p90_s
    ranks = run.measured["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and [r["local_batch"] for r in ranks] == run.local_batches
    assert run.measured["allreduce_busbw_gbps"] > 0 and len(run.measured["in_run_compute"]) == 2
    # each rank measured the compute it loses to an allreduce in flight (>= 0 s/byte)
    inter = run.measured["interference_s_per_byte"]
    assert len(inter) == 2 and all(math.isfinite(v) and v >= 0 for v in inter)
    assert any("compute lost to collectives" in n for n in run.notes)
    recs = load_measurements(meas)
    kinds = [r["kind"] for r in recs]
    assert kinds.count("ddp") == 1 and kinds.count("compute") == 4  # 2 ranks x 2 calibration batches
    ddp = next(r for r in recs if r["kind"] == "ddp")
    assert ddp["ape"] == pytest.approx(run.ape) and ddp["local_batches"] == run.local_batches


def test_validate_appends_to_profile(calibrator: Calibrator) -> None:
    from srift.validate.runner import _make_profile

    prof = _make_profile("resnet18_cifar", {}, "sgd")
    rep = validate("resnet18_cifar", 5, [emulated_cluster(2, None)], mode="loopback", launcher="direct",
                   warmup=0, iterations=1, optimizer="sgd", fail_rank=0, timeout_s=120, calibrator=calibrator,
                   profile=prof, add_to_profile=True)
    # the run fails on purpose: the report names the rank and why; calibration is in the profile
    assert not rep.runs and rep.failures and rep.failures[0]["rank"] == 0
    assert "on purpose" in rep.failures[0]["error"]
    got = prof.measurements_for("emu-cpu-t1")
    assert len(got) == 8 and all(m.source == "srift validate calibration" for m in got)  # 2 passes
    # the profile stays usable with the bundled catalog, which has no emulated workers
    import srift

    assert srift.predict(prof, "1x g4dn.xlarge", global_batch=8).iteration_s > 0


def test_validate_refuses_a_profile_of_another_model() -> None:
    from srift.validate.runner import _make_profile

    prof = _make_profile("resnet18_cifar", {}, "sgd")
    with pytest.raises(ValueError, match="profile: it profiles 'resnet18_cifar', but the model validated is 'ncf'"):
        validate("ncf", 5, [emulated_cluster(2, None)], mode="loopback", launcher="direct", profile=prof,
                 add_to_profile=True)
    assert prof.measurements == []


@pytest.mark.skipif(NETNS_REASON is not None, reason=f"emulated hosts unavailable: {NETNS_REASON}")
def test_ddp_in_namespaces_and_cleanup() -> None:
    before = set(netemu.list_namespaces())
    res = run_ranks({**TINY, "local_batches": [2, 2]}, ranks_per_host=[1, 1], mode="netns", nic_gbps=[2.0, 2.0],
                    launcher="torchrun", timeout_s=120)
    assert all(r["status"] == "ok" for r in res.ranks)
    assert res.latency_floor_s is not None and res.latency_floor_s > 0
    assert all(h["address"].startswith("192.0.2.") for h in res.hosts)
    after = set(netemu.list_namespaces())
    mine = f"{netemu.PREFIX}{os.getpid()}x"  # other runs may be creating namespaces of their own
    assert not {n for n in after - before if n.startswith(mine)}, "namespaces left behind"


@pytest.mark.skipif(NETNS_REASON is not None, reason=f"emulated hosts unavailable: {NETNS_REASON}")
def test_namespaces_removed_on_error() -> None:
    mine = f"{netemu.PREFIX}{os.getpid()}x"
    with pytest.raises(RuntimeError, match="boom"):
        with netemu.emulate([1.0, 1.0]) as emu:
            assert len(emu.hosts) == 2 and set(emu.namespaces) <= set(netemu.list_namespaces())
            raise RuntimeError("boom")
    assert not [n for n in netemu.list_namespaces() if n.startswith(mine)]


@pytest.mark.skipif(NETNS_REASON is not None, reason=f"emulated hosts unavailable: {NETNS_REASON}")
def test_cleanup_leftovers_of_dead_process() -> None:
    # a namespace named as if by a dead process (pid that does not exist) is removed
    dead = 2**22 + 12345
    name = f"{netemu.PREFIX}{dead}x1h0"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=15)
    try:
        assert name in netemu.cleanup_leftovers()
        assert name not in netemu.list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=15)


def test_unavailable_reason_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in (netemu.unavailable_reason() or "")
    with pytest.raises(netemu.EmulationUnavailable, match="root"):
        with netemu.emulate([1.0]):
            pass


def test_cli_registers_validate() -> None:
    import argparse

    from srift import cli_validate

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli_validate.register(sub)
    args = parser.parse_args(["validate", "--model", "ncf", "--global-batch", "8", "--nic-gbps", "1,2",
                              "--cpu-quota", "none,0.5", "--json"])
    assert args.nic_gbps == [1.0, 2.0] and args.cpu_quota == [None, 0.5] and args.func is cli_validate.cmd_validate
    with pytest.raises(SystemExit):
        parser.parse_args(["validate", "--nic-gbps", "fast"])
    args = parser.parse_args(["validate", "--option", 'layers=[1, 2]', "--option", "name=plain"])
    assert args.option == [("layers", [1, 2]), ("name", "plain")]
    with pytest.raises(SystemExit):  # argparse's usage error, not a RecursionError traceback
        parser.parse_args(["validate", "--option", "layers=" + "[" * 100_000 + "]" * 100_000])


def test_worker_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "srift.validate.worker"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_rank_batches_follow_the_plan() -> None:
    from types import SimpleNamespace

    from srift.validate.runner import _rank_batches, emulation_overrides

    hosts = [HostSpec(1.0, (WorkerSpec(),) * 2), HostSpec(1.0, (WorkerSpec(1, 0.5),)), HostSpec(1.0, (WorkerSpec(),) * 2)]
    g = SimpleNamespace
    pred = SimpleNamespace(groups=[
        g(instance_type="emu-cpu-t1-x2-1g", ranks=4, ranks_high=1, local_batch_high=11, local_batch_low=10),
        g(instance_type="emu-cpu-t1-q50-x1-1g", ranks=1, ranks_high=0, local_batch_high=5, local_batch_low=5)])
    assert _rank_batches(pred, hosts, [1.0] * 3) == [11, 10, 5, 10, 10]
    cal = [{"key": "emu-cpu-t1", "local_batch": 4, "forward_s": 0.1, "backward_s": 0.2},
           {"key": "emu-cpu-t1-q50", "local_batch": 4, "forward_s": 0.2, "backward_s": 0.4}]
    overrides, cluster = emulation_overrides(hosts, cal, 1e9, [1.0] * 3)
    assert cluster == "2x emu-cpu-t1-x2-1g + 1x emu-cpu-t1-q50-x1-1g"
    assert overrides["schema"] == "srift.catalog-overrides/1"
    inst = overrides["instances"]["emu-cpu-t1-q50-x1-1g"]
    assert inst["network_gbps"] == 1.0 and inst["gpu"] == "emu-cpu-t1-q50" and inst["gpu_count"] == 1
    assert overrides["instances"]["emu-cpu-t1-x2-1g"]["interconnect"] == "pcie"
    # the slow class is written with half the measured FLOP rate of the fast one
    gpus = overrides["gpus"]
    assert gpus["emu-cpu-t1"]["fp32_tflops"] == pytest.approx(2 * gpus["emu-cpu-t1-q50"]["fp32_tflops"])
    from srift.catalog import Catalog

    cat = Catalog.default().with_overrides(overrides)  # a valid overrides document
    assert cat.instance("emu-cpu-t1-x2-1g").gpu_count == 2


def test_the_measured_ddp_is_built_as_the_profile_says() -> None:
    """srift validate times the DDP the profile describes: without the buffer broadcast when
    the profile says forward_sync_buffers=False (broadcast_buffers=False on a torch before
    2.13, which lacks the new name), and with DDP's default otherwise."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from srift.validate.worker import ddp_options

    assert ddp_options({"bucket_cap_mb": 5}, DDP, None) == {"bucket_cap_mb": 5.0}
    assert ddp_options({"forward_sync_buffers": False}, DDP, [1]) == {
        "bucket_cap_mb": 25.0, "forward_sync_buffers": False, "device_ids": [1]}

    class OlderDDP:
        def __init__(self, module, device_ids=None, broadcast_buffers=True, bucket_cap_mb=None):
            pass

    assert ddp_options({"forward_sync_buffers": False}, OlderDDP, None) == {
        "bucket_cap_mb": 25.0, "broadcast_buffers": False}


# ---- review fixes: schema-valid overrides, honest labels, --timeout ---------------------------
def test_a_low_flop_model_gets_a_valid_emulated_gpu() -> None:
    # ncf measured ~1e-4 TFLOP/s (embeddings, not FLOPs): the floor of 1e-4 wrote an overrides
    # document the catalog schema refuses (fp32_tflops minimum 0.001), and validate failed
    from srift.catalog import Catalog
    from srift.validate.runner import emulation_overrides, schema_bounds

    low, high = schema_bounds("gpu", "fp32_tflops")
    assert (low, high) == (0.001, 1e6)  # read from srift/schemas/catalog.schema.json
    hosts = emulated_cluster(2, None)
    for seconds in (1e3, 1e-15):  # far below the minimum, far above the maximum
        cal = [{"key": "emu-cpu-t1", "local_batch": b, "forward_s": seconds, "backward_s": seconds} for b in (8, 24)]
        overrides, cluster = emulation_overrides(hosts, cal, 639744.0, [10.0, 10.0], loopback=True)
        assert low <= overrides["gpus"]["emu-cpu-t1"]["fp32_tflops"] <= high
        cat = Catalog.default().with_overrides(overrides)  # raised ValueError: "at least 0.001"
        assert cat.instance(cluster.split("x ", 1)[1]).gpu == "emu-cpu-t1"


def test_the_emulated_peak_is_clamped_and_does_not_move_the_prediction() -> None:
    # validate's prediction is anchored on the calibration (two local batches per speed
    # class): the nominal peak, clamped or not, changes nothing srift predicts
    import srift
    from srift.catalog import Catalog
    from srift.engine import EngineConfig
    from srift.validate.runner import _make_profile, emulation_overrides

    prof = _make_profile("ncf", {}, "adam")
    cal = [{"key": "emu-cpu-t1", "local_batch": b, "iteration_s": it, "forward_s": f, "backward_s": bw}
           for b, it, f, bw in ((32, 0.02, 0.006, 0.01), (19, 0.015, 0.004, 0.007))]
    for p in cal:
        prof.add_measurement(p["key"], p["local_batch"], p["iteration_s"], p["forward_s"], p["backward_s"])
    overrides, cluster = emulation_overrides(emulated_cluster(2, None), cal, 1.0, [10.0, 10.0], loopback=True)
    assert overrides["gpus"]["emu-cpu-t1"]["fp32_tflops"] == 0.001  # clamped up from ~1e-12
    for compute_model in ("learned", "roofline"):
        got = []
        for tflops in (0.001, 0.1, 100.0):
            doc = json.loads(json.dumps(overrides))
            doc["gpus"]["emu-cpu-t1"]["fp32_tflops"] = tflops
            pred = srift.predict(prof, cluster, 64, catalog=Catalog.default().with_overrides(doc),
                                 region="us-east-1", config=EngineConfig(compute_model=compute_model))
            assert [g.compute_source for g in pred.groups] == ["measured"]
            got.append((pred.iteration_s, pred.compute_s, pred.optimizer_s, pred.groups[0].local_batch_high))
        assert got[0] == got[1] == got[2]


def test_nic_rate_outside_the_catalog_range_is_refused() -> None:
    with pytest.raises(ValueError, match=r"nic_gbps: .*\[0.001, 1e\+07\].*0.0001"):
        HostSpec(0.0001)
    assert HostSpec(0.001).instance_name() == "emu-cpu-t1-x1-0.001g"


def test_loopback_names_no_nic_rate() -> None:
    # loopback emulates no NIC: the label said "1G" and the instance "-10g" (a placeholder)
    from srift.cli_validate import run_label

    assert run_label("resnet18_cifar", [None, None], 1.0, "loopback") == "resnet18_cifar homo lo"
    assert run_label("resnet18_cifar", [None, 0.5], 2.0, "netns") == "resnet18_cifar het 2G"
    assert run_label("ncf", [None], None, "netns") == "ncf homo lo"
    host = HostSpec(1.0)
    assert host.instance_name(10.0, loopback=True) == "emu-cpu-t1-x1-lo"
    assert HostSpec(None).instance_name(10.0) == "emu-cpu-t1-x1-lo"
    assert host.instance_name(10.0) == "emu-cpu-t1-x1-10g"


def test_cli_labels_after_the_mode_is_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from srift import cli_validate
    from srift.validate import runner

    seen = {}

    def fake_validate(model, global_batch, clusters, **kw):
        seen.update(kw, clusters=clusters)
        return ValidationReport(runs=[])

    monkeypatch.setattr(runner, "validate", fake_validate)
    parser = argparse.ArgumentParser()
    cli_validate.register(parser.add_subparsers())
    args = parser.parse_args(["validate", "--model", "ncf", "--global-batch", "8", "--mode", "loopback", "--quiet"])
    assert cli_validate.cmd_validate(args) == 0
    assert seen["labels"] == ["ncf homo lo"]
    monkeypatch.setattr(netemu, "unavailable_reason", lambda: "not root")
    args = parser.parse_args(["validate", "--model", "ncf", "--global-batch", "8", "--nic-gbps", "2", "--quiet"])
    cli_validate.cmd_validate(args)  # auto falls back to loopback: no 2G in the label
    assert seen["labels"] == ["ncf homo lo"]
    args = parser.parse_args(["validate", "--model", "ncf", "--global-batch", "8", "--mode", "netns"])
    with pytest.raises(ValueError, match="--mode netns: not root"):
        cli_validate.cmd_validate(args)


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "-inf", "soon"])
def test_cli_timeout_must_be_positive_and_finite(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from srift.cli import main

    with pytest.raises(SystemExit) as info:
        main(["validate", "--model", "ncf", "--global-batch", "8", f"--timeout={value}"])
    assert info.value.code == 2
    assert "--timeout" in capsys.readouterr().err
    with pytest.raises(ValueError, match=f"timeout_s: .*{value if value != 'soon' else 'x'}"):
        validate("ncf", 8, [emulated_cluster(2, None)], mode="loopback",
                 timeout_s=float(value) if value != "soon" else "x")  # type: ignore[arg-type]


def test_worker_alarm_of_a_huge_deadline_is_reported_not_lost(tmp_path: Path) -> None:
    # signal.alarm(int(inf)) raised before the worker wrote its status: the run failed with
    # no reason. Large deadlines wait as long as alarm can; a bad one is written as the error.
    from srift.validate.worker import MAX_ALARM_S, alarm_seconds

    assert alarm_seconds(float("inf")) == MAX_ALARM_S == alarm_seconds(1e300)
    assert alarm_seconds(0.2) == 1 and alarm_seconds(5.5) == 6
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"out_dir": str(tmp_path), "timeout_s": float("nan"), "fail_rank": 0}))
    env = {**os.environ, "RANK": "0"}
    proc = subprocess.run([sys.executable, "-m", "srift.validate.worker", str(cfg)], capture_output=True,
                          text=True, timeout=60, env=env)
    status = json.loads((tmp_path / "rank0.json").read_text())
    assert proc.returncode == 1 and status["status"] == "error" and "timeout_s" in status["error"]
    cfg.write_text(json.dumps({"out_dir": str(tmp_path), "timeout_s": 1e300, "fail_rank": 0}))
    proc = subprocess.run([sys.executable, "-m", "srift.validate.worker", str(cfg)], capture_output=True,
                          text=True, timeout=60, env=env)
    status = json.loads((tmp_path / "rank0.json").read_text())
    assert proc.returncode == 1 and "on purpose" in status["error"], proc.stderr
