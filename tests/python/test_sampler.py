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


def test_loss_scale_and_epoch_length_with_accumulation():
    # 44 + 4 x 14 = 100 (a V100 beside four T4s): a T4 sample weighs 44/14 times a V100 sample unscaled
    samplers = [UnevenBatchSampler(1003, [14, 14, 14, 14, 44], r) for r in range(5)]
    assert [s.loss_scale for s in samplers] == [0.7] * 4 + [2.2]
    # every sample then weighs 1 / global batch in DDP's average over the 5 ranks
    assert [s.loss_scale / (5 * s.local_batches[s.rank]) for s in samplers] == pytest.approx([1 / 100] * 5)
    assert UnevenBatchSampler(100, [25] * 4, 2).loss_scale == 1.0
    acc = UnevenBatchSampler(1003, [14, 14, 14, 14, 44], 4, accumulation_steps=3)
    assert acc.loss_scale == pytest.approx(44 * 5 / 300)
    # 1003 samples: 3 optimizer steps of 3 micro-steps of 100, never a partial optimizer step
    assert len(acc) == 9 and len(list(acc)) == 9 and len(samplers[0]) == 10
    with pytest.raises(ValueError, match=r"dataset_len: .*3 micro-steps of 100 \(300\), got 299"):
        UnevenBatchSampler(299, [14, 14, 14, 14, 44], 0, accumulation_steps=3)
    with pytest.raises(ValueError, match=r"accumulation_steps: expected an integer >= 1, got 0"):
        UnevenBatchSampler(1003, [1], 0, accumulation_steps=0)


def _one_step(rank: int, world: int, store: str, out: str, steps: int) -> None:
    """One optimizer step of DDP over uneven local batches (``steps`` micro-steps), with the
    sampler's loss scale and without it."""
    os.environ.update(LOCAL_RANK=str(rank), SRIFT_LOCAL_BATCHES="5,2,1", SRIFT_ACCUMULATION_STEPS=str(steps))
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    data = torch.Generator().manual_seed(5)
    dataset = torch.utils.data.TensorDataset(torch.randn(50, 4, generator=data), torch.randn(50, 3, generator=data))
    sampler = srift.UnevenBatchSampler.from_env(len(dataset), seed=2)
    result = {"indices": [], "scale": sampler.loss_scale}
    for scaled in (True, False):
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        batches = iter(torch.utils.data.DataLoader(dataset, batch_sampler=sampler))
        for micro in range(steps):
            x, y = next(batches)
            loss = torch.nn.functional.mse_loss(model(x), y) * (sampler.loss_scale if scaled else 1.0)
            if micro < steps - 1:
                with model.no_sync():
                    loss.backward()
            else:
                loss.backward()
        opt.step()
        result["scaled" if scaled else "plain"] = [p.detach().clone() for p in model.module.parameters()]
    result["indices"] = [b for _, b in zip(range(steps), iter(sampler))]
    torch.save(result, f"{out}.{rank}")
    dist.barrier()
    os._exit(0)  # as _train: no gloo teardown racing the peers' exit


@pytest.mark.parametrize("steps", [1, 2])
def test_one_uneven_ddp_step_equals_one_step_on_the_global_batch(tmp_path, steps):
    """Note "uneven loss scale": DDP over local batches 5, 2, 1 with each rank's mean loss times
    sampler.loss_scale takes the same step as one process on the whole global batch (with
    accumulation: on the optimizer step's 2 x 8 samples); the plain mean loss does not."""
    out = str(tmp_path / "rank")
    mp.spawn(_one_step, args=(3, str(tmp_path / "store"), out, steps), nprocs=3, join=True)
    ranks = [torch.load(f"{out}.{r}") for r in range(3)]
    assert [r["scale"] for r in ranks] == pytest.approx([5 * 3 / (8 * steps), 2 * 3 / (8 * steps), 3 / (8 * steps)])
    indices = [i for r in ranks for b in r["indices"] for i in b]
    assert len(indices) == len(set(indices)) == 8 * steps
    data = torch.Generator().manual_seed(5)
    x_all, y_all = torch.randn(50, 4, generator=data), torch.randn(50, 3, generator=data)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.nn.functional.mse_loss(model(x_all[indices]), y_all[indices]).backward()
    opt.step()
    for r in ranks:
        for got, want in zip(r["scaled"], model.parameters()):
            torch.testing.assert_close(got, want.detach(), rtol=1e-6, atol=1e-6)
    # without the scale the 1-sample rank's sample weighs 5x a 5-sample rank's: a different step
    assert max((got - want).abs().max().item()
               for got, want in zip(ranks[0]["plain"], model.parameters())) > 1e-3


@pytest.mark.parametrize("steps", [1, 3])
def test_a_resumed_epoch_takes_the_samples_the_uninterrupted_one_would(steps):
    """A spot restart loads a checkpoint taken at step s and resumes there: the epoch's
    remaining batches are the uninterrupted epoch's from s on, on every rank."""
    batches = [14, 14, 44]
    for rank in range(3):
        whole = UnevenBatchSampler(1003, batches, rank, seed=4, accumulation_steps=steps)
        whole.set_epoch(5)
        full = list(whole)
        resumed = UnevenBatchSampler(1003, batches, rank, seed=4, accumulation_steps=steps)
        resumed.set_epoch(5, start_step=6)
        assert len(resumed) == len(full) - 6 and list(resumed) == full[6:]
        resumed.set_epoch(6)  # the next epoch starts at its beginning
        assert len(resumed) == len(full)
    with pytest.raises(ValueError, match=r"start_step: expected an integer in 0\.\.12, a multiple of "
                                         r"accumulation_steps \(3\), got 4"):
        UnevenBatchSampler(1003, batches, 0, accumulation_steps=3).set_epoch(1, start_step=4)
    with pytest.raises(ValueError, match=r"start_step: expected an integer in 0\.\.13, got 14"):
        UnevenBatchSampler(1003, batches, 0).set_epoch(1, start_step=14)
