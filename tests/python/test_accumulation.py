"""Gradient accumulation where the global batch does not fit GPU memory (srift::simulate note
"accumulation"): predict, recommend, the CLI, exports and sweeps."""
from __future__ import annotations

import pytest

import srift
from srift import export, report
from srift.cli import main
from srift.engine import Engine, EngineConfig
from srift.sweep import parse_spec, run_sweep, tasks

# resnet50 at FP32 on a T4 (16 GiB) holds 171 samples: 1000 samples on two need 3 micro-steps
CLUSTER, BATCH = "2x g4dn.xlarge", 1000


def test_off_by_default_and_says_how_to_fit(resnet50_profile):
    pred = srift.predict(resnet50_profile, CLUSTER, BATCH)
    assert not pred.feasible
    assert pred.groups[0].max_local_batch == 171
    assert "allow gradient accumulation" in pred.why_infeasible
    too_few = srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=2)
    assert not too_few.feasible
    assert "needs 3 accumulation micro-steps, more than the 2 allowed" in too_few.why_infeasible


def test_the_fewest_micro_steps_that_fit(resnet50_profile, catalog):
    pred = srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=8)
    assert pred.feasible
    assert (pred.accumulation_steps, pred.micro_batch) == (3, 334)  # 334 + 333 + 333
    g = pred.groups[0]
    assert (g.local_batch_low, g.local_batch_high, g.ranks_high) == (167, 167, 0)
    assert g.memory_gib <= g.gpu_memory_gib
    # The micro-steps before the last only compute; the last is an ordinary 334-sample
    # iteration whose allreduce they delay. The two after the first also add their gradients
    # into the accumulated ones: 3 x the gradient bytes at 70% of the T4's 320 GB/s.
    add = Engine(resnet50_profile, catalog).instance_compute("g4dn.xlarge")[0].accumulate_s
    assert add == pytest.approx(3 * resnet50_profile.trainable_param_bytes / (320e9 * 0.7), rel=1e-12)
    last = srift.predict(resnet50_profile, CLUSTER, 334)
    at_333 = srift.predict(resnet50_profile, CLUSTER, 333)
    before = 2 * (at_333.groups[0].compute_s) + 2 * add
    assert pred.iteration_s == pytest.approx(before + last.iteration_s, rel=1e-12)
    assert pred.compute_s == pytest.approx(before + last.compute_s, rel=1e-12)
    assert pred.exposed_comm_s == pytest.approx(last.exposed_comm_s, rel=1e-9, abs=1e-15)
    assert pred.samples_per_s == pytest.approx(BATCH / pred.iteration_s)
    # the band scales with the iteration
    assert pred.iteration_p10_s < pred.iteration_s < pred.iteration_p90_s
    d = pred.to_dict()
    assert d["accumulation_steps"] == 3 and d["micro_batch"] == 334


def test_a_batch_that_fits_is_unchanged(resnet50_profile):
    plain = srift.predict(resnet50_profile, CLUSTER, 256)
    allowed = srift.predict(resnet50_profile, CLUSTER, 256, max_accumulation_steps=8)
    assert (allowed.accumulation_steps, allowed.micro_batch) == (1, 256)
    assert allowed.iteration_s == plain.iteration_s


def test_bad_values_name_the_field(resnet50_profile, catalog):
    with pytest.raises(ValueError, match=r"max_accumulation_steps must be an integer in 1\.\.2147483647, got 0"):
        srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=0)
    with pytest.raises(ValueError, match=r"max_accumulation_steps must be an integer in 1\.\.2147483647, got 2.5"):
        Engine(resnet50_profile, catalog, EngineConfig(max_accumulation_steps=2.5))
    engine = Engine(resnet50_profile, catalog, EngineConfig(max_accumulation_steps=4))
    with pytest.raises(ValueError, match="differs from the engine's"):
        srift.predict(resnet50_profile, CLUSTER, BATCH, engine=engine, max_accumulation_steps=8)
    assert srift.predict(resnet50_profile, CLUSTER, BATCH, engine=engine).accumulation_steps == 3


def test_recommend_finds_plans_only_accumulation_makes_fit(resnet50_profile):
    kwargs = dict(global_batch=BATCH, iterations=1000, deadline_hours=24, instance_types=["g4dn.xlarge"],
                  max_instances_per_type=2, regions="us-east-1")
    none = srift.recommend(resnet50_profile, **kwargs)
    assert none.best is None and "memory" in none.why_none
    rec = srift.recommend(resnet50_profile, max_accumulation_steps=8, **kwargs)
    assert rec.best is not None
    assert rec.best.prediction.accumulation_steps > 1
    assert rec.assumptions["max_accumulation_steps"] == 8
    # the plan's prediction is the one predict makes
    again = srift.predict(resnet50_profile, rec.best.cluster, BATCH, max_accumulation_steps=8)
    assert again.iteration_s == pytest.approx(rec.best.iteration_s, rel=1e-12)


def test_accumulation_never_makes_the_best_plan_dearer(resnet50_profile):
    kwargs = dict(global_batch=2048, iterations=10000, deadline_hours=48, regions="us-east-1",
                  instance_types=["g4dn.xlarge", "g5.xlarge", "g5.12xlarge", "p3.8xlarge"])
    plain = srift.recommend(resnet50_profile, **kwargs)
    accumulating = srift.recommend(resnet50_profile, max_accumulation_steps=16, **kwargs)
    assert accumulating.best is not None
    if plain.best is not None:  # more plans to choose from, the same cost model
        assert accumulating.best.total_usd <= plain.best.total_usd * (1 + 1e-12)


def test_exports_carry_the_micro_steps(resnet50_profile):
    pred = srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=8)
    nodes = export.nodes(pred)
    assert sum(sum(n.local_batches) for n in nodes) == pred.micro_batch
    lines = export.torchrun(pred)
    assert all("SRIFT_ACCUMULATION_STEPS=3 " in line and "SRIFT_GLOBAL_BATCH=1000" in line for line in lines)
    assert "export SRIFT_ACCUMULATION_STEPS=3" in export.skypilot(pred)
    plain = srift.predict(resnet50_profile, CLUSTER, 256)
    assert not any("SRIFT_ACCUMULATION_STEPS" in line for line in export.torchrun(plain))
    assert "3 micro-steps of up to 334 samples" in report.prediction_text(pred)


def test_cli_accumulate(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["predict", "--profile", str(path), "--cluster", CLUSTER, "--global-batch", str(BATCH),
                 "--accumulate", "4"]) == 0
    assert "accumulation   3 micro-steps" in capsys.readouterr().out
    code = main(["recommend", "--profile", str(path), "--global-batch", str(BATCH), "--iterations", "1000",
                 "--deadline", "24h", "--types", "g4dn.xlarge", "--max-instances-per-type", "2",
                 "--regions", "us-east-1", "--accumulate", "8", "--json"])
    assert code == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["best"]["prediction"]["accumulation_steps"] > 1


def test_sweep_passes_it_and_keeps_older_keys(tmp_path, resnet50_profile):
    resnet50_profile.save(tmp_path / "r50.json")
    base = {"models": [{"profile": str(tmp_path / "r50.json"), "name": "r50"}], "global_batch": BATCH,
            "iterations": 1000, "constraints": [{"deadline": "24h"}], "regions": ["us-east-1"],
            "types": ["g4dn.xlarge"], "max_instances_per_type": 2, "output": str(tmp_path / "out.csv")}
    plain = parse_spec(base)
    assert "max_accumulation_steps" not in tasks(plain)[0]  # keys of sweeps before the option
    spec = parse_spec({**base, "max_accumulation_steps": 8})
    assert tasks(spec)[0]["key"] != tasks(plain)[0]["key"]
    result = run_sweep(spec, jobs=0, progress=False)
    assert result.rows == 1
    import csv

    with open(tmp_path / "out.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert row["found"] == "True" and row["plan"].startswith(("1x g4dn.xlarge", "2x g4dn.xlarge"))
    with pytest.raises(ValueError, match="max_accumulation_steps"):
        parse_spec({**base, "max_accumulation_steps": 0})


# ---- max_local_batch: the per-GPU batch a script is written for ----------------------------
def test_max_local_batch_sets_the_micro_steps(resnet50_profile):
    # 1000 samples on two T4s at most 64 per GPU: 8 micro-steps of 125 (memory alone: 3 of 334)
    pred = srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=16, max_local_batch=64)
    assert pred.feasible
    assert (pred.accumulation_steps, pred.micro_batch) == (8, 125)
    g = pred.groups[0]
    assert g.max_local_batch == 64 and g.local_batch_high <= 64
    assert pred.local_batch_cap == 64 and pred.to_dict()["local_batch_cap"] == 64
    # the same iteration as eight 125-sample micro-steps under memory alone would take
    memory_only = srift.predict(resnet50_profile, "2x g4dn.xlarge", BATCH, max_accumulation_steps=8)
    assert pred.iteration_s > memory_only.iteration_s  # more micro-steps: more fixed costs and adds
    # a cap above what memory holds changes nothing
    loose = srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=16, max_local_batch=10_000)
    assert loose.iteration_s == memory_only.iteration_s
    assert loose.groups[0].max_local_batch == 171


def test_max_local_batch_without_accumulation_says_why(resnet50_profile):
    pred = srift.predict(resnet50_profile, CLUSTER, 256, max_local_batch=100)
    assert not pred.feasible
    assert "max_local_batch = 100 allow at most 200 samples" in pred.why_infeasible
    assert "raise max_local_batch" in pred.why_infeasible
    assert srift.predict(resnet50_profile, CLUSTER, 200, max_local_batch=100).feasible
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="max_local_batch must be an integer in 1.."):
            srift.predict(resnet50_profile, CLUSTER, 256, max_local_batch=bad)


def test_recommend_keeps_every_gpu_under_the_cap(resnet50_profile):
    kwargs = dict(global_batch=2048, iterations=10000, deadline_hours=48, regions="us-east-1",
                  instance_types=["g4dn.xlarge", "g5.xlarge", "g5.12xlarge", "p3.8xlarge"],
                  max_accumulation_steps=16)
    free = srift.recommend(resnet50_profile, **kwargs)
    capped = srift.recommend(resnet50_profile, max_local_batch=32, **kwargs)
    assert capped.best is not None and capped.assumptions["max_local_batch"] == 32
    for plan in [capped.best, *capped.alternatives]:
        assert all(g.local_batch_high <= 32 for g in plan.prediction.groups)
        again = srift.predict(resnet50_profile, plan.cluster, 2048, max_accumulation_steps=16, max_local_batch=32)
        assert again.iteration_s == pytest.approx(plan.iteration_s, rel=1e-12)
    # a cap only removes options
    assert capped.best.total_usd >= free.best.total_usd * (1 - 1e-12)


def test_cli_and_sweep_max_local_batch(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["predict", "--profile", str(path), "--cluster", CLUSTER, "--global-batch", str(BATCH),
                 "--accumulate", "16", "--max-local-batch", "64", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "accumulation   8 micro-steps of up to 125 samples" in out and "max_local_batch = 64" in out
    assert "local batch up to 64 allowed (max_local_batch)" in out
    with pytest.raises(SystemExit):
        main(["predict", "--profile", str(path), "--cluster", CLUSTER, "--global-batch", "256",
              "--max-local-batch", "0"])
    assert "--max-local-batch" in capsys.readouterr().err
    base = {"models": [{"profile": str(path), "name": "r50"}], "global_batch": BATCH,
            "iterations": 1000, "constraints": [{"deadline": "24h"}], "regions": ["us-east-1"],
            "types": ["g4dn.xlarge"], "max_instances_per_type": 2, "max_accumulation_steps": 16,
            "output": str(tmp_path / "out.csv")}
    assert "max_local_batch" not in tasks(parse_spec(base))[0]
    spec = parse_spec({**base, "max_local_batch": 64})
    assert tasks(spec)[0]["max_local_batch"] == 64
    assert tasks(spec)[0]["key"] != tasks(parse_spec(base))[0]["key"]
    with pytest.raises(ValueError, match="max_local_batch"):
        parse_spec({**base, "max_local_batch": 0})


# ---- a measurement of an accumulating script (Measurement.accumulation_steps) ----------------
def test_an_accumulated_measurement_is_read_as_the_plain_step_it_implies(resnet50_profile):
    # A T4 timed at 12.0 s per optimizer step of 8 micro-steps of 64: srift's prediction of that
    # very run gives the time back, whichever way the measured model splits off the optimizer.
    prof = type(resnet50_profile).from_dict(resnet50_profile.to_dict())
    prof.add_measurement("T4", 64, 12.0, accumulation_steps=8)
    pred = srift.predict(prof, "1x g4dn.xlarge", 512, max_accumulation_steps=8, max_local_batch=64)
    assert pred.groups[0].compute_source == "measured"
    assert (pred.accumulation_steps, pred.micro_batch) == (8, 64)
    assert pred.iteration_s == pytest.approx(12.0, rel=1e-6)
    # not the same as a plain step of 64 taking 12.0 / 8 s: that one pays the optimizer 8 times
    plain = type(resnet50_profile).from_dict(resnet50_profile.to_dict())
    plain.add_measurement("T4", 64, 12.0 / 8)
    as_plain = srift.predict(plain, "1x g4dn.xlarge", 512, max_accumulation_steps=8, max_local_batch=64)
    assert as_plain.iteration_s != pytest.approx(12.0, rel=1e-6)
    # it anchors other GPUs too, and round-trips through the profile file
    assert srift.predict(prof, "1x g5.xlarge", 512, max_accumulation_steps=8, max_local_batch=64).feasible
    again = type(prof).from_json(prof.to_json())
    assert again.measurements[-1].accumulation_steps == 8
    assert "accumulation_steps" not in plain.measurements[-1].to_dict()  # older files unchanged


def test_accumulated_measurement_errors_name_the_field(resnet50_profile):
    prof = type(resnet50_profile).from_dict(resnet50_profile.to_dict())
    with pytest.raises(ValueError, match="accumulation_steps"):
        prof.add_measurement("T4", 64, 12.0, accumulation_steps=0)
    with pytest.raises(ValueError, match="accumulation_steps: 4 micro-steps are supported for one GPU"):
        prof.add_measurement("g4dn.12xlarge", 64, 12.0, gpus=4, accumulation_steps=4)
    with pytest.raises(ValueError, match="forward_s \\+ backward_s"):
        prof.add_measurement("T4", 64, 1.0, forward_s=0.2, backward_s=0.4, accumulation_steps=8)
    # a time below srift's own optimizer step and gradient adds cannot be read as micro-steps
    prof.add_measurement("T4", 64, 1e-6, accumulation_steps=1000)
    with pytest.raises(ValueError, match="less than the optimizer step and 999 gradient adds"):
        srift.predict(prof, "1x g4dn.xlarge", 64)
    data = resnet50_profile.to_dict()
    data["measurements"] = [{"device": "T4", "local_batch": 64, "iteration_s": 1.0, "forward_s": None,
                             "backward_s": None, "source": "user", "recorded_at": "2026-01-01T00:00:00Z",
                             "accumulation_steps": 0}]
    with pytest.raises(ValueError, match="accumulation_steps"):
        type(resnet50_profile).from_dict(data)


def test_cli_measure_with_micro_steps(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["predict", "--profile", str(path), "--cluster", "1x g4dn.xlarge", "--global-batch", "512",
                 "--measure", "T4:64:12.0:8", "--accumulate", "8", "--max-local-batch", "64", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["iteration_s"] == pytest.approx(12.0, rel=1e-6)
    with pytest.raises(SystemExit):
        main(["predict", "--profile", str(path), "--cluster", "1x g4dn.xlarge", "--global-batch", "64",
              "--measure", "T4:64:12.0:8:1"])
    assert "MICRO_STEPS" in capsys.readouterr().err
