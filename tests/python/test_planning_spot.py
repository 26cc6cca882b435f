"""recommend with spot markets, deadline confidence, held groups and constraints."""
from __future__ import annotations

import pytest

import srift
from srift.planning import SpotAssumptions

TYPES = ["p4d.24xlarge", "p3.16xlarge", "p3.8xlarge", "g4dn.12xlarge"]


def _rec(profile, **kw):
    kw.setdefault("regions", ["us-east-1"])
    kw.setdefault("instance_types", TYPES)
    kw.setdefault("max_instances_per_type", 8)
    return srift.recommend(profile, global_batch=256, iterations=200_000, **kw)


def test_spot_plans_carry_their_preemption_estimate(resnet50_profile):
    rec = _rec(resnet50_profile, deadline_hours=48, spot=True)
    assert "spot" in rec.search.markets
    spot_plans = [p for p in [rec.best, *rec.alternatives] if p.uses_spot]
    assert spot_plans, "cheap spot offers in us-east-1 should appear among the cheapest plans"
    for p in spot_plans:
        assert p.interruptions_per_hour > 0
        assert p.total_hours >= p.nominal_hours
        assert p.preemption_p90_hours >= p.nominal_hours


def test_risky_spot_costs_time_and_money(resnet50_profile):
    calm = _rec(resnet50_profile, deadline_hours=48, markets=["spot"])
    risky = _rec(resnet50_profile, deadline_hours=48, markets=["spot"],
                 spot_assumptions=SpotAssumptions(interruptions_per_hour={t: 0.5 for t in TYPES}))
    assert risky.best.total_hours > calm.best.total_hours or risky.best.cluster != calm.best.cluster
    assert risky.best.expected_interruptions > calm.best.expected_interruptions
    assert risky.best.checkpoint_interval_hours > 0


def test_confidence_covers_preemption_and_the_band(resnet50_profile):
    shaky = SpotAssumptions(interruptions_per_hour={t: 0.3 for t in TYPES}, provisioning_s=1800)
    rec = _rec(resnet50_profile, deadline_hours=12, markets=["spot"], spot_assumptions=shaky,
               deadline_confidence=0.9)
    for plan in [rec.best, *rec.alternatives] if rec.best is not None else []:
        assert plan.deadline_probability >= 0.9
        assert plan.nominal_hours <= 12  # the median run fits
        assert plan.to_dict()["deadline_probability"] == plan.deadline_probability
    expected_only = _rec(resnet50_profile, deadline_hours=12, markets=["spot"], spot_assumptions=shaky)
    assert expected_only.best is not None and expected_only.best.total_hours <= 12 + 1e-9
    if rec.best is not None:
        assert rec.best.total_usd >= expected_only.best.total_usd - 1e-9


def test_held_groups_stay_in_every_plan(resnet50_profile):
    rec = _rec(resnet50_profile, deadline_hours=6, held="1x p3.16xlarge @us-east-1")
    for p in [rec.best, *rec.alternatives]:
        counts = {g.instance_type: g.count for g in p.cluster.groups if g.market == "on-demand"}
        assert counts.get("p3.16xlarge", 0) >= 1
        assert p.region == "us-east-1"


@pytest.mark.parametrize("filters", [{"instance_types": ["g4dn.12xlarge", "p3.8xlarge"]},
                                     {"exclude": ["p3.16xlarge"]}])
def test_a_held_type_the_filters_rule_out_is_kept_not_grown(resnet50_profile, filters):
    # replan rented more of a held type that --types left out or --exclude named
    kw = {"instance_types": TYPES, **filters}
    rec = _rec(resnet50_profile, deadline_hours=24, held="1x p3.16xlarge @us-east-1", spot=True, **kw)
    plans = [rec.best, *rec.alternatives]
    assert plans[0] is not None
    for p in plans:
        held = [g for g in p.cluster.groups if g.instance_type == "p3.16xlarge"]
        assert [(g.count, g.market) for g in held] == [(1, "on-demand")]  # no more, and no spot p3.16xlarge
        others = {g.instance_type for g in p.cluster.groups} - {"p3.16xlarge"}
        allowed = set(filters.get("instance_types", TYPES)) - set(filters.get("exclude", []))
        assert others <= allowed


@pytest.mark.parametrize("objective", [{"deadline_hours": 6}, {"budget_usd": 2000}])
def test_a_held_spot_group_without_spot_rents_no_more_spot(resnet50_profile, objective):
    # replan opened the held group's market to every type: 2x p3.16xlarge:spot held, no
    # --spot, gave alternatives with new g4dn/p4d spot groups and a third p3.16xlarge:spot
    rec = _rec(resnet50_profile, held="2x p3.16xlarge:spot @us-east-1", **objective)
    plans = [rec.best, *rec.alternatives]
    assert plans[0] is not None and len(plans) > 1
    for p in plans:
        spot = [(g.instance_type, g.count) for g in p.cluster.groups if g.market == "spot"]
        assert spot == [("p3.16xlarge", 2)], p.cluster
    with_spot = _rec(resnet50_profile, held="2x p3.16xlarge:spot @us-east-1", spot=True, **objective)
    grown = [p for p in [with_spot.best, *with_spot.alternatives]
             if [(g.instance_type, g.count) for g in p.cluster.groups if g.market == "spot"] != [("p3.16xlarge", 2)]]
    assert grown  # with --spot new spot capacity is fair game


def test_why_none_names_the_held_group_whose_nic_bounds_every_plan(resnet50_profile):
    """A held g5.xlarge (one A10G, a 2.5 Gbit/s NIC) stays in every plan, so its NIC bounds
    every plan's allreduce: the answer says so instead of only "the fastest takes 13 h"."""
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=100_000, deadline_hours=0.5,
                          regions=["us-east-1"], held="1x g5.xlarge @us-east-1")
    assert rec.best is None
    assert "every plan keeps the held 1x g5.xlarge" in rec.why_none
    assert "the network link of g5.xlarge" in rec.why_none and "bounds the allreduce" in rec.why_none
    assert any(g.instance_type == "g5.xlarge" for g in rec.closest.cluster.groups)


def test_held_group_in_several_regions_needs_one(resnet50_profile):
    with pytest.raises(ValueError, match="say which one with '@REGION'"):
        srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=6,
                        regions=["us-east-1", "us-west-2"], held="1x p3.16xlarge")


def test_held_instances_are_not_moved_to_another_region(resnet50_profile):
    # regions that leave the held instances' region out used to move them there
    with pytest.raises(ValueError, match="held instances run in eu-west-1, but regions is us-east-1"):
        srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=6,
                        regions=["us-east-1"], held="1x g5.xlarge @eu-west-1")
    # named as held's region (it read as a `regions` the caller never gave), in any case
    with pytest.raises(ValueError, match=r"^held = '1x g5.xlarge @MARS-1': regions \['MARS-1'\] are not in the catalog"):
        srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=6,
                        regions=["us-east-1"], held="1x g5.xlarge @MARS-1")
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=6,
                          regions=["us-east-1", "eu-west-1"], held="1x g5.xlarge @eu-west-1")
    assert rec.best.cluster.region == "eu-west-1" and rec.search.regions == ["eu-west-1"]


def test_why_none_names_a_held_group_the_limits_exclude(resnet50_profile):
    # It used to read "no plan within the limits ... holds the global batch".
    def why(**kw):
        kw = {"global_batch": 256, "iterations": 1000, "deadline_hours": 12, **kw}
        rec = srift.recommend(resnet50_profile, **kw)
        assert rec.best is None
        return rec.why_none

    assert "held 30x g5.xlarge, more than that offer's cap of 4 instances" in why(
        held="30x g5.xlarge @us-east-1", max_instances_per_type=4)
    assert "below min_gpu_memory (40 GiB)" in why(held="2x g5.xlarge @us-east-1", min_gpu_memory_gib=40)
    assert "held groups' 5 instances, more than max_instances (3)" in why(
        held="5x g5.xlarge @us-east-1", max_instances=3)
    assert "held groups' 8 GPUs, more than the global batch of 4 samples" in why(
        held="1x p4d.24xlarge @us-east-1", global_batch=4)


def test_a_far_deadline_with_a_confidence_returns(resnet50_profile):
    # The Poisson CDF of a spot plan's interruptions summed toward a count of 9e15 and never
    # returned (csrc/spot.cpp); now the deadline is simply met.
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=1e8, deadline_hours=99999999999,
                          regions=["us-east-1"], spot=True, deadline_confidence=0.9,
                          instance_types=["g5.xlarge", "p3.2xlarge"])
    assert rec.best is not None and rec.best.deadline_probability == pytest.approx(1.0)


def test_min_gpu_memory_filters_gpus(resnet50_profile, catalog):
    rec = _rec(resnet50_profile, deadline_hours=48, min_gpu_memory_gib=30)
    for p in [rec.best, *rec.alternatives]:
        for g in p.prediction.groups:
            assert g.gpu_memory_gib >= 30


def test_search_is_exact_and_reports_it(resnet50_profile):
    rec = _rec(resnet50_profile, deadline_hours=24, max_types=3)
    assert rec.search.optimal and rec.search.gap == 0
    assert rec.search.space >= rec.search.evaluated
    for bad in (1.5, 0.3, 0.0):
        with pytest.raises(ValueError, match=r"deadline_confidence must be a number in \[0.5, 1\)"):
            _rec(resnet50_profile, deadline_hours=24, deadline_confidence=bad)
    with pytest.raises(ValueError, match="max_types must be an integer in 1..16"):
        _rec(resnet50_profile, deadline_hours=24, max_types=0)


def test_the_bound_spot_functions_refuse_what_estimate_spot_refuses():
    # spot_expected_s read a NaN rate as no preemption and returned negative or NaN times;
    # poisson_cdf of a negative mean was 1.
    from srift import _core

    p = _core.SpotParams()
    nan, inf = float("nan"), float("inf")
    for nominal, rate, field in ((1e5, nan, "interruptions_per_hour"), (1e5, inf, "interruptions_per_hour"),
                                 (1e5, -0.1, "interruptions_per_hour"), (-5.0, 0.1, "nominal_s must be >= 0, got -5"),
                                 (-inf, 0.1, "nominal_s"), (nan, 0.0, "nominal_s")):
        with pytest.raises(ValueError, match=field):
            _core.spot_expected_s(nominal, rate, p)
        with pytest.raises(ValueError, match=field.split()[0]):
            _core.estimate_spot(nominal, rate, p)  # the same rule
    with pytest.raises(ValueError, match="mean must be finite and >= 0, got -5"):
        _core.poisson_cdf(3, -5.0)
    with pytest.raises(ValueError, match="mean must be >= 0"):
        _core.poisson_quantile(-5.0, 0.5)
    assert _core.spot_expected_s(3600.0, 0.0, p) == 3600.0
    assert _core.poisson_cdf(3, 0.0) == 1.0


def test_a_spot_rate_no_run_outlives_is_said_so_not_inf_hours(resnet50_profile):
    # "the fastest takes inf h": restarts that cost more than the time between interruptions
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=1e5, deadline_hours=12, markets=["spot"],
                          instance_types=["p4d.24xlarge"], regions=["us-east-1"],
                          spot_assumptions=SpotAssumptions(interruptions_per_hour={"p4d.24xlarge": 1e6}))
    assert rec.best is None
    assert "never finishes at its spot interruption rate" in rec.why_none
    assert "inf h" not in rec.why_none
