"""search() is exact: property tests against brute force on spaces small enough to enumerate.

Random catalogs and workloads are built directly as srift._core objects. Every plan of the
space is simulated in Python through srift._core.simulate (plans of up to three offers), its
totals computed with the spot model, the constraints applied and the plans ordered as the
core orders them; search() must return the same top-k, Pareto front and closest plan. On
two-type spaces it must also equal search_exhaustive.
"""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

core = pytest.importorskip("srift._core")

INF = math.inf


@st.composite
def requests(draw, max_offers_per_region: int = 4, max_count: int = 3):
    w = core.Workload()
    n_buckets = draw(st.integers(0, 4))
    w.bucket_bytes = [draw(st.floats(1e6, 1e8)) for _ in range(n_buckets)]
    w.bucket_ready_fraction = sorted(draw(st.floats(0, 1)) for _ in range(n_buckets))
    w.fixed_memory_bytes = draw(st.floats(1e9, 12e9))
    w.activation_bytes_per_sample = draw(st.floats(5e7, 2e9))
    instances = []
    for i in range(draw(st.integers(1, 3))):
        s = core.InstanceSpec()
        s.name = f"t{i}"
        s.gpus = draw(st.sampled_from([1, 1, 2, 4, 8]))
        s.gpu_memory_bytes = draw(st.sampled_from([16e9, 24e9, 40e9, 80e9]))
        s.intra = core.LinkSpec(draw(st.floats(1e10, 3e11)), draw(st.floats(0, 2e-5)))
        s.network = core.LinkSpec(draw(st.floats(1e9, 1.2e10)), draw(st.floats(1e-5, 5e-5)))
        instances.append(s)
    offers = []
    for region in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(0, max_offers_per_region))):
            o = core.Offer()
            o.instance = draw(st.integers(0, len(instances) - 1))
            o.region = region
            spot = draw(st.booleans())
            o.market = core.Market.spot if spot else core.Market.on_demand
            o.usd_per_hour = draw(st.floats(0.3, 60))
            o.max_count = draw(st.integers(0, max_count))
            m = core.ComputeModel()
            m.forward_fixed_s = draw(st.floats(0, 0.02))
            m.forward_per_sample_s = draw(st.floats(2e-4, 5e-3))
            m.backward_fixed_s = draw(st.floats(0, 0.03))
            m.backward_per_sample_s = draw(st.floats(4e-4, 1e-2))
            m.optimizer_s = draw(st.floats(0, 0.02))
            o.compute = m
            if spot:
                o.interruptions_per_hour = draw(st.sampled_from([0.0, 0.001, 0.02, 0.3]))
            offers.append(o)
    r = core.SearchRequest()
    r.workload = w
    r.instances = instances
    r.offers = offers
    r.global_batch = draw(st.integers(2, 128))
    r.iterations = draw(st.floats(1e3, 1e5))
    sp = core.SpotParams()
    sp.checkpoint_bytes = draw(st.floats(0, 2e10))
    sp.provisioning_s = draw(st.floats(0, 600))
    r.spot = sp
    r.objective = draw(st.sampled_from([core.Objective.min_cost, core.Objective.max_throughput]))
    r.top_k = draw(st.integers(1, 4))
    r.collect_pareto = draw(st.booleans())
    if draw(st.booleans()):
        r.max_instances = draw(st.integers(1, 6))
    if draw(st.integers(0, 4)) == 0:
        r.min_gpu_memory_bytes = 30e9
    if draw(st.integers(0, 4)) == 0:
        r.deadline_confidence = 0.9
    # Constraints as quantiles of the feasible plans' totals, found by brute force later.
    limits = {"deadline_q": draw(st.floats(0.0, 1.0)), "budget_q": draw(st.floats(0.0, 1.0)),
              "hourly": draw(st.sampled_from([INF, INF, 5.0, 50.0]))}
    return r, limits


def usable(r, i) -> bool:
    return r.instances[r.offers[i].instance].gpu_memory_bytes >= r.min_gpu_memory_bytes


def all_plans(r, max_types: int):
    """Every plan of the space as ((offer, count), ...) in ascending offer order."""
    by_region: dict[int, list[int]] = {}
    for i, o in enumerate(r.offers):
        if usable(r, i):
            by_region.setdefault(o.region, []).append(i)
    for idx in by_region.values():
        for k in range(1, max_types + 1):
            for combo in itertools.combinations(idx, k):
                for counts in itertools.product(*[range(1, r.offers[i].max_count + 1) for i in combo]):
                    if sum(counts) > r.max_instances:
                        continue
                    workers = sum(c * r.instances[r.offers[i].instance].gpus for i, c in zip(combo, counts))
                    if workers > r.global_batch:
                        continue
                    plan = tuple(zip(combo, counts))
                    if all(any(o == h.offer and c >= h.count for o, c in plan) for h in r.held):
                        yield plan


def brute_force(r, max_types: int):
    """[(key, total_s, total_usd, satisfies, usd_per_hour)] of every feasible plan."""
    out = []
    for plan in all_plans(r, max_types):
        groups = []
        rate = 0.0
        for i, c in plan:
            o = r.offers[i]
            groups.append((r.instances[o.instance], c, o.compute, o.usd_per_hour))
            rate += c * o.interruptions_per_hour
        it, _, _ = core.simulate(r.workload, groups, r.global_batch, r.usable_memory_fraction)
        if not it.feasible:
            continue
        nominal = r.iterations * it.iteration_s
        total_s = core.spot_expected_s(nominal, rate, r.spot)
        total_usd = it.usd_per_hour * total_s / 3600.0
        if r.deadline_confidence > 0 and rate > 0:
            est = core.estimate_spot(nominal, rate, r.spot, r.deadline_s)
            meets_deadline = 1.0 - est.miss_probability >= r.deadline_confidence
        else:
            meets_deadline = total_s <= r.deadline_s
        ok = meets_deadline and not (total_usd > r.budget_usd or it.usd_per_hour > r.max_usd_per_hour)
        out.append((plan, total_s, total_usd, ok, it.usd_per_hour))
    return out


def order_key(objective):
    def key(p):
        plan, s, usd = p[:3]
        pad = [x for g in plan for x in g]
        primary = (usd, s) if objective == core.Objective.min_cost else (s, usd)
        return (*primary, pad)
    return key


def plan_tuple(p):
    return tuple((g.offer, g.count) for g in p.groups)


def front(points):
    pts = sorted(points)
    out, best = [], INF
    for s, usd in pts:
        if usd < best:
            out.append((s, usd))
            best = usd
    return out


def apply_constraints(r, limits, feasible):
    """Deadline / budget at a quantile of the feasible plans' totals (so they bind)."""
    if not feasible:
        return
    times = sorted(p[1] for p in feasible)
    costs = sorted(p[2] for p in feasible)
    pick = lambda xs, q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    if r.objective == core.Objective.min_cost:
        r.deadline_s = pick(times, limits["deadline_q"])
    else:
        r.budget_usd = pick(costs, limits["budget_q"])
    r.max_usd_per_hour = limits["hourly"]


def check_against_brute_force(r, limits, max_types: int):
    r.max_types = max_types
    base = brute_force(r, max_types)
    apply_constraints(r, limits, base)
    rows = brute_force(r, max_types)
    res = core.search(r)
    assert res.optimal and res.gap == 0.0
    ok = sorted((p for p in rows if p[3]), key=order_key(r.objective))
    expected = [(p[0], p[1], p[2]) for p in ok[: r.top_k]]
    got = [(plan_tuple(p), p.total_s, p.total_usd) for p in res.plans]
    assert got == expected
    if r.collect_pareto:
        assert [(p.total_s, p.total_usd) for p in res.pareto] == front([(p[1], p[2]) for p in rows])
    if not ok:
        binds, closest = expected_closest(r, rows)
        if closest:
            assert plan_tuple(res.closest) == closest[0]
            assert binds in res.why_none, res.why_none
        else:
            assert not res.closest.groups
        assert res.why_none


def expected_closest(r, rows):
    """What binds and the closest plan when none meets the constraints (note "closest" in
    csrc/search_internal.hpp): the fastest plan within the budget and the hourly cap when a
    deadline is set; else the cheapest within the cap when a budget is set; else the plan of
    the least hourly rate when a cap is set."""
    fastest, cheapest = order_key(core.Objective.max_throughput), order_key(core.Objective.min_cost)
    within = [p for p in rows if not (p[2] > r.budget_usd or p[4] > r.max_usd_per_hour)]
    in_cap = [p for p in rows if not p[4] > r.max_usd_per_hour]
    if math.isfinite(r.deadline_s) and within:
        return "meets the deadline", min(within, key=fastest)
    if math.isfinite(r.budget_usd) and in_cap:
        return "fits the budget", min(in_cap, key=cheapest)
    if math.isfinite(r.max_usd_per_hour) and rows:
        return "no plan runs within the hourly cap", min(rows, key=lambda p: (p[4], fastest(p)))
    return None, None


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(requests())
def test_three_type_search_equals_brute_force(drawn):
    r, limits = drawn
    check_against_brute_force(r, limits, 3)


@SETTINGS
@given(requests(), st.data())
def test_held_groups_equal_brute_force(drawn, data):
    r, limits = drawn
    candidates = [i for i, o in enumerate(r.offers) if o.max_count > 0 and o.region == 0]
    if candidates:
        i = data.draw(st.sampled_from(candidates))
        r.held = [core.PlanGroup(i, data.draw(st.integers(1, r.offers[i].max_count)))]
    check_against_brute_force(r, limits, 3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests(max_offers_per_region=6, max_count=5))
def test_two_type_search_equals_exhaustive(drawn):
    r, limits = drawn
    r.max_types = 2
    apply_constraints(r, limits, brute_force(r, 1))
    ex = core.search_exhaustive(r)
    bb = core.search(r)
    assert [(plan_tuple(p), p.total_s, p.total_usd) for p in bb.plans] == \
           [(plan_tuple(p), p.total_s, p.total_usd) for p in ex.plans]
    if r.collect_pareto:  # the same plans, ties included (Finding 8: the same one stands for a tie)
        assert [(plan_tuple(p), p.total_s, p.total_usd) for p in bb.pareto] == \
               [(plan_tuple(p), p.total_s, p.total_usd) for p in ex.pareto]
    if not ex.plans:
        assert plan_tuple(bb.closest) == plan_tuple(ex.closest)
        if ex.closest.groups:  # (with nothing feasible the counts of infeasible plans differ)
            assert bb.why_none == ex.why_none


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests(max_offers_per_region=5, max_count=5), st.sampled_from([8, 16, 32, 64]), st.integers(64, 1024),
       st.integers(4, 32))
def test_many_accumulation_steps_equal_exhaustive(drawn, steps, batch, heavier):
    """Up to 64 micro-steps (review finding 7: the bounds on them, csrc/bnb.cpp note "bounds")."""
    r, limits = drawn
    r.max_types = 2
    r.max_accumulation_steps = steps
    r.global_batch = batch
    r.workload.activation_bytes_per_sample *= heavier
    apply_constraints(r, limits, brute_force(r, 1))
    ex = core.search_exhaustive(r)
    bb = core.search(r)
    assert [(plan_tuple(p), p.total_s, p.total_usd) for p in bb.plans] == \
           [(plan_tuple(p), p.total_s, p.total_usd) for p in ex.plans]
    if r.collect_pareto:
        assert [(plan_tuple(p), p.total_s, p.total_usd) for p in bb.pareto] == \
               [(plan_tuple(p), p.total_s, p.total_usd) for p in ex.pareto]
    if not ex.plans:
        assert plan_tuple(bb.closest) == plan_tuple(ex.closest)


def test_bad_request_raises_value_error_naming_the_field():
    r = core.SearchRequest()
    r.global_batch = 8
    r.iterations = 10
    r.max_types = core.MAX_GROUPS + 1
    with pytest.raises(ValueError, match="max_types"):
        core.search(r)
    r.max_types = 2
    r.held = [core.PlanGroup(3, 1)]
    with pytest.raises(IndexError, match="held"):
        core.search(r)


def test_spot_helpers():
    p = core.SpotParams()
    p.checkpoint_bytes = 1e10
    p.write_bytes_per_s = 1e9
    p.read_bytes_per_s = 2e9
    p.provisioning_s = 295
    e = core.estimate_spot(36000.0, 0.1, p, 37000.0)
    assert e.checkpoint_interval_s == pytest.approx(math.sqrt(2 * 10 * 36000))
    assert e.expected_s == core.spot_expected_s(36000.0, 0.1, p)
    assert core.interruption_rate_from_class("<5%") == pytest.approx(-math.log(0.95) / 730)
    with pytest.raises(ValueError, match="frequency_class"):
        core.interruption_rate_from_class("sometimes")
