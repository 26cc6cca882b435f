"""srift.UnevenBatchSampler: unequal local batches, equal steps, every step the global batch."""
from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import srift
from srift.sampler import UnevenBatchSampler


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_rank_runs_the_same_steps_and_each_step_is_the_global_batch(shuffle):
    batches, n = [12, 11, 11], 340
    samplers = [UnevenBatchSampler(n, batches, r, shuffle=shuffle, seed=7) for r in range(3)]
    for epoch in (0, 1):
        for s in samplers:
            s.set_epoch(epoch)
        steps = [list(s) for s in samplers]
        assert [len(x) for x in steps] == [n // 34] * 3 == [len(s) for s in samplers]
        seen: set[int] = set()
        for per_rank in zip(*steps):
            assert [len(b) for b in per_rank] == batches
            step = [i for b in per_rank for i in b]
            assert len(set(step)) == 34 and not seen & set(step)  # disjoint within and across steps
            seen |= set(step)
        assert len(seen) == 340 - 340 % 34
    first = [list(s) for s in samplers]
    for s in samplers:
        s.set_epoch(2)
    assert ([list(s) for s in samplers] != first) == shuffle  # a new permutation each epoch


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset_len": 10, "local_batches": [8, 8], "rank": 0}, r"dataset_len: .*>= the global batch \(16\)"),
    ({"dataset_len": 100, "local_batches": [], "rank": 0}, r"local_batches: expected one integer >= 1 per rank"),
    ({"dataset_len": 100, "local_batches": [4, 0], "rank": 0}, r"local_batches"),
    ({"dataset_len": 100, "local_batches": [4, 4], "rank": 2}, r"rank: expected an integer in 0\.\.1, got 2"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        UnevenBatchSampler(**kwargs)


def _train(rank: int, world: int, store: str, out: str) -> None:
    # One node of srift's launch spec: SRIFT_LOCAL_BATCHES and LOCAL_RANK as torchrun sets them.
    # A file store, not a TCP port another test could take between choosing and binding it.
    os.environ.update(LOCAL_RANK=str(rank), SRIFT_LOCAL_BATCHES="12,11,11")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    dataset = torch.utils.data.TensorDataset(torch.randn(340, 4), torch.randn(340, 1))
    sampler = srift.UnevenBatchSampler.from_env(len(dataset), seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    steps, sizes = 0, set()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            steps += 1
            sizes.add(len(x))
    with open(f"{out}.{rank}", "w") as f:
        f.write(f"{steps} {sorted(sizes)}")
    dist.barrier()  # every rank has written its file
    # Leave without tearing gloo down: a rank's teardown racing its peers' exit aborted once in CI
    # ("terminate called without an active exception"), after the training had finished.
    os._exit(0)


def test_ddp_with_unequal_local_batches_finishes_every_epoch(tmp_path):
    """The launch specs' recipe with DistributedSampler hung here (a review: 3 gloo ranks at
    12, 11, 11 ran 10 and 11 steps and timed out); with this sampler every rank runs 20."""
    out = str(tmp_path / "rank")
    mp.spawn(_train, args=(3, str(tmp_path / "store"), out), nprocs=3, join=True)
    assert [open(f"{out}.{r}").read() for r in range(3)] == ["20 [12]", "20 [11]", "20 [11]"]
