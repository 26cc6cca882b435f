"""Shared fixtures: profiles are built once per session on the meta device (FLOPs and bytes
without compute), so tests stay fast and deterministic."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def resnet50_profile():
    import srift

    model, batch, loss_fn = srift.zoo.build("resnet50", batch_size=4, device="meta")
    return srift.profile(model, batch, loss_fn=loss_fn, device="meta", name="resnet50")


@pytest.fixture(scope="session")
def catalog():
    import srift

    return srift.Catalog.default()


@pytest.fixture()
def fresh_profile(resnet50_profile):
    """A copy tests may add measurements to."""
    from srift.profile_data import Profile

    return Profile.from_dict(resnet50_profile.to_dict())


@pytest.fixture()
def one_torch_thread():
    """One intra-op thread: the suite shares a small machine, and OpenMP spinning against other
    processes costs more than the parallelism gains at the zoo tests' tiny batches."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def n_params(model) -> int:
    """Parameters of a torch module, shared ones once (as model.parameters() yields them)."""
    return sum(p.numel() for p in model.parameters())
