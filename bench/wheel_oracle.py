"""Brute-force oracle for recommend/pareto under the PyTorch wheel check (note "one wheel per
plan" in srift/planning.py): random questions over small catalog slices (2-5 instance types of
V100, T4, A10G, L4, A100, B200, B300, RTX PRO 6000, M60 and g5g's arm64 T4; 1-2 regions; spot or
not; torch 2.10/2.11/2.13/2.15; max_types 1-3; top_k 1/3/8; deadline, budget, hourly cap or a
mix), each answered by srift and by one core search over every offer (top_k = MAX_TOP_K, the
space small enough to list every plan) filtered to the plans one wheel variant runs.

    python bench/wheel_oracle.py recommend 400 100   # top-k lists, constraints binding
    python bench/wheel_oracle.py none 300            # nothing fits: the closest plan
    python bench/wheel_oracle.py held 150 500        # replan around held instances
    python bench/wheel_oracle.py pareto 200          # the merged front is the runnable front

Prints each mismatch and a count per outcome (ok: plans found and equal; ok-none: nothing fits
and the closest is equal; empty: no plan runs at all; big/skip: a space too large to list or a
question srift refuses)."""
import math
import random
import sys
import warnings
import srift
from srift import planning, _core
from srift.torch_support import gpu_capabilities

warnings.simplefilter("ignore")
cat = srift.Catalog.default()
model, batch, loss_fn = srift.zoo.build("resnet50", batch_size=4, device="meta")
prof = srift.profile(model, batch, loss_fn=loss_fn, device="meta", name="resnet50")

captured = {}
orig = planning._Space.search
def spy(self, request):
    captured["space"] = self
    return orig(self, request)
planning._Space.search = spy

def runnable(space, groups):
    if not space.torch.checked:
        return True
    hosts = gpu_capabilities(cat, [space.offer_info[o][0] for o, _ in groups])  # (capability, cpu_arch)
    return bool(space.torch.variants_for(hosts.values()))

def everything(space, request, constrained):
    """All plans of the full space (top_k = MAX), constrained or not, in core order."""
    r = space.request
    saved = (r.top_k, r.deadline_s, r.budget_usd, r.max_usd_per_hour, r.collect_pareto, r.deadline_confidence, r.time_limit_s)
    r.offers = space.offers; r.held = space.held
    r.top_k = _core.MAX_TOP_K; r.collect_pareto = False; r.time_limit_s = math.inf
    if not constrained:
        r.deadline_s = math.inf; r.budget_usd = math.inf; r.max_usd_per_hour = math.inf; r.deadline_confidence = 0.0
    res = _core.search(r)
    (r.top_k, r.deadline_s, r.budget_usd, r.max_usd_per_hour, r.collect_pareto, r.deadline_confidence, r.time_limit_s) = saved
    assert len(res.plans) < _core.MAX_TOP_K, "space too large"
    return [p for p in res.plans]

def pkey(space, p):
    return tuple((g.offer, g.count) for g in p.groups)

def cluster_key(space, plan):
    # map a srift Plan back to offer indices
    out = []
    for g in plan.cluster.groups:
        idx = [i for i, (n, reg, m) in enumerate(space.offer_info) if n == g.instance_type and reg == plan.region and m == g.market]
        assert len(idx) == 1
        out.append((idx[0], g.count))
    return tuple(out)

def front(points):
    pts = sorted(points, key=lambda p: (p[1], p[2], p[0]))
    out, best = [], math.inf
    for k, s, usd in pts:
        if usd < best:
            out.append((k, s, usd)); best = usd
    return out

def closest_oracle(space, r, rows):
    # rows: (key, s, usd, rate)
    fastest = lambda p: (p[1], p[2], p[0])
    cheapest = lambda p: (p[2], p[1], p[0])
    within = [p for p in rows if not (p[2] > r.budget_usd or p[3] > r.max_usd_per_hour)]
    in_cap = [p for p in rows if not p[3] > r.max_usd_per_hour]
    if math.isfinite(r.deadline_s) and within:
        return min(within, key=fastest)
    if math.isfinite(r.budget_usd) and in_cap:
        return min(in_cap, key=cheapest)
    if math.isfinite(r.max_usd_per_hour) and rows:
        return min(rows, key=lambda p: (p[3], fastest(p)))
    return None

TYPES = ["p3.2xlarge", "p3.8xlarge", "g6.xlarge", "g6.12xlarge", "p6-b200.48xlarge", "g4dn.12xlarge",
         "g5.12xlarge", "p4d.24xlarge", "g7e.12xlarge", "p6-b300.48xlarge", "g3.16xlarge", "g5g.xlarge"]

def one(seed, mode):
    rnd = random.Random(seed)
    types = rnd.sample(TYPES, rnd.randint(2, 5))
    regions = rnd.sample(["us-east-1", "us-west-2", "eu-west-1"], rnd.randint(1, 2))
    spot = rnd.random() < 0.4
    torch = rnd.choice(["2.10", "2.11", "2.13", "2.15"])
    kw = dict(global_batch=rnd.choice([256, 512, 1024]), iterations=rnd.choice([10_000, 100_000]), catalog=cat,
              regions=regions, instance_types=types, spot=spot, max_types=rnd.choice([1, 2, 2, 3]),
              max_instances_per_type=rnd.choice([1, 2, 3]), torch=torch)
    if rnd.random() < 0.2:
        kw["max_instances"] = rnd.randint(1, 4)
    if mode == "pareto":
        try:
            fr = srift.pareto(prof, **kw)
        except ValueError as e:
            return "skip"
        space = captured["space"]
        allp = everything(space, space.request, constrained=False)
        rows = [(pkey(space, p), p.total_s, p.total_usd) for p in allp if runnable(space, pkey(space, p))]
        exp = front(rows)
        got = [(cluster_key(space, p), p.total_hours * 3600, p.total_usd) for p in fr]
        if [g[0] for g in got] != [e[0] for e in exp]:
            return f"PARETO MISMATCH seed={seed} kw={ {k:v for k,v in kw.items() if k!='catalog'} }\n got={got}\n exp={exp}"
        return "ok"
    # recommend
    q = rnd.choice(["deadline", "budget", "rate", "both"])
    captured.clear()
    # first an unconstrained look to pick binding limits
    try:
        base = srift.recommend(prof, max_usd_per_hour=1e9, top_k=1, **kw)
    except ValueError:
        return "skip"
    space = captured["space"]
    allp = everything(space, space.request, constrained=False)
    if not allp:
        return "empty"
    times = sorted(p.total_s for p in allp); costs = sorted(p.total_usd for p in allp)
    rates = sorted(p.iteration.usd_per_hour for p in allp)
    pick = lambda xs: xs[min(len(xs) - 1, int(rnd.random() * len(xs) * 1.1))] * rnd.choice([1.0, 1.0, 0.999])
    cons = {}
    if q in ("deadline", "both"):
        cons["deadline_hours"] = pick(times) / 3600
    if q in ("budget",):
        cons["budget_usd"] = pick(costs)
    if q == "rate":
        cons["max_usd_per_hour"] = pick(rates)
    if q == "both":
        cons[rnd.choice(["budget_usd", "max_usd_per_hour"])] = pick(costs) if rnd.random() < .5 else pick(rates)
    if mode == "none":
        lo = lambda xs: xs[rnd.randint(0, len(xs) - 1)] * rnd.choice([0.5, 0.9, 1.0])
        cons = {"deadline_hours": lo(times) / 3600} if rnd.random() < 0.7 else {}
        if rnd.random() < 0.5 or not cons:
            cons["budget_usd"] = lo(costs)
        if rnd.random() < 0.5:
            cons["max_usd_per_hour"] = lo(rates)
    top_k = rnd.choice([1, 3, 8])
    if mode == "held":
        pick_from = [p for p in allp if runnable(space, pkey(space, p))] if rnd.random() < 0.8 else allp
        pick_from = pick_from or allp
        p = rnd.choice(pick_from)
        o, c = rnd.choice(pkey(space, p))
        name, region, market = space.offer_info[o]
        kw["held"] = f"{c}x {name}{':spot' if market == 'spot' else ''} @{region}"
    try:
        rec = srift.recommend(prof, top_k=top_k, **kw, **cons)
    except ValueError as e:
        return "skip"
    space = captured["space"]
    r = space.request
    allc = everything(space, r, constrained=True)
    exp = [pkey(space, p) for p in allc if runnable(space, pkey(space, p))][:top_k]
    got = [cluster_key(space, p) for p in [rec.best, *rec.alternatives] if p is not None]
    msg = ""
    if got != exp:
        msg += f"TOPK MISMATCH got={got} exp={exp}"
    if not exp:
        allu = everything(space, r, constrained=False)
        rows = [(pkey(space, p), p.total_s, p.total_usd, p.iteration.usd_per_hour) for p in allu if runnable(space, pkey(space, p))]
        c = closest_oracle(space, r, rows)
        gotc = cluster_key(space, rec.closest) if rec.closest is not None else None
        if (c[0] if c else None) != gotc:
            msg += f" CLOSEST MISMATCH got={gotc} exp={c} why={rec.why_none!r}"
    if msg:
        return f"seed={seed} q={q} cons={cons} top_k={top_k} kw={ {k:v for k,v in kw.items() if k!='catalog'} }: {msg}"
    return "ok" if exp else "ok-none"

if __name__ == "__main__":
    mode = sys.argv[1]; n = int(sys.argv[2]); start = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    from collections import Counter
    cnt = Counter()
    for s in range(start, start + n):
        try:
            out = one(s, mode)
        except AssertionError:
            out = "big"
        cnt[out if len(out) < 10 else "FAIL"] += 1
        if len(out) >= 10:
            print(out)
    print(mode, dict(cnt))
