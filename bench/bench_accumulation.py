#!/usr/bin/env python3
"""Gradient accumulation in the search (srift::simulate note "accumulation"; csrc/bnb.cpp note
"bounds"): questions whose global batch fills GPU memory, asked on the bundled catalog (every
region, on-demand alone and with spot, up to 3 instance types and 64 instances each, one
thread), once without accumulation and once allowing up to --steps micro-steps, in the same
run:
  - the best plan, its cost and hours, and its micro-steps;
  - search time with accumulation as a ratio of the plain question's (the bounds read a
    worker's memory cap as the micro-steps', so they prune less);
  - on the space the exhaustive search finishes (2 types, 16 instances each), whether
    branch-and-bound and exhaustive enumeration find the same optimum with accumulation.

And, with --ddp, the timing rule itself on real DistributedDataParallel (gloo, 2 CPU ranks on
this machine, the zoo's resnet18_cifar): an iteration of k micro-steps, the first k - 1 under
no_sync(), timed against the simulator's composition of the same run's own pieces: one
ordinary all-reducing step plus k - 1 compute-only micro-steps that add their gradients into
those held (ComputeModel.accumulate_s), each timed back to back in a loop of 8 (median / max
absolute percentage error over k = 2, 4, 8); beside it the composition without the add (the
loop's micro-steps on fresh gradients), and k ordinary steps (an allreduce in each
micro-step, what accumulation without no_sync() would cost) as baselines.

    python bench/bench_accumulation.py [--steps 16] [--ddp] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from bench_recommend import _commit  # the script's directory is on sys.path

# (zoo model, zoo options, precision, global batch, iterations, deadline in hours)
QUESTIONS = [
    ("resnet50", {}, "fp32", 4096, 20_000, 24),
    ("bert_large", {"seq_len": 384}, "amp", 1024, 20_000, 48),
    ("gpt2_large", {}, "amp", 512, 20_000, 96),
]


def _best(rec) -> dict:
    b = rec.best
    if b is None:
        return {"best": None, "why_none": rec.why_none}
    return {"best": str(b.cluster), "total_usd": round(b.total_usd, 2), "total_hours": round(b.total_hours, 2),
            "accumulation_steps": b.prediction.accumulation_steps}


def _ddp_rank(rank: int, world: int, port: int, micro: int, steps: list[int], reps: int, out) -> None:
    """One rank of the --ddp check: times compute-only micro-steps (no_sync), ordinary DDP
    steps, and k-micro-step iterations, each after every rank meets at a barrier."""
    import torch
    import torch.distributed as dist

    import srift

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, batch, loss_fn = srift.zoo.build("resnet18_cifar", batch_size=micro, device="cpu")
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    inputs, targets = batch

    def micro_step(sync: bool) -> None:
        loss = loss_fn(ddp(inputs), targets)
        if sync:
            loss.backward()
        else:
            with ddp.no_sync():
                loss.backward()

    def timed(k: int, optimizer: bool) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        for j in range(k):
            micro_step(sync=optimizer and j == k - 1)
        if optimizer:
            opt.step()
            opt.zero_grad(set_to_none=True)
        dist.barrier()  # the slowest rank ends the iteration
        return time.perf_counter() - t0

    def loop(n: int, held: bool) -> float:
        """Seconds per compute-only micro-step, n back to back (fresh: gradients dropped first)."""
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            if not held:
                opt.zero_grad(set_to_none=True)
            micro_step(sync=False)
        dist.barrier()
        return (time.perf_counter() - t0) / n

    for _ in range(2):  # warm-up
        timed(1, True)
    rows = {"compute_only": [], "compute_only_held": [], "step": [], **{k: [] for k in steps}}
    for _ in range(reps):  # interleaved, so drift hits every kind alike
        rows["compute_only"].append(loop(8, held=False))
        rows["compute_only_held"].append(loop(8, held=True))  # each adds into the gradients held
        opt.zero_grad(set_to_none=True)
        rows["step"].append(timed(1, True))  # an ordinary step on fresh gradients
        for k in steps:
            rows[k].append(timed(k, True))
    if rank == 0:
        out.put({str(k): statistics.median(v) for k, v in rows.items()})
    dist.destroy_process_group()


def ddp_check(micro: int = 4, steps: tuple[int, ...] = (2, 4, 8), reps: int = 15) -> dict:
    """The --ddp check: measured k-micro-step iterations against (k - 1) x the measured
    compute-only micro-step + the measured ordinary step, 2 gloo ranks on CPU."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_ddp_rank, args=(r, 2, port, micro, list(steps), reps, out)) for r in range(2)]
    for p in procs:
        p.start()
    t = out.get(timeout=1800)
    for p in procs:
        p.join()
    rows = []
    for k in steps:
        predicted = t["step"] + (k - 1) * t["compute_only_held"]
        no_add = t["step"] + (k - 1) * t["compute_only"]
        rows.append({"k": k, "measured_s": t[str(k)], "composed_s": predicted,
                     "ape": abs(predicted / t[str(k)] - 1) * 100,
                     "composed_without_add_s": no_add, "without_add_ape": abs(no_add / t[str(k)] - 1) * 100,
                     "every_step_s": k * t["step"], "every_step_ape": abs(k * t["step"] / t[str(k)] - 1) * 100})
    apes = [r["ape"] for r in rows]
    base = [r["every_step_ape"] for r in rows]
    plain = [r["without_add_ape"] for r in rows]
    result = {"model": "resnet18_cifar", "ranks": 2, "backend": "gloo", "micro_batch_per_rank": micro,
              "compute_only_s": t["compute_only"], "compute_only_held_s": t["compute_only_held"],
              "add_s": t["compute_only_held"] - t["compute_only"], "step_s": t["step"], "rows": rows,
              "without_add_median_ape": statistics.median(plain), "without_add_max_ape": max(plain),
              "median_ape": statistics.median(apes), "max_ape": max(apes),
              "every_step_median_ape": statistics.median(base), "every_step_max_ape": max(base)}
    for r in rows:
        print(f"ddp check: {r['k']} micro-steps of {micro} per rank: measured {r['measured_s'] * 1e3:.1f} ms, "
              f"composed {r['composed_s'] * 1e3:.1f} ms ({r['ape']:.1f}% off); without the add "
              f"{r['without_add_ape']:.1f}% off; k ordinary steps "
              f"{r['every_step_s'] * 1e3:.1f} ms ({r['every_step_ape']:.1f}% off)")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16, help="most accumulation micro-steps allowed")
    parser.add_argument("--repeat", type=int, default=3, help="runs per question (median reported)")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--ddp", action="store_true", help="also check the timing rule on real DDP (gloo, CPU)")
    parser.add_argument("--ddp-reps", type=int, default=15, help="timed repetitions of each kind (median)")
    args = parser.parse_args(argv)

    import srift
    from srift import _core
    from srift.planning import _Space

    catalog = srift.Catalog.default()
    rows = []
    for name, options, precision, batch, iterations, deadline in QUESTIONS:
        model, sample, loss_fn = srift.zoo.build(name, batch_size=4, device="meta", **options)
        prof = srift.profile(model, sample, loss_fn=loss_fn, device="meta", name=name, precision=precision)
        for spot in (False, True):
            runs = {}
            for steps in (1, args.steps):
                times, rec = [], None
                for _ in range(args.repeat):
                    rec = srift.recommend(prof, global_batch=batch, iterations=iterations, deadline_hours=deadline,
                                          catalog=catalog, regions="all", spot=spot, max_types=3,
                                          max_instances_per_type=64, threads=1, max_accumulation_steps=steps)
                    times.append(rec.search.seconds)
                runs[steps] = (statistics.median(times), rec)
            (plain_s, plain), (acc_s, acc) = runs[1], runs[args.steps]
            # B&B against exhaustive enumeration on the space the latter finishes, accumulation on
            space = _Space(prof, catalog, global_batch=batch, iterations=iterations, regions="all",
                           markets=("on-demand", "spot") if spot else ("on-demand",), instance_types=None, exclude=None,
                           max_instances_per_type=16, config=None, precision=None, max_accumulation_steps=args.steps)
            req = space.request
            req.objective = _core.Objective.min_cost
            req.deadline_s = deadline * 3600.0
            req.max_types, req.threads, req.top_k = 2, 1, 1
            t0 = time.perf_counter()
            ex = _core.search_exhaustive(req)
            exhaustive_s = time.perf_counter() - t0
            bb = _core.search(req)
            same = (not ex.plans and not bb.plans) or bool(
                ex.plans and bb.plans and abs(ex.plans[0].total_usd - bb.plans[0].total_usd) <= 1e-9 * ex.plans[0].total_usd)
            row = {"model": name, "precision": precision, "global_batch": batch, "iterations": iterations,
                   "deadline_hours": deadline, "markets": "on-demand,spot" if spot else "on-demand", "plain": _best(plain), "accumulating": _best(acc),
                   "plain_search_s": plain_s, "accumulating_search_s": acc_s, "search_time_ratio": acc_s / plain_s,
                   "plain_simulated": plain.search.evaluated, "accumulating_simulated": acc.search.evaluated,
                   "cost_ratio": (acc.best.total_usd / plain.best.total_usd
                                  if acc.best is not None and plain.best is not None else None),
                   "exhaustive_s": exhaustive_s, "exhaustive_equal_optimum": same}
            rows.append(row)
            ratio = f"x{row['cost_ratio']:.3f} the cost" if row["cost_ratio"] is not None else "(no plain plan)"
            print(f"{name:10s} batch {batch:5d} within {deadline:3d} h, {row['markets']:14s}: plain {row['plain'].get('best')} "
                  f"${row['plain'].get('total_usd')} | accumulating {row['accumulating'].get('best')} "
                  f"${row['accumulating'].get('total_usd')} "
                  f"({row['accumulating'].get('accumulation_steps')} micro-steps), {ratio}; search "
                  f"{plain_s * 1e3:.1f} -> {acc_s * 1e3:.1f} ms (x{row['search_time_ratio']:.2f}); "
                  f"exhaustive equal optimum {same}")
    result = {"benchmark": "bench_accumulation", "commit": _commit(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "threads": 1, "steps": args.steps, "rows": rows}
    if args.ddp:
        result["ddp_check"] = ddp_check(reps=args.ddp_reps)
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
