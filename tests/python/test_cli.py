"""The command line: readable tables, --json, one-line errors."""
from __future__ import annotations

import argparse
import json

import pytest

from srift.cli import main, parse_duration_hours


def test_durations():
    assert parse_duration_hours("12h") == 12
    assert parse_duration_hours("90m") == 1.5
    assert parse_duration_hours("2d") == 48
    assert parse_duration_hours("7200s") == 2
    assert parse_duration_hours("3") == 3
    # numbers as Python writes them: exponents, a bare point
    assert parse_duration_hours("1e-300h") == 1e-300
    assert parse_duration_hours("1.5E3s") == pytest.approx(1500 / 3600)
    assert parse_duration_hours(".5d") == 12
    for text, message in (("0h", "finite and > 0"), ("1e999h", "finite and > 0"), ("12 hours", "must look like"),
                          ("-1h", "must look like")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_duration_hours(text)


def test_recommend_json(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1000",
                 "--deadline", "12h", "--types", "g4dn.xlarge,p3.2xlarge", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["found"] is True
    assert out["best"]["total_hours"] <= 12


def test_recommend_table_and_budget(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1000",
                 "--budget", "500", "--types", "g4dn.xlarge,p3.2xlarge,p3.8xlarge"])
    text = capsys.readouterr().out
    assert code == 0
    assert "fastest plan" in text and "samples/s" in text and "best plan:" in text


def test_predict_table(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["predict", "--profile", str(path), "--cluster", "2x p3.16xlarge", "--global-batch", "256",
                 "--measure", "V100:16:0.08"]) == 0
    text = capsys.readouterr().out
    assert "exposed comm" in text and "measured" in text


def test_predict_with_a_whole_instance_measurement(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["predict", "--profile", str(path), "--cluster", "1x p3.16xlarge", "--global-batch", "128",
                 "--measure-instance", "p3.16xlarge:16:0.125", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groups"][0]["compute_source"] == "measured-instance"
    assert out["iteration_s"] == pytest.approx(0.125, rel=1e-9)


def test_user_errors_are_one_line(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["predict", "--profile", str(path), "--cluster", "2x p3.16xlarg", "--global-batch", "256"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("srift: error: ") and "p3.16xlarge" in err and "Traceback" not in err


def test_impossible_deadline_exit_code(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1e7",
                 "--deadline", "1m", "--types", "g4dn.xlarge"])
    assert code == 3
    assert "no plan fits" in capsys.readouterr().out


def test_an_hourly_cap_beside_a_deadline_is_in_the_header_and_the_answer(capsys, tmp_path, resnet50_profile):
    # review finding 3: the header said only "cheapest plan finishing ... within 2.00 h", the
    # answer blamed the deadline "within the budget limits" and showed a plan at $569/h
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1e5",
                 "--deadline", "2h", "--max-usd-per-hour", "1.5", "--regions", "us-east-1"])
    text = capsys.readouterr().out
    assert code == 3
    assert "cheapest plan finishing 100,000 iterations within 2.00 h, at most $1.50/h" in text
    assert "no plan within the hourly cap of USD 1.5/h meets the deadline of 2 h" in text
    assert "budget limits" not in text
    closest = [line for line in text.splitlines() if line.startswith("closest (")]
    assert closest and float(closest[0].split("$")[1].split("/h")[0]) <= 1.5


def test_a_minimum_gpu_memory_no_offer_meets_is_the_reason(capsys, tmp_path, resnet50_profile):
    # review finding 6: the answer blamed the batch and suggested gradient accumulation
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1e5",
                 "--deadline", "12h", "--min-gpu-memory", "1000", "--regions", "eu-west-1"])
    text = capsys.readouterr().out
    assert code == 3
    assert "the filters remove every offer" in text and "on GPUs of at least 1000 GiB" in text
    assert "accumulation" not in text


def test_a_model_no_gpu_holds_says_so_and_every_command_exits_3(capsys, tmp_path, resnet50_profile):
    """A model whose weights, gradients and optimizer state fit no GPU was told to allow
    accumulation or raise the limits, which cannot help; pareto printed an empty table and
    predict an infeasible cluster, both with exit 0."""
    import dataclasses

    huge = dataclasses.replace(resnet50_profile, param_bytes=200 * 2**30, trainable_param_bytes=200 * 2**30,
                               optimizer_state_bytes=400 * 2**30)
    path = huge.save(tmp_path / "huge.json")
    common = ["--profile", str(path), "--global-batch", "64"]
    assert main(["recommend", *common, "--iterations", "1000", "--deadline", "24h", "--accumulate", "64"]) == 3
    out = capsys.readouterr().out
    assert "the model's weights, gradients, optimizer state, buffers and workspace take" in out
    assert "DDP keeps a whole copy per rank" in out and "allow gradient accumulation" not in out
    assert main(["pareto", *common, "--iterations", "1000", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["plans"] == [] and "DDP keeps a whole copy per rank" in doc["why_none"]
    assert main(["predict", *common, "--cluster", "1x p4d.24xlarge"]) == 3
    assert "does not run" in capsys.readouterr().out


def test_bad_profile_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "srift.profile/99"}')
    code = main(["predict", "--profile", str(bad), "--cluster", "1x p3.2xlarge", "--global-batch", "8"])
    assert code == 2
    assert "srift.profile/99" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["recommend", "--help"], ["--version"]])
def test_help_and_version(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0


def test_replan_keeps_the_held_group(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["replan", "--profile", str(path), "--global-batch", "256", "--iterations", "20000",
                 "--deadline", "6h", "--held", "1x p3.16xlarge @us-east-1",
                 "--types", "p3.16xlarge,g4dn.12xlarge,p3.8xlarge", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    held = [g for g in out["best"]["groups"] if g["instance_type"] == "p3.16xlarge"]
    assert held and held[0]["count"] >= 1 and out["best"]["region"] == "us-east-1"
    assert out["search"]["optimal"] is True


def test_ddp_options_reach_the_profile_and_the_prediction(capsys, tmp_path, resnet50_profile):
    """--bucket-cap-mb (which, as in DDP, also sizes the first bucket) and --allreduce-dtype
    profile the DDP the user's code builds; on a saved profile the dtype can be set, the
    buckets cannot (they are fixed when profiling)."""
    assert main(["profile", "--model", "resnet50", "--device", "meta", "--batch-size", "2",
                 "--bucket-cap-mb", "1000", "--allreduce-dtype", "fp16", "--json"]) == 0
    prof = json.loads(capsys.readouterr().out)
    assert len(prof["buckets"]) == 1 and prof["bucket_cap_mb"] == prof["first_bucket_mb"] == 1000
    assert prof["allreduce_dtype"] == "fp16"

    path = resnet50_profile.save(tmp_path / "p.json")
    common = ["predict", "--profile", str(path), "--cluster", "2x p3.16xlarge", "--global-batch", "256",
              "--measure", "V100:16:0.08", "--json"]
    assert main(common) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(common + ["--allreduce-dtype", "bf16"]) == 0
    half = json.loads(capsys.readouterr().out)
    assert half["comm_s"] < plain["comm_s"]
    assert main(common + ["--bucket-cap-mb", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("srift: error: --bucket-cap-mb applies when profiling (--model)")
    # DDP(forward_sync_buffers=False): no buffer broadcast, on a saved profile or when profiling
    assert plain["broadcast_s"] > 0
    assert main(common + ["--no-forward-sync-buffers"]) == 0
    quiet = json.loads(capsys.readouterr().out)
    assert quiet["broadcast_s"] == 0 and quiet["iteration_s"] == pytest.approx(plain["iteration_s"] - plain["broadcast_s"])
    assert main(["profile", "--model", "resnet50", "--device", "meta", "--batch-size", "2",
                 "--no-forward-sync-buffers", "--json"]) == 0
    prof = json.loads(capsys.readouterr().out)
    assert prof["forward_sync_buffers"] is False and sum(prof["buffer_broadcast_bytes"]) == prof["buffer_bytes"]
    # the summary says what DDP broadcasts (ResNet-50: 212,904 bytes of BatchNorm state)
    assert main(["profile", "--model", "resnet50", "--device", "meta", "--batch-size", "2"]) == 0
    assert "buffers 208 KiB, broadcast by DDP before every forward in 2 messages" in capsys.readouterr().out
    assert main(["profile", "--model", "resnet50", "--device", "meta", "--batch-size", "2",
                 "--no-forward-sync-buffers"]) == 0
    assert "buffers not broadcast (forward_sync_buffers=False)" in capsys.readouterr().out


def test_pareto_keeps_max_instances(capsys, tmp_path, resnet50_profile):
    # --max-instances was accepted and ignored: 24 of 30 front plans had several instances
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["pareto", "--profile", str(path), "--global-batch", "256", "--iterations", "1e5",
                 "--regions", "us-east-1", "--max-instances", "1", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert plans and all(sum(g["count"] for g in p["groups"]) == 1 for p in plans)


def test_emit_json_with_no_plan_still_writes_json(capsys, tmp_path, resnet50_profile):
    path = resnet50_profile.save(tmp_path / "p.json")
    code = main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1e6",
                 "--deadline", "1m", "--types", "g4dn.xlarge", "--emit", "json", "--json"])
    captured = capsys.readouterr()
    assert code == 3 and "no plan fits" in captured.err
    out = json.loads(captured.out)
    assert out["found"] is False and out["why_none"]


def test_spot_line_says_it_is_preemption_alone(capsys, tmp_path, resnet50_profile):
    # "meets the deadline with probability 52% (p90 3.42 h)" then "p90 1.54 h, P(miss deadline) 0.1%"
    path = resnet50_profile.save(tmp_path / "p.json")
    assert main(["recommend", "--profile", str(path), "--global-batch", "256", "--iterations", "1e5",
                 "--deadline", "12h", "--spot", "--types", "g4dn.12xlarge,p3.16xlarge",
                 "--regions", "us-east-1"]) == 0
    text = capsys.readouterr().out
    spot = [line for line in text.splitlines() if line.startswith("spot:")]
    if spot:  # the best plan may be on-demand
        assert "with preemption alone (the prediction taken as exact)" in spot[0]


# ---- review findings: predict --emit on an infeasible cluster, --json schema, --iterations bound ----

def test_emit_of_an_infeasible_cluster_exits_3_not_2(capsys, tmp_path, resnet50_profile):
    """Review finding 6: `predict --emit` of a cluster that cannot run exited 2 (bad input),
    not 3 (nothing runs) as predict without --emit does; it now says why and exits 3."""
    path = resnet50_profile.save(tmp_path / "p.json")
    common = ["predict", "--profile", str(path), "--cluster", "1x p3.2xlarge", "--global-batch", "100000"]
    assert main(common) == 3
    capsys.readouterr()
    for extra in (["--emit", "json"], ["--emit", "torchrun"], ["--emit", "skypilot", "--emit-to",
                                                                 str(tmp_path / "t.yaml")]):
        assert main(common + extra) == 3, extra
        captured = capsys.readouterr()
        assert captured.out == "" and "does not run" in captured.err and "GPU memory holds" in captured.err
        assert "srift: error" not in captured.err
    assert not (tmp_path / "t.yaml").exists()
    assert main(common + ["--emit", "json", "--json"]) == 3  # a script reading JSON gets a document
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is False and doc["why_infeasible"] and doc["schema"] == "srift.prediction/1"
    # a mistake in the launch-spec options is still a mistake (2), runnable or not
    assert main(common + ["--emit", "torchrun", "--json"]) == 2
    assert "both write stdout" in capsys.readouterr().err
    assert main(common + ["--emit-to", str(tmp_path / "x")]) == 2


def test_json_documents_name_their_schema(capsys, tmp_path, resnet50_profile):
    """Review finding 7: predict/recommend/replan/pareto --json carried no schema field (validate
    writes srift.validate-report/1, catalog show srift.catalog-show/1); the other keys stay."""
    path = str(resnet50_profile.save(tmp_path / "p.json"))
    assert main(["predict", "--profile", path, "--cluster", "2x p3.2xlarge", "--global-batch", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "srift.prediction/1" and doc["feasible"] is True and "iteration_s" in doc
    space = ["--profile", path, "--global-batch", "64", "--iterations", "1000", "--types", "p3.2xlarge,g4dn.xlarge"]
    assert main(["recommend", *space, "--deadline", "1h", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "srift.recommendation/1" and doc["found"] is True and "why" in doc and "best" in doc
    assert main(["recommend", *space, "--deadline", "1s", "--json"]) == 3  # no plan: still a document
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "srift.recommendation/1" and doc["found"] is False
    assert main(["replan", *space, "--deadline", "1h", "--held", "1x p3.2xlarge @us-east-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "srift.recommendation/1"
    assert main(["pareto", *space, "--regions", "us-east-1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "srift.pareto/1" and doc["plans"]


@pytest.mark.parametrize("command", ["predict", "recommend", "pareto", "replan"])
def test_iterations_are_bounded(capsys, tmp_path, resnet50_profile, command):
    """Review finding 11: --iterations 1e308 printed run times and costs with ~300 digits."""
    path = str(resnet50_profile.save(tmp_path / "p.json"))
    argv = {"predict": ["--cluster", "2x p3.2xlarge"],
            "recommend": ["--deadline", "1h"], "pareto": [],
            "replan": ["--deadline", "1h", "--held", "1x p3.2xlarge"]}[command]
    for bad in ("1e308", "1.5e12"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--profile", path, "--global-batch", "64", "--iterations", bad, *argv])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --iterations: expected at most 1e12 iterations, got '{bad}'" in err
    # below one iteration: 1e-322 hung recommend and pareto (every total 0, nothing pruned)
    for bad in ("1e-322", "0.5"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--profile", path, "--global-batch", "64", "--iterations", bad, *argv])
        assert exc.value.code == 2
        assert f"argument --iterations: expected at least 1 iteration, got '{bad}'" in capsys.readouterr().err
    if command == "predict":
        assert main([command, "--profile", path, "--global-batch", "64", "--iterations", "1e12", *argv]) == 0
        assert "1,000,000,000,000 iterations" in capsys.readouterr().out


def test_plot_of_an_infeasible_cluster_exits_3_not_2(capsys, tmp_path, resnet50_profile):
    """`predict --plot` of a cluster that cannot run exited 2 (bad input), unlike predict alone
    and --emit (3: nothing runs); a bad plot path is still a mistake (2)."""
    path = resnet50_profile.save(tmp_path / "p.json")
    common = ["predict", "--profile", str(path), "--cluster", "1x p3.2xlarge", "--global-batch", "100000"]
    assert main(common + ["--plot", str(tmp_path / "t.png")]) == 3
    captured = capsys.readouterr()
    assert "no timeline" in captured.err and "does not run" in captured.err and "srift: error" not in captured.err
    assert not (tmp_path / "t.png").exists()
    assert main(common + ["--plot", str(tmp_path / "t.png"), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["feasible"] is False
    assert main(common + ["--plot", str(tmp_path / "t.txt")]) == 2


def test_questions_without_a_gpu_profile_zoo_models_on_meta_with_the_cpu_answer(capsys, monkeypatch):
    # The engine reads a CPU profile's FLOPs, bytes and buckets, never its CPU timings, so predict,
    # recommend and pareto skip the timing and answer the same (srift.cli._profile_zoo).
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = ["predict", "--model", "ncf", "--cluster", "2x g4dn.12xlarge + 1x p3.8xlarge", "--global-batch", "2048"]
    assert main(argv) == 0
    by_default = capsys.readouterr()
    assert "on meta (FLOPs, bytes, DDP buckets: there is no CUDA GPU here" in by_default.err
    assert main([*argv, "--device", "cpu"]) == 0
    on_cpu = capsys.readouterr()
    assert "on cpu ..." in on_cpu.err
    assert by_default.out == on_cpu.out and "2x g4dn.12xlarge" in on_cpu.out
    # `srift profile` is asked for the profile itself: it still times the model on the CPU
    assert main(["profile", "--model", "ncf", "--warmup", "1", "--repeats", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "cpu" and doc["timings"] is not None
