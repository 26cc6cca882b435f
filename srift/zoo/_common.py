"""Shared plumbing for the zoo: registry entries, option checking, deterministic batches."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "BatchFactory",
    "BatchMaker",
    "LossFn",
    "Options",
    "ZooEntry",
    "check_choice",
    "check_range",
    "cross_entropy_loss",
    "image_batch",
]

Options = dict[str, Any]
LossFn = Callable[[Any, Any], Tensor]
BatchMaker = Callable[["BatchFactory", int, Options], tuple[Any, Any]]


@dataclass(frozen=True)
class ZooEntry:
    """One named model: how to build it, its example batch and loss, and what it is.

    `params` is the exact parameter count of the model `make_model` returns with the default
    options; the tests hold it equal to the published number quoted in `params_source`.
    """

    name: str
    family: str
    params: int
    params_source: str
    source: str
    task: str
    sample_unit: str  # what one unit of batch_size is: images, sequences, utterances, samples
    loss: str
    defaults: Mapping[str, Any]
    make_model: Callable[[Options], nn.Module]
    make_batch: BatchMaker
    make_loss: Callable[[Options], LossFn]
    input_shape: Callable[[Options], tuple[int, ...]]
    validate: Callable[[Options], None] | None = None
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


class BatchFactory:
    """Makes example tensors: seeded on the CPU and then moved, or shape-only on meta.

    Drawing on the CPU with one torch.Generator keeps batches identical across devices and
    leaves the global RNG alone; on meta nothing is drawn, so huge batches cost no memory.
    """

    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        self.meta = device.type == "meta"
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(seed)

    def _place(self, tensor: Tensor) -> Tensor:
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        return torch.empty(shape, dtype=dtype, device=self.device)

    def randn(self, shape: tuple[int, ...]) -> Tensor:
        if self.meta:
            return self.empty(shape, torch.float32)
        return self._place(torch.randn(shape, generator=self.generator))

    def rand(self, shape: tuple[int, ...]) -> Tensor:
        if self.meta:
            return self.empty(shape, torch.float32)
        return self._place(torch.rand(shape, generator=self.generator))

    def randint(self, low: int, high: int, shape: tuple[int, ...]) -> Tensor:
        if self.meta:
            return self.empty(shape, torch.int64)
        return self._place(torch.randint(low, high, shape, generator=self.generator))

    def full(self, shape: tuple[int, ...], value: int) -> Tensor:
        if self.meta:
            return self.empty(shape, torch.int64)
        return self._place(torch.full(shape, value, dtype=torch.int64))

    def cpu_tensor(self, tensor: Tensor) -> Tensor:
        """Place a tensor built on the CPU by a family's own code (never called on meta)."""
        return self._place(tensor)


def check_range(name: str, value: float, low: float, high: float | None = None) -> None:
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"option {name} must be {bound}, got {value!r}")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"option {name} must be one of {list(choices)}, got {value!r}")


def cross_entropy_loss(options: Options) -> LossFn:
    """Classifier loss: mean cross-entropy of logits (N, C) against labels (N,)."""

    def loss_fn(output: Tensor, targets: Tensor) -> Tensor:
        return torch.nn.functional.cross_entropy(output, targets)

    return loss_fn


def image_batch(size: int, classes: int) -> BatchMaker:
    """Batch maker for image classifiers: N(0,1) images (as if normalised) and labels.

    The side comes from the ``image_size`` option when the entry has one, else ``size``.
    """

    def make(factory: BatchFactory, batch_size: int, options: Options) -> tuple[Tensor, Tensor]:
        s = int(options.get("image_size", size))
        return factory.randn((batch_size, 3, s, s)), factory.randint(0, classes, (batch_size,))

    return make
