"""Launch specs for a plan: torchrun lines per node, a SkyPilot task YAML, JSON.

Heterogeneous plans give different GPUs different local batches (srift splits the global
batch so that every rank finishes its backward together). torchrun has no notion of that,
so each node's line exports ``SRIFT_LOCAL_BATCHES`` — the local batch of each of its local
ranks, comma-separated — and the training script takes its own with ``LOCAL_RANK``. Feed it
to the DataLoader through srift.sampler.UnevenBatchSampler, which gives every rank the same
number of steps (``DistributedSampler`` with ``batch_size=local_batch`` does not: uneven
ranks run different step counts and DDP hangs at the first epoch's end)::

    sampler = srift.UnevenBatchSampler.from_env(len(dataset))  # after init_process_group
    loader = DataLoader(dataset, batch_sampler=sampler)

Node ranks follow the plan's groups in order; node 0 (the first instance of the first group)
is the rendezvous host. The lines use torchrun's default static rendezvous (``--nnodes``,
``--node-rank``, ``--master-addr``, ``--master-port``; torch 2.13's ``torchrun --help``), which
takes nodes of different ``--nproc-per-node``: global ranks follow node ranks, and the sampler
gathers every rank's batch, so the order does not matter to it.

DDP averages gradients over ranks, so unequal local batches need each rank's mean loss scaled
by ``sampler.loss_scale`` (srift/sampler.py note "uneven loss scale"); without it the samples
of the ranks with small batches weigh more.

Note "spot launch": a plan with spot instances adds ``--max-restarts=3``. When a node is
reclaimed, every other rank's collectives fail; torchrun then restarts the workers on the
surviving nodes, which wait for the missing peer, and the same line started on a replacement
instance joins them (on loopback under torch 2.13: node 1's agent and worker killed, node 0's
agent restarted its worker, and node 1's line started again 10 s later joined and both
finished). Each restart waits for the peer up to the process group's timeout, so the
replacement must come up within the restarts. A reclaimed node 0 takes the rendezvous store
with it: start every line again with the new ``MASTER_ADDR``. Restarted workers run the script
from the top, so resuming is the script's job: save weights and optimizer state to storage
that outlives the instance (S3) every ``checkpoint_every_iterations`` (the Young/Daly interval
srift's spot price assumes, on a Plan) and load the latest at start
(``UnevenBatchSampler.set_epoch(epoch, start_step=step)`` resumes mid-epoch). SkyPilot's managed jobs
(``sky jobs launch``) relaunch a preempted cluster and rerun ``run``; resuming is the script's
job there too.

SkyPilot: one task is one instance type (``num_nodes`` of it; ``any_of`` picks one of several,
it does not mix them), and Job Groups, the one way to run tasks of different types together,
reach each other by host name only on Kubernetes (SkyPilot 0.14: on AWS the group's networking
is turned off with a warning and ``<task>-0.<group>`` does not resolve). A plan of more than
one instance group (types or markets) therefore has no SkyPilot task that runs it: ``skypilot``
refuses it, naming ``--emit torchrun``, instead of writing a YAML whose nodes never meet.

With gradient accumulation (a plan whose GPUs hold the global batch only in k micro-steps,
``Prediction.accumulation_steps``), every line also exports ``SRIFT_ACCUMULATION_STEPS=k``:
each rank runs k forward/backward micro-steps, all but the last under DDP's ``no_sync()``,
then the optimizer step. The local batches are those of the micro-step that all-reduces
(``Prediction.micro_batch`` samples over all ranks); when the global batch is not a multiple
of k, srift times micro-steps of ``micro_batch`` and ``micro_batch - 1`` samples that add up
to the global batch, so a script that keeps every micro-step at the exported batches takes
up to k - 1 samples more per iteration.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

from srift import jsonout

if TYPE_CHECKING:
    from srift.prediction import Prediction
    from srift.planning import Plan

__all__ = ["NodeLaunch", "nodes", "torchrun", "torchrun_text", "skypilot", "to_json", "emit", "EMIT_FORMATS"]

EMIT_FORMATS = ("torchrun", "skypilot", "json")
DEFAULT_PORT = 29500
SPOT_MAX_RESTARTS = 3  # torchrun --max-restarts of a plan with spot instances (note "spot launch")
LAUNCH_SCHEMA = "srift.launch/1"  # the `json` format's document
# A launch spec writes a line (and holds an object) per node: a 1e7-node spec ran out of memory
# with a traceback. No EC2 account runs more instances than this in one job.
MAX_LAUNCH_NODES = 100_000


@dataclass
class NodeLaunch:
    """One instance of the plan and what its torchrun launches."""

    node_rank: int
    instance_type: str
    market: str
    group: int                 # index of the plan's instance group
    nproc_per_node: int
    local_batches: list[int]   # one per local rank
    first_global_rank: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prediction(obj: Plan | Prediction) -> Prediction:
    pred = getattr(obj, "prediction", obj)
    if not getattr(pred, "feasible", False):
        raise ValueError(f"cannot export {getattr(pred, 'cluster', obj)}: it does not run "
                         f"({getattr(pred, 'why_infeasible', 'infeasible')})")
    return pred


def nodes(obj: Plan | Prediction) -> list[NodeLaunch]:
    """Every instance of the plan with its ranks' local batches. Within a group, the first
    ``ranks_high`` ranks (in node order) take ``local_batch_high`` and the rest
    ``local_batch_low``; the batches of all ranks sum to the global batch (with gradient
    accumulation: to the micro-step's, ``micro_batch``)."""
    pred = _prediction(obj)
    count = sum(g.count for g in pred.groups)
    if count > MAX_LAUNCH_NODES:
        raise ValueError(f"cannot write a launch spec for {count:,} nodes ({pred.cluster}): it writes one line "
                         f"per node, and more than {MAX_LAUNCH_NODES:,} is past any EC2 job")
    out: list[NodeLaunch] = []
    node_rank = rank = 0
    for gi, g in enumerate(pred.groups):
        for i in range(g.count):
            batches = []
            for j in range(g.gpus_per_instance):
                k = i * g.gpus_per_instance + j
                batches.append(g.local_batch_high if k < g.ranks_high else g.local_batch_low)
            out.append(NodeLaunch(node_rank, g.instance_type, g.market, gi, g.gpus_per_instance, batches, rank))
            node_rank += 1
            rank += g.gpus_per_instance
    total = sum(sum(n.local_batches) for n in out)
    if total != pred.micro_batch:  # a broken invariant of the core, not a user mistake
        raise RuntimeError(f"local batches sum to {total}, not the batch of one micro-step {pred.micro_batch} "
                           f"(global batch {pred.global_batch})")
    return out


def _uses_spot(pred: Prediction) -> bool:
    return any(g.market == "spot" for g in pred.groups)


def _restarts(pred: Prediction) -> str:
    """`` --max-restarts=3`` on a plan with spot instances (note "spot launch"), else nothing."""
    return f" --max-restarts={SPOT_MAX_RESTARTS}" if _uses_spot(pred) else ""


def _checkpoint_iterations(obj: Plan | Prediction) -> int | None:
    """Iterations between checkpoints that the spot price assumes (a Plan with spot), else None."""
    hours = getattr(obj, "checkpoint_interval_hours", 0.0) or 0.0
    pred = _prediction(obj)
    if not (hours > 0 and pred.iteration_s > 0):
        return None
    return max(1, int(hours * 3600.0 / pred.iteration_s))


def _spot_comments(obj: Plan | Prediction, how: str) -> list[str]:
    """Comment lines for a plan with spot instances: restarts and whose job checkpoints are."""
    pred = _prediction(obj)
    if not _uses_spot(pred):
        return []
    every = _checkpoint_iterations(obj)
    when = (f" every {every:,} iterations (the interval srift's spot price assumes)" if every else "")
    return [f"# spot: {how}",
            f"# checkpointing is your script's job: save weights + optimizer state to S3{when} and resume",
            "# from the latest at start (restarted workers run the script from the top)"]


def _accumulation_comment(pred: Prediction) -> list[str]:
    k = pred.accumulation_steps
    if k <= 1:
        return []
    return [f"# gradient accumulation: {k} micro-steps of {pred.micro_batch} samples per optimizer step "
            f"({k * pred.micro_batch} >= global batch {pred.global_batch}), all but the last under no_sync()"]


def _check_port(master_port: int) -> None:
    if isinstance(master_port, bool) or not isinstance(master_port, int) or not 1 <= master_port <= 65535:
        raise ValueError(f"master_port must be a TCP port, an integer in 1..65535, got {master_port!r}")


def _script_words(script: str, script_args: Sequence[str]) -> str:
    if not isinstance(script, str) or not script.strip():
        raise ValueError(f"script must name the training script (e.g. 'train.py'), got {script!r}")
    return " ".join(shlex.quote(w) for w in [script, *script_args])


def torchrun(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = (),
             master_addr: str = "$MASTER_ADDR", master_port: int = DEFAULT_PORT) -> list[str]:
    """One shell line per node: ``SRIFT_LOCAL_BATCHES=... SRIFT_GLOBAL_BATCH=... torchrun
    --nnodes=N --nproc-per-node=G --node-rank=R --master-addr=... --master-port=...
    [--max-restarts=3] SCRIPT ARGS`` (``--max-restarts`` on a plan with spot instances, note
    "spot launch"). ``master_addr`` is written unquoted so ``$MASTER_ADDR`` expands."""
    pred = _prediction(obj)
    launch = nodes(pred)
    n = len(launch)
    if not re.fullmatch(r"[\w.\-$:{}\[\]]+", master_addr):
        raise ValueError(f"master_addr must be a host name, an IP or a $VARIABLE, got {master_addr!r}")
    _check_port(master_port)
    lines = []
    for node in launch:
        env = " ".join(f"{k}={v}" for k, v in _node_env(pred, node).items())
        lines.append(f"{env} torchrun --nnodes={n} --nproc-per-node={node.nproc_per_node} "
                     f"--node-rank={node.node_rank} --master-addr={master_addr} --master-port={master_port}"
                     f"{_restarts(pred)} {_script_words(script, script_args)}")
    return lines


def torchrun_text(obj: Plan | Prediction, **kwargs: Any) -> str:
    """``torchrun`` lines, each preceded by a comment naming the node."""
    pred = _prediction(obj)
    launch = nodes(pred)
    out = [f"# {pred.cluster} in {pred.region}: {len(launch)} nodes, {pred.workers} ranks, "
           f"global batch {pred.global_batch}",
           "# run line k on node k; set MASTER_ADDR to node 0's address on every node",
           *_accumulation_comment(pred),
           *_spot_comments(obj, f"--max-restarts={SPOT_MAX_RESTARTS}: when an instance is reclaimed, run its line on a "
                                f"replacement and the others take it in (node 0 reclaimed: rerun every line)"),
           *_wheel_comment(pred)]
    for node, line in zip(launch, torchrun(pred, **kwargs)):
        last = node.first_global_rank + node.nproc_per_node - 1
        ranks = f"rank {last}" if node.nproc_per_node == 1 else f"ranks {node.first_global_rank}-{last}"
        out.append(f"# node {node.node_rank}: {node.instance_type} ({node.market}), {ranks}")
        out.append(line)
    return "\n".join(out)


def _wheel_comment(pred: Prediction) -> list[str]:
    """The install line of the official PyTorch wheel that runs every GPU of the plan, as a
    comment (srift.torch_support), or none when the check is off."""
    from srift.report import torch_lines

    return [f"# {line}" for line in torch_lines(pred)]


def skypilot(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = (),
             name: str = "srift-train", workdir: str | None = ".", setup: str | None = None,
             master_port: int = DEFAULT_PORT) -> str:
    """A SkyPilot task YAML for a plan of one instance group: ``num_nodes`` instances of its
    type in its region and market; ``run`` starts torchrun with node 0 (the first of
    ``SKYPILOT_NODE_IPS``) as the rendezvous host. A plan of several groups is refused: no
    SkyPilot task runs one job over different instance types or markets on AWS (module doc)."""
    import yaml

    pred = _prediction(obj)
    launch = nodes(pred)
    _check_port(master_port)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"name must be lower-case letters, digits and '-', got {name!r}")
    if len(pred.groups) > 1:
        kinds = ", ".join(f"{g.instance_type} ({g.market})" for g in pred.groups)
        raise ValueError(
            f"cannot write a SkyPilot task for {pred.cluster}: its {len(pred.groups)} instance groups ({kinds}) "
            "need one job over different instances, and a SkyPilot task is one instance type and market; "
            "Job Groups reach each other by host name only on Kubernetes, not on AWS (SkyPilot 0.14). "
            "Use --emit torchrun and start the instances yourself, or plan one instance type and market "
            "(recommend --max-types 1; predict --cluster of one group)")
    g = pred.groups[0]
    accumulation = f"export SRIFT_ACCUMULATION_STEPS={pred.accumulation_steps}\n" if pred.accumulation_steps > 1 else ""
    # One case per node: the per-rank batches can differ between nodes of one group.
    cases = "\n".join(f"    {x.node_rank}) export SRIFT_LOCAL_BATCHES={','.join(map(str, x.local_batches))} ;;"
                      for x in launch)
    run = (f"set -e\n"
           f'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
           f"case \"$SKYPILOT_NODE_RANK\" in\n{cases}\nesac\n"
           f"export SRIFT_GLOBAL_BATCH={pred.global_batch}\n"
           + accumulation +
           f"torchrun --nnodes={len(launch)} --nproc-per-node={g.gpus_per_instance} --node-rank=$SKYPILOT_NODE_RANK "
           f"--master-addr=$MASTER_ADDR --master-port={master_port}{_restarts(pred)} "
           f"{_script_words(script, script_args)}\n")
    resources: dict[str, Any] = {"infra": f"aws/{pred.region}", "instance_type": g.instance_type,
                                 "use_spot": g.market == "spot"}
    task: dict[str, Any] = {"name": name, "num_nodes": g.count, "resources": resources}
    if workdir:
        task["workdir"] = workdir
    if setup:
        task["setup"] = setup
    task["run"] = run
    header = [f"# srift plan: {pred.cluster} in {pred.region}, {pred.workers} GPUs, global batch {pred.global_batch}",
              f"# predicted {pred.iteration_s * 1e3:.1f} ms/iteration, {pred.samples_per_s:,.0f} samples/s, "
              f"${pred.usd_per_hour:,.2f}/h (SkyPilot >= 0.10 reads infra:)",
              *_wheel_comment(pred),
              *_accumulation_comment(pred),
              *_spot_comments(obj, "launch with `sky jobs launch` (not `sky launch`): it relaunches the "
                                   "cluster after a preemption and reruns run")]
    return "\n".join(header) + "\n" + yaml.dump(task, sort_keys=False, default_flow_style=False,
                                                  Dumper=_literal_dumper())


def _literal_dumper() -> type:
    """A SafeDumper that writes multi-line strings (the ``run`` scripts) as ``|`` blocks."""
    import yaml

    class LiteralDumper(yaml.SafeDumper):
        pass

    def str_presenter(dumper: Any, data: str) -> Any:
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    LiteralDumper.add_representer(str, str_presenter)
    return LiteralDumper


def _node_env(pred: Prediction, node: NodeLaunch) -> dict[str, str]:
    env = {"SRIFT_LOCAL_BATCHES": ",".join(map(str, node.local_batches)), "SRIFT_GLOBAL_BATCH": str(pred.global_batch)}
    if pred.accumulation_steps > 1:
        env["SRIFT_ACCUMULATION_STEPS"] = str(pred.accumulation_steps)
    return env


def to_json(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = (),
            master_port: int = DEFAULT_PORT) -> dict[str, Any]:
    """The plan (or prediction) as a dict, with what a scheduler needs to start it under
    ``launch`` (``schema``: LAUNCH_SCHEMA): the region, the rendezvous (static: node 0 hosts it
    at ``master_port``), the script and its arguments, torchrun's ``max_restarts``, the
    accumulation micro-steps and micro-batch, ``checkpoint_every_iterations`` (a Plan with
    spot; else null), and per node its instance type, market, ranks, local batches and the
    environment its torchrun line sets, and the torchrun lines themselves."""
    pred = _prediction(obj)
    launch = nodes(pred)
    out = {"schema": LAUNCH_SCHEMA, **obj.to_dict()}
    out["launch"] = {
        "region": pred.region, "nnodes": len(launch), "world_size": pred.workers,
        "rendezvous": "static", "master_port": master_port, "script": script, "script_args": list(script_args),
        "max_restarts": SPOT_MAX_RESTARTS if _uses_spot(pred) else 0,
        "accumulation_steps": pred.accumulation_steps, "micro_batch": pred.micro_batch,
        "global_batch": pred.global_batch, "checkpoint_every_iterations": _checkpoint_iterations(obj),
        "nodes": [{**x.to_dict(), "env": _node_env(pred, x)} for x in launch],
        "torchrun": torchrun(pred, script=script, script_args=script_args, master_port=master_port)}
    return out


def emit(obj: Plan | Prediction, fmt: str, **kwargs: Any) -> str:
    """The launch spec in ``fmt`` (one of EMIT_FORMATS) as text."""
    if fmt == "torchrun":
        return torchrun_text(obj, **{k: v for k, v in kwargs.items() if k in ("script", "script_args",
                                                                              "master_addr", "master_port")})
    if fmt == "skypilot":
        return skypilot(obj, **{k: v for k, v in kwargs.items() if k in ("script", "script_args", "name",
                                                                        "workdir", "setup", "master_port")})
    if fmt == "json":
        return jsonout.dumps(to_json(obj, **{k: v for k, v in kwargs.items() if k in ("script", "script_args",
                                                                                    "master_port")}))
    raise ValueError(f"emit format must be one of {', '.join(EMIT_FORMATS)}, got {fmt!r}")
