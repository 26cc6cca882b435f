"""Note "same specs" (csrc/learned_compute.cpp): a GPU type whose specs equal a measured one's
(the V100-SXM2 in 16 GB on p3 and 32 GB on p3dn) is predicted as that GPU's measured curve, not
through the cross-GPU ratio model, whose output at no spec difference is its bias."""
from __future__ import annotations

import warnings

import pytest

import srift


@pytest.fixture
def gpt2_meta():
    model, batch, loss_fn = srift.zoo.build("gpt2", batch_size=8, device="meta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return srift.profile(model, batch, loss_fn=loss_fn, device="meta")


@pytest.mark.parametrize("measured_batch, seconds", [(4, 0.06), (1, 0.02)])
def test_a_v100_32gb_runs_as_the_measured_v100_16gb(gpt2_meta, measured_batch, seconds):
    prof = gpt2_meta
    prof.add_measurement("V100-16GB", local_batch=measured_batch, iteration_s=seconds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for local in (1, 2, 4, 8):
            one = srift.predict(prof, "p3.2xlarge", global_batch=local)        # 1x V100-16GB
            eight = srift.predict(prof, "p3dn.24xlarge", global_batch=8 * local)  # 8x V100-32GB
            # before: 1.19-1.37x slower at every batch, the measured one included
            assert eight.compute_s == pytest.approx(one.compute_s, rel=1e-12), local
        at_run = srift.predict(prof, "p3dn.24xlarge", global_batch=8 * measured_batch)
    # the run itself at its batch: compute plus the optimizer step is the measured iteration
    assert at_run.compute_s + at_run.optimizer_s == pytest.approx(seconds, rel=1e-9)
