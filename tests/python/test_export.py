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


def test_skypilot_job_group_has_one_task_per_instance_group(hetero):
    text = export.skypilot(hetero, script="train.py", script_args=["--lr", "0.1"], name="r50")
    docs = list(yaml.safe_load_all(text))
    header, *tasks = docs
    assert header == {"name": "r50", "execution": "parallel"}
    assert [t["resources"]["instance_type"] for t in tasks] == ["p3.16xlarge", "p3.2xlarge"]
    assert [t["num_nodes"] for t in tasks] == [1, 2]
    assert [t["resources"]["use_spot"] for t in tasks] == [False, True]
    assert all(t["resources"]["infra"] == "aws/us-east-1" for t in tasks)
    # node ranks continue across groups; every task reaches node 0 by the job group's host name
    assert "NODE_RANK=$(( 0 + SKYPILOT_NODE_RANK ))" in tasks[0]["run"]
    assert "NODE_RANK=$(( 1 + SKYPILOT_NODE_RANK ))" in tasks[1]["run"]
    assert all(f"MASTER_ADDR={tasks[0]['name']}-0.r50" in t["run"] for t in tasks)
    assert all("--nnodes=3" in t["run"] and "train.py --lr 0.1" in t["run"] for t in tasks)
    batches = []
    for t in tasks:
        batches += [int(b) for line in t["run"].splitlines() if "SRIFT_LOCAL_BATCHES=" in line
                    for b in line.split("=")[1].split(" ")[0].split(",")]
    assert sum(batches) == hetero.global_batch


def test_skypilot_single_group_is_a_plain_task(resnet50_profile):
    pred = predict(resnet50_profile, "2x g5.12xlarge", 256, region="us-west-2")
    task = yaml.safe_load(export.skypilot(pred, name="one"))
    assert task["name"] == "one" and task["num_nodes"] == 2
    assert task["resources"] == {"infra": "aws/us-west-2", "instance_type": "g5.12xlarge", "use_spot": False}
    assert 'head -n1' in task["run"] and "--nproc-per-node=4" in task["run"]


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
