"""srift.predict: the iteration model's invariants through the public API."""
from __future__ import annotations

import math

import pytest

import srift
from srift.catalog import Catalog


def test_predict_reports_the_documented_fields(resnet50_profile):
    pred = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256)
    assert pred.feasible
    assert pred.workers == 16
    assert pred.groups[0].local_batch_low == 16 and pred.groups[0].ranks_high == 0
    assert pred.samples_per_s == pytest.approx(256 / pred.iteration_s)
    assert pred.usd_per_hour == pytest.approx(2 * Catalog.default().price("p3.16xlarge", pred.region))
    assert pred.bottleneck == "network"  # two instances: the 25 Gbps NIC bounds the ring
    # DESIGN.md: max(compute, exposed comm) <= iteration <= compute + comm + optimizer
    assert max(pred.compute_s, pred.exposed_comm_s) <= pred.iteration_s + 1e-12
    assert pred.iteration_s <= pred.compute_s + pred.comm_s + pred.optimizer_s + 1e-12
    d = pred.to_dict()
    assert d["cluster"] == "2x p3.16xlarge" and d["groups"][0]["gpu"] == "V100-16GB"


def test_one_worker_has_no_communication(resnet50_profile):
    pred = srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=32)
    assert pred.workers == 1
    assert pred.comm_s == 0 and pred.exposed_comm_s == 0
    assert pred.iteration_s == pytest.approx(pred.compute_s + pred.optimizer_s)


def test_faster_network_is_never_slower(resnet50_profile, catalog):
    previous = math.inf
    for gbps in (1, 5, 10, 25, 100, 400):
        patched = catalog.with_overrides({"schema": "srift.catalog-overrides/1",
                                          "instances": {"p3.16xlarge": {"network_gbps": gbps}}})
        pred = srift.predict(resnet50_profile, "4x p3.16xlarge", global_batch=512, catalog=patched)
        assert pred.iteration_s <= previous + 1e-12
        previous = pred.iteration_s


def test_heterogeneous_split_gives_the_faster_gpu_more(resnet50_profile):
    pred = srift.predict(resnet50_profile, "1x g4dn.xlarge + 1x p3.2xlarge", global_batch=64)
    t4, v100 = pred.groups
    assert v100.local_batch_low > t4.local_batch_high
    assert t4.local_batch_low * t4.ranks + v100.local_batch_low * v100.ranks == 64
    # balanced: neither group idles for long
    assert abs(t4.compute_s - v100.compute_s) / pred.compute_s < 0.25


def test_measurement_anchors_the_gpu_type(fresh_profile):
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)
    pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert pred.groups[0].compute_source == "measured"
    assert pred.iteration_s == pytest.approx(0.21, rel=1e-9)
    fresh_profile.add_measurement("T4", local_batch=64, iteration_s=0.40)
    two = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=48)
    assert two.iteration_s == pytest.approx(0.21 + (0.40 - 0.21) * 16 / 32, rel=1e-9)


def test_measurements_that_fit_no_line_are_named_not_labelled_measured_in_silence(fresh_profile, tmp_path, capsys):
    # a larger batch measured faster: the core scales the curve through the mean, which
    # missed both points (196 ms predicted at the batch measured at 100 ms) without a word
    import warnings

    fresh_profile.add_measurement("V100", local_batch=32, iteration_s=0.2)
    fresh_profile.add_measurement("V100", local_batch=64, iteration_s=0.1)
    with pytest.warns(UserWarning, match=r"measurements on V100-16GB \(0.2 s at 32, 0.1 s at 64\) fit no line"
                                         r".*which misses a measured point by"):
        srift.predict(fresh_profile, "1x p3.2xlarge", global_batch=64)
    # a line that fits says nothing: proportional times (whose intercept's sign is rounding)
    # and a compute-bound model's noise (an intercept a little below 0)
    for points in ([(16, 0.016), (32, 0.032), (64, 0.064)], [(32, 0.35), (64, 0.5)], [(32, 0.100), (64, 0.201)]):
        good = srift.Profile.from_dict(fresh_profile.to_dict())
        good.measurements = []
        for batch, seconds in points:
            good.add_measurement("V100", local_batch=batch, iteration_s=seconds)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            srift.predict(good, "1x p3.2xlarge", global_batch=64)
    # a drop within 10% that the kept curve still misses by ~2x (a compute-bound model) is named
    bad = srift.Profile.from_dict(fresh_profile.to_dict())
    bad.measurements = []
    bad.add_measurement("V100", local_batch=16, iteration_s=0.10)
    bad.add_measurement("V100", local_batch=64, iteration_s=0.095)
    with pytest.warns(UserWarning, match=r"measurements on V100-16GB \(0.1 s at 16, 0.095 s at 64\) fit no line"):
        srift.predict(bad, "1x p3.2xlarge", global_batch=16)
    # the CLI says it on one line
    from srift.cli import main

    path = str(fresh_profile.save(tmp_path / "p.json"))
    assert main(["predict", "--profile", path, "--cluster", "1x p3.2xlarge", "--global-batch", "64"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("srift: warning: measurements on V100-16GB") and "engine.py" not in err


def test_a_run_at_another_precision_anchors_nothing_and_is_named(fresh_profile):
    """Engine note "measurement precision": --precision amp read an FP32 run as an AMP one (a
    review). A prediction anchors only on runs at its precision; the others are left out with
    one warning naming each, so a profile may hold runs at several precisions. A measurement
    recorded without a precision (older files) is the profile's (fp32 here)."""
    import warnings

    unmeasured = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32, precision="amp")
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.5)  # no precision: the profile's fp32
    fresh_profile.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.6, gpus=4, precision="fp32")
    with pytest.warns(UserWarning, match=r"2 measurements timed at another precision than the amp predicted are not "
                                         r"used: measurements\[0\] \(T4, local batch 32, 0.5 s, fp32: recorded without "
                                         r"a precision, read as the profile's\); measurements\[1\] \(g4dn.12xlarge whole "
                                         r"instance, local batch 32, 0.6 s, fp32\).*GPU:BATCH:SECONDS@amp"):
        amp = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32, precision="amp")
    assert amp.groups[0].compute_source == unmeasured.groups[0].compute_source == "learned"
    assert amp.iteration_s == pytest.approx(unmeasured.iteration_s, rel=1e-12)
    with pytest.warns(UserWarning, match="not used"):
        whole = srift.predict(fresh_profile, "1x g4dn.12xlarge", global_batch=128, precision="amp")
    assert whole.groups[0].compute_source != "measured-instance"
    # at the runs' precision they anchor as before, without a word
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fp32 = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
        assert srift.predict(fresh_profile, "1x g4dn.12xlarge", global_batch=128).groups[0].compute_source == \
            "measured-instance"
    assert fp32.groups[0].compute_source == "measured" and fp32.iteration_s == pytest.approx(0.5, rel=1e-9)
    # an AMP run beside them: the AMP prediction uses it, and says the FP32 ones are not used
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.3, precision="amp")
    with pytest.warns(UserWarning, match=r"2 measurements timed at another precision"):
        amp = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32, precision="amp")
    assert amp.groups[0].compute_source == "measured" and amp.iteration_s == pytest.approx(0.3, rel=1e-9)
    with pytest.warns(UserWarning, match=r"1 measurement timed at another precision than the fp32 predicted is not "
                                         r"used: measurements\[2\] \(T4, local batch 32, 0.3 s, amp\)"):
        fp32 = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert fp32.iteration_s == pytest.approx(0.5, rel=1e-9)


def test_the_profiles_own_timings_count_at_the_precision_it_ran_at(fresh_profile):
    """A profile timed on a GPU measured that GPU at the profile's precision: its timings
    anchor predictions at that precision and no other."""
    from srift.profile_data import Profile, Timings

    data = fresh_profile.to_dict()
    data.update(device="cuda", device_gpu="T4")
    timed = Profile.from_dict(data)
    timed.timings = Timings(batch_sizes=[16, 32], forward_s=[0.05, 0.09], backward_s=[0.1, 0.18], optimizer_s=0.01,
                            iteration_s=[0.16, 0.28], forward_p10=[0.05, 0.09], forward_p90=[0.05, 0.09],
                            backward_p10=[0.1, 0.18], backward_p90=[0.1, 0.18], repeats=5, warmup=2,
                            iteration_p10=[0.16, 0.28], iteration_p90=[0.16, 0.28], peak_memory_bytes=[None, None])
    assert srift.predict(timed, "1x g4dn.xlarge", global_batch=32).groups[0].compute_source == "measured"
    with pytest.warns(UserWarning, match=r"1 measurement timed at another precision than the amp predicted is not "
                                         r"used: the profile's own timings on T4 \(fp32, as profiled\)"):
        amp = srift.predict(timed, "1x g4dn.xlarge", global_batch=32, precision="amp")
    assert amp.groups[0].compute_source == "learned"


def test_repeats_that_disagree_are_named_with_the_value_used(fresh_profile, tmp_path, capsys):
    """Engine note "repeated measurements": two runs of one configuration that disagree (0.2 s
    and 0.5 s) were averaged without a word (a review). Repeats whose slowest is more than 20%
    over their fastest are named with the value the fit uses: the mean of two, the median of
    three or more (one bad run does not move it)."""
    import warnings

    from srift.engine import REPEAT_SPREAD_SHARE

    assert REPEAT_SPREAD_SHARE == 0.20
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.2)
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.5)
    with pytest.warns(UserWarning, match=r"measurements on T4 at local batch 32 disagree: 0.2 s \(measurements\[0\]\), "
                                         r"0.5 s \(measurements\[1\]\); the slowest is 150% over the fastest.*at most "
                                         r"20%. srift uses their mean, 0.35 s"):
        pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert pred.iteration_s == pytest.approx(0.35, rel=1e-9)
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)
    with pytest.warns(UserWarning, match=r"0.5 s \(measurements\[1\]\), 0.21 s \(measurements\[2\]\);.*srift uses "
                                         r"their median, 0.21 s"):
        pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert pred.iteration_s == pytest.approx(0.21, rel=1e-9)
    # the median stands for each repeat in the fit: with a run at another batch, the line
    # passes through it (0.21 s at 32, 0.4 s at 64)
    fresh_profile.add_measurement("T4", local_batch=64, iteration_s=0.4)
    with pytest.warns(UserWarning, match="disagree"):
        pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=48)
    assert pred.iteration_s == pytest.approx(0.21 + (0.4 - 0.21) / 2, rel=1e-9)
    # an even count: the mean of the middle two
    fresh_profile.measurements = []
    for seconds in (0.2, 0.21, 0.23, 0.5):
        fresh_profile.add_measurement("T4", local_batch=32, iteration_s=seconds)
    with pytest.warns(UserWarning, match=r"srift uses their median, 0.22 s"):
        pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert pred.iteration_s == pytest.approx(0.22, rel=1e-9)
    # within 20%, or at different batches or micro-steps: nothing to say
    for runs in ([(32, 0.2, 1), (32, 0.24, 1)], [(32, 0.2, 1), (64, 0.38, 1)], [(32, 0.2, 1), (32, 1.7, 8)]):
        fresh_profile.measurements = []
        for batch, seconds, steps in runs:
            fresh_profile.add_measurement("T4", local_batch=batch, iteration_s=seconds, accumulation_steps=steps)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    # a whole instance's repeats too; the CLI says it on one line
    fresh_profile.measurements = []
    fresh_profile.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.3, gpus=4)
    fresh_profile.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.45, gpus=4)
    with pytest.warns(UserWarning, match=r"measurements on g4dn.12xlarge \(T4\) at local batch 32 disagree: 0.3 s "
                                         r"\(measurements\[0\]\), 0.45 s \(measurements\[1\]\); the slowest is 50%"):
        srift.predict(fresh_profile, "1x g4dn.12xlarge", global_batch=128)
    from srift.cli import main

    fresh_profile.measurements = []
    path = str(fresh_profile.save(tmp_path / "p.json"))
    assert main(["predict", "--profile", path, "--cluster", "1x g4dn.xlarge", "--global-batch", "32",
                 "--measure", "T4:32:0.2", "--measure", "T4:32:0.5"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("srift: warning: measurements on T4 at local batch 32 disagree") and err.count("\n") == 1


def test_a_measured_batch_the_memory_estimate_does_not_hold_is_named(fresh_profile):
    # srift's estimate holds 171 ResNet-50 samples on a 16 GiB GPU (1.48 GiB fixed, 81.9 MiB
    # per sample, 95% usable); a run the user timed at 512 says the profile overstates memory
    import warnings

    from srift.engine import Engine

    engine_limit = Engine(fresh_profile, Catalog.default()).memory_max_batch("T4")
    assert engine_limit == 171
    fresh_profile.add_measurement("T4", local_batch=512, iteration_s=1.9)
    with pytest.warns(UserWarning, match=r"measurements on T4: a run at local batch 512 is more than srift's memory "
                                         r"estimate holds on one T4 \(171 samples: .*plans put at most 171 samples"):
        srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=64)
    fresh_profile.measurements = []
    fresh_profile.add_measurement("p3.16xlarge", local_batch=400, iteration_s=1.9, gpus=8)
    with pytest.warns(UserWarning, match=r"measurements on p3.16xlarge \(V100-16GB\): a run at local batch 400"):
        srift.predict(fresh_profile, "1x p3.16xlarge", global_batch=512)
    fresh_profile.measurements = []
    fresh_profile.add_measurement("V100", local_batch=200, iteration_s=0.9)  # 16 or 32 GB: it may have fit
    fresh_profile.add_measurement("T4", local_batch=171, iteration_s=0.7)  # at the limit: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=64)


def test_a_run_faster_than_its_gpus_peak_is_flagged(fresh_profile):
    """ResNet-50 at batch 32 in 1 ms on a T4 is ~780 TFLOP/s, ten times its 65 TFLOP/s tensor
    peak: most likely milliseconds or per sample. srift keeps the run and says so (a review)."""
    import warnings

    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.001)
    with pytest.warns(UserWarning, match=r"measurements on T4: a run at local batch 32 in 0.001 s does .* TFLOP/s "
                                         r"of the profile's FLOPs, [\d.]+x the 65 TFLOP/s peak of a T4"):
        srift.predict(fresh_profile, "1x p5.48xlarge", global_batch=256)
    fresh_profile.measurements = []
    fresh_profile.add_measurement("g4dn.12xlarge", local_batch=32, iteration_s=0.001, gpus=4)
    with pytest.warns(UserWarning, match=r"measurements on g4dn.12xlarge \(T4\): a run at local batch 32"):
        srift.predict(fresh_profile, "1x g4dn.12xlarge", global_batch=128)
    fresh_profile.measurements = []
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)  # a plausible run: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=64)
    # the margin (engine.PEAK_MARGIN): 1.1x the peak is noise on a measured peak, 1.3x is not
    from srift.engine import PEAK_MARGIN

    at_peak = (fresh_profile.total_forward_flops() + fresh_profile.total_backward_flops()) * 32 / 65e12
    for share, flagged in ((1.1, False), (1.3, True)):
        assert (share > PEAK_MARGIN) == flagged
        fresh_profile.measurements = []
        fresh_profile.add_measurement("T4", local_batch=32, iteration_s=at_peak / share)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=64)
        assert any("TFLOP/s peak of a T4" in str(w.message) for w in seen) == flagged, share


def test_measurements_on_a_gpu_only_anchoring_others_are_checked_too(fresh_profile):
    # the runs on V100 anchor the T4's prediction though no plan asked runs on a V100: the
    # checks a planned GPU's runs get apply to them as well
    fresh_profile.add_measurement("V100-16GB", local_batch=32, iteration_s=0.2)
    fresh_profile.add_measurement("V100-16GB", local_batch=64, iteration_s=0.1)
    with pytest.warns(UserWarning, match=r"measurements on V100-16GB \(0.2 s at 32, 0.1 s at 64\) fit no line"):
        pred = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert pred.groups[0].compute_source.startswith("learned")
    fresh_profile.measurements = []
    fresh_profile.add_measurement("V100-16GB", local_batch=512, iteration_s=0.6)
    with pytest.warns(UserWarning, match=r"measurements on V100-16GB: a run at local batch 512 is more than"):
        srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)


def test_memory_infeasible_cluster_says_why(resnet50_profile):
    pred = srift.predict(resnet50_profile, "1x g4dn.xlarge", global_batch=4096)
    assert not pred.feasible
    assert "GPU memory holds at most" in pred.why_infeasible
    assert math.isnan(pred.iteration_s)


def test_whole_run_totals(resnet50_profile):
    pred = srift.predict(resnet50_profile, "1x p3.8xlarge", global_batch=128, iterations=1000)
    assert pred.total_hours == pytest.approx(1000 * pred.iteration_s / 3600)
    assert pred.total_usd == pytest.approx(pred.total_hours * pred.usd_per_hour)


@pytest.mark.parametrize("cluster, batch, error, fragment", [
    ("2x p3.16xlarg", 256, ValueError, "did you mean"),
    ("2x p3.16xlarge", 0, ValueError, r"global_batch must be an integer in 1\.\.2147483647, got 0"),
    ("2x p3.16xlarge", -8, ValueError, r"global_batch must be an integer in 1\.\.2147483647, got -8"),
    # past the core's int: refused by name, not a bare TypeError from the bindings
    ("2x p3.16xlarge", 2**31, ValueError, "global_batch must be an integer in 1..2147483647, got 2147483648"),
    ("2x p3.16xlarge", 256.0, ValueError, "global_batch must be an integer"),
    ("3000000000x p3.16xlarge", 256, ValueError, "count of 'p3.16xlarge' must be an integer in 1..2147483647"),
    ("2x p3.16xlarge", 8, ValueError, "global_batch must be >= the number of workers"),
])
def test_bad_input_names_field_and_value(resnet50_profile, cluster, batch, error, fragment):
    with pytest.raises(error, match=fragment):
        srift.predict(resnet50_profile, cluster, global_batch=batch)


@pytest.mark.parametrize("iterations", [math.inf, math.nan, 0, -5, "10", True, 10**400])
def test_iterations_must_be_a_finite_positive_number(resnet50_profile, iterations):
    # inf used to give inf totals, "10" a TypeError
    with pytest.raises(ValueError, match=r"iterations must be a finite number > 0, got"):
        srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=32, iterations=iterations)


def test_unpriced_region_is_explained(resnet50_profile):
    with pytest.raises(ValueError, match="no on-demand price in|not in the catalog"):
        srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=8, region="mars-east-1")


def test_timeline_orders_buckets_on_one_stream(resnet50_profile):
    pred = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, timeline=True)
    assert len(pred.buckets) == len(resnet50_profile.buckets)
    for a, b in zip(pred.buckets, pred.buckets[1:]):
        assert b.start_s >= a.end_s - 1e-15
    for e in pred.buckets:
        assert e.start_s >= e.ready_s - 1e-15


def test_unmeasured_gpu_uses_learned_model_with_interval(resnet50_profile):
    pred = srift.predict(resnet50_profile, "1x p4d.24xlarge", global_batch=256)
    assert pred.groups[0].compute_source == "learned"
    assert pred.iteration_p10_s < pred.iteration_s < pred.iteration_p90_s
    d = pred.to_dict()
    assert d["iteration_p10_s"] == pred.iteration_p10_s


def test_measurement_on_another_gpu_anchors_the_learned_ratio(fresh_profile):
    before = srift.predict(fresh_profile, "1x p4d.24xlarge", global_batch=256).iteration_s
    fresh_profile.add_measurement("V100", local_batch=64, iteration_s=0.20)
    slow = srift.predict(fresh_profile, "1x p4d.24xlarge", global_batch=256).iteration_s
    fresh_profile.add_measurement("V100", local_batch=64, iteration_s=0.40)  # a twice slower V100 run
    with pytest.warns(UserWarning, match=r"measurements on V100-16GB at local batch 64 disagree.*their mean, 0.3 s"):
        slower = srift.predict(fresh_profile, "1x p4d.24xlarge", global_batch=256).iteration_s
    assert slow != before
    assert slower > slow  # the A100 estimate follows the anchor


def test_roofline_can_be_chosen(resnet50_profile):
    from srift.engine import EngineConfig

    pred = srift.predict(resnet50_profile, "1x p4d.24xlarge", global_batch=256,
                         config=EngineConfig(compute_model="roofline"))
    assert pred.groups[0].compute_source == "roofline"
    assert math.isnan(pred.iteration_p10_s)
    with pytest.raises(ValueError, match="compute_model must be"):
        srift.predict(resnet50_profile, "1x p4d.24xlarge", global_batch=256,
                      config=EngineConfig(compute_model="magic"))


def test_measured_link_is_used_as_is(resnet50_profile, catalog):
    patched = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 2.5, "measured_network_latency_us": 40.0}}})
    pred = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, catalog=patched)
    assert pred.ring_gbytes_s == pytest.approx(2.5)
    nominal = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, catalog=catalog)
    assert nominal.ring_gbytes_s == pytest.approx(25 / 8 * 0.8)  # 25 Gbit/s NIC at the assumed 80%
    with pytest.raises(ValueError, match="measured_network_gbytes_s"):
        catalog.with_overrides({"schema": "srift.catalog-overrides/1",
                                "instances": {"p3.16xlarge": {"measured_network_gbytes_s": -1}}})


def test_measured_interference_stretches_compute(resnet50_profile, catalog):
    # Collectives that share the compute's cores cost compute time per byte of traffic that
    # flows while it runs; 0 / unset (every EC2 type) leaves the prediction as it was.
    base = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, catalog=catalog, timeline=True)
    assert base.interference_s == 0.0
    cost = 0.5  # s per GB of traffic
    patched = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_comm_compute_s_per_gbyte": cost}}})
    hit = srift.predict(resnet50_profile, "2x p3.16xlarge", global_batch=256, catalog=patched, timeline=True)
    # the traffic that started before the compute ended, pro rata of each bucket's allreduce
    # (bucket times count from the iteration's start, the buffer broadcast first)
    workers = 16
    end = base.broadcast_s + base.compute_s
    overlapped = sum(b.bytes * min(1.0, (end - b.start_s) / (b.end_s - b.start_s))
                     for b in base.buckets if b.start_s < end and b.end_s > b.start_s)
    expected = cost * 1e-9 * 2 * (workers - 1) / workers * overlapped
    assert expected > 0
    assert hit.interference_s == pytest.approx(expected, rel=1e-9)
    assert hit.compute_s == pytest.approx(base.compute_s)
    assert hit.iteration_s == pytest.approx(base.broadcast_s + max(base.compute_s + expected,
                                                                   base.compute_s + base.exposed_comm_s)
                                            + base.optimizer_s, rel=1e-9)
    with pytest.raises(ValueError, match="measured_comm_compute_s_per_gbyte"):
        catalog.with_overrides({"schema": "srift.catalog-overrides/1",
                                "instances": {"p3.16xlarge": {"measured_comm_compute_s_per_gbyte": -1}}})


def test_whole_instance_measurement_anchors_that_instance(fresh_profile):
    # gpus > 1: a DDP iteration on all GPUs of one instance. One instance reproduces it exactly
    # (at one batch, and on the line through two batches); more instances add only the network.
    fresh_profile.add_measurement("V100", local_batch=32, iteration_s=0.10)
    fresh_profile.add_measurement("p3.16xlarge", local_batch=32, iteration_s=0.16, gpus=8)
    one = srift.predict(fresh_profile, "1x p3.16xlarge", global_batch=8 * 32)
    assert one.groups[0].compute_source == "measured-instance"
    assert one.iteration_s == pytest.approx(0.16, rel=1e-9)
    assert one.comm_s < 1e-9  # the allreduce inside the instance is in the measured 0.16 s
    # ... so no link bounds the ring (it was "intra-node at 1e9 GB/s", the in-measurement sentinel)
    assert (one.bottleneck, one.ring_gbytes_s, one.bottleneck_group) == ("none", 0.0, -1)
    fresh_profile.add_measurement("p3.16xlarge", local_batch=64, iteration_s=0.28, gpus=8)
    mid = srift.predict(fresh_profile, "1x p3.16xlarge", global_batch=8 * 48)
    assert mid.iteration_s == pytest.approx(0.16 + (0.28 - 0.16) * 16 / 32, rel=1e-9)
    two = srift.predict(fresh_profile, "2x p3.16xlarge", global_batch=16 * 48)
    assert two.comm_s > 0 and two.iteration_s >= mid.iteration_s - 1e-12
    assert two.iteration_s <= mid.iteration_s + two.comm_s + 1e-12
    # other instance types of the same GPU keep the single-GPU anchor
    assert srift.predict(fresh_profile, "1x p3.2xlarge", global_batch=32).iteration_s == pytest.approx(0.10)
    # the interval of a measured instance is the measurement noise, not a model's residuals;
    # across instances the network it did not see widens it to instance anchoring's held-out
    # residuals on the Sia traces (shipped with the models)
    from srift.learn import default_models

    assert one.iteration_p10_s < one.iteration_s < one.iteration_p90_s
    q10, q90 = default_models().instance_anchor_interval()
    assert 0 < q10 < 1 < q90
    slow = max(two.groups, key=lambda g: g.compute_s)
    assert two.iteration_p90_s == pytest.approx(two.iteration_s + slow.compute_s * (q90 - 1), rel=1e-9)
    assert two.iteration_p10_s == pytest.approx(two.iteration_s - slow.compute_s * (1 - q10), rel=1e-9)


@pytest.mark.parametrize(("device", "gpus", "fragment"), [
    ("V100", 8, r"measurements\[0\]\.device.*not one"),
    ("p3.16xlarge", 4, r"measurements\[0\]\.gpus.*8 GPUs"),
])
def test_whole_instance_measurement_must_name_a_whole_instance(fresh_profile, device, gpus, fragment):
    fresh_profile.add_measurement(device, local_batch=32, iteration_s=0.2, gpus=gpus)
    with pytest.raises(ValueError, match=fragment):
        srift.predict(fresh_profile, "1x p3.16xlarge", global_batch=256)


def test_measurement_on_a_gpu_the_catalog_does_not_know_is_refused(fresh_profile):
    # It used to be dropped without a word, planning as if it were not there.
    fresh_profile.add_measurement("A10GG", local_batch=32, iteration_s=0.2)
    with pytest.raises(ValueError, match=r"measurements\[0\]\.device: gpu = 'A10GG'.*did you mean 'A10G'"):
        srift.predict(fresh_profile, "1x g5.xlarge", global_batch=32)
    with pytest.raises(ValueError, match=r"measurements\[0\]\.device"):
        srift.recommend(fresh_profile, global_batch=32, iterations=1000, deadline_hours=12)


def test_measurement_gpus_must_be_a_positive_integer(fresh_profile):
    with pytest.raises(ValueError, match="gpus"):
        fresh_profile.add_measurement("p3.16xlarge", local_batch=32, iteration_s=0.2, gpus=0)


def test_one_measured_batch_carries_to_others_along_the_learned_curve(fresh_profile):
    # srift::LearnedCompute note "measured batch shape": one batch measured scales the
    # no-measurement model's batch curve through it
    from srift.engine import Engine, EngineConfig

    catalog = Catalog.default()
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)
    measured, source = Engine(fresh_profile, catalog).compute_model("T4")
    assert source == "measured"
    assert measured.compute_s(32) + measured.optimizer_s == pytest.approx(0.21, rel=1e-12)
    bare = srift.Profile.from_dict(fresh_profile.to_dict())
    bare.measurements.clear()
    learned, _ = Engine(bare, catalog).compute_model("T4")
    roof, _ = Engine(bare, catalog, EngineConfig(compute_model="roofline")).compute_model("T4")

    def through_the_measurement(m, batch):  # the curve scaled to pass through 0.21 s at 32
        return (m.compute_s(batch) + m.optimizer_s) * 0.21 / (m.compute_s(32) + m.optimizer_s)

    for batch in (1, 4, 8, 128, 512, 1000):
        t = measured.compute_s(batch) + measured.optimizer_s
        assert t == pytest.approx(through_the_measurement(learned, batch), rel=1e-9)
        assert t != pytest.approx(through_the_measurement(roof, batch), rel=1e-3)  # not the roofline's shape
    # the terms split as the roofline splits them (forward / backward shares)
    assert (measured.forward_per_sample_s / (measured.forward_per_sample_s + measured.backward_per_sample_s)
            == pytest.approx(roof.forward_per_sample_s / (roof.forward_per_sample_s + roof.backward_per_sample_s),
                             rel=1e-9))
    # the roofline engine keeps the roofline's curve
    only_roof, _ = Engine(fresh_profile, catalog, EngineConfig(compute_model="roofline")).compute_model("T4")
    assert only_roof.compute_s(128) + only_roof.optimizer_s == pytest.approx(through_the_measurement(roof, 128), rel=1e-9)


def test_one_measured_batch_band_widens_away_from_it(fresh_profile):
    # band.hpp note "measured batch band": the measurement's noise and the per-e-fold band in quadrature
    from srift.learn import default_models

    (n10, n90), (e10, e90) = default_models().measured_band()
    noise = f"x{n10:.2f}-x{n90:.2f}"
    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)
    at = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32)
    assert at.band_from == [f"compute on g4dn.xlarge (measured): {noise} of its compute"]
    away = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=128)
    folds = math.log(4)
    p90 = math.exp(math.hypot(math.log(n90), folds * math.log(e90)))
    p10 = math.exp(-math.hypot(math.log(n10), folds * math.log(e10)))
    assert away.iteration_p90_s == pytest.approx(away.iteration_s + away.compute_s * (p90 - 1), rel=1e-12)
    assert away.iteration_p10_s == pytest.approx(away.iteration_s - away.compute_s * (1 - p10), rel=1e-12)
    assert "measured at local batch 32, predicted at 128" in away.band_from[0]
    # two measured batches fit their own line: the band stays the noise
    fresh_profile.add_measurement("T4", local_batch=64, iteration_s=0.40)
    two = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=128)
    assert two.band_from == [f"compute on g4dn.xlarge (measured): {noise} of its compute"]
    # EngineConfig overrides what `srift train` fitted, one factor at a time
    from srift.engine import Engine, EngineConfig

    engine = Engine(fresh_profile, Catalog.default(), EngineConfig(measured_p90=1.1))
    assert engine.measured_band() == ((n10, 1.1), (e10, e90))
    for bad in ({"measured_p10": 1.2}, {"measured_p90": 0.9}, {"measured_batch_p90_per_e_fold": float("nan")},
                {"measured_batch_p10_per_e_fold": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Engine(fresh_profile, Catalog.default(), EngineConfig(**bad))


def test_a_measured_batch_band_that_overflows_is_refused_naming_it(fresh_profile) -> None:
    """EngineConfig(measured_batch_p90_per_e_fold=1e308) is finite and >= 1, valid alone, but
    raised to the ln 4 e-folds from the measured batch it made a p90 of inf s, and recommend
    read that band as a 0.5 chance of meeting any deadline (band.cpp note "measured batch
    band"). Refused, naming the factor and the batches; 1e20 stays a wide, finite band."""
    from srift.engine import EngineConfig

    fresh_profile.add_measurement("T4", local_batch=32, iteration_s=0.21)
    with pytest.raises(ValueError, match=r"^bands\[0\]\.per_e_fold\.p90 = 1e\+308 per e-fold over 1\.386294361 "
                                         r"e-folds \(local batch 128, measured at 32\): the iteration's p90 is not a "
                                         r"finite number"):
        srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=128,
                      config=EngineConfig(measured_batch_p90_per_e_fold=1e308))
    at = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=32,  # at the measured batch: not raised
                       config=EngineConfig(measured_batch_p90_per_e_fold=1e308))
    assert math.isfinite(at.iteration_p90_s)
    wide = srift.predict(fresh_profile, "1x g4dn.xlarge", global_batch=128,
                         config=EngineConfig(measured_batch_p90_per_e_fold=1e20))
    assert math.isfinite(wide.iteration_p90_s) and wide.iteration_p90_s > 1e20


@pytest.mark.parametrize("fields, fragment", [
    # an efficiency of 0 or NaN had become a made-up 1 GB/s link, 1e-300 a negative interference
    ({"nvlink_efficiency": 0}, r"EngineConfig.nvlink_efficiency must be in \[0.01, 2\], got 0"),
    ({"nvlink_efficiency": 1e-300}, r"EngineConfig.nvlink_efficiency must be in \[0.01, 2\]"),
    ({"usable_memory_fraction": 1.5}, r"EngineConfig.usable_memory_fraction must be in \[0.01, 1\]"),
    ({"pcie_model": "v0", "pcie_efficiency": float("nan")}, "EngineConfig.pcie_efficiency must be a finite number"),
    ({"efa_network_efficiency": 50}, r"EngineConfig.efa_network_efficiency must be in \[0.01, 2\], got 50"),
    ({"network_efficiency": "0.8"}, "EngineConfig.network_efficiency must be a finite number, got '0.8'"),
    ({"usable_memory_fraction": float("nan")}, "EngineConfig.usable_memory_fraction must be a finite number"),
    ({"network_latency_s": -1e-6}, "EngineConfig.network_latency_s must be >= 0"),
    ({"roofline": "x"}, "EngineConfig.roofline must be a dict"),
    ({"roofline": {"memory_efficiency": "a"}}, r"EngineConfig.roofline\['memory_efficiency'\] must be a finite number"),
])
def test_engine_config_out_of_range_names_the_field(resnet50_profile, fields, fragment):
    from srift.engine import EngineConfig

    with pytest.raises(ValueError, match=fragment):
        srift.predict(resnet50_profile, "1x p3.16xlarge", 64, config=EngineConfig(**fields))


def test_engine_and_predict_arguments_of_the_wrong_type_are_named(resnet50_profile):
    from srift.engine import Engine

    catalog = Catalog.default()
    for args, fragment in (((None, catalog), "profile must be a Profile"), ((resnet50_profile, None), "catalog must be a Catalog"),
                           ((resnet50_profile, catalog, "x"), "config must be an EngineConfig")):
        with pytest.raises(ValueError, match=fragment):  # was an AttributeError deep inside
            Engine(*args)
    with pytest.raises(ValueError, match="timeline must be True or False, got 'yes'"):
        srift.predict(resnet50_profile, "1x p3.2xlarge", 32, timeline="yes")


def test_ddp_buckets_and_allreduce_dtype_as_the_code_builds_them():
    """The DDP a user's code builds decides the exposed allreduce: one bucket larger than the
    gradients (apex's message_size=250M, bucket_cap_mb=1000) starts its allreduce only after
    the backward, so all of it is exposed; a compression hook (allreduce_dtype) halves the bytes
    every allreduce carries on the same buckets (Profile note "allreduce dtype")."""
    model, batch, loss = srift.zoo.build("bert_base", 4, device="meta")
    runs = {}
    for label, kw in (("default", {}), ("one_bucket", {"bucket_cap_mb": 1000, "first_bucket_mb": 1000}),
                      ("bf16_hook", {"allreduce_dtype": "bf16"})):
        prof = srift.profile(model, batch, loss, device="meta", **kw)
        prof.add_measurement("V100-16GB", 32, 0.25)
        runs[label] = srift.predict(prof, "2x p3.16xlarge", 512, timeline=True)
    default, one, bf16 = runs["default"], runs["one_bucket"], runs["bf16_hook"]
    assert len(one.buckets) == 1 and len(default.buckets) > 1
    assert one.exposed_comm_s == pytest.approx(one.comm_s, rel=1e-9)
    assert one.exposed_comm_s > default.exposed_comm_s
    assert one.buckets[0].start_s >= one.compute_s - 1e-12  # the whole backward comes first
    assert [b.bytes for b in bf16.buckets] == pytest.approx([b.bytes / 2 for b in default.buckets], rel=1e-12)
    assert bf16.comm_s < default.comm_s and bf16.iteration_s < default.iteration_s
    assert one.iteration_s > default.iteration_s


def test_a_region_that_contradicts_the_clusters_is_refused(resnet50_profile):
    # --region used to win silently over the cluster's own @region
    with pytest.raises(ValueError, match="region = 'us-east-1', but the cluster says @us-west-2"):
        srift.predict(resnet50_profile, "2x p3.16xlarge @us-west-2", global_batch=64, region="us-east-1")
    pred = srift.predict(resnet50_profile, "2x p3.16xlarge @us-west-2", global_batch=64, region="us-west-2")
    assert pred.region == "us-west-2"


def test_module_buffers_take_gpu_memory(resnet50_profile):
    """Registered buffers (BatchNorm statistics, lookup tables) live on the GPU with the model;
    a 19 GiB buffer was predicted to fit a 16 GiB V100 in 1 GiB."""
    import dataclasses

    import srift

    base = srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=32)
    more = srift.predict(dataclasses.replace(resnet50_profile, buffer_bytes=resnet50_profile.buffer_bytes + 2**30),
                         "1x p3.2xlarge", global_batch=32)
    assert more.groups[0].memory_gib == pytest.approx(base.groups[0].memory_gib + 1.0, rel=1e-9)
    huge = srift.predict(dataclasses.replace(resnet50_profile, buffer_bytes=19 * 2**30), "1x p3.2xlarge",
                         global_batch=32)
    assert not huge.feasible


def test_ddp_broadcasts_the_buffers_before_every_forward(resnet50_profile, catalog):
    """simulator.hpp note "buffer broadcast": DDP's forward_sync_buffers (on by default) sends
    rank 0's buffers down the ring before every iteration's forward: one message per dtype
    (ResNet-50: its BatchNorm statistics in float32, their counters in int64), each
    bytes / ring bandwidth plus a chain's latency through every rank (7 NVLink hops inside
    each p3.16xlarge, 3 NIC hops between the 4), added to the whole iteration."""
    import dataclasses

    import srift
    from srift.engine import Engine

    assert resnet50_profile.forward_sync_buffers is True
    messages = resnet50_profile.buffer_broadcast_bytes
    assert len(messages) == 2 and sum(messages) == resnet50_profile.buffer_bytes
    assert messages[0] == 4 * 2 * 26_560  # running mean and variance of 26,560 BatchNorm channels
    assert messages[1] == 8 * 53          # num_batches_tracked of its 53 BatchNorm layers

    pred = srift.predict(resnet50_profile, "4x p3.16xlarge", global_batch=256, timeline=True)
    off = srift.predict(dataclasses.replace(resnet50_profile, forward_sync_buffers=False), "4x p3.16xlarge",
                        global_batch=256, timeline=True)
    assert off.broadcast_s == 0.0 and pred.broadcast_s > 0
    assert pred.iteration_s == pytest.approx(off.iteration_s + pred.broadcast_s, rel=1e-12)
    assert pred.compute_s == off.compute_s and pred.comm_s == off.comm_s
    assert pred.buckets[0].ready_s == pytest.approx(off.buckets[0].ready_s + pred.broadcast_s, rel=1e-12)
    spec = Engine(resnet50_profile, catalog).instance_spec("p3.16xlarge")
    chain = 4 * 7 * spec.intra.latency + 3 * spec.network.latency
    bandwidth = pred.ring_gbytes_s * 1e9
    assert pred.broadcast_s == pytest.approx(sum(messages) / bandwidth + 2 * chain, rel=1e-9)
    # one GPU broadcasts to nobody
    assert srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=32).broadcast_s == 0.0
    # a profile from before srift recorded the messages: its buffers as one message
    legacy = dataclasses.replace(resnet50_profile, buffer_broadcast_bytes=None)
    assert legacy.broadcast_bytes() == [float(resnet50_profile.buffer_bytes)]
    # a big registered mask (e.g. nanoGPT's causal mask without flash attention) costs more
    big = dataclasses.replace(resnet50_profile, buffer_broadcast_bytes=[*messages, 48 * 2**20])
    slow = srift.predict(big, "4x p3.16xlarge", global_batch=256)
    assert slow.broadcast_s - pred.broadcast_s == pytest.approx(48 * 2**20 / bandwidth + chain, rel=1e-9)


def test_an_empty_region_is_refused_not_read_as_the_cheapest(resnet50_profile, tmp_path, capsys):
    # "" priced silently in the cheapest region; "us-east-1 " (a trailing space) is read as
    # us-east-1, as instance types are
    from srift.cli import main
    from srift.cluster import Cluster

    with pytest.raises(ValueError, match="region: .*got ''"):
        srift.predict(resnet50_profile, "2x p3.2xlarge", global_batch=64, region="")
    with pytest.raises(ValueError, match="region: .*got ''"):
        srift.predict(resnet50_profile, Cluster.parse("2x p3.2xlarge", region=""), global_batch=64)
    assert srift.predict(resnet50_profile, "2x p3.2xlarge", global_batch=64, region="us-east-1 ").region == "us-east-1"
    path = tmp_path / "r50.json"
    resnet50_profile.save(path)
    capsys.readouterr()
    code = main(["predict", "--profile", str(path), "--cluster", "2x p3.2xlarge", "--global-batch", "64",
                 "--region", ""])
    assert code == 2 and "region" in capsys.readouterr().err
    assert srift.predict(resnet50_profile, "2x p3.2xlarge", global_batch=64, region=None).region


def test_prediction_names_the_group_whose_link_bounds_the_ring(resnet50_profile, catalog):
    # the core says which group's link it used; a probed p3.16xlarge NIC (0.5 GB/s) is
    # slower than p3.8xlarge's 10 Gbit/s one (1.0 GB/s achieved)
    probed = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 0.5, "measured_network_latency_us": 100}}})
    pred = srift.predict(resnet50_profile, "1x p3.16xlarge + 1x p3.8xlarge", global_batch=256, catalog=probed)
    assert pred.bottleneck == "network" and pred.ring_gbytes_s == pytest.approx(0.5)
    assert pred.groups[pred.bottleneck_group].instance_type == "p3.16xlarge"
    assert pred.to_dict()["bottleneck_group"] == pred.bottleneck_group
    plain = srift.predict(resnet50_profile, "1x p3.16xlarge + 1x p3.8xlarge", global_batch=256)
    assert plain.groups[plain.bottleneck_group].instance_type == "p3.8xlarge"
    assert srift.predict(resnet50_profile, "1x p3.2xlarge", global_batch=8).bottleneck_group == -1


def test_iterations_past_any_real_run_are_refused_by_the_api_as_by_the_cli(resnet50_profile):
    """1e308 iterations printed 300-digit times and costs; the API, the CLI and sweeps share
    one bound (srift.checks.MAX_ITERATIONS, 1e12)."""
    import pytest

    import srift
    from srift import checks
    from srift.sweep import parse_spec

    prof = resnet50_profile
    assert srift.predict(prof, "1x g5.xlarge", 64, iterations=checks.MAX_ITERATIONS).total_hours > 0
    with pytest.raises(ValueError, match=r"iterations must be at most 1e\+12, got 1e\+308"):
        srift.predict(prof, "1x g5.xlarge", 64, iterations=1e308)
    with pytest.raises(ValueError, match=r"iterations must be at most 1e\+12"):
        srift.recommend(prof, global_batch=64, iterations=1e13, deadline_hours=10)
    with pytest.raises(ValueError, match=r"iterations must be at most 1e\+12"):
        parse_spec({"models": ["resnet50"], "global_batch": 64, "iterations": [1000, 1e13],
                    "constraints": [{"deadline": "10h"}]})


def test_a_cluster_is_read_as_the_catalog_spells_it(resnet50_profile):
    # Instance types and regions are case-insensitive as the CLI reads them: through the API
    # "2X p3.16xlarge" was refused, "P3.16XLARGE" came back as typed and as a group apart from
    # "p3.16xlarge", and "@US-EAST-1" was not in the catalog.
    plain = srift.predict(resnet50_profile, "3x p3.16xlarge:spot @us-east-1", global_batch=96)
    for text in ("3X P3.16XLARGE:SPOT @US-EAST-1", "1x p3.16xlarge:spot + 2x P3.16xlarge:Spot@Us-East-1"):
        pred = srift.predict(resnet50_profile, text, global_batch=96)
        assert pred.to_dict()["cluster"] == "3x p3.16xlarge:spot" and pred.region == "us-east-1"
        assert [(g.instance_type, g.count, g.market) for g in pred.groups] == [("p3.16xlarge", 3, "spot")]
        assert (pred.iteration_s, pred.usd_per_hour) == (plain.iteration_s, plain.usd_per_hour)
    assert srift.predict(resnet50_profile, "3x p3.16xlarge:spot", global_batch=96,
                         region="US-EAST-1").usd_per_hour == plain.usd_per_hour
    with pytest.raises(ValueError, match="region = 'US-EAST-1', but the cluster says @us-west-2"):
        srift.predict(resnet50_profile, "2x p3.16xlarge @us-west-2", global_batch=64, region="US-EAST-1")


def test_predict_prices_in_recommends_regions_unless_told(resnet50_profile):
    # predict priced a cluster in the cheapest of all 28 regions while recommend searches three
    # by default, so predicting recommend's own answer could give another region and price.
    from srift.prediction import DEFAULT_REGIONS

    catalog = Catalog.default()
    moved = 0
    fell_back = 0
    for name in ("g4dn.12xlarge", "g5.2xlarge", "p3.8xlarge", "p3.16xlarge", "p5.4xlarge"):
        for market in ("on-demand", "spot"):
            priced = {r: catalog.price(name, r, market) for r in catalog.regions}
            priced = {r: p for r, p in priced.items() if p is not None}
            home = {r: p for r, p in priced.items() if r in DEFAULT_REGIONS}
            if not priced:
                continue
            suffix = ":spot" if market == "spot" else ""
            pred = srift.predict(resnet50_profile, f"1x {name}{suffix}", global_batch=8)
            expected = min(home or priced, key=lambda r: (home or priced)[r])
            assert pred.region == expected and pred.usd_per_hour == (home or priced)[expected]
            moved += min(priced.values()) < pred.usd_per_hour
            fell_back += not home
    # not vacuous: spot is cheaper outside the default regions for some types (g4dn.12xlarge in
    # me-south-1 at 0.37x), and p5.4xlarge has no spot price in them (the fallback)
    assert moved >= 3 and fell_back >= 1
