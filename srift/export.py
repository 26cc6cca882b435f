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
is the rendezvous host.

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


def _accumulation_env(pred: Prediction) -> str:
    """`` SRIFT_ACCUMULATION_STEPS=k`` under gradient accumulation, else nothing."""
    steps = pred.accumulation_steps
    return f" SRIFT_ACCUMULATION_STEPS={steps}" if steps > 1 else ""


def _script_words(script: str, script_args: Sequence[str]) -> str:
    if not isinstance(script, str) or not script.strip():
        raise ValueError(f"script must name the training script (e.g. 'train.py'), got {script!r}")
    return " ".join(shlex.quote(w) for w in [script, *script_args])


def torchrun(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = (),
             master_addr: str = "$MASTER_ADDR", master_port: int = DEFAULT_PORT) -> list[str]:
    """One shell line per node: ``SRIFT_LOCAL_BATCHES=... SRIFT_GLOBAL_BATCH=... torchrun
    --nnodes=N --nproc-per-node=G --node-rank=R --master-addr=... --master-port=...
    SCRIPT ARGS``. ``master_addr`` is written unquoted so ``$MASTER_ADDR`` expands."""
    pred = _prediction(obj)
    launch = nodes(pred)
    n = len(launch)
    if not re.fullmatch(r"[\w.\-$:{}\[\]]+", master_addr):
        raise ValueError(f"master_addr must be a host name, an IP or a $VARIABLE, got {master_addr!r}")
    lines = []
    for node in launch:
        env = (f"SRIFT_LOCAL_BATCHES={','.join(map(str, node.local_batches))} "
               f"SRIFT_GLOBAL_BATCH={pred.global_batch}{_accumulation_env(pred)}")
        lines.append(f"{env} torchrun --nnodes={n} --nproc-per-node={node.nproc_per_node} "
                     f"--node-rank={node.node_rank} --master-addr={master_addr} --master-port={master_port} "
                     f"{_script_words(script, script_args)}")
    return lines


def torchrun_text(obj: Plan | Prediction, **kwargs: Any) -> str:
    """``torchrun`` lines, each preceded by a comment naming the node."""
    pred = _prediction(obj)
    launch = nodes(pred)
    out = [f"# {pred.cluster} in {pred.region}: {len(launch)} nodes, {pred.workers} ranks, "
           f"global batch {pred.global_batch}",
           "# run line k on node k; set MASTER_ADDR to node 0's address on every node"]
    wheel = _wheel_comment(pred)
    if wheel:
        out.append(wheel)
    for node, line in zip(launch, torchrun(pred, **kwargs)):
        out.append(f"# node {node.node_rank}: {node.instance_type} ({node.market}), ranks "
                   f"{node.first_global_rank}-{node.first_global_rank + node.nproc_per_node - 1}")
        out.append(line)
    return "\n".join(out)


def _wheel_comment(pred: Prediction) -> str:
    """The install line of the official PyTorch wheel that runs every GPU of the plan, as a
    comment (srift.torch_support), or "" when the check is off."""
    from srift.torch_support import describe

    line = describe(pred)
    return f"# {line}" if line else ""


def _task_name(instance_type: str, market: str) -> str:
    name = re.sub(r"[^a-z0-9-]", "-", instance_type.lower()) + ("-spot" if market == "spot" else "")
    return name


def skypilot(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = (),
             name: str = "srift-train", workdir: str | None = ".", setup: str | None = None,
             master_port: int = DEFAULT_PORT) -> str:
    """A SkyPilot task YAML. One instance group: a single task with ``num_nodes``. Several:
    a Job Group (multi-document YAML, ``execution: parallel``), one task per instance
    group, which reach node 0 through the job group's host name ``<task>-0.<name>``.
    Each task's ``run`` computes its node rank and the ranks' local batches."""
    import yaml

    pred = _prediction(obj)
    launch = nodes(pred)
    accumulation = f"export{_accumulation_env(pred)}\n" if pred.accumulation_steps > 1 else ""
    n = len(launch)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"name must be lower-case letters, digits and '-', got {name!r}")
    tasks = []
    first_node = 0
    task_names = []
    for gi, g in enumerate(pred.groups):
        base = _task_name(g.instance_type, g.market)
        tname = base if base not in task_names else f"{base}-{gi}"
        task_names.append(tname)
        group_nodes = [x for x in launch if x.group == gi]
        batches = {x.node_rank - first_node: x.local_batches for x in group_nodes}
        # One case per node of the group: the per-rank batches can differ between nodes.
        cases = "\n".join(f"    {i}) export SRIFT_LOCAL_BATCHES={','.join(map(str, b))} ;;"
                          for i, b in sorted(batches.items()))
        if len(pred.groups) == 1:
            master = 'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)'
        else:
            master = f"MASTER_ADDR={task_names[0]}-0.{name}"
        run = (f"set -e\n"
               f"NODE_RANK=$(( {first_node} + SKYPILOT_NODE_RANK ))\n"
               f"{master}\n"
               f"case \"$SKYPILOT_NODE_RANK\" in\n{cases}\nesac\n"
               f"export SRIFT_GLOBAL_BATCH={pred.global_batch}\n"
               + accumulation +
               f"torchrun --nnodes={n} --nproc-per-node={g.gpus_per_instance} --node-rank=$NODE_RANK "
               f"--master-addr=$MASTER_ADDR --master-port={master_port} {_script_words(script, script_args)}\n")
        resources: dict[str, Any] = {"infra": f"aws/{pred.region}", "instance_type": g.instance_type,
                                     "use_spot": g.market == "spot"}
        task: dict[str, Any] = {"name": tname, "num_nodes": g.count, "resources": resources}
        if workdir:
            task["workdir"] = workdir
        if setup:
            task["setup"] = setup
        task["run"] = run
        tasks.append(task)
        first_node += g.count
    header = (f"# srift plan: {pred.cluster} in {pred.region}, {pred.workers} GPUs, global batch "
              f"{pred.global_batch}\n# predicted {pred.iteration_s * 1e3:.1f} ms/iteration, "
              f"{pred.samples_per_s:,.0f} samples/s, ${pred.usd_per_hour:,.2f}/h\n"
              + (f"{_wheel_comment(pred)}\n" if _wheel_comment(pred) else ""))
    dumper = _literal_dumper()
    dump = lambda d: yaml.dump(d, sort_keys=False, default_flow_style=False, Dumper=dumper)  # noqa: E731
    if len(tasks) == 1:
        tasks[0]["name"] = name
        return header + dump(tasks[0])
    docs = [dump({"name": name, "execution": "parallel"}), *(dump(t) for t in tasks)]
    return header + "".join("---\n" + d for d in docs)


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


def to_json(obj: Plan | Prediction, *, script: str = "train.py", script_args: Sequence[str] = ()) -> dict[str, Any]:
    """The plan (or prediction) as a dict, with the per-node launch layout and torchrun lines
    (``schema``: LAUNCH_SCHEMA)."""
    pred = _prediction(obj)
    out = {"schema": LAUNCH_SCHEMA, **obj.to_dict()}
    out["launch"] = {"nodes": [x.to_dict() for x in nodes(pred)],
                     "torchrun": torchrun(pred, script=script, script_args=script_args)}
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
        return jsonout.dumps(to_json(obj, **{k: v for k, v in kwargs.items() if k in ("script", "script_args")}))
    raise ValueError(f"emit format must be one of {', '.join(EMIT_FORMATS)}, got {fmt!r}")
