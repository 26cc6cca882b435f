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
        for x, y in loader:
            loss = loss_fn(model(x), y) * sampler.loss_scale  # see note "uneven loss scale"
            ...

Note "uneven loss scale": DDP averages gradients over ranks, so with a mean loss a sample on
rank r weighs 1 / (world * local_batch_r) in the step, not 1 / global_batch: unequal local
batches over-weight the samples of the ranks with small batches (a 12, 11, 11 split moves the
gradient off the global batch's; a 44, 14, 14, 14, 14 split weighs a T4 sample 3.1x a V100
sample). ``loss_scale`` is ``local_batch_r * world / (global_batch * k)`` for k accumulation
micro-steps; each rank multiplies its mean loss by it (every micro-step, with no further
division by k), and DDP's average becomes the gradient of the mean loss over all the step's
samples, as one process running the whole global batch computes it
(tests/python/test_sampler.py checks one DDP step against that to float tolerance).

With gradient accumulation (``SRIFT_ACCUMULATION_STEPS=k`` in the launch spec, read by
``from_env``) each batch the sampler yields is one micro-step, and an epoch is a whole number
of optimizer steps: ``dataset_len // (k * global_batch)`` of them, k micro-steps each.

A job restarted from a checkpoint taken mid-epoch (spot, srift/export.py note "spot launch")
resumes with ``set_epoch(epoch, start_step=step)``: the rest of the epoch takes the samples an
uninterrupted run would have.
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
    steps on every rank (with ``accumulation_steps=k``: rounded down to a multiple of k, whole
    optimizer steps); every sample is taken at most once per epoch and the samples left over
    are dropped (each epoch's permutation drops others). ``loss_scale`` weighs this rank's mean
    loss so that DDP's average is the global batch's (note "uneven loss scale")."""

    def __init__(self, dataset_len: int, local_batches: Sequence[int], rank: int, *, shuffle: bool = True,
                 seed: int = 0, accumulation_steps: int = 1):
        batches = list(local_batches)
        if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
            raise ValueError(f"local_batches: expected one integer >= 1 per rank, got {local_batches!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(batches):
            raise ValueError(f"rank: expected an integer in 0..{len(batches) - 1}, got {rank!r}")
        if isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps, int) or accumulation_steps < 1:
            raise ValueError(f"accumulation_steps: expected an integer >= 1, got {accumulation_steps!r}")
        global_batch = sum(batches)
        step = global_batch * accumulation_steps
        if isinstance(dataset_len, bool) or not isinstance(dataset_len, int) or dataset_len < step:
            what = "the global batch" if accumulation_steps == 1 else \
                f"the samples of one optimizer step, {accumulation_steps} micro-steps of {global_batch}"
            raise ValueError(f"dataset_len: expected an integer >= {what} ({step}), got {dataset_len!r}")
        self.dataset_len, self.local_batches, self.rank = dataset_len, batches, rank
        self.global_batch = global_batch  # samples of one (micro-)step over all ranks
        self.accumulation_steps = accumulation_steps
        self.offset = sum(batches[:rank])
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.start_step = 0

    @property
    def loss_scale(self) -> float:
        """What this rank multiplies its mean loss by before ``backward()`` (every micro-step):
        ``local_batch * world_size / (global_batch * accumulation_steps)``. DDP then averages
        the ranks' gradients into the gradient of the mean loss over every sample of the
        optimizer step (note "uneven loss scale"). 1.0 for equal batches without accumulation.
        A loss summed over the local batch takes ``world_size / (global_batch *
        accumulation_steps)`` instead."""
        return (self.local_batches[self.rank] * len(self.local_batches)
                / (self.global_batch * self.accumulation_steps))

    @classmethod
    def from_env(cls, dataset_len: int, *, shuffle: bool = True, seed: int = 0) -> UnevenBatchSampler:
        """This rank's sampler, in a process group srift's launch spec started: every rank's
        local batch is its node's ``SRIFT_LOCAL_BATCHES`` entry at ``LOCAL_RANK``, gathered
        over the group (torch.distributed must be initialised; with NCCL, call
        ``torch.cuda.set_device(LOCAL_RANK)`` first, as the gather runs on the current GPU), and
        the micro-steps per optimizer step are ``SRIFT_ACCUMULATION_STEPS`` (1 when unset)."""
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
        raw_steps = os.environ.get("SRIFT_ACCUMULATION_STEPS", "1")
        try:
            steps = int(raw_steps)
        except ValueError:
            raise ValueError(f"SRIFT_ACCUMULATION_STEPS: expected an integer >= 1, got {raw_steps!r}") from None
        everyone: list[object] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        return cls(dataset_len, [int(b) for b in everyone], dist.get_rank(), shuffle=shuffle,  # type: ignore[arg-type]
                   seed=seed, accumulation_steps=steps)

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        """A new permutation for ``epoch`` (the same on every rank), as DistributedSampler.
        ``start_step``: resume the epoch at that (micro-)step, after a checkpoint taken there
        (a spot restart): the steps left are those an uninterrupted epoch runs from it, and
        ``len()`` counts them. It must be a whole number of optimizer steps (a multiple of
        ``accumulation_steps``) within the epoch."""
        steps = self._epoch_steps()
        k = self.accumulation_steps
        if (isinstance(start_step, bool) or not isinstance(start_step, int) or not 0 <= start_step <= steps
                or start_step % k):
            whole = "" if k == 1 else f", a multiple of accumulation_steps ({k})"
            raise ValueError(f"start_step: expected an integer in 0..{steps}{whole}, got {start_step!r}")
        self.epoch, self.start_step = epoch, start_step

    def _epoch_steps(self) -> int:
        k = self.accumulation_steps
        return self.dataset_len // (self.global_batch * k) * k

    def __len__(self) -> int:
        """(Micro-)steps left in the epoch: whole optimizer steps of ``accumulation_steps``
        each, from ``start_step`` (0 unless ``set_epoch`` resumed the epoch)."""
        return self._epoch_steps() - self.start_step

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_len, generator=generator)
        else:
            order = torch.arange(self.dataset_len)
        mine = self.local_batches[self.rank]
        for step in range(self.start_step, self._epoch_steps()):
            start = step * self.global_batch + self.offset
            yield order[start:start + mine].tolist()
