"""One rank of a validation run: real DistributedDataParallel training, timed.

Run by the launcher (or by a user's own ``torchrun``) as::

    python -m srift.validate.worker CONFIG.json

It reads the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
builds the zoo model with this rank's local batch, wraps it in DDP (gloo on CPU, NCCL on CUDA),
runs ``warmup`` untimed and ``iterations`` timed iterations (forward, loss, backward with DDP's
bucketed allreduce, optimizer step) and writes ``rank<R>.json`` into the config's ``out_dir``.
With ``"mode": "compute"`` it runs one process without DDP to measure compute alone; with
``"mode": "allreduce"`` no model at all: it times ``dist.all_reduce`` of float32 tensors of
``message_bytes`` (``repeats`` times each after one untimed call) for the learned link model.

Timing: ``time.perf_counter`` around each phase on CPU; CUDA events (and a synchronize at the
end of every iteration) on GPU. Every rank writes a status file first, so a rank that fails or
hangs can be named by the launcher.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULT_SCHEMA = "srift.validate-rank/1"


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _move(obj: Any, device: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_move(x, device) for x in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device) for k, v in obj.items()}
    return obj


def _call(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _optimizer(name: str, params: Any) -> Any:
    import torch

    name = (name or "sgd").lower()
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    raise ValueError(f"optimizer: expected sgd, adam or adamw, got {name!r}")


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _summary(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "p10": _pct(xs, 0.1), "p90": _pct(xs, 0.9),
            "mean": statistics.fmean(xs), "min": min(xs), "max": max(xs)}


def _interference_probe(model: Any, opt: Any, loss_fn: Any, inputs: Any, targets: Any, world: int, device: Any,
                        cuda: bool, busbw_gbps: float, reps: int) -> dict[str, Any]:
    """Compute lost per byte of allreduce traffic flowing while this rank computes (s/byte).

    Alternates forward+backward alone and forward+backward with an asynchronous allreduce in
    flight (sized to last about half the compute at the probed bandwidth), every rank at once.
    Where collectives compete with compute for the same cores (a CPU host with no spare core:
    TCP stack, gloo's copies and sums) the second is slower; the difference over the traffic
    that overlapped it is the cost per byte."""
    import torch
    import torch.distributed as dist

    def fwd_bwd() -> float:
        t0 = time.perf_counter()
        with model.no_sync():
            loss_fn(_call(model, inputs), targets).backward()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    traffic_per_byte = 2 * (world - 1) / world
    dist.barrier()
    alone0 = fwd_bwd()  # warm-up, and the size of the overlapping message
    nbytes = int(0.5 * alone0 * busbw_gbps * 1e9 / 8 / traffic_per_byte)
    nbytes = max(1 << 20, min(nbytes, 512 << 20)) // 4 * 4
    agreed = torch.tensor([nbytes], dtype=torch.int64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)  # every rank must reduce the same size
    nbytes = int(agreed.item())
    buf = torch.zeros(nbytes // 4, device=device)
    alone, shared, overlap = [], [], []
    for _ in range(max(2, reps)):
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        alone.append(fwd_bwd())
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        t0 = time.perf_counter()
        work = dist.all_reduce(buf, async_op=True)
        t_compute = fwd_bwd()
        work.wait()
        if cuda:
            torch.cuda.synchronize()
        t_comm = time.perf_counter() - t0
        shared.append(t_compute)
        overlap.append(min(1.0, t_compute / t_comm) if t_comm > 0 else 1.0)  # traffic share inside
    opt.zero_grad(set_to_none=True)
    lost = statistics.median(shared) - statistics.median(alone)
    traffic = traffic_per_byte * nbytes * statistics.median(overlap)
    return {"interference_s_per_byte": max(0.0, lost / traffic) if traffic > 0 else 0.0,
            "interference_probe": {"bytes": nbytes, "alone_s": alone, "shared_s": shared, "overlap": overlap}}


def _timed_allreduce(tensor: Any, cuda: bool) -> float:
    """Seconds of one allreduce of `tensor`, the GPU queue drained before and after (on its
    own device) so the wall clock holds exactly the collective."""
    import torch
    import torch.distributed as dist

    if cuda:
        torch.cuda.synchronize(tensor.device)
    t0 = time.perf_counter()
    dist.all_reduce(tensor)
    if cuda:
        torch.cuda.synchronize(tensor.device)
    return time.perf_counter() - t0


def allreduce_times(sizes: list[int], repeats: int, device: Any, cuda: bool) -> tuple[list[float], list[list[float]]]:
    """Median seconds of one float32 allreduce per message size (bytes) in the initialised
    default process group, and each size's [p10, p90]: one untimed call per size (connections,
    buffers), then `repeats` timings, all ranks released together by a barrier before each."""
    import torch
    import torch.distributed as dist

    medians, spreads = [], []
    for nbytes in sizes:
        x = torch.ones(max(nbytes // 4, 1), dtype=torch.float32, device=device)
        dist.all_reduce(x)  # connection set-up and buffers outside the timing
        ts = []
        for _ in range(repeats):
            dist.barrier()
            ts.append(_timed_allreduce(x, cuda))
        medians.append(statistics.median(ts))
        spreads.append([_pct(ts, 0.1), _pct(ts, 0.9)])
    return medians, spreads


def ddp_options(cfg: dict[str, Any], ddp_class: Any, device_ids: list[int] | None) -> dict[str, Any]:
    """DistributedDataParallel's keyword arguments for the run: the profile's bucket cap and,
    when the profile says the user's DDP does not broadcast its buffers, that (torch 2.13
    renamed broadcast_buffers, now deprecated, to forward_sync_buffers)."""
    import inspect

    out: dict[str, Any] = {"bucket_cap_mb": float(cfg.get("bucket_cap_mb", 25))}
    if not cfg.get("forward_sync_buffers", True):
        renamed = "forward_sync_buffers" in inspect.signature(ddp_class.__init__).parameters
        out["forward_sync_buffers" if renamed else "broadcast_buffers"] = False
    if device_ids is not None:
        out["device_ids"] = device_ids
    return out


def _allreduce_sweep(cfg: dict[str, Any], rank: int, world: int, local_rank: int, device: Any,
                     cuda: bool) -> dict[str, Any]:
    """Median seconds of one allreduce per message size, every rank starting together."""
    import torch.distributed as dist

    backend = cfg.get("backend") or ("nccl" if cuda else "gloo")
    dist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=float(cfg.get("collective_timeout_s", 120))))
    sizes = [int(s) for s in cfg["message_bytes"]]
    repeats = int(cfg.get("repeats", 5))
    medians, spreads = allreduce_times(sizes, repeats, device, cuda)
    dist.barrier()
    dist.destroy_process_group()
    return {"schema": RESULT_SCHEMA, "status": "ok", "mode": "allreduce", "rank": rank, "world_size": world,
            "local_rank": local_rank, "backend": backend, "hostname": os.uname().nodename,
            "message_bytes": sizes, "repeats": repeats, "allreduce_s": medians, "allreduce_p10_p90_s": spreads}


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    import torch

    mode = cfg.get("mode", "ddp")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    threads = cfg.get("threads")
    if isinstance(threads, list):
        threads = threads[rank]
    if threads:
        torch.set_num_threads(int(threads))
    cuda = cfg.get("device", "cpu") == "cuda"
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if mode == "allreduce":
        return _allreduce_sweep(cfg, rank, world, local_rank, device, cuda)
    local_batches = cfg["local_batches"]
    b = int(local_batches[rank] if rank < len(local_batches) else local_batches[0])

    from srift import zoo  # noqa: PLC0415 - after thread settings

    model, (inputs, targets), loss_fn = zoo.build(cfg["model"], b, device="cpu", seed=int(cfg.get("seed", 0)) + rank,
                                                  **cfg.get("options", {}))
    model = model.to(device)
    inputs, targets = _move(inputs, device), _move(targets, device)

    info: dict[str, Any] = {}
    pg = None
    # compute calibration of several ranks at once: a gloo group only for barriers, so the
    # ranks start every iteration and every optimizer step together, as DDP makes them do
    # (co-located ranks then contend for memory bandwidth in the same phases as in the run)
    align = None
    if mode == "compute" and cfg.get("align") and world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="gloo",
                                    timeout=_dt.timedelta(seconds=float(cfg.get("collective_timeout_s", 120))))
        align = dist
    if mode == "ddp":
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        backend = cfg.get("backend") or ("nccl" if cuda else "gloo")
        dist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=float(cfg.get("collective_timeout_s", 120))))
        pg = dist
        model = DDP(model, **ddp_options(cfg, DDP, [local_rank] if cuda else None))
        # latency floor of one tiny allreduce and the achieved bandwidth of a big one
        if cfg.get("probe", True) and world > 1:
            t = torch.zeros(1, device=device)
            lat = []
            for _ in range(30):
                lat.append(_timed_allreduce(t, cuda))
            info["allreduce_latency_s"] = statistics.median(lat[5:])
            # bandwidth from the slope of time over message size (several sizes up to
            # probe_bytes), so per-call start-up costs do not pass for a slow link
            top = int(cfg.get("probe_bytes", 32 << 20))
            sizes = sorted({max(1 << 16, top >> k) for k in (5, 3, 1, 0)})
            xs, ts = [], []
            for nbytes in sizes:
                big = torch.zeros(nbytes // 4, device=device)
                reps = []
                for _ in range(4):
                    dist.barrier()
                    reps.append(_timed_allreduce(big, cuda))
                # ring allreduce moves 2(n-1)/n * S through each rank
                xs.append(2 * (world - 1) / world * nbytes)
                ts.append(statistics.median(reps[1:]))
            mx, mt = statistics.fmean(xs), statistics.fmean(ts)
            sxx = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sxx if sxx > 0 else 0.0
            if slope > 0:
                info["allreduce_busbw_gbps"] = 8 / slope / 1e9
                info["allreduce_intercept_s"] = max(0.0, mt - slope * mx)
            else:  # noise swamped the fit: the largest message alone
                info["allreduce_busbw_gbps"] = xs[-1] * 8 / ts[-1] / 1e9
            info["allreduce_probe_bytes"] = sizes
            info["allreduce_probe_s"] = ts

    opt = _optimizer(cfg.get("optimizer", "sgd"), model.parameters())
    warmup, iters = int(cfg.get("warmup", 3)), int(cfg.get("iterations", 10))
    # in-run compute: DDP's no_sync() skips the allreduce, so these iterations time this
    # rank's compute under the very conditions of the run (the other ranks compute too)
    n_local = int(cfg.get("compute_iterations", 0)) if pg is not None else 0
    local_it, local_f, local_b = [], [], []
    for i in range(n_local + (1 if n_local else 0)):
        pg.barrier()
        t0 = time.perf_counter()
        with model.no_sync():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(_call(model, inputs), targets)
            if cuda:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            loss.backward()
            if cuda:
                torch.cuda.synchronize()
            t2 = time.perf_counter()
        pg.barrier()  # as after an allreduce, every rank steps its optimizer at once
        t3 = time.perf_counter()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        if i > 0:  # the first one warms up
            local_it.append(t2 - t0 + time.perf_counter() - t3), local_f.append(t1 - t0), local_b.append(t2 - t1)
    if local_it:
        info["local_compute"] = {"iteration": _summary(local_it), "forward": _summary(local_f),
                                 "backward": _summary(local_b)}
    if pg is not None and world > 1 and cfg.get("interference_probe", True) and info.get("allreduce_busbw_gbps"):
        info.update(_interference_probe(model, opt, loss_fn, inputs, targets, world, device, cuda,
                                        float(info["allreduce_busbw_gbps"]), int(cfg.get("interference_reps", 6))))
    fwd, bwd, stp, it = [], [], [], []
    if pg is not None:
        pg.barrier()
    for i in range(warmup + iters):
        if align is not None:
            align.barrier()
        if cuda:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
            ev[0].record()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(_call(model, inputs), targets)
        if cuda:
            ev[1].record()
        t1 = time.perf_counter()
        loss.backward()
        if cuda:
            ev[2].record()
        t2 = tb = time.perf_counter()
        if align is not None:  # the optimizer step starts when every rank's backward is done
            align.barrier()
            t2 = time.perf_counter()
        if cuda:
            ev[4].record()  # optimizer start (after the barrier when aligned)
        opt.step()
        if cuda:
            ev[3].record()
            torch.cuda.synchronize()
            f, bk, s = (ev[0].elapsed_time(ev[1]) / 1e3, ev[1].elapsed_time(ev[2]) / 1e3, ev[4].elapsed_time(ev[3]) / 1e3)
            total = f + bk + s
        else:
            t3 = time.perf_counter()
            # aligned: the wait at the barrier is not this rank's work
            f, bk, s = t1 - t0, (t2 - t1) if align is None else (tb - t1), t3 - t2
            total = f + bk + s
        if not torch.isfinite(loss.detach()).item():
            raise FloatingPointError(f"loss is {loss.item()} at iteration {i}")
        if i >= warmup:
            fwd.append(f), bwd.append(bk), stp.append(s), it.append(total)
    result = {
        "schema": RESULT_SCHEMA, "status": "ok", "mode": mode, "rank": rank, "world_size": world,
        "local_rank": local_rank, "local_batch": b, "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "hostname": os.uname().nodename, "warmup": warmup, "iterations": iters,
        "iteration_s": it, "forward_s": fwd, "backward_s": bwd, "optimizer_s": stp,
        "summary": {"iteration": _summary(it), "forward": _summary(fwd), "backward": _summary(bwd),
                    "optimizer": _summary(stp)},
        **info,
    }
    if pg is not None:
        pg.barrier()
        pg.destroy_process_group()
    return result


MAX_ALARM_S = 2**31 - 1  # signal.alarm takes a C int


def alarm_seconds(timeout: float) -> int:
    """Whole seconds for ``signal.alarm``: at least 1, at most MAX_ALARM_S (an infinite or
    huge deadline waits as long as alarm can); ValueError for a deadline that is not positive."""
    if not timeout > 0:  # also NaN
        raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout!r}")
    if not math.isfinite(timeout):
        return MAX_ALARM_S
    return int(min(MAX_ALARM_S, max(1, math.ceil(timeout))))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m srift.validate.worker CONFIG.json", file=sys.stderr)
        return 2
    cfg = json.loads(Path(argv[0]).read_text())
    rank = int(os.environ.get("RANK", "0"))
    out = Path(cfg["out_dir"]) / f"rank{rank}.json"
    _write(out, {"schema": RESULT_SCHEMA, "status": "started", "rank": rank, "pid": os.getpid()})
    timeout = math.nan

    def _alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"rank {rank} exceeded its {timeout:.0f}s deadline")

    try:
        # hard deadline of its own: a rank never outlives the run. Inside the try: a bad value
        # is reported in the rank's status file, not lost in a traceback before it is written.
        timeout = float(cfg.get("timeout_s", 600))
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(alarm_seconds(timeout))
        fail_rank = cfg.get("fail_rank")  # for tests: make one rank fail on purpose
        if fail_rank is not None and int(fail_rank) == rank:
            raise RuntimeError(f"rank {rank} failed on purpose (fail_rank={fail_rank})")
        hang_rank = cfg.get("hang_rank")  # for tests: make one rank hang until its deadline
        if hang_rank is not None and int(hang_rank) == rank:
            time.sleep(timeout + 60)
        batches = cfg.get("calibration_batches") if cfg.get("mode") == "compute" else None
        if batches and isinstance(batches[0], list):  # one list per rank
            batches = batches[rank]
        if batches:
            # several local batches in one process (compute calibration): one result each
            parts = [run({**cfg, "local_batches": [int(b)]}) for b in batches]
            result = {**parts[0], "calibration": parts}
        else:
            result = run(cfg)
        if cfg.get("mode") == "compute":  # the barrier-only group of an aligned calibration
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
                dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - report any failure, then exit non-zero
        _write(out, {"schema": RESULT_SCHEMA, "status": "error", "rank": rank,
                     "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]})
        return 1
    finally:
        signal.alarm(0)
    _write(out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
