"""Plan tables, the "why it won" line, explanations and intervals."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from srift import report
from srift.prediction import predict
from srift.planning import recommend

TYPES = ["g4dn.xlarge", "g5.xlarge", "g5.12xlarge", "p3.8xlarge"]


@pytest.fixture(scope="module")
def cheapest(resnet50_profile):
    return recommend(resnet50_profile, global_batch=256, iterations=100_000, deadline_hours=12,
                     instance_types=TYPES, top_k=6)


@pytest.fixture(scope="module")
def fastest(resnet50_profile):
    return recommend(resnet50_profile, global_batch=256, iterations=100_000, budget_usd=100,
                     instance_types=TYPES, top_k=4)


def test_plan_table_one_row_per_group(cheapest):
    plans = [cheapest.best, *cheapest.alternatives]
    rows = report.plan_rows(plans)
    assert len(rows) == sum(len(p.cluster.groups) for p in plans)
    first = rows[0]
    best = cheapest.best
    assert first[0] == 1 and first[1] == best.cluster.groups[0].instance_type and first[3] == best.region
    assert first[4] == best.cluster.groups[0].count
    assert first[7] == report.usd(best.total_usd) and first[9] == report.usd(best.usd_per_1k_samples)
    text = report.plan_table(plans)
    lines = text.splitlines()
    assert lines[0].split()[:5] == ["#", "type", "market", "region", "count"]
    assert len({len(line) for line in lines[:2]}) == 1  # header and rule aligned


def test_why_line_names_the_runner_up_and_the_reason(cheapest, fastest):
    why = report.why_best(cheapest.best, cheapest.alternatives, "min_cost")
    runner = next(p for p in cheapest.alternatives
                  if sorted(map(str, p.cluster.groups)) != sorted(map(str, cheapest.best.cluster.groups)))
    assert "cheaper than" in why and " ".join(str(g) for g in runner.cluster.groups) in why
    assert "because" in why
    pct = float(why.split("%")[0])
    assert pct == pytest.approx(100 * (runner.total_usd - cheapest.best.total_usd) / runner.total_usd, abs=0.06)
    why = report.why_best(fastest.best, fastest.alternatives, "max_throughput")
    assert "more samples/s than" in why or "ties" in why
    assert report.why_best(cheapest.best, [], "min_cost") == "the only plan that meets the constraints"


def test_a_cost_tie_prints_both_prices_when_the_table_does():
    def plan(instance, usd, hours):
        return SimpleNamespace(cluster=SimpleNamespace(groups=[instance]), region="us-east-1", total_usd=usd,
                               total_hours=hours, usd_per_hour=usd / hours, prediction=None)

    best, other = plan("1x g7e.2xlarge", 26.3126, 7.82), plan("2x g5.2xlarge", 26.3152, 10.86)
    assert "ties on cost with 2x g5.2xlarge in us-east-1 ($26.31 vs $26.32)" in report._versus(best, other, "min_cost")
    same = plan("2x g5.2xlarge", 26.3127, 10.86)
    assert "($26.31) and finishes no later" in report._versus(best, same, "min_cost")
    # a tie the search broke on cost alone may finish later: it says so (it said "no later")
    sooner = plan("2x g5.2xlarge", 26.3127, 7.80)
    assert report._versus(best, sooner, "min_cost").endswith("($26.31), cheaper by 0.0004%, though it finishes 0.3% later")


def test_data_size_reads_in_binary_units():
    assert [report.data_size(b) for b in (512, 212_904, 48 * 2**20, 1.5 * 2**30, float("nan"))] == [
        "512 B", "208 KiB", "48.0 MiB", "1.5 GiB", "-"]


def test_speed_reason_names_the_buffer_broadcast_when_it_decides():
    def plan(compute, exposed, buffers, workers=16):
        return SimpleNamespace(prediction=SimpleNamespace(compute_s=compute, exposed_comm_s=exposed,
                                                          broadcast_s=buffers, optimizer_s=0.002, workers=workers,
                                                          bottleneck="network"))

    why = report._speed_reason(plan(0.1, 0.02, 0.001), plan(0.1, 0.02, 0.03))
    assert why.startswith("DDP's buffer broadcast takes 30.0 ms per iteration on the runner-up vs 1.0 ms")
    assert "communication exposes" in report._speed_reason(plan(0.1, 0.02, 0.001), plan(0.1, 0.06, 0.002))


def test_explain_breakdown(cheapest, catalog):
    text = report.explain_prediction(cheapest.best.prediction, catalog)
    for needle in ("compute", "exposed comm", "optimizer", "bottleneck link:", "headroom", "where the time goes"):
        assert needle in text
    g = cheapest.best.prediction.groups[0]
    assert report.gib(g.gpu_memory_gib - g.memory_gib) in text


def test_bottleneck_names_the_slow_nic(resnet50_profile, catalog):
    pred = predict(resnet50_profile, "2x p3.16xlarge + 2x p4d.24xlarge", 256)
    assert pred.bottleneck == "network"
    text = report.bottleneck_link(pred, catalog)
    slow = min((catalog.instance(g.instance_type) for g in pred.groups), key=lambda i: i.network_gbps)
    assert f"{slow.network_gbps:g} Gbit/s NIC of {slow.name}" in text


def test_interval_uses_p10_p90_when_present():
    pred = SimpleNamespace(iteration_s=0.2, total_hours=10.0)
    assert report.interval(pred) == "10.00 h"
    pred = SimpleNamespace(iteration_s=0.2, total_hours=10.0, iteration_p10_s=0.18, iteration_p90_s=0.25)
    assert report.interval(pred) == "10.00 h (9.00-12.50 h)"
    pred = SimpleNamespace(iteration_s=0.2, total_hours=1.0, iteration_p10_s=0.1, iteration_p90_s=0.4)
    assert report.interval(pred) == "1.00 h (30.0 min-2.00 h)"


def test_units():
    assert report.hours(0.5) == "30.0 min" and report.hours(3) == "3.00 h" and report.hours(72) == "3.0 d"
    # under a minute in seconds: a 2 s deadline read "0.0 min"
    assert report.hours(2 / 3600) == "2.000 s" and report.hours(0.1 / 3600) == "100.0 ms"
    assert report.usd(1234.5) == "$1,234.50" and report.usd(0.01234) == "$0.0123" and report.usd(None) == "-"
    assert report.seconds(0.0123) == "12.3 ms" and report.rate(float("nan")) == "-"
    # iteration counts: a fraction of an iteration printed "0 iterations"
    assert report.count(0.5) == "0.5" and report.count(12.25) == "12.25" and report.count(100000) == "100,000"
    assert report.count(1234.6) == "1,235" and report.count(None) == "-"


def test_rich_tables_only_when_asked():
    rows, headers = [(1, "a")], ["n", "name"]
    plain = report.table(rows, headers, right=[0])
    assert plain.splitlines()[1].startswith("-")
    try:
        assert report.use_rich(True)
        fancy = report.table(rows, headers, right=[0])
        assert "name" in fancy and "\x1b[" in fancy  # styled for a terminal
    finally:
        report.use_rich(False)
    assert report.table(rows, headers, right=[0]) == plain


def test_small_differences_do_not_read_zero_percent():
    # a 1e6-sample plan beat its runner-up by finishing 0.14% sooner: "0%" hid why
    assert report._share(0.0014) == "0.1%"
    assert report._share(-0.0004) == "-0.04%"
    assert report._share(0.0) == "0%"
    assert report._share(0.27) == "27%"
    assert report._share(0.00996) == "1%"


def test_a_spot_plan_under_a_budget_wins_on_expected_time_and_says_so():
    # the search ranks spot plans by expected time with preemption; "why" compared the
    # uninterrupted samples/s and printed "-7.5% more samples/s than ..."
    def plan(groups, region, nominal_h, total_h, samples_per_s, spot):
        return SimpleNamespace(cluster=SimpleNamespace(groups=groups), region=region, uses_spot=spot,
                               nominal_hours=nominal_h, total_hours=total_h, samples_per_s=samples_per_s,
                               total_usd=100.0, usd_per_hour=10.0, prediction=None)

    best = plan(["9x p4d.24xlarge:spot"], "us-east-1", 5.0, 5.2, 26_173.0, True)
    other = plan(["9x p4d.24xlarge:spot", "1x p4d.24xlarge"], "us-east-1", 4.6, 5.6, 28_303.9, True)
    why = report._versus(best, other, "max_throughput")
    # 1 - 5.2 / 5.6: how much sooner (it printed 5.6 / 5.2 - 1, how much longer the other takes)
    assert why.startswith("finishes 7.1% sooner than") and "in expectation (5.20 h vs 5.60 h with preemption)" in why
    assert "preemption costs it 12.0 min where it costs the runner-up 1.00 h" in why
    assert "more samples/s" not in why
    on_demand = plan(["9x p4d.24xlarge"], "us-east-1", 5.2, 5.2, 26_173.0, False)
    assert report._versus(on_demand, other, "max_throughput").endswith(
        "because it is on demand, while preemption costs the runner-up 1.00 h")


def test_a_tie_with_the_twin_is_said_once():
    twin = SimpleNamespace(cluster=SimpleNamespace(groups=["1x g5.xlarge"]), region="us-east-2", total_usd=0.6324,
                           usd_per_hour=1.0, total_s=3600.0, prediction=None)
    best = SimpleNamespace(**{**vars(twin), "region": "us-east-1"})
    why = report.why_best(best, [twin], "min_cost")
    assert why == "ties with the same instances in us-east-2 ($0.6324 each)"


def test_bottleneck_names_the_link_the_simulator_used(resnet50_profile, catalog):
    # a probed 0.5 GB/s p3.16xlarge NIC bounds the ring; the text named p3.8xlarge's nominally
    # slower 10 Gbit/s NIC (1.0 GB/s achieved) next to 0.5 GB/s
    probed = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 0.5, "measured_network_latency_us": 100}}})
    cluster = "1x p3.16xlarge + 1x p3.8xlarge"
    pred = predict(resnet50_profile, cluster, 256, catalog=probed)
    text = report.bottleneck_link(pred, probed)
    assert text == "network at 0.5 GB/s achieved (the 25 Gbit/s NIC of p3.16xlarge, probed)"
    assert "p3.8xlarge" not in report.explain_prediction(pred, probed).split("bottleneck link:")[1].splitlines()[0]
    plain = predict(resnet50_profile, cluster, 256)
    assert report.bottleneck_link(plain, catalog) == "network at 1.0 GB/s achieved (the 10 Gbit/s NIC of p3.8xlarge)"
    # a figure probed over loopback is said to be one (a review: it read as the NIC's)
    lo = probed.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "p3.16xlarge": {"measured_network_gbytes_s": 0.5, "measured_network_over": "loopback"}}})
    with pytest.warns(UserWarning, match=r"the network link of p3.16xlarge, 0.5 GB/s, was probed over loopback"):
        pred = predict(resnet50_profile, cluster, 256, catalog=lo)
    assert report.bottleneck_link(pred, lo) == ("network at 0.5 GB/s achieved (the network link of p3.16xlarge as "
                                                "probed over loopback on one host, not its 25 Gbit/s NIC)")
    assert ("network link of p3.16xlarge: 0.5 GB/s probed over loopback on one host (srift probe-network --loopback), "
            "not across its 25 Gbit/s NIC") in report.explain_prediction(pred, lo)
    import warnings

    with warnings.catch_warnings():  # one instance: no network, nothing to say
        warnings.simplefilter("error")
        assert "loopback" not in report.explain_prediction(predict(resnet50_profile, "1x p3.16xlarge", 64, catalog=lo),
                                                           lo)
    # a prediction without the simulator's group (built by hand) keeps the nominal guess
    guess = SimpleNamespace(**{**vars(plain), "bottleneck_group": -1})
    assert "10 Gbit/s NIC of p3.8xlarge" in report.bottleneck_link(guess, catalog)


def test_predict_text_says_a_spot_cluster_is_priced_uninterrupted(resnet50_profile):
    # predict and recommend gave different totals for one spot plan without saying why
    import srift
    from srift import report

    spot = report.prediction_text(srift.predict(resnet50_profile, "2x p4d.24xlarge:spot", 256, iterations=1e5,
                                                region="us-east-1"))
    assert "spot: uninterrupted; recommend and pareto add the expected preemption" in spot
    plain = report.prediction_text(srift.predict(resnet50_profile, "2x p4d.24xlarge", 256, iterations=1e5,
                                                 region="us-east-1"))
    assert "spot:" not in plain


@pytest.mark.parametrize("value, thresholds, text", [
    (0.899, (0.9,), "89.9%"), (0.8999, (0.9,), "89.99%"), (0.9, (0.9,), "90%"), (0.95, (0.9,), "95%"),
    (0.7496, (0.9, 0.75), "74.96%"), (0.123, (0.9,), "12%"), (float("nan"), (0.9,), "unknown"), (None, (), "unknown"),
    # never 100% short of certain, never 0% above nothing, never a rounded threshold
    (0.99669, (0.9,), "99.7%"), (0.99999912, (0.9,), "> 99.999%"), (1.0, (0.9,), "100%"),
    (0.89999999, (0.9,), "< 90%"), (1e-7, (0.9,), "< 0.001%"), (0.0, (0.9,), "0%")])
def test_chance_never_rounds_across_a_threshold(value, thresholds, text):
    from srift import report

    assert report.chance(value, *thresholds) == text


def _pred(compute=0.1, exposed=0.01, buffers=0.0, optimizer=0.002, interference=0.0, workers=8):
    return SimpleNamespace(compute_s=compute, exposed_comm_s=exposed, broadcast_s=buffers, optimizer_s=optimizer,
                           interference_s=interference, workers=workers, bottleneck="network")


def _plan(groups, usd, hours, usd_per_hour, prediction=None, spot=False, nominal=None):
    return SimpleNamespace(cluster=SimpleNamespace(groups=groups), region="us-east-1", total_usd=usd,
                           total_hours=hours, usd_per_hour=usd_per_hour, prediction=prediction or _pred(),
                           uses_spot=spot, nominal_hours=hours if nominal is None else nominal,
                           samples_per_s=1000.0 / hours)


def test_speed_reason_names_the_part_that_differs_most():
    # the whole gap was the optimizer step, and "compute takes 89.2 ms per iteration vs 89.2 ms" was printed
    why = report._speed_reason(SimpleNamespace(prediction=_pred(optimizer=0.0028)),
                               SimpleNamespace(prediction=_pred(optimizer=0.0040)))
    assert why == "its optimizer step takes 2.8 ms vs 4.0 ms on the runner-up"
    why = report._speed_reason(SimpleNamespace(prediction=_pred(interference=0.001)),
                               SimpleNamespace(prediction=_pred(interference=0.008)))
    assert why == "collectives take 1.0 ms of compute on shared cores vs 8.0 ms on the runner-up"
    # as many digits as tell two times apart: "1.0 ms vs 1.0 ms" said nothing
    why = report._speed_reason(SimpleNamespace(prediction=_pred(exposed=0.000955)),
                               SimpleNamespace(prediction=_pred(exposed=0.001024)))
    assert why == "network communication exposes 1.02 ms per iteration on the runner-up vs 0.95 ms"


def test_same_speed_cheaper_rate_is_not_called_faster():
    best = _plan(["1x g5.xlarge"], 2.95, 2.93, 1.006)
    other = _plan(["1x g5.2xlarge"], 3.55, 2.93, 1.212)
    why = report._versus(best, other, "min_cost")
    assert why.endswith("because it runs as fast and costs 17% less per hour ($1.01/h vs $1.21/h)")
    assert "faster" not in why
    faster = _plan(["1x g5.xlarge"], 2.90, 2.88, 1.006)
    same_rate = _plan(["1x g5.4xlarge"], 3.62, 3.6, 1.006)
    assert "it finishes 20% sooner at the same hourly rate (" in report._versus(faster, same_rate, "min_cost")


def test_top_one_is_not_called_the_only_plan():
    best = _plan(["1x g5.xlarge"], 2.95, 2.93, 1.006)
    assert report.why_best(best, [], "min_cost", top_k=1) == (
        "the cheapest plan that meets the constraints (no runner-up was asked for, so none is compared)")
    assert report.why_best(best, [], "max_throughput", top_k=1).startswith("the fastest plan that meets")
    # asked for more and got one back: it is the only one
    assert report.why_best(best, [], "min_cost", top_k=3) == "the only plan that meets the constraints"


def test_explain_adds_interference_and_says_when_the_global_batch_fits(resnet50_profile, catalog):
    pred = predict(resnet50_profile, "2x g4dn.12xlarge", 16, catalog=catalog)
    text = report.explain_prediction(pred, catalog)
    assert "the whole global batch (16) would fit on one" in text and "local batch up to 16" not in text
    overridden = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "g4dn.12xlarge": {"measured_comm_compute_s_per_gbyte": 0.05}}})
    pred = predict(resnet50_profile, "2x g4dn.12xlarge", 256, catalog=overridden)
    assert pred.interference_s > 0
    line = next(x for x in report.explain_prediction(pred, overridden).splitlines() if x.startswith("where"))
    shares = [float(s.split("%")[0].split()[-1]) for s in line.split(";")[0].split(",")]
    assert "interference" in line and sum(shares) == pytest.approx(100, abs=len(shares) * 0.5)


def test_tiny_costs_keep_two_significant_digits():
    assert report.usd(5.04e-6) == "$0.0000050" and report.usd(0.00012) == "$0.0001" and report.usd(0.0) == "$0.0000"
    assert report.usd(1.2e-13) == "$0.000000000000"  # past 12 decimals: as small as a cent's trillionth gets
