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
    with pytest.raises(ValueError, match="max_accumulation_steps must be an integer >= 1, got 0"):
        srift.predict(resnet50_profile, CLUSTER, BATCH, max_accumulation_steps=0)
    with pytest.raises(ValueError, match="max_accumulation_steps must be an integer >= 1, got 2.5"):
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
