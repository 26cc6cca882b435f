"""Benchmark of srift's exact plan search (issue 5).

What it measures, in one run on one machine:
  1. time to the optimum of search() (branch-and-bound, csrc/bnb.cpp) for both questions
     (min cost under a deadline, max throughput under a budget) on a large synthetic catalog,
     with a resnet50-like and a bert_large-like workload, on one thread;
  2. plans evaluated (simulated) per second by the core on one thread, and the share of the
     space pruned without simulation;
  3. on the largest space they finish in the run: exhaustive enumeration vectorised in numpy
     (a reimplementation of the iteration model for <= 2 offers per plan) and
     scipy.optimize.milp (HiGHS) on a linearisation of the homogeneous subproblem, with
     their speed-ups against search() and a check that the optima are equal.

All numbers are synthetic and say so: the catalog (instance types, prices, links, spot
rates) and the workloads' compute models are generated from a seed below, not measured. They
are shaped like EC2 GPU instances and like ResNet-50 / BERT-large training so the search
faces realistic trade-offs; they are not predictions for those models.

    python bench/bench_search.py --json out.json          # the full run
    python bench/bench_search.py --quick                  # smaller catalog, seconds
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

import srift._core as core

# ---- the synthetic catalog ----------------------------------------------------------------

# GPU kinds: (name, memory GB, relative speed vs V100 = 1, usd/h of one GPU on demand).
GPU_KINDS = [
    ("K80", 12, 0.18, 0.90),
    ("M60", 8, 0.25, 0.75),
    ("T4", 16, 0.35, 0.53),
    ("V100", 16, 1.00, 3.06),
    ("V100-32", 32, 1.05, 3.90),
    ("A10G", 24, 0.70, 1.01),
    ("L4", 24, 0.60, 0.80),
    ("A100-40", 40, 2.30, 4.10),
    ("A100-80", 80, 2.50, 5.12),
    ("H100", 80, 4.50, 12.29),
]
# Instance sizes: (GPUs, NIC Gbit/s, NVLink).
SIZES = [(1, 25, False), (4, 50, False), (8, 100, True), (8, 400, True)]


@dataclass
class Catalog:
    instances: list
    offers: list
    n_types: int
    n_regions: int


def make_catalog(n_types: int, n_regions: int, seed: int) -> Catalog:
    rng = np.random.default_rng(seed)
    instances, kinds = [], []
    for t in range(n_types):
        g = GPU_KINDS[t % len(GPU_KINDS)]
        gpus, gbit, nvlink = SIZES[(t // len(GPU_KINDS)) % len(SIZES)]
        s = core.InstanceSpec()
        s.name = f"{g[0].lower()}.{gpus}x.{t}"
        s.gpus = gpus
        s.gpu_memory_bytes = g[1] * 1e9
        s.intra = core.LinkSpec(1.3e11 if nvlink else 1.2e10, 8e-6 if nvlink else 1.5e-5)
        s.network = core.LinkSpec(gbit / 8 * 1e9 * rng.uniform(0.6, 0.8), rng.uniform(2.5e-5, 6e-5))
        instances.append(s)
        kinds.append(g)
    offers = []  # (instance, region, market, usd/h, max_count, rate)
    rates = [core.interruption_rate_from_class(c) for c in ("<5%", "5-10%", "10-15%", "15-20%", ">20%")]
    for region in range(n_regions):
        regional = rng.uniform(1.0, 1.3)
        for t in range(n_types):
            g = kinds[t]
            gpus = instances[t].gpus
            od = round(g[3] * gpus * regional * rng.uniform(0.97, 1.05) * (1.15 if gpus == 8 else 1.0), 4)
            offers.append((t, region, core.Market.on_demand, od, 64, 0.0))
            spot = round(od * rng.uniform(0.3, 0.7), 4)
            offers.append((t, region, core.Market.spot, spot, 64, float(rng.choice(rates))))
    return Catalog(instances, offers, n_types, n_regions)


@dataclass
class WorkloadSpec:
    name: str
    grad_bytes: float
    fixed_memory: float
    activation_per_sample: float
    per_sample_v100: float  # forward + backward, seconds
    fixed_v100: float
    optimizer_v100: float
    global_batch: int
    iterations: float


WORKLOADS = {
    # ResNet-50 (25.6 M params, AMP): ~1100 img/s per V100.
    "resnet50": WorkloadSpec("resnet50", 25.6e6 * 4, 2.5e9, 0.11e9, 0.9e-3, 12e-3, 4e-3, 1024, 112_590),
    # BERT-large (335 M params, seq 128, AMP, Adam): ~95 seq/s per V100.
    "bert_large": WorkloadSpec("bert_large", 335e6 * 4, 335e6 * 16 + 1e9, 0.35e9, 10.5e-3, 25e-3, 35e-3, 256, 100_000),
}


def ddp_buckets(total: float, cap: float = 25 * 2**20, first: float = 2**20) -> list[float]:
    out, left = [min(first, total)], total - min(first, total)
    while left > 0:
        out.append(min(cap, left))
        left -= cap
    return out


def make_request(cat: Catalog, spec: WorkloadSpec, seed: int) -> core.SearchRequest:
    rng = np.random.default_rng(seed + 1)
    w = core.Workload()
    w.bucket_bytes = ddp_buckets(spec.grad_bytes)
    n = len(w.bucket_bytes)
    w.bucket_ready_fraction = [min(1.0, (k + 1) / n) for k in range(n)]
    w.fixed_memory_bytes = spec.fixed_memory
    w.activation_bytes_per_sample = spec.activation_per_sample
    r = core.SearchRequest()
    r.workload = w
    r.instances = cat.instances
    # One compute model per instance type (the GPU kind's speed, a little noise per type).
    models = []
    for t in range(cat.n_types):
        speed = GPU_KINDS[t % len(GPU_KINDS)][2] * rng.uniform(0.95, 1.05)
        m = core.ComputeModel()
        m.forward_fixed_s = spec.fixed_v100 / 3 / speed ** 0.5
        m.backward_fixed_s = 2 * spec.fixed_v100 / 3 / speed ** 0.5
        m.forward_per_sample_s = spec.per_sample_v100 / 3 / speed
        m.backward_per_sample_s = 2 * spec.per_sample_v100 / 3 / speed
        m.optimizer_s = spec.optimizer_v100 / speed
        models.append(m)
    offers = []
    for (t, region, market, usd, cap, rate) in cat.offers:
        o = core.Offer()
        o.instance, o.region, o.market, o.usd_per_hour, o.max_count = t, region, market, usd, cap
        o.compute = models[t]
        o.interruptions_per_hour = rate
        offers.append(o)
    r.offers = offers
    r.global_batch = spec.global_batch
    r.iterations = spec.iterations
    sp = core.SpotParams()
    sp.checkpoint_bytes = spec.fixed_memory  # weights + optimizer state, roughly
    sp.write_bytes_per_s = 1e9
    sp.read_bytes_per_s = 2e9
    sp.provisioning_s = 180
    r.spot = sp
    r.max_types = 3
    r.top_k = 1
    r.threads = 1
    return r


# ---- a numpy reimplementation of the iteration model (<= 2 groups per plan) -----------------

def _max_batch(r, inst) -> int:
    w = r.workload
    free = r.usable_memory_fraction * inst.gpu_memory_bytes - w.fixed_memory_bytes
    if free < w.activation_bytes_per_sample:
        return 0
    if w.activation_bytes_per_sample <= 0:
        return r.global_batch
    cap = math.floor(free / w.activation_bytes_per_sample)
    return r.global_batch if cap >= r.global_batch else int(cap)


class NumpyModel:
    """Vectorised simulate_unchecked + spot expectation for plans of one or two offers.

    Mirrors csrc/simulator.cpp operation by operation so the optima agree with the core's
    (the last bits can differ where numpy fuses or reorders nothing: we compare to 1e-9)."""

    def __init__(self, r: core.SearchRequest):
        self.r = r
        offers = r.offers
        inst = [r.instances[o.instance] for o in offers]
        f = lambda xs: np.array(xs, dtype=np.float64)  # noqa: E731
        self.gpus = np.array([i.gpus for i in inst], dtype=np.int64)
        self.m = np.array([_max_batch(r, i) for i in inst], dtype=np.int64)
        self.ff = f([o.compute.forward_fixed_s for o in offers])
        self.fp = f([o.compute.forward_per_sample_s for o in offers])
        self.bf = f([o.compute.backward_fixed_s for o in offers])
        self.bp = f([o.compute.backward_per_sample_s for o in offers])
        self.c = self.ff + self.bf
        self.s = self.fp + self.bp
        self.opt = f([o.compute.optimizer_s for o in offers])
        self.price = f([o.usd_per_hour for o in offers])
        self.rate = f([o.interruptions_per_hour for o in offers])
        self.intra_bw = f([i.intra.bandwidth for i in inst])
        self.intra_lat = f([i.intra.latency for i in inst])
        self.net_bw = f([i.network.bandwidth for i in inst])
        self.net_lat = f([i.network.latency for i in inst])
        self.bytes = [b for b in r.workload.bucket_bytes]
        self.ready = [x for x in r.workload.bucket_ready_fraction]

    def evaluate(self, offer_idx: list[np.ndarray], counts: list[np.ndarray]):
        """Totals (total_s, total_usd, usd_per_hour) of plans; NaN where infeasible."""
        r, B = self.r, self.r.global_batch
        n = len(offer_idx)
        size = counts[0].shape[0]
        w = [counts[g] * self.gpus[offer_idx[g]] for g in range(n)]
        m = [self.m[offer_idx[g]] for g in range(n)]
        c = [self.c[offer_idx[g]] for g in range(n)]
        s = [self.s[offer_idx[g]] for g in range(n)]
        W = sum(w)
        inst_total = sum(counts)
        usd_h = np.zeros(size)
        for g in range(n):
            usd_h = usd_h + counts[g] * self.price[offer_idx[g]]
        cap = sum(w[g] * m[g] for g in range(n))
        ok = (W <= B) & (cap >= B)
        for g in range(n):
            ok &= m[g] >= 1
        mf = [np.maximum(m[g], 1).astype(np.float64) for g in range(n)]
        # split_batch: water level over the breakpoints, then floors and a greedy remainder.
        bps = np.sort(np.stack([x for g in range(n) for x in (c[g] + s[g], c[g] + s[g] * mf[g])]), axis=0)

        def total_at(t):
            tot = np.zeros(size)
            for g in range(n):
                tot = tot + w[g] * np.clip((t - c[g]) / s[g], 1.0, mf[g])
            return tot

        fs = np.stack([total_at(bps[i]) for i in range(bps.shape[0])])
        t = bps[-1].copy()
        found = np.zeros(size, dtype=bool)
        for i in range(1, bps.shape[0]):
            hit = (~found) & (fs[i] >= B)
            t_lo, f_lo, t_hi, f_hi = bps[i - 1], fs[i - 1], bps[i], fs[i]
            with np.errstate(divide="ignore", invalid="ignore"):
                ti = np.where(f_hi > f_lo, t_lo + (B - f_lo) * (t_hi - t_lo) / (f_hi - f_lo), t_hi)
            t = np.where(hit, ti, t)
            found |= hit
        low, nxt = [], []
        assigned = np.zeros(size, dtype=np.int64)
        for g in range(n):
            b = np.clip((t - c[g]) / s[g], 1.0, mf[g])
            lo = np.clip(np.floor(b).astype(np.int64), 1, np.maximum(m[g], 1))
            low.append(lo)
            assigned += w[g] * lo
            nxt.append(np.where(lo < m[g], c[g] + s[g] * (lo + 1), np.inf))
        remaining = B - assigned
        high_flag = [np.zeros(size, dtype=bool) for _ in range(n)]
        if n == 1:
            order = [np.zeros(size, dtype=np.int64)]
        else:
            first = np.where(nxt[1] < nxt[0], 1, 0)
            order = [first, 1 - first]
        for k in range(n):
            for g in range(n):
                sel = (order[k] == g) & (remaining > 0) & np.isfinite(nxt[g])
                extra = np.minimum(remaining, w[g])
                remaining = np.where(sel, remaining - extra, remaining)
                high_flag[g] |= sel & (extra > 0)
        fw, bw_, comp, opt = [], [], np.zeros(size), np.zeros(size)
        for g in range(n):
            slowest = np.where(high_flag[g], low[g] + 1, low[g]).astype(np.float64)
            o = offer_idx[g]
            fwd = self.ff[o] + self.fp[o] * slowest
            bwd = self.bf[o] + self.bp[o] * slowest
            fw.append(fwd)
            bw_.append(bwd)
            comp = np.maximum(comp, fwd + bwd)
            opt = np.maximum(opt, self.opt[o])
        ring_bw = np.full(size, np.inf)
        lat = np.zeros(size)
        for g in range(n):
            o = offer_idx[g]
            multi = self.gpus[o] > 1
            ring_bw = np.where(multi, np.minimum(ring_bw, self.intra_bw[o]), ring_bw)
            lat = np.maximum(lat, np.where(multi, self.intra_lat[o], 0.0))
            many = inst_total > 1
            ring_bw = np.where(many, np.minimum(ring_bw, self.net_bw[o]), ring_bw)
            lat = np.where(many, np.maximum(lat, self.net_lat[o]), lat)
        Wf = W.astype(np.float64)
        stream = np.zeros(size)
        multi_rank = W > 1
        for k, nbytes in enumerate(self.bytes):
            ready = np.zeros(size)
            for g in range(n):
                ready = np.maximum(ready, fw[g] + self.ready[k] * bw_[g])
            if nbytes > 0:
                with np.errstate(divide="ignore", invalid="ignore"):
                    dur = 2.0 * (Wf - 1.0) / Wf * nbytes / ring_bw + 2.0 * (Wf - 1.0) * lat
                dur = np.where(multi_rank, dur, 0.0)
            else:
                dur = np.zeros(size)
            start = np.maximum(ready, stream)
            stream = np.where(multi_rank, start + dur, stream)
        iteration = np.maximum(stream, comp) + opt
        rate = np.zeros(size)
        for g in range(n):
            rate = rate + counts[g] * self.rate[offer_idx[g]]
        total_s = self.spot_expected(r.iterations * iteration, rate)
        total_usd = usd_h * total_s / 3600.0
        total_s = np.where(ok, total_s, np.nan)
        total_usd = np.where(ok, total_usd, np.nan)
        return total_s, total_usd, usd_h

    def spot_expected(self, nominal, rate):
        p = self.r.spot
        out = nominal.copy()
        sp = rate > 0
        if not sp.any():
            return out
        with np.errstate(divide="ignore", invalid="ignore"):
            mtbf = 3600.0 / rate
            delta = p.checkpoint_bytes / p.write_bytes_per_s
            restart = p.provisioning_s + p.checkpoint_bytes / p.read_bytes_per_s
            never_cf = restart + nominal / 2.0
            never_d = 1.0 - never_cf / mtbf
            never = np.where(never_d > 0, nominal / never_d, np.inf)
            tau = np.sqrt(2.0 * delta * mtbf)
            t0 = nominal * (1.0 + np.sqrt(delta / (2.0 * mtbf)))
            cf = restart + (tau + delta) / 2.0
            d = 1.0 - cf / mtbf
            withc = np.where((tau < nominal) & (d > 0), t0 / d, np.inf)
        return np.where(sp, np.minimum(withc, never), out)


def numpy_exhaustive(r: core.SearchRequest, regions: set[int]):
    """Best plan (min cost under the deadline or min time under the budget) over <= 2 offers."""
    model = NumpyModel(r)
    by_region: dict[int, list[int]] = {}
    for i, o in enumerate(r.offers):
        if o.region in regions and o.max_count > 0:
            by_region.setdefault(o.region, []).append(i)
    best = (math.inf, math.inf, None)
    evaluated = 0
    min_cost = r.objective == core.Objective.min_cost

    def consider(ts, us, uh, plans):
        nonlocal best, evaluated
        evaluated += ts.shape[0]
        okc = np.isfinite(ts) & (ts <= r.deadline_s) & (us <= r.budget_usd) & (uh <= r.max_usd_per_hour)
        if not okc.any():
            return
        primary, secondary = (us, ts) if min_cost else (ts, us)
        idx = np.flatnonzero(okc)
        j = idx[np.lexsort((secondary[idx], primary[idx]))[0]]
        cand = (primary[j], secondary[j], plans(j))
        if (cand[0], cand[1]) < (best[0], best[1]):
            best = cand

    for idx in by_region.values():
        for i in idx:
            cnt = np.arange(1, r.offers[i].max_count + 1)
            oi = np.full(cnt.shape[0], i)
            ts, us, uh = model.evaluate([oi], [cnt])
            consider(ts, us, uh, lambda j, i=i, cnt=cnt: ((i, int(cnt[j])),))
            if r.max_types < 2:
                continue
            js = [j for j in idx if j > i]
            if not js:
                continue
            ca, cb, jj = [], [], []
            for j in js:
                a, b = np.meshgrid(np.arange(1, r.offers[i].max_count + 1), np.arange(1, r.offers[j].max_count + 1), indexing="ij")
                ca.append(a.ravel()); cb.append(b.ravel()); jj.append(np.full(a.size, j))
            ca, cb, jj = np.concatenate(ca), np.concatenate(cb), np.concatenate(jj)
            ts, us, uh = model.evaluate([np.full(ca.shape[0], i), jj], [ca, cb])
            consider(ts, us, uh, lambda k, i=i, ca=ca, cb=cb, jj=jj: ((i, int(ca[k])), (int(jj[k]), int(cb[k]))))
    return best, evaluated


def milp_homogeneous(r: core.SearchRequest, regions: set[int]):
    """scipy.optimize.milp (HiGHS) on the homogeneous plans (one offer per plan).

    Linearisation: the iteration model is not linear in the counts, so each (offer, count)
    becomes a binary x_oc with its simulated time T_oc and cost U_oc as coefficients (from the
    numpy model); min Σ U x (or Σ T x) s.t. Σ x = 1, Σ T x <= deadline, Σ U x <= budget,
    Σ usd/h x <= hourly cap. Exact for max_types = 1; the coefficient build is timed too."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    model = NumpyModel(r)
    t0 = time.perf_counter()
    idx, cnts = [], []
    for i, o in enumerate(r.offers):
        if o.region in regions and o.max_count > 0:
            idx.append(np.full(o.max_count, i)); cnts.append(np.arange(1, o.max_count + 1))
    oi, cn = np.concatenate(idx), np.concatenate(cnts)
    ts, us, uh = model.evaluate([oi], [cn])
    keep = np.isfinite(ts)
    oi, cn, ts, us, uh = oi[keep], cn[keep], ts[keep], us[keep], uh[keep]
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    min_cost = r.objective == core.Objective.min_cost
    cost = us if min_cost else ts
    rows, lo, hi = [np.ones_like(ts)], [1.0], [1.0]
    for coef, limit in ((ts, r.deadline_s), (us, r.budget_usd), (uh, r.max_usd_per_hour)):
        if math.isfinite(limit):
            rows.append(coef); lo.append(-np.inf); hi.append(limit)
    res = milp(c=cost, constraints=LinearConstraint(np.vstack(rows), lo, hi),
               integrality=np.ones_like(cost), bounds=Bounds(0, 1))
    solve_s = time.perf_counter() - t1
    if res.x is None:
        return None, build_s, solve_s, len(ts)
    j = int(np.argmax(res.x))
    return ((int(oi[j]), int(cn[j])), float(ts[j]), float(us[j])), build_s, solve_s, len(ts)


# ---- the run --------------------------------------------------------------------------------

QUESTIONS = {
    # workload: (deadline hours for min cost, budget USD for max throughput); chosen so the
    # constraint binds (the unconstrained optimum violates it).
    "resnet50": ((1.0, 2.0, 8.0), (50.0, 200.0, 1000.0)),
    "bert_large": ((4.0, 8.0, 24.0), (50.0, 200.0, 1000.0)),
}


def machine() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        commit += "+dirty" if dirty else ""
    except OSError:
        commit = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
            "commit": commit, "srift_core": core.__version__, "load_avg": os.getloadavg()}


def plan_of(p) -> list:
    return [[g.offer, g.count] for g in p.groups]


def subset(r: core.SearchRequest, regions: set[int], max_count: int | None = None) -> core.SearchRequest:
    """The same question restricted to some regions (offers renumbered) and a smaller cap."""
    q = core.SearchRequest()
    for name in ("workload", "instances", "global_batch", "iterations", "objective", "deadline_s", "budget_usd",
                 "max_usd_per_hour", "max_types", "top_k", "threads", "spot", "usable_memory_fraction"):
        setattr(q, name, getattr(r, name))
    offers = []
    for o in r.offers:
        if o.region in regions:
            if max_count is not None:
                o.max_count = min(o.max_count, max_count)
            offers.append(o)
    q.offers = offers
    return q


def timed_search(r, repeat: int):
    times, res = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        res = core.search(r)
        times.append((time.perf_counter() - t, res.stats.seconds))
    wall = sorted(x[0] for x in times)[len(times) // 2]
    core_s = sorted(x[1] for x in times)[len(times) // 2]
    return res, wall, core_s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--types", type=int, default=40, help="instance types in the synthetic catalog")
    ap.add_argument("--regions", type=int, default=20)
    ap.add_argument("--max-types", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5, help="runs per question (median reported)")
    ap.add_argument("--numpy-budget-s", type=float, default=60.0,
                    help="grow the numpy baseline's space (regions) while a run stays under this")
    ap.add_argument("--quick", action="store_true", help="10 types x 4 regions, fewer repeats")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.types, args.regions, args.repeat, args.numpy_budget_s = 10, 4, 2, 5.0

    out: dict = {"benchmark": "bench_search", "machine": machine(), "threads": 1,
                 "catalog": {"types": args.types, "markets": 2, "regions": args.regions, "seed": args.seed,
                             "max_count": 64, "synthetic": True},
                 "max_types": args.max_types, "questions": [], "evaluation_rate": {}, "baselines": {}}
    cat = make_catalog(args.types, args.regions, args.seed)

    # 1. Time to the optimum, both questions, both workloads, one thread.
    for wl, (deadlines, budgets) in QUESTIONS.items():
        for kind, limits in (("min_cost_deadline", deadlines), ("max_throughput_budget", budgets)):
            for lim in limits:
                r = make_request(cat, WORKLOADS[wl], args.seed)
                r.max_types = args.max_types
                if kind == "min_cost_deadline":
                    r.objective, r.deadline_s = core.Objective.min_cost, lim * 3600.0
                else:
                    r.objective, r.budget_usd = core.Objective.max_throughput, lim
                res, wall, core_s = timed_search(r, args.repeat)
                best = res.plans[0] if res.plans else None
                row = {"workload": wl, "question": kind, "limit": lim, "core_ms": core_s * 1e3,
                       "call_ms": wall * 1e3, "optimal": res.optimal, "evaluated": res.stats.evaluated,
                       "nodes": res.stats.nodes, "space": res.stats.space,
                       "pruned_share": res.stats.pruned / res.stats.space if res.stats.space else 0.0,
                       "plan": plan_of(best) if best else None,
                       "hours": best.total_s / 3600 if best else None, "usd": best.total_usd if best else None}
                out["questions"].append(row)
                print(f"[time-to-optimum] {wl:10s} {kind:22s} {lim:>7g}: {core_s * 1e3:7.2f} ms core, "
                      f"{res.stats.evaluated} simulated, {res.stats.nodes} nodes, space {res.stats.space:.3g}, "
                      f"plan {row['plan']} {row['hours'] and round(row['hours'], 2)} h USD "
                      f"{row['usd'] and round(row['usd'], 2)}", flush=True)

    # 2. Simulations per second of the core on one thread (search_exhaustive over one region,
    #    <= 2 offers, caps 32), and the branch-and-bound's effective rate (space / time).
    for wl in WORKLOADS:
        r = subset(make_request(cat, WORKLOADS[wl], args.seed), {0}, max_count=32)
        r.max_types = 2
        r.objective, r.deadline_s = core.Objective.min_cost, QUESTIONS[wl][0][1] * 3600.0
        ex = core.search_exhaustive(r)
        rate = ex.stats.evaluated / ex.stats.seconds
        qs = [q for q in out["questions"] if q["workload"] == wl]
        effective = [q["space"] / (q["core_ms"] / 1e3) for q in qs]
        out["evaluation_rate"][wl] = {"simulations_per_s": rate, "buckets": len(r.workload.bucket_bytes),
                                      "exhaustive_plans": ex.stats.evaluated,
                                      "bnb_space_per_s_median": float(np.median(effective)),
                                      "bnb_pruned_share_median": float(np.median([q["pruned_share"] for q in qs]))}
        print(f"[rate] {wl}: {rate / 1e6:.2f} M simulations/s ({len(r.workload.bucket_bytes)} buckets); "
              f"branch-and-bound resolves {np.median(effective):.3g} plans/s of the space, "
              f"pruned share {np.median([q['pruned_share'] for q in qs]):.9f}", flush=True)

    # 3. Baselines on the largest space they finish: numpy exhaustive (<= 2 offers per plan)
    #    and MILP (homogeneous plans), against search() on the same space in the same run.
    for wl in WORKLOADS:
        for kind in ("min_cost_deadline", "max_throughput_budget"):
            base = make_request(cat, WORKLOADS[wl], args.seed)
            if kind == "min_cost_deadline":
                base.objective, base.deadline_s = core.Objective.min_cost, QUESTIONS[wl][0][1] * 3600.0
            else:
                base.objective, base.budget_usd = core.Objective.max_throughput, QUESTIONS[wl][1][1]
            n_regions, rows = 1, []
            while n_regions <= args.regions:
                regions = set(range(n_regions))
                r = subset(base, regions)
                r.max_types = 2
                t = time.perf_counter()
                (p1, p2, plan), evaluated = numpy_exhaustive(r, regions)
                np_s = time.perf_counter() - t
                res, wall, core_s = timed_search(r, args.repeat)
                best = res.plans[0] if res.plans else None
                bb = (best.total_usd, best.total_s) if best and kind == "min_cost_deadline" else \
                     ((best.total_s, best.total_usd) if best else (math.inf, math.inf))
                same = (plan is None and best is None) or (
                    best is not None and plan is not None and tuple(map(tuple, plan_of(best))) == plan
                    and math.isclose(bb[0], p1, rel_tol=1e-9))
                rows.append({"regions": n_regions, "plans": evaluated, "numpy_s": np_s, "bnb_core_s": core_s,
                             "speedup": np_s / core_s, "equal_optimum": bool(same)})
                print(f"[numpy] {wl} {kind} {n_regions} region(s), <=2 offers: {evaluated} plans in {np_s:.2f} s; "
                      f"search() {core_s * 1e3:.2f} ms -> {np_s / core_s:.0f}x, equal optimum {same}", flush=True)
                if np_s * 2 > args.numpy_budget_s:
                    break
                n_regions *= 2
            r = make_request(cat, WORKLOADS[wl], args.seed)
            r.objective, r.deadline_s, r.budget_usd = base.objective, base.deadline_s, base.budget_usd
            r.max_types = 1
            milp_best, build_s, solve_s, n_vars = milp_homogeneous(r, set(range(args.regions)))
            res, wall, core_s = timed_search(r, args.repeat)
            best = res.plans[0] if res.plans else None
            same = (milp_best is None and best is None) or (
                best is not None and milp_best is not None and plan_of(best) == [list(milp_best[0])])
            print(f"[milp] {wl} {kind} homogeneous, {n_vars} binaries: build {build_s:.3f} s + HiGHS {solve_s:.3f} s; "
                  f"search(max_types=1) {core_s * 1e3:.2f} ms -> {(build_s + solve_s) / core_s:.0f}x, "
                  f"equal optimum {same}", flush=True)
            out["baselines"][f"{wl}/{kind}"] = {
                "numpy_exhaustive_2_types": rows,
                "milp_homogeneous": {"binaries": n_vars, "build_s": build_s, "solve_s": solve_s,
                                     "bnb_core_s": core_s, "speedup": (build_s + solve_s) / core_s,
                                     "equal_optimum": bool(same)}}
    text = json.dumps(out, indent=1, default=float)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
