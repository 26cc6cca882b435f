"""pytest-benchmark micro-benchmarks (run: pytest bench/test_bench_predict.py). Not part of the
test suite: bench/ is outside tests/ and never asserts on time."""
from __future__ import annotations

import pytest

import srift
from srift import _core
from srift.engine import Engine


@pytest.fixture(scope="module")
def setup():
    model, batch, loss_fn = srift.zoo.build("resnet50", batch_size=4, device="meta")
    prof = srift.profile(model, batch, loss_fn=loss_fn, device="meta")
    catalog = srift.Catalog.default()
    engine = Engine(prof, catalog)
    return prof, catalog, engine


def test_predict(benchmark, setup):
    prof, catalog, engine = setup
    benchmark(srift.predict, prof, "2x p3.16xlarge", 256, catalog=catalog, engine=engine)


def test_core_simulate_baseline(benchmark, setup):
    prof, catalog, engine = setup
    groups = [(engine.instance_spec("p3.16xlarge"), 2, engine.instance_compute("p3.16xlarge")[0], 24.48)]
    benchmark(_core.simulate, engine.workload, groups, 256)


@pytest.fixture(scope="module")
def learned(setup):
    from srift.learn import default_models
    from srift.learn.features import core_workload_stats, gpu_spec
    from srift.learn.gpus import peaks_from_catalog
    from srift.learn.workloads import workload_from_profile

    prof, catalog, _ = setup
    wl = workload_from_profile(prof)
    g = peaks_from_catalog(catalog, "A10G")
    return default_models(), wl, core_workload_stats(wl), g, gpu_spec(g)


def test_learned_compute_core(benchmark, learned):
    """One no-measurement compute model as the engine builds it: srift::LearnedCompute."""
    models, _, stats, _, spec = learned
    benchmark(models.learned_compute.predict_absolute, stats, spec, _core.Precision.amp, 0.0)


def test_learned_compute_core_pytorch_fp32(benchmark, learned):
    """The same at PyTorch's default FP32 on a GPU with TF32: the TF32 and strict-FP32
    predictions and the roofline's cost between them (srift::LearnedCompute note "fp32 via
    tf32"); about twice test_learned_compute_core's work."""
    models, _, stats, _, spec = learned
    benchmark(models.learned_compute.predict_absolute, stats, spec, _core.Precision.fp32, 0.0)


def test_learned_compute_python_twin_baseline(benchmark, learned):
    """The same model composed in Python (the training code's twin: guarded_correction and
    absolute_on_grid), the engine's path before the core did it."""
    from srift.learn.dominance import guarded_correction
    from srift.learn.features import roofline
    from srift.learn.models import absolute_on_grid

    models, wl, _, g, _ = learned

    def python_twin():
        return absolute_on_grid(roofline(wl, g, "amp"), lambda grid: guarded_correction(
            models.absolute.core.predict, wl, g, grid, "amp", models._references), None, token_slope=True)

    benchmark(python_twin)
