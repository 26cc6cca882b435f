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


def test_its_band_widens_away_from_the_measured_batch_as_the_measured_gpus_own(gpt2_meta):
    # The same-specs target is the measured GPU's curve, so it is no surer of another batch than
    # the measured GPU: its band was the anchored one at every batch (x0.81-x1.28), narrower at
    # 4x the measured batch than the measured V100-16GB's own (x1.49).
    import math

    from srift.catalog import Catalog
    from srift.engine import Engine, EngineConfig

    prof = gpt2_meta
    prof.add_measurement("V100-16GB", local_batch=2, iteration_s=0.035)
    engine = Engine(prof, Catalog.default(), EngineConfig())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert engine.compute_model("V100-32GB")[1] == "measured-same-specs"
        band = engine.group_band("p3dn.24xlarge", several=False)
        p10, p90 = engine.compute_interval("V100-32GB")
    assert band.measured_batch == 2.0
    (_, _), (e10, e90) = engine.measured_band()
    assert (band.per_e_fold.p10, band.per_e_fold.p90) == (e10, e90)
    assert (band.compute.p10, band.compute.p90) == pytest.approx((p10, p90))  # the anchored band at the run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        near = srift.predict(prof, "p3dn.24xlarge", global_batch=16, engine=engine)   # local batch 2
        far = srift.predict(prof, "p3dn.24xlarge", global_batch=64, engine=engine)    # local batch 8
    assert near.groups[0].compute_source == "measured-same-specs"
    assert "(measured-same-specs at local batch 2, predicted at 8)" in " ".join(far.band_from)
    # the compute band at local batch 8: the anchored band and ln(4) e-folds in quadrature
    # (band.hpp note "measured batch band"), wider than the anchored band alone
    widened = math.exp(math.hypot(math.log(p90), math.log(4) * math.log(e90)))
    assert widened > p90 * 1.1
    assert f"x{widened:.2f}" in " ".join(far.band_from)


def test_explain_says_why_an_unmeasured_gpu_runs_as_measured(gpt2_meta):
    from srift.report import explain_prediction

    prof = gpt2_meta
    prof.add_measurement("V100-16GB", local_batch=2, iteration_s=0.035)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = srift.predict(prof, "1x p3dn.24xlarge", global_batch=16)
        other = srift.predict(prof, "1x p4d.24xlarge", global_batch=16)
    assert "same specs: V100-32GB on p3dn.24xlarge has the peaks and memory bandwidth" in explain_prediction(same)
    assert "same specs:" not in explain_prediction(other)
