"""A batch sampler for the unequal local batches of a heterogeneous plan.

srift splits a global batch so that every rank finishes its backward together, which on mixed
GPUs gives ranks different local batches (``SRIFT_LOCAL_BATCHES`` in the launch specs,
srift.export). ``DistributedSampler`` hands every rank the same number of samples, so with
``batch_size=local_batch`` a rank with a smaller batch runs more steps per epoch than one with
a larger batch: DDP's allreduces stop pairing up at the end of the first epoch and the job
hangs until the collective timeout (a review ran it: 3 gloo ranks at 12, 11, 11). This sampler
takes each step's global batch from one permutation all ranks share and gives each rank its
own slice at the running offset of the local batches, so every rank runs the same number of
steps and each step's samples are exactly the global batch srift planned for::

    sampler = UnevenBatchSampler.from_env(len(dataset))  # after init_process_group
    loader = DataLoader(dataset, batch_sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        ...
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler

__all__ = ["UnevenBatchSampler"]


class UnevenBatchSampler(Sampler[list[int]]):
    """Each step, rank ``rank`` takes ``local_batches[rank]`` indices of one global batch of
    ``sum(local_batches)`` drawn from a permutation of ``range(dataset_len)`` every rank draws
    alike (seeded by ``seed`` and the epoch). An epoch is ``dataset_len // sum(local_batches)``
    steps on every rank; the samples left over are dropped (each epoch's permutation drops
    others)."""

    def __init__(self, dataset_len: int, local_batches: Sequence[int], rank: int, *, shuffle: bool = True,
                 seed: int = 0):
        batches = list(local_batches)
        if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
            raise ValueError(f"local_batches: expected one integer >= 1 per rank, got {local_batches!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(batches):
            raise ValueError(f"rank: expected an integer in 0..{len(batches) - 1}, got {rank!r}")
        global_batch = sum(batches)
        if isinstance(dataset_len, bool) or not isinstance(dataset_len, int) or dataset_len < global_batch:
            raise ValueError(f"dataset_len: expected an integer >= the global batch ({global_batch}), "
                             f"got {dataset_len!r}")
        self.dataset_len, self.local_batches, self.rank = dataset_len, batches, rank
        self.global_batch = global_batch
        self.offset = sum(batches[:rank])
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    @classmethod
    def from_env(cls, dataset_len: int, *, shuffle: bool = True, seed: int = 0) -> UnevenBatchSampler:
        """This rank's sampler, in a process group srift's launch spec started: every rank's
        local batch is its node's ``SRIFT_LOCAL_BATCHES`` entry at ``LOCAL_RANK``, gathered
        over the group (torch.distributed must be initialised)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("UnevenBatchSampler.from_env needs torch.distributed initialised "
                               "(init_process_group) to learn every rank's local batch")
        try:
            mine = int(os.environ["SRIFT_LOCAL_BATCHES"].split(",")[int(os.environ["LOCAL_RANK"])])
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError("SRIFT_LOCAL_BATCHES and LOCAL_RANK must be set as srift's launch spec sets "
                             f"them (SRIFT_LOCAL_BATCHES={os.environ.get('SRIFT_LOCAL_BATCHES')!r}, "
                             f"LOCAL_RANK={os.environ.get('LOCAL_RANK')!r}): {e}") from None
        everyone: list[object] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        return cls(dataset_len, [int(b) for b in everyone], dist.get_rank(), shuffle=shuffle,  # type: ignore[arg-type]
                   seed=seed)

    def set_epoch(self, epoch: int) -> None:
        """A new permutation for ``epoch`` (the same on every rank), as DistributedSampler."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.dataset_len // self.global_batch

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_len, generator=generator)
        else:
            order = torch.arange(self.dataset_len)
        mine = self.local_batches[self.rank]
        for step in range(len(self)):
            start = step * self.global_batch + self.offset
            yield order[start:start + mine].tolist()
