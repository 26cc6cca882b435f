"""The emitted torchrun lines of a mixed plan, launched for real: two "nodes" on 127.0.0.1 (gloo,
CPU), a script that feeds a DataLoader through srift.UnevenBatchSampler and DDP as the tutorial
says. Checks what a user's job depends on: torchrun accepts every option the lines carry, each
rank gets its node's emitted local batch, every rank runs the same steps, and each epoch takes
every sample at most once (only the remainder of the global batch is left out)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from srift import export
from srift.prediction import predict

SCRIPT = textwrap.dedent("""
    import datetime, json, os, sys
    import torch, torch.distributed as dist
    import srift

    dataset_len, out = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=240))
    dataset = torch.utils.data.TensorDataset(torch.arange(dataset_len))
    sampler = srift.UnevenBatchSampler.from_env(dataset_len, seed=3)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        steps = []
        for (x,) in loader:
            (model(x.float().unsqueeze(1)).mean() * sampler.loss_scale).backward()
            steps.append(x.tolist())
        epochs.append(steps)
    record = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "SRIFT_LOCAL_BATCHES")}
    with open(os.path.join(out, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump({**record, "epochs": epochs, "batches": sampler.local_batches}, f)
    dist.barrier()
    dist.destroy_process_group()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_nodes(lines: list[str], cwd) -> tuple[list[subprocess.Popen], list[str]]:
    """Runs each emitted torchrun line as one "node" on this machine (the last first, so node 0's
    store is awaited), each in its own process group; returns the processes and their output.
    On a failure or a timeout every agent and worker is killed. The timeouts are generous: on a
    2-core machine busy with a C++ build, one run failed (the file took 132 s) that passes in
    20 s alone."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for line in reversed(lines)]
    try:
        logs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:  # the torchrun agents and their workers (own process groups) on a failure
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return procs, logs


def test_emitted_torchrun_lines_run_a_mixed_plan(resnet50_profile, tmp_path):
    # 2 T4G ranks on node 0 and 1 V100 on node 1 (spot): different --nproc-per-node and local batches
    pred = predict(resnet50_profile, "1x g5g.16xlarge + 1x p3.2xlarge:spot", 100, region="us-east-1")
    (tmp_path / "train.py").write_text(SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    dataset_len = 1003  # not a multiple of the global batch: 3 samples left out per epoch
    lines = export.torchrun(pred, script="train.py", script_args=[str(dataset_len), str(out)],
                            master_addr="127.0.0.1", master_port=_free_port())
    launch = export.nodes(pred)
    assert len(lines) == 2 and [n.nproc_per_node for n in launch] == [2, 1]
    assert len({b for n in launch for b in n.local_batches}) > 1  # uneven
    assert all("--max-restarts=3" in line for line in lines)  # a spot plan (note "spot launch")
    procs, logs = _run_nodes(lines, tmp_path)
    assert [p.returncode for p in procs] == [0, 0], logs
    ranks = sorted((json.loads(f.read_text()) for f in out.glob("rank*.json")), key=lambda r: int(r["RANK"]))
    assert [int(r["RANK"]) for r in ranks] == list(range(pred.workers)) == list(range(3))
    emitted = [b for node in launch for b in node.local_batches]
    for r in ranks:
        node = launch[int(r["GROUP_RANK"])]
        # global ranks follow node ranks, and every rank runs its node's emitted local batch
        assert int(r["RANK"]) == node.first_global_rank + int(r["LOCAL_RANK"])
        assert r["SRIFT_LOCAL_BATCHES"] == ",".join(map(str, node.local_batches)) and r["WORLD_SIZE"] == "3"
        assert r["batches"] == emitted
        assert {len(b) for steps in r["epochs"] for b in steps} == {node.local_batches[int(r["LOCAL_RANK"])]}
        assert [len(steps) for steps in r["epochs"]] == [dataset_len // 100] * 2  # the same steps everywhere
    for epoch in range(2):
        taken = [i for r in ranks for b in r["epochs"][epoch] for i in b]
        assert len(taken) == len(set(taken)) == 1000 and set(taken) <= set(range(dataset_len))
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]  # set_epoch reshuffles


def _tutorial_script() -> str:
    """docs/tutorial.md's complete ``train.py``, as a user copies it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "tutorial.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith("# train.py\n")]
    assert len(blocks) == 1, "docs/tutorial.md holds one complete train.py"
    return blocks[0]


def test_the_tutorials_train_py_runs_a_mixed_spot_plans_lines(resnet50_profile, tmp_path):
    """A first-time user copies the tutorial's script and runs the emitted lines on 127.0.0.1
    (gloo, CPU, two "nodes"). The tutorial had a fragment (NCCL, undefined names, no end): a copy
    did not run, and one written without a barrier before destroy_process_group aborted at exit
    now and then, which a spot plan's --max-restarts turned into a restart from the top."""
    pred = predict(resnet50_profile, "1x g5.xlarge + 1x g4dn.4xlarge:spot", 64, region="us-east-1")
    (tmp_path / "train.py").write_text(_tutorial_script())
    lines = export.torchrun(pred, script="train.py", script_args=["--epochs", "2"],
                            master_addr="127.0.0.1", master_port=_free_port())
    launch = export.nodes(pred)
    assert [n.local_batches for n in launch] == [[51], [13]]  # uneven: the g5's A10G takes more
    assert all("--max-restarts=3" in line for line in lines)
    procs, logs = _run_nodes(lines, tmp_path)
    assert [p.returncode for p in procs] == [0, 0], logs
    out = "\n".join(logs)
    # 4096 samples at a global batch of 64: 64 steps an epoch on both ranks; loss scales 2 x 51 / 64, 2 x 13 / 64
    assert "rank 0: 2 epochs of 64 steps at local batch 51, loss scale 1.5938" in out, out
    assert "rank 1: 2 epochs of 64 steps at local batch 13, loss scale 0.4062" in out, out
    # each worker ran once: no abort at exit, no restart by --max-restarts
    assert "terminate called" not in out and out.count("rank 0: ") == out.count("rank 1: ") == 1, out
