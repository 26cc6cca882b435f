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
