"""Launch specs: torchrun lines per node and SkyPilot YAML, checked by parsing them."""
from __future__ import annotations

import json
import shlex

import pytest
import yaml

import srift
from srift.prediction import predict
from srift import export

HETERO = "1x p3.16xlarge + 2x p3.2xlarge:spot"


@pytest.fixture(scope="module")
def hetero(resnet50_profile):
    # two groups of the same GPU (V100) in different markets; node ranks span both groups
    return predict(resnet50_profile, HETERO, 100, region="us-east-1")


@pytest.fixture(scope="module")
def mixed(resnet50_profile):
    return predict(resnet50_profile, "1x p3.16xlarge + 3x g4dn.xlarge", 83, region="us-east-1")


def _parse(line: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    words = shlex.split(line)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    assert words.pop(0) == "torchrun"
    opts = {}
    while words and words[0].startswith("--"):
        k, _, v = words.pop(0)[2:].partition("=")
        opts[k] = v
    return env, opts, words


@pytest.mark.parametrize("which", ["hetero", "mixed"])
def test_torchrun_lines_cover_every_rank_and_the_global_batch(which, request):
    pred = request.getfixturevalue(which)
    lines = export.torchrun(pred, script="train.py", script_args=["--epochs", "3"], master_addr="10.0.0.1")
    nodes = sum(g.count for g in pred.groups)
    assert len(lines) == nodes
    total_batch = total_ranks = 0
    for rank, line in enumerate(lines):
        env, opts, rest = _parse(line)
        assert opts["nnodes"] == str(nodes) and opts["node-rank"] == str(rank)
        assert opts["master-addr"] == "10.0.0.1" and opts["master-port"] == "29500"
        assert rest == ["train.py", "--epochs", "3"]
        batches = [int(b) for b in env["SRIFT_LOCAL_BATCHES"].split(",")]
        assert len(batches) == int(opts["nproc-per-node"])
        assert env["SRIFT_GLOBAL_BATCH"] == str(pred.global_batch)
        total_batch += sum(batches)
        total_ranks += len(batches)
    assert total_batch == pred.global_batch
    assert total_ranks == pred.workers


def test_torchrun_gives_each_group_its_own_local_batch(mixed):
    lines = export.torchrun(mixed)
    v100 = [int(b) for b in _parse(lines[0])[0]["SRIFT_LOCAL_BATCHES"].split(",")]
    t4 = [int(_parse(line)[0]["SRIFT_LOCAL_BATCHES"]) for line in lines[1:]]
    assert _parse(lines[0])[1]["nproc-per-node"] == "8" and len(t4) == 3
    # the faster V100s take the larger share, as the prediction splits it
    g_v100, g_t4 = mixed.groups
    assert set(v100) <= {g_v100.local_batch_low, g_v100.local_batch_high}
    assert set(t4) <= {g_t4.local_batch_low, g_t4.local_batch_high}
    assert max(v100) > max(t4)
    # the default master address is left for the shell to expand
    assert "--master-addr=$MASTER_ADDR" in lines[0]


@pytest.mark.parametrize("which", ["hetero", "mixed"])
def test_skypilot_refuses_a_plan_of_several_instance_groups(which, request):
    """It wrote a Job Group reaching node 0 at ``<task>-0.<name>``: SkyPilot 0.14 resolves Job
    Group host names only on Kubernetes, so on AWS no node ever met node 0."""
    pred = request.getfixturevalue(which)
    with pytest.raises(ValueError, match=r"cannot write a SkyPilot task for .*: its 2 instance groups .*"
                                         r"only on Kubernetes.*--emit torchrun.*\(recommend --max-types 1; "
                                         r"predict --cluster of one group\)$"):
        export.skypilot(pred, name="r50")
    assert len(export.torchrun(pred)) == sum(g.count for g in pred.groups)  # the launch that runs it


def test_skypilot_single_group_is_a_plain_task(resnet50_profile):
    pred = predict(resnet50_profile, "2x g5.12xlarge", 256, region="us-west-2")
    task = yaml.safe_load(export.skypilot(pred, name="one"))
    assert task["name"] == "one" and task["num_nodes"] == 2
    assert task["resources"] == {"infra": "aws/us-west-2", "instance_type": "g5.12xlarge", "use_spot": False}
    assert 'head -n1' in task["run"] and "--nproc-per-node=4" in task["run"]
    assert "--node-rank=$SKYPILOT_NODE_RANK" in task["run"] and "--max-restarts" not in task["run"]
    assert "spot" not in export.skypilot(pred, name="one").split("name:")[0]  # no spot advice in the header


def _sky_schema_check(task: dict) -> None:
    """SkyPilot's own task and resources schemas, where the package is installed."""
    sky_utils = pytest.importorskip("sky.utils.schemas")
    from sky.utils import common_utils

    common_utils.validate_schema(task, sky_utils.get_task_schema(), "task: ")
    common_utils.validate_schema(task["resources"], sky_utils.get_resources_schema(), "resources: ")


def test_skypilot_spot_task_says_how_to_recover_and_validates(resnet50_profile):
    pred = predict(resnet50_profile, "2x p3.2xlarge:spot", 100, region="us-east-1")
    text = export.skypilot(pred, name="one", script_args=["--epochs", "2"])
    task = yaml.safe_load(text)
    assert task["resources"]["use_spot"] is True and task["num_nodes"] == 2
    assert "--max-restarts=3 train.py --epochs 2" in task["run"]
    assert "sky jobs launch" in text and "checkpointing is your script's job" in text
    cases = [line.strip() for line in task["run"].splitlines() if line.strip().startswith(("0)", "1)"))]
    assert cases == ["0) export SRIFT_LOCAL_BATCHES=50 ;;", "1) export SRIFT_LOCAL_BATCHES=50 ;;"]
    _sky_schema_check(task)


def test_json_export_and_bad_input(hetero):
    data = json.loads(export.emit(hetero, "json"))
    assert data["schema"] == export.LAUNCH_SCHEMA == "srift.launch/1"
    assert data["cluster"] == hetero.cluster
    assert sum(sum(n["local_batches"]) for n in data["launch"]["nodes"]) == 100
    assert len(data["launch"]["torchrun"]) == 3
    with pytest.raises(ValueError, match="emit format"):
        export.emit(hetero, "slurm")
    with pytest.raises(ValueError, match="master_addr"):
        export.torchrun(hetero, master_addr="a; rm -rf /")
    with pytest.raises(ValueError, match="name"):
        export.skypilot(hetero, name="Bad Name")
    for port in (0, 70000, "29500"):
        with pytest.raises(ValueError, match=rf"master_port must be a TCP port, .*got {port!r}"):
            export.emit(hetero, "json", master_port=port)


def test_json_launch_carries_what_a_scheduler_needs(mixed, resnet50_profile):
    data = json.loads(export.emit(mixed, "json", script="t.py", script_args=["--lr", "0.1"], master_port=29511))
    launch = data["launch"]
    assert data["schema"] == "srift.launch/1"
    assert {k: launch[k] for k in ("region", "nnodes", "world_size", "rendezvous", "master_port", "script",
                                   "script_args", "max_restarts", "accumulation_steps", "micro_batch",
                                   "global_batch", "checkpoint_every_iterations")} == {
        "region": "us-east-1", "nnodes": 4, "world_size": 11, "rendezvous": "static", "master_port": 29511,
        "script": "t.py", "script_args": ["--lr", "0.1"], "max_restarts": 0, "accumulation_steps": 1,
        "micro_batch": 83, "global_batch": 83, "checkpoint_every_iterations": None}
    for node, line in zip(launch["nodes"], launch["torchrun"]):
        env, opts, rest = _parse(line)
        assert env == node["env"] == {"SRIFT_LOCAL_BATCHES": ",".join(map(str, node["local_batches"])),
                                      "SRIFT_GLOBAL_BATCH": "83"}
        assert opts["master-port"] == "29511" and opts["node-rank"] == str(node["node_rank"])
        assert rest == ["t.py", "--lr", "0.1"]


def test_spot_plans_restart_and_name_the_checkpoint_interval(resnet50_profile):
    """Note "spot launch": torchrun lines of a plan with spot instances carry --max-restarts=3,
    and a Plan's launch names the checkpoint interval its spot price assumes."""
    plan = srift.recommend(resnet50_profile, global_batch=256, iterations=100_000, deadline_hours=12, markets="spot",
                           regions=["us-east-1"], max_types=1, instance_types=["p4d.24xlarge"])
    assert plan.best is not None and plan.best.uses_spot and plan.best.checkpoint_interval_hours > 0
    best = plan.best
    every = int(best.checkpoint_interval_hours * 3600 / best.prediction.iteration_s)
    data = export.to_json(best)
    assert data["launch"]["checkpoint_every_iterations"] == every >= 1
    assert data["launch"]["max_restarts"] == 3
    lines = export.torchrun(best)
    assert lines and all(_parse(line)[1]["max-restarts"] == "3" for line in lines)
    text = export.torchrun_text(best)
    assert f"every {every:,} iterations" in text and "checkpointing is your script's job" in text
    on_demand = predict(resnet50_profile, "2x p3.2xlarge", 100, region="us-east-1")
    assert not any("max-restarts" in line for line in export.torchrun(on_demand))
    assert "spot" not in export.torchrun_text(on_demand)


def test_infeasible_prediction_is_not_exported(resnet50_profile):
    from srift.profile_data import Profile

    big = Profile.from_dict(resnet50_profile.to_dict())
    big.activation_bytes_per_sample = 4e9  # nothing fits a 16 GiB GPU at batch >= 4
    pred = predict(big, "1x p3.2xlarge", 64, region="us-east-1")
    assert not pred.feasible
    with pytest.raises(ValueError, match="does not run"):
        export.torchrun(pred)


def test_a_spec_of_more_nodes_than_any_job_is_refused_before_it_is_built(resnet50_profile):
    """--emit held an object and a line per node: 1e7 nodes ended in a MemoryError traceback."""
    huge = predict(resnet50_profile, "1000000x g4dn.xlarge", 1_000_000, region="us-east-1")
    assert huge.feasible
    for fmt in export.EMIT_FORMATS:
        with pytest.raises(ValueError, match=r"1,000,000 nodes .* more than 100,000"):
            export.emit(huge, fmt)
    assert len(export.nodes(predict(resnet50_profile, "100000x g4dn.xlarge", 100_000, region="us-east-1"))) == 100_000
