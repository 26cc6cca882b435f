#!/usr/bin/env python3
"""What DDP's buffer broadcast costs on a real link, against what srift predicts for it.

    sudo python bench/buffer_broadcast.py [--rates 1 4] [--mib 8 32 128] [--iterations 30]

Two emulated hosts (network namespaces, NICs shaped by tbf: srift.validate.netemu; --hosts
for more), one gloo rank on each, train a Linear(64, 64) that carries buffers of B MiB with DDP's
``forward_sync_buffers`` on and off (its default is on); the broadcast's cost is the difference
of the median iterations (the two runs alternate which goes first). The prediction is srift's
rule (simulator.hpp note "buffer broadcast") on the emulated link as it is: the messages
srift.buckets.buffer_broadcasts finds, each bytes / the shaped NIC rate plus one hop at half the
emulation's measured round trip. (srift.predict would take the link from the catalog or a
probe instead; this checks the rule, not a catalog's NIC figures.) Buffers come as one float32
tensor ("one") and as eight ("eight": one message, which DDP flattens and copies back: the
copies run at host memory speed here, at HBM speed on a GPU). Prints one JSON line per
configuration. ``--hosts N`` runs N ranks, one per host: the rule is NCCL's pipelined ring, a
chain of N - 1 hops; gloo broadcasts otherwise, and there the rule under-predicts (README
"Buffers").
Needs root (network namespaces); takes ~10 minutes at the defaults.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MIB = 1 << 20


def _model(layout: str, mib: int):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(64, 64)
    pieces = 1 if layout == "one" else 8
    for i in range(pieces if mib else 0):
        model.register_buffer(f"buf{i}", torch.zeros(mib * MIB // 4 // pieces))
    return model


def worker(spec: dict) -> None:
    """One rank: median iteration with the broadcast on and off, per buffer layout and size."""
    import warnings

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    out = []
    x = torch.randn(8, 64)
    for layout, mib in spec["configs"]:
        row = {"layout": layout, "mib": mib}
        for sync in ((True, False) if len(out) % 2 == 0 else (False, True)):  # alternate: no order bias
            ddp = DDP(_model(layout, mib), forward_sync_buffers=sync)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
            times = []
            for i in range(spec["warmup"] + spec["iterations"]):
                dist.barrier()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                ddp(x).square().mean().backward()
                opt.step()
                if i >= spec["warmup"]:
                    times.append(time.perf_counter() - t0)
            row["sync_s" if sync else "nosync_s"] = statistics.median(times)
        out.append(row)
    if dist.get_rank() == 0:
        with open(spec["out"], "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[1.0, 4.0], help="NIC Gbit/s")
    ap.add_argument("--mib", type=int, nargs="+", default=[8, 32, 128], help="buffer MiB")
    ap.add_argument("--hosts", type=int, default=2, help="emulated hosts, one rank each")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hosts < 2:
        ap.error(f"--hosts: a broadcast needs at least 2 hosts, got {args.hosts}")
    if args.worker:
        worker(json.loads(args.worker))
        return 0

    from srift import _core
    from srift.buckets import buffer_broadcasts
    from srift.validate import netemu

    reason = netemu.unavailable_reason()
    if reason:
        print(f"buffer_broadcast: {reason}", file=sys.stderr)
        return 2
    configs = [("one", 0)] + [(layout, m) for m in args.mib for layout in ("one", "eight")]
    for k, rate in enumerate(args.rates):
        with netemu.emulate([rate] * args.hosts) as emu:
            latency = netemu.latency_floor(emu.hosts[0], emu.hosts[1]) / 2  # a round trip: two hops
            out = f"/tmp/srift_buffer_broadcast_{os.getpid()}.json"
            spec = {"configs": configs, "iterations": args.iterations, "warmup": args.warmup, "out": out}
            procs = []
            try:
                for rank, host in enumerate(emu.hosts):
                    env = {**os.environ, "MASTER_ADDR": emu.hosts[0].address, "MASTER_PORT": str(29750 + k),
                           "RANK": str(rank), "WORLD_SIZE": str(args.hosts), "GLOO_SOCKET_IFNAME": host.ifname,
                           "OMP_NUM_THREADS": "1"}
                    procs.append(subprocess.Popen(host.exec_prefix() + [sys.executable, __file__, "--worker",
                                                                        json.dumps(spec)], env=env))
                codes = [p.wait(timeout=1800) for p in procs]
            finally:  # a failed or timed-out rank must not leave the other waiting on gloo
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            if any(codes):
                print(f"buffer_broadcast: rank exit codes {codes} at {rate:g} Gbit/s", file=sys.stderr)
                return 1
            with open(out) as f:
                rows = json.load(f)
            os.unlink(out)
        link = _core.LinkSpec(rate * 1e9 / 8, latency)
        for row in rows:
            messages = buffer_broadcasts(_model(row["layout"], row["mib"]))
            predicted = sum(_core.ring_broadcast_s(m, args.hosts, link) for m in messages)
            measured = row["sync_s"] - row["nosync_s"]
            print(json.dumps({"gbit_s": rate, **row, "messages": messages, "measured_cost_s": measured,
                              "predicted_cost_s": predicted,
                              "error_pct": 100 * (predicted - measured) / measured if row["mib"] else None}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
