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
