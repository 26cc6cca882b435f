"""srift.recommend and srift.pareto equal brute force over srift.predict on small spaces."""
from __future__ import annotations

import itertools
import json
import math

import pytest

import srift
from srift.cluster import Cluster, ClusterGroup

TYPES = ["g4dn.xlarge", "g5.xlarge", "p3.2xlarge", "g4dn.12xlarge"]
REGION = "us-east-1"
CAP = 3


def all_plans(profile, catalog, global_batch, iterations):
    """Every plan of 1-2 types x 1..CAP instances, predicted one by one."""
    plans = []
    singles = [(t, n) for t in TYPES for n in range(1, CAP + 1)]
    candidates = [[s] for s in singles]
    for (a, b) in itertools.combinations(TYPES, 2):
        for na, nb in itertools.product(range(1, CAP + 1), repeat=2):
            candidates.append([(a, na), (b, nb)])
    for groups in candidates:
        cluster = Cluster(tuple(ClusterGroup(t, n) for t, n in groups), REGION)
        workers = sum(catalog.instance(t).gpu_count * n for t, n in groups)
        if workers > global_batch:
            continue
        p = srift.predict(profile, cluster, global_batch, catalog=catalog, iterations=iterations)
        if p.feasible:
            plans.append(p)
    return plans


@pytest.fixture(scope="module")
def brute(resnet50_profile):
    catalog = srift.Catalog.default()
    return all_plans(resnet50_profile, catalog, 64, 20_000)


def _recommend(profile, **kw):
    return srift.recommend(profile, global_batch=64, iterations=20_000, regions=[REGION], instance_types=TYPES,
                           max_instances_per_type=CAP, max_types=2, top_k=3, **kw)


@pytest.mark.parametrize("deadline_hours", [0.5, 1.0, 2.0, 8.0])
def test_min_cost_equals_brute_force(resnet50_profile, brute, deadline_hours):
    rec = _recommend(resnet50_profile, deadline_hours=deadline_hours)
    ok = [p for p in brute if p.total_hours <= deadline_hours]
    if not ok:
        assert rec.best is None and "no plan meets the deadline" in rec.why_none
        return
    best = min(p.total_usd for p in ok)
    assert rec.best.total_usd == pytest.approx(best, rel=1e-9)
    assert rec.best.total_hours <= deadline_hours
    costs = [rec.best.total_usd] + [a.total_usd for a in rec.alternatives]
    assert costs == sorted(costs)


@pytest.mark.parametrize("budget", [5.0, 20.0, 80.0])
def test_max_throughput_equals_brute_force(resnet50_profile, brute, budget):
    rec = _recommend(resnet50_profile, budget_usd=budget)
    ok = [p for p in brute if p.total_usd <= budget]
    if not ok:
        assert rec.best is None
        return
    fastest = max(p.samples_per_s for p in ok)
    assert rec.best.samples_per_s == pytest.approx(fastest, rel=1e-9)
    assert rec.best.total_usd <= budget


def test_pareto_equals_brute_force_front(resnet50_profile, brute):
    front = srift.pareto(resnet50_profile, global_batch=64, iterations=20_000, regions=[REGION],
                         instance_types=TYPES, max_instances_per_type=CAP, max_types=2)
    points = sorted((p.total_hours, p.total_usd) for p in brute)
    expected, best_usd = [], math.inf
    for h, usd in points:
        if usd < best_usd:
            expected.append((h, usd))
            best_usd = usd
    got = [(p.total_hours, p.total_usd) for p in front]
    assert len(got) == len(expected)
    for (h1, u1), (h2, u2) in zip(got, expected):
        assert h1 == pytest.approx(h2, rel=1e-9) and u1 == pytest.approx(u2, rel=1e-9)
    d = json.loads(json.dumps(front.to_dict()))  # like every result: a dict JSON can carry
    assert d["why_none"] == "" and [p["total_usd"] for p in d["plans"]] == [p.total_usd for p in front]


def test_impossible_deadline_says_why_and_shows_the_fastest(resnet50_profile):
    rec = _recommend(resnet50_profile, deadline_hours=0.001)
    assert not rec.found and rec.best is None
    # the deadline as a person reads it: 0.001 h is 3.6 s ("0.000278 h" for 1 s before)
    assert "no plan meets the deadline of 3.6 s" in rec.why_none
    assert "the fastest takes" in rec.why_none
    assert rec.closest is not None and rec.closest.total_hours > 0.001
    assert rec.to_dict()["found"] is False


def test_a_binding_hourly_cap_is_named_and_the_closest_keeps_within_it(resnet50_profile):
    # review finding 3: the closest plan lifted the cap ("the fastest takes 0.475 h (within the
    # budget limits)" at $569/h against a $1.5/h cap, and 0.475 h met the deadline)
    fastest = _recommend(resnet50_profile, budget_usd=1e9).best
    cap = 1.5
    assert fastest.usd_per_hour > cap
    rec = _recommend(resnet50_profile, deadline_hours=fastest.total_hours * 1.01, max_usd_per_hour=cap)
    assert rec.best is None
    assert "no plan within the hourly cap of USD 1.5/h meets the deadline" in rec.why_none
    assert "the fastest within it takes" in rec.why_none and "with no hourly cap the fastest takes" in rec.why_none
    assert "budget limits" not in rec.why_none
    assert rec.closest is not None and rec.closest.usd_per_hour <= cap
    assert rec.closest.total_hours > rec.deadline_hours
    # a cap below every offer: said so, with the least rate any plan runs at; the budget is fine
    cheapest_rate = min(p.usd_per_hour for p in all_plans(resnet50_profile, srift.Catalog.default(), 64, 20_000))
    rec = _recommend(resnet50_profile, budget_usd=1000, max_usd_per_hour=0.1)
    assert rec.why_none.startswith("no plan runs within the hourly cap of USD 0.1/h: the least any plan runs at is USD ")
    assert "budget" not in rec.why_none
    assert rec.closest is not None and rec.closest.usd_per_hour == pytest.approx(cheapest_rate, rel=1e-9)
    # a budget that binds under the cap: the cheapest plan within the cap
    rec = _recommend(resnet50_profile, budget_usd=1e-3, max_usd_per_hour=cap)
    assert rec.why_none.startswith("no plan fits the budget of USD 0.001; the cheapest within the hourly cap of USD "
                                   "1.5/h costs USD ")
    assert rec.closest.usd_per_hour <= cap


def test_filters_that_leave_no_offer_are_named(resnet50_profile):
    # review finding 6: --min-gpu-memory 100 blamed the batch and suggested accumulation;
    # --types g5.xlarge --exclude g5.xlarge said no type is priced in the regions
    rec = _recommend(resnet50_profile, deadline_hours=8, min_gpu_memory_gib=100)
    assert rec.best is None
    assert rec.why_none.startswith("the filters remove every offer: none of the ")
    assert "us-east-1 (on-demand) is of the types asked (g4dn.12xlarge, g4dn.xlarge, g5.xlarge, p3.2xlarge) and " \
           "on GPUs of at least 100 GiB (the largest among those has 22.35 GiB)" in rec.why_none
    assert "accumulation" not in rec.why_none
    rec = srift.recommend(resnet50_profile, global_batch=64, iterations=20_000, deadline_hours=8, regions=[REGION],
                          instance_types=["g5.xlarge"], exclude=["g5.xlarge"])
    assert "is of the types asked (g5.xlarge) and outside the excluded (g5.xlarge)" in rec.why_none
    front = srift.pareto(resnet50_profile, global_batch=64, iterations=20_000, regions=[REGION],
                         min_gpu_memory_gib=1000)
    assert not front and front.why_none.startswith("the filters remove every offer")
    assert "on GPUs of at least 1000 GiB (the largest has " in front.why_none
    # with no type filter the minimum alone is named
    assert srift.recommend(resnet50_profile, global_batch=64, iterations=20_000, deadline_hours=8,
                           regions=[REGION], min_gpu_memory_gib=1000).why_none.startswith("the filters")


def test_question_is_required_and_validated(resnet50_profile):
    with pytest.raises(ValueError, match="give deadline_hours"):
        srift.recommend(resnet50_profile, global_batch=64, iterations=10)
    with pytest.raises(ValueError, match="deadline_hours must be a finite number > 0, got -1"):
        srift.recommend(resnet50_profile, global_batch=64, iterations=10, deadline_hours=-1)
    with pytest.raises(ValueError, match=r"global_batch must be an integer in 1\.\.2147483647, got 0"):
        srift.recommend(resnet50_profile, global_batch=0, iterations=10, deadline_hours=1)
    with pytest.raises(ValueError, match="regions .* are not in the catalog"):
        srift.recommend(resnet50_profile, global_batch=64, iterations=10, deadline_hours=1, regions=["nowhere-1"])
    with pytest.raises(ValueError, match="did you mean"):
        srift.recommend(resnet50_profile, global_batch=64, iterations=10, deadline_hours=1, instance_types=["p3.2xlarg"])


@pytest.mark.parametrize("kwargs, fragment", [
    # values past the core's int: refused by name, not a bare TypeError from the bindings
    ({"global_batch": 2**31}, "global_batch must be an integer in 1..2147483647"),
    ({"max_instances": 2**31}, "max_instances must be an integer in 1..2147483647"),
    ({"max_instances_per_type": 2**40}, "max_instances_per_type must be an integer in 1..2147483647"),
    ({"max_accumulation_steps": 2**31}, "max_accumulation_steps must be an integer in 1..2147483647"),
    ({"max_local_batch": 2**31}, "max_local_batch must be an integer in 1..2147483647"),
    # the bounds prune only once the top k are full: a huge k walked the whole space
    ({"top_k": 1001}, r"top_k must be an integer in 1\.\.1000, got 1001"),
    ({"top_k": 2**31 - 1}, "top_k must be an integer in 1..1000"),
    ({"max_types": True}, "max_types must be an integer in 1..16, got True"),
    ({"threads": -1}, "threads must be an integer in 0.."),
    # wrong types: a named ValueError, not a TypeError from a comparison
    ({"iterations": "10"}, "iterations must be a finite number > 0, got '10'"),
    ({"iterations": math.inf}, "iterations must be a finite number > 0, got inf"),
    ({"deadline_confidence": "0.9"}, r"deadline_confidence must be a number in \[0.5, 1\), got '0.9'"),
    ({"regions": 123}, "regions must be a region name, .* got 123"),
    ({"spot": "no"}, "spot must be True or False, got 'no'"),
    ({"markets": 5}, "markets must be a non-empty subset"),
    ({"instance_types": []}, "instance_types must name at least one instance type"),
    # 1e-322 iterations underflowed every total to 0 and the search, its bounds all 0, ran for hours
    ({"iterations": 1e-322}, r"iterations must be at least 1 \(iterations of the training run\), got 1e-322"),
    ({"iterations": 0.5}, "iterations must be at least 1"),
    # spot=True was dropped without a word when markets left spot out
    ({"spot": True, "markets": ["on-demand"]}, "spot=True asks for spot offers and markets=.* leaves them out"),
    # objects where a path or a dict came: a named ValueError, not an AttributeError deep inside
    ({"catalog": "catalog.json"}, r"catalog must be a Catalog \(srift.Catalog.load\(path\).*got str 'catalog.json'"),
    ({"config": {"precision": "amp"}}, r"config must be an EngineConfig .*got dict"),
    ({"spot_assumptions": {"provisioning_s": 60}}, r"spot_assumptions must be a SpotAssumptions .*got dict"),
    # a confidence with a budget alone was accepted and meant nothing
    ({"deadline_hours": None, "budget_usd": 100, "deadline_confidence": 0.9},
     "deadline_confidence=0.9 is the probability of meeting deadline_hours, and none was given"),
])
def test_bad_arguments_name_the_field(resnet50_profile, kwargs, fragment):
    args = {"global_batch": 64, "iterations": 1000, "deadline_hours": 12, "regions": "us-east-1", **kwargs}
    with pytest.raises(ValueError, match=fragment):
        srift.recommend(resnet50_profile, **args)


def test_one_instance_type_as_a_string_is_one_name(resnet50_profile):
    rec = srift.recommend(resnet50_profile, global_batch=64, iterations=1000, deadline_hours=12,
                          regions="us-east-1", instance_types="g5.xlarge")
    assert {g.instance_type for g in rec.best.cluster.groups} == {"g5.xlarge"}
    rec = srift.recommend(resnet50_profile, global_batch=64, iterations=1000, deadline_hours=12,
                          regions="us-east-1", instance_types=["g5.xlarge", "g4dn.xlarge"], exclude="g5.xlarge")
    assert {g.instance_type for g in rec.best.cluster.groups} == {"g4dn.xlarge"}


def test_type_names_filter_as_the_catalog_spells_them(resnet50_profile):
    # the lookup forgives case and spaces; the filters compared the raw name and matched
    # nothing: --exclude P3.2XLARGE kept p3.2xlarge, --types P3.2XLARGE found no offer
    args = dict(global_batch=64, iterations=1000, deadline_hours=12, regions="us-east-1")
    rec = srift.recommend(resnet50_profile, instance_types=["P3.2XLARGE"], **args)
    assert {g.instance_type for g in rec.best.cluster.groups} == {"p3.2xlarge"}
    rec = srift.recommend(resnet50_profile, instance_types=["p3.2xlarge", "g5.xlarge"], exclude=" P3.2xlarge", **args)
    assert {g.instance_type for g in rec.best.cluster.groups} == {"g5.xlarge"}
    rec = srift.recommend(resnet50_profile, instance_types="p3.2xlarge", exclude="P3.2XLARGE", **args)
    assert rec.best is None and "outside the excluded (p3.2xlarge)" in rec.why_none
    # held instances too ("has no on-demand price" before)
    rec = srift.recommend(resnet50_profile, held="1x P3.2XLARGE", **args)
    assert any(g.instance_type == "p3.2xlarge" for g in rec.best.cluster.groups)


def test_a_region_named_twice_is_searched_once(resnet50_profile):
    # "us-east-1,US-EAST-1" (or the same name twice) searched us-east-1 twice: twice the offers,
    # and every plan among the alternatives twice
    args = dict(global_batch=256, iterations=10000, deadline_hours=5, instance_types=["g5.xlarge", "g4dn.xlarge"])
    once = srift.recommend(resnet50_profile, regions="us-east-1", **args)
    for regions in ("us-east-1,US-EAST-1", ["us-east-1", "us-east-1"]):
        rec = srift.recommend(resnet50_profile, regions=regions, **args)
        assert rec.search.regions == ["us-east-1"] and rec.search.offers == once.search.offers == 2
        plans = [str(p.cluster) for p in [rec.best, *rec.alternatives]]
        assert plans == [str(p.cluster) for p in [once.best, *once.alternatives]] and len(set(plans)) == len(plans)


def test_a_quota_of_zero_is_why_nothing_fits(resnet50_profile):
    # the core, given offers it may not rent, blamed the batch and GPU memory
    catalog = srift.Catalog.default().with_overrides({"schema": "srift.catalog-overrides/1", "quotas": {"p3.2xlarge": 0}})
    rec = srift.recommend(resnet50_profile, global_batch=64, iterations=1000, deadline_hours=12,
                          regions="us-east-1", instance_types="p3.2xlarge", catalog=catalog)
    assert rec.best is None
    assert rec.why_none.startswith("every offer left may run no instance: a quota of 0 (p3.2xlarge")


def test_numpy_scalars_are_numbers(resnet50_profile):
    import numpy as np

    # sweeps driven from numpy or pandas pass numpy scalars; only bools and strings are refused
    pred = srift.predict(resnet50_profile, "1x g5.xlarge", np.int64(32), iterations=np.float32(1000))
    assert pred.total_hours == pytest.approx(1000 * pred.iteration_s / 3600)
    rec = srift.recommend(resnet50_profile, global_batch=np.int64(64), iterations=np.int64(1000),
                          deadline_hours=np.float64(12), regions="us-east-1", instance_types="g5.xlarge")
    assert rec.best is not None
    # its dict is plain JSON: the numpy int was kept and json.dumps refused it
    assert json.loads(json.dumps(rec.to_dict()))["global_batch"] == 64


def test_recommendation_serialises(resnet50_profile):
    import json

    rec = _recommend(resnet50_profile, deadline_hours=8)
    text = json.dumps(rec.to_dict())
    assert '"objective": "min_cost"' in text
    assert rec.search.evaluated > 0 and rec.search.offers == len(TYPES)


def test_max_instances_zero_is_refused_not_unlimited(resnet50_profile):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_instances must be an integer in 1.."):
            srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=12,
                            regions="us-east-1", max_instances=bad)


def test_a_stopped_search_says_so(resnet50_profile):
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=12,
                          regions="us-east-1", time_limit_s=1e-300)
    if rec.best is None:  # stopped before its first plan (the machine may be quick enough)
        assert rec.why_none.startswith("the search stopped (time limit or cancel)")


@pytest.mark.parametrize("call", [
    lambda p: srift.predict(p, "1x g5.xlarge", global_batch=32),
    lambda p: srift.recommend(p, global_batch=32, iterations=10, deadline_hours=1),
    lambda p: srift.pareto(p, global_batch=32, iterations=10),
])
def test_a_profile_must_be_a_profile(call, tmp_path, resnet50_profile):
    path = tmp_path / "p.json"
    resnet50_profile.save(path)
    for wrong, shown in ((str(path), "str"), (resnet50_profile.to_dict(), "dict")):
        with pytest.raises(ValueError, match=rf"profile must be a Profile \(srift.profile\(model, ...\) or "
                                             rf"srift.Profile.load\(path\)\), got {shown}"):
            call(wrong)
