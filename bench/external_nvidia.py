"""srift against measured training throughput it never trained on: NVIDIA DeepLearningExamples.

NVIDIA publishes the training throughput of its PyTorch reference models (ResNet-50 v1.5, SSD300,
BERT-large SQuAD fine-tuning and pre-training, Transformer-XL, NCF) on its own machines: DGX-1
(8x V100 16GB or 32GB, NVLink), DGX-2 (16x V100 32GB, NVSwitch) and DGX A100 (40GB or 80GB,
NVSwitch). None of those numbers is in ../shared/data or in srift's training set, so they test
whether the shipped models generalise to another lab's measurements. Lambda's benchmark runs
the same reference code, so rows whose (zoo model, GPU chip, precision) a training row has are
reported apart ("seen") from those no training row has ("unseen": BERT-large pre-training at
128 and 512 tokens, Transformer-XL with its adaptive softmax, NCF, or a precision Lambda did not
time on that chip).

The table (bench/data/nvidia_dle_train.csv, provenance in bench/data/README.md) is transcribed
from the READMEs at the commits it names. Splits, each beside the baselines of the same run:

  one_gpu_no_measurement   each 1-GPU row from the profile alone, as the engine predicts it,
                           beside the v0 roofline; with the share of rows inside srift's
                           p10-p90 band
  one_gpu_anchored         each 1-GPU row given a 1-GPU row of the same README version (one
                           software stack), workload and precision on another GPU chip, at
                           the batch that row was measured at (a user who timed one GPU asks
                           about another); beside the v0 roofline anchored the same way
  one_gpu_other_batch      each 1-GPU row given the same machine's row at another batch (a user
                           times one batch; every plan runs its own local batch), beside v0 (the
                           roofline's batch curve) and the per-sample time held constant
  one_gpu_same_specs       each 1-GPU row given a 1-GPU row of the same README version, workload
                           and precision on another GPU with its specs (V100 16 GB and 32 GB), at
                           the batch that row ran: the anchor's own curve (note "same specs"),
                           with srift.predict's band; beside v0 and the per-sample time held
                           constant
  multi_gpu_one_system     each N-GPU row of one machine given that machine's 1-GPU row, the
                           machine entered as a catalog override (GPU, count, NVLink/NVSwitch
                           and its bandwidth), beside perfect linear scaling and v0
  multi_node_instance_anchored  each multi-node row given one whole node's row (Srifty's way),
                           the nodes joined by the machine's InfiniBand
  multi_gpu_accumulation   BERT-large pre-training's 4/8/16-GPU rows, k micro-steps per
                           optimizer step, given the 1-GPU row as the accumulated run it is;
                           predicted at the script's micro-batch (max_local_batch) in k
                           micro-steps, beside linear scaling, v0 and every micro-step taken
                           as a whole DDP iteration (what srift did before it modelled them)

Error is the absolute percentage error of the per-sample time (throughput's reciprocal); each
split prints median and p90. BERT pre-training accumulates gradients over many micro-batches.
Its 1-GPU rows are predicted at the micro-batch, with the optimizer step paid once per
accumulated batch; its multi-GPU rows have their own split (multi_gpu_accumulation). DGX-2H
runs its V100s at 450 W, a variant the catalog lacks, so only its multi-GPU scaling is compared.
This is a benchmark, not a test: it prints JSON lines (about 30 s).

    python bench/external_nvidia.py
    python bench/external_nvidia.py --rows      # every row's errors on stderr
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import re
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_CSV = HERE / "data" / "nvidia_dle_train.csv"

# NVIDIA's model name -> the zoo model as NVIDIA's command line builds it. Each returns
# (zoo name, zoo options, tokens per zoo sample, stand-in note or "").
def zoo_model(model: str, seq_len: str) -> tuple[str, dict, int, str] | None:
    seq = int(seq_len) if seq_len.strip() else 0
    if model in ("resnet50", "ssd300", "ncf"):
        return model, {}, 1, ""
    if model == "bert_large_squad":
        return "bert_large", {"seq_len": 384, "head": "qa"}, 1, ""
    if model == "bert_base_pretrain" and seq:
        # DLPerf's runs of NVIDIA's run_pretraining.py with bert-base-uncased: the encoder
        # (12 x 768) as the zoo builds it, a classification head standing in for MLM + NSP
        return "bert_base", {"seq_len": seq, "head": "classification"}, 1, "classification head for MLM+NSP"
    if model.startswith("bert_large_pretrain") and seq:
        # The MLM + NSP heads are not in the zoo: a classification head stands in (the encoder,
        # 24 x 1024 at this sequence length, is the same and carries ~all of the FLOPs).
        return "bert_large", {"seq_len": seq, "head": "classification"}, 1, "classification head for MLM+NSP"
    if model == "transformerxl_base" and seq:
        # run_wt103_base.sh: wt103_base.yaml's adaptive input and softmax (cutoffs, div_val 1)
        return "transformer_xl_base", {"adaptive": True, "tgt_len": seq, "mem_len": seq}, seq, ""
    if model == "transformerxl_large" and seq:
        # run_wt103_large.sh: wt103_large.yaml's adaptive input and softmax, tail clusters narrowed by div_val 4
        return "transformer_xl_large", {"adaptive": True, "div_val": 4, "tgt_len": seq, "mem_len": seq}, seq, ""
    return None


# The GPU column as NVIDIA prints it -> srift catalog GPU key (None: not in the catalog).
def catalog_gpu(name: str) -> str | None:
    n = name.upper().replace("-", " ")
    if "A100" in n:
        return "A100-80GB" if "80" in n else "A100-40GB"
    if "H100" in n:
        return "H100-80GB"
    if "V100" in n:
        return "V100-32GB" if "32" in n else "V100-16GB"
    if n.strip() == "T4" or " T4" in f" {n}":
        return "T4"
    return None


# Intra-machine links of NVIDIA's systems (GB/s per direction per GPU, the catalog's unit).
def system_link(system: str, gpu_key: str) -> tuple[str, float] | None:
    s = system.upper()
    if "DLPERF" in s:
        # DLPerf's V100-SXM2 servers: NVLink in the DGX-1 hybrid cube mesh (its nvidia-smi topo)
        return "nvlink", 150.0
    if "DGX 1" in s.replace("-", " "):
        return "nvlink", 150.0
    if "DGX 2" in s.replace("-", " "):
        return "nvswitch", 150.0
    if "A100" in gpu_key and "DGX" in s:
        return "nvswitch", 300.0
    if "H100" in gpu_key and "DGX" in s:
        return "nvswitch", 450.0
    return None


@dataclass
class Row:
    model: str          # NVIDIA's model name
    zoo: str
    options: dict
    stand_in: str       # what differs from NVIDIA's model ("" = nothing known)
    section: str
    system: str
    gpu: str
    gpu_key: str | None
    gpus: int
    nodes: int
    precision: str
    batch: int          # per GPU per optimizer step, in the zoo model's samples
    micro_batch: int    # per GPU per forward/backward (batch / gradient-accumulation steps)
    throughput: float   # the zoo model's samples per second over all GPUs
    commit: str
    profile_kw: dict = field(default_factory=dict)  # srift.profile options of the user's code (DDP buckets)

    @property
    def workload(self) -> str:
        return self.zoo if not self.options else f"{self.zoo} {json.dumps(self.options, sort_keys=True)}"


def srift_precision(p: str) -> str | None:
    return {"tf32": "tf32", "fp32": "fp32", "amp": "amp", "mixed": "amp", "fp16": "amp"}.get(p.strip().lower())


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    scale = 1e6 if text.endswith("M") else 1e3 if text.endswith("k") else 1.0
    return float(text.rstrip("Mk")) * scale


def load_rows(path: Path) -> tuple[list[Row], list[str]]:
    rows, skipped = [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            what = f"{r['model']} on {r['system']}"
            mapped = zoo_model(r["model"], r.get("seq_len", ""))
            if mapped is None:
                skipped.append(f"{r['model']}: no zoo model")
                continue
            prec, key = srift_precision(r["precision"]), catalog_gpu(r["gpu"])
            if prec is None or key is None:
                skipped.append(f"{what}: precision {r['precision']!r} / GPU {r['gpu']!r} not modelled")
                continue
            if prec == "fp32" and key.startswith(("A100", "H100")):
                prec = "tf32"  # NVIDIA's FP32 column on Ampere and newer runs TF32
            try:
                thr, batch = _number(r["throughput"]), int(float(r["batch_per_gpu"]))
            except ValueError:
                skipped.append(f"{what}: unparsed {r['throughput']!r} / {r['batch_per_gpu']!r}")
                continue
            accum = re.search(r"accumulation steps (\d+)", r["notes"])
            steps = int(accum.group(1)) if accum else 1
            if r["model"].startswith("bert_large_pretrain") and not accum:
                skipped.append(f"{what}: gradient-accumulation steps not printed")
                continue
            zoo, options, tokens, stand_in = mapped
            rows.append(Row(r["model"], zoo, options, stand_in, r["section"], r["system"], r["gpu"], key,
                            int(r["num_gpus"]), int(r["num_nodes"] or 1), prec, batch, max(1, round(batch / steps)),
                            thr / tokens, r["commit"]))
    return rows, skipped


def ape(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(pred) / np.asarray(truth) - 1.0) * 100.0


def stats(e: np.ndarray) -> dict[str, float]:
    e = np.asarray(e, float)
    e = e[np.isfinite(e)]
    if len(e) == 0:
        return {"n": 0}
    return {"median": round(float(np.median(e)), 2), "p90": round(float(np.percentile(e, 90)), 2), "n": len(e)}


def seen_in_training() -> set[tuple[str, str, str]]:
    """(zoo model, catalog-GPU chip, precision) triples of srift's GPU training rows."""
    from srift.learn.datasets import chip_of, compute_rows
    from srift.learn.workloads import DATA_MODELS
    zoo_of = {key: name for key, name, _, _ in DATA_MODELS.values()}
    return {(zoo_of.get(r.workload, r.workload), chip_of(r.gpu), r.precision) for r in compute_rows() if r.source != "cpu"}


class Profiles:
    """Meta-device profiles of the zoo models (FLOPs, bytes, buckets: no compute), cached."""

    def __init__(self) -> None:
        self._cache: dict[str, object] = {}

    def get(self, row: Row):
        import srift
        from srift import zoo
        key = (row.workload, json.dumps(row.profile_kw, sort_keys=True))
        if key not in self._cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                net, batch, loss = zoo.build(row.zoo, 4, device="meta", **row.options)
                self._cache[key] = srift.profile(net, batch, loss, device="meta", name=row.workload, **row.profile_kw)
        prof = self._cache[key]
        copy = type(prof).from_dict(prof.to_dict())
        copy.precision = row.precision
        return copy


def compute_model(profile, row: Row, config_kw: dict):
    """The engine's compute model of the row's GPU and its (p10, p90) factors."""
    from srift.catalog import Catalog
    from srift.engine import Engine, EngineConfig
    eng = Engine(profile, Catalog.default(), EngineConfig(precision=row.precision, **config_kw))
    return eng.compute_model(row.gpu_key)[0], eng.compute_interval(row.gpu_key)


def learned_and_v0(profiles: Profiles, row: Row, anchor: Row | None = None) -> dict:
    """The row's per-sample time as the learned models and as v0 predict it, from the profile
    alone or anchored on ``anchor``'s measured row, with the learned band."""
    prof = profiles.get(row)  # the engines only read it
    if anchor is not None:
        prof.add_measurement(anchor.gpu_key, anchor.micro_batch, anchor.micro_batch / anchor.throughput,
                             source="NVIDIA DeepLearningExamples")
    (model, (p10, p90)), (v0, _) = compute_model(prof, row, {}), compute_model(prof, row, V0)
    t = per_sample_s(model, row)
    return {"learned": t, "v0": per_sample_s(v0, row), "band": (t * p10, t * p90)}


def per_sample_s(model, row: Row) -> float:
    """One GPU's seconds per sample: forward/backward at the micro batch, the optimizer once
    per accumulated batch."""
    return model.compute_s(row.micro_batch) / row.micro_batch + model.optimizer_s / row.batch


def chip(gpu_key: str) -> str:
    from srift.learn.datasets import chip_of
    return chip_of(gpu_key)


def is_seen(row: Row, seen: set) -> bool:
    return not row.options and (row.zoo, chip(row.gpu_key), row.precision) in seen


# Machines whose GPU is a variant the catalog has no entry for: DGX-2H runs its V100s at
# 450 W and higher clocks than the V100-32GB (SXM2/SXM3 at 300-350 W). Their N-GPU rows are
# still compared against their own 1-GPU row.
VARIANT_SYSTEMS = {"DGX-2H"}
V0 = {"compute_model": "roofline", "pcie_model": "v0"}


def one_gpu_no_measurement(rows: list[Row], profiles: Profiles, seen: set) -> list[dict]:
    out = []
    for r in rows:
        if r.gpus != 1 or r.system in VARIANT_SYSTEMS:
            continue
        out.append({"row": r, "truth": 1.0 / r.throughput, "seen": is_seen(r, seen),
                    **learned_and_v0(profiles, r)})
    return out


def one_stack_pairs(rows: list[Row]):
    """(target, anchor) for every two 1-GPU rows of one README version (one software stack),
    workload and precision, a machine of NVIDIA's own GPU variant (VARIANT_SYSTEMS) left out."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.gpus == 1 and r.system not in VARIANT_SYSTEMS:
            groups[(r.commit, r.workload, r.precision)].append(r)
    for members in groups.values():
        for target in members:
            for anchor in members:
                yield target, anchor


def one_gpu_anchored(rows: list[Row], profiles: Profiles, seen: set) -> list[dict]:
    """Every 1-GPU row from every 1-GPU row of the same README version (one software stack:
    container, data pipeline, kernels), workload and precision on another GPU chip, at whatever
    batch each was measured: a user measures their own training on one GPU and asks about
    another. Across README versions the same GPU moves by up to 2x (ResNet-50 AMP on an A100:
    1,241 img/s in 20.06, 2,470 in 21.03), which no GPU model can know."""
    out = []
    for target, anchor in one_stack_pairs(rows):
        if chip(anchor.gpu_key) == chip(target.gpu_key):
            continue
        res = {"row": target, "anchor": anchor, "truth": 1.0 / target.throughput, "seen": is_seen(target, seen)}
        res.update(learned_and_v0(profiles, target, anchor))
        out.append(res)
    return out


def anchored_with_band(profiles: Profiles, target: Row, anchor: Row) -> dict:
    """``target``'s 1-GPU row given ``anchor``'s measured row: learned and v0 as
    learned_and_v0, the anchor's per-sample time held constant, and the band as srift.predict
    gives it on a 1-GPU machine of the target's (it widens away from the measured batch: band.hpp
    note "measured batch band")."""
    import srift

    res = {"row": target, "anchor": anchor, "truth": 1.0 / target.throughput,
           "constant_per_sample": 1.0 / anchor.throughput}
    res.update(learned_and_v0(profiles, target, anchor))
    cat, name = system_catalog(target.system, target.gpu_key, 1)
    prof = profiles.get(target)
    prof.add_measurement(anchor.gpu_key, anchor.micro_batch, anchor.micro_batch / anchor.throughput,
                         source="NVIDIA DeepLearningExamples")
    p = srift.predict(prof, f"1x {name}", target.micro_batch, catalog=cat)
    res["band"] = (p.iteration_p10_s / target.micro_batch, p.iteration_p90_s / target.micro_batch)
    return res


def one_gpu_same_specs(rows: list[Row], profiles: Profiles) -> list[dict]:
    """Every 1-GPU row from a row of the same README version, workload and precision on a GPU
    with its specs but another catalog entry (V100-SXM2 16 GB and 32 GB: DGX-1 against DGX-1 or
    DGX-2), at whatever batch each was measured (mostly the same; BERT-large SQuAD at FP32 twice):
    srift predicts such a target as the anchor's own measured curve (srift::LearnedCompute note
    "same specs"), with the band srift.predict gives it on a 1-GPU machine of the target's."""
    from srift.catalog import Catalog
    from srift.learn.dominance import same_specs
    from srift.learn.gpus import peaks_from_catalog

    catalog = Catalog.default()
    out = []
    for target, anchor in one_stack_pairs(rows):
        if anchor.gpu_key == target.gpu_key or not same_specs(
                peaks_from_catalog(catalog, anchor.gpu_key), peaks_from_catalog(catalog, target.gpu_key),
                target.precision):
            continue
        res = anchored_with_band(profiles, target, anchor)
        res["batch_ratio"] = target.micro_batch / anchor.micro_batch
        out.append(res)
    return out


# NVIDIA's machines' compute fabric between nodes (Gb/s, RDMA cards): DGX-2H has eight 100 Gb/s
# EDR InfiniBand adapters, DGX A100 eight 200 Gb/s HDR ones. RDMA bypasses the OS as EFA does.
SYSTEM_NETWORK = {"DGX-2H": (800.0, 8), "DGX-2": (800.0, 8), "DGX A100": (1600.0, 8),
                  "DLPerf": (100.0, 1)}  # one EDR InfiniBand HCA per node


def one_gpu_other_batch(rows: list[Row], profiles: Profiles) -> list[dict]:
    """Each 1-GPU row given the same machine's row at another batch (same README version,
    workload, precision): a user times one batch and trains at another. The engine's model of a
    measured GPU type is the measurement's own (srift.engine: the anchored affine model), so this
    checks how it carries to other batches; beside v0 (the roofline's batch curve through the
    same point) and the per-sample time held constant."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.gpus == 1:
            groups[(r.commit, r.system, r.workload, r.precision)].append(r)
    out = []
    for members in groups.values():
        for target in members:
            for anchor in members:
                if anchor.micro_batch == target.micro_batch:
                    continue
                out.append(anchored_with_band(profiles, target, anchor))
    return out


def system_catalog(system: str, gpu_key: str, gpus: int):
    """The catalog with NVIDIA's machine (``gpus`` of its GPUs) as a private instance type,
    the way a user enters their own hardware (srift.catalog_overrides)."""
    from srift.catalog import Catalog
    link = system_link(system, gpu_key)
    if link is None:
        return None, None
    gbps, cards = next((v for k, v in SYSTEM_NETWORK.items() if system.startswith(k)), (100.0, 1))
    name = f"nvidia.{system.lower().replace(' ', '-')}.{gpu_key.lower()}.x{gpus}"
    cat = Catalog.default()
    region = cat.regions[0]
    overrides = {"schema": "srift.catalog-overrides/1",
                 "instances": {name: {"gpu": gpu_key, "gpu_count": gpus, "vcpus": 16 * gpus, "memory_gib": 128 * gpus,
                                      "interconnect": link[0], "intra_node_gbytes_s": link[1], "network_gbps": gbps,
                                      "efa": cards > 1, "network_cards": cards, "regions": [region]}},
                 "prices": [{"instance": name, "region": region, "market": "on-demand", "usd_per_hour": 1.0}]}
    return cat.with_overrides(overrides), name


def multi_gpu_one_system(rows: list[Row], profiles: Profiles) -> list[dict]:
    """Each N-GPU row of one machine (one node) given the 1-GPU row of the same table at the
    same per-GPU batch (or, for strong scaling, the table's 1-GPU row at its own batch)."""
    tables: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.nodes == 1 and r.micro_batch == r.batch:  # no gradient accumulation: one allreduce per step
            tables[(r.section, r.workload, r.precision)].append(r)
    out = []
    for members in tables.values():
        ones = {r.batch: r for r in members if r.gpus == 1}
        for r in members:
            if r.gpus == 1 or not ones:
                continue
            one = ones.get(r.batch) or next(iter(ones.values()))
            res = predict_from_one_gpu(profiles, r, one, nodes=1)
            if res is not None:
                out.append(res)
    return out


def predict_from_one_gpu(profiles: Profiles, r: Row, one: Row, nodes: int, band: bool = False) -> dict | None:
    """Row ``r`` on ``nodes`` of its machine (r.gpus / nodes GPUs each) as the learned engine and
    v0 predict it from the 1-GPU row ``one`` alone; None where the machine's links are unknown."""
    import srift
    from srift.engine import EngineConfig
    cat, name = system_catalog(r.system, r.gpu_key, r.gpus // nodes)
    if cat is None:
        return None
    res = {"row": r, "anchor": one, "truth": r.gpus * r.batch / r.throughput, "linear": r.batch / one.throughput}
    for label, kw in (("learned", {}), ("v0", V0)):
        prof = profiles.get(r)
        prof.add_measurement(r.gpu_key, one.batch, one.batch / one.throughput, source="the table's 1-GPU row")
        p = srift.predict(prof, f"{nodes}x {name}", r.gpus * r.batch, catalog=cat, config=EngineConfig(**kw))
        res[label] = p.iteration_s if p.feasible else math.nan
        if band and label == "learned" and p.feasible:
            res["band"] = (p.iteration_p10_s, p.iteration_p90_s)
    return res


def multi_node_instance_anchored(rows: list[Row], profiles: Profiles) -> list[dict]:
    """Each multi-node row given the same machine's whole-node row at the same per-GPU batch
    (all its GPUs under DDP: what Srifty profiles, Measurement(gpus=N)), the nodes joined by
    the machine's InfiniBand (SYSTEM_NETWORK); beside linear scaling of the node's row and v0
    (the node's row, v0 links)."""
    import srift
    from srift.engine import EngineConfig
    nodes_rows: dict[tuple, dict[int, Row]] = defaultdict(dict)
    for r in rows:
        if r.micro_batch == r.batch:
            nodes_rows[(r.section, r.system, r.workload, r.precision, r.batch)][r.nodes] = r
    out = []
    for by_nodes in nodes_rows.values():
        node = by_nodes.get(1)
        if node is None or len(by_nodes) == 1:
            continue
        cat, name = system_catalog(node.system, node.gpu_key, node.gpus)
        if cat is None:
            continue
        node_s = node.gpus * node.batch / node.throughput  # one iteration of the whole node
        for n, r in sorted(by_nodes.items()):
            if n == 1 or r.gpus != n * node.gpus:
                continue
            res = {"row": r, "anchor": node, "truth": r.gpus * r.batch / r.throughput, "linear": node_s}
            for label, kw in (("learned", {}), ("v0", V0)):
                prof = profiles.get(r)
                prof.add_measurement(name, node.batch, node_s, source="NVIDIA DeepLearningExamples", gpus=node.gpus)
                p = srift.predict(prof, f"{n}x {name}", r.gpus * r.batch, catalog=cat, config=EngineConfig(**kw))
                res[label] = p.iteration_s if p.feasible else math.nan
            out.append(res)
    return out


def multi_node_one_gpu_anchored(rows: list[Row], profiles: Profiles) -> list[dict]:
    """Each multi-node row given only the 1-GPU row of its table at the same per-GPU batch: a
    user profiles one GPU and asks about a cluster (the engine path of bench/accuracy.py's
    leave-one-cluster-out split). The cluster is N whole nodes, the machine entered as a catalog
    override with its NVLink and InfiniBand (system_catalog); beside perfect linear scaling of
    the 1-GPU row and v0 (roofline compute through the same measurement, nominal links)."""
    tables: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.micro_batch == r.batch:  # no gradient accumulation: one allreduce per step
            tables[(r.section, r.system, r.workload, r.precision)].append(r)
    out = []
    for members in tables.values():
        ones = {r.batch: r for r in members if r.gpus == 1}
        for r in members:
            one = ones.get(r.batch)
            if r.nodes < 2 or one is None or r.gpus % r.nodes:
                continue
            res = predict_from_one_gpu(profiles, r, one, nodes=r.nodes, band=True)
            if res is not None:
                out.append(res)
    return out


def multi_gpu_accumulation(rows: list[Row], profiles: Profiles) -> list[dict]:
    """BERT-large pre-training's N-GPU rows, which accumulate gradients over k = batch /
    micro-batch micro-steps and all-reduce once per optimizer step (NVIDIA's scripts fix the
    per-GPU micro-batch), each given the 1-GPU row of its table at the same micro-batch, entered
    as what it is: one optimizer step of k micro-steps (Measurement.accumulation_steps, srift.engine
    note "accumulated measurement"). srift predicts the machine with ``max_local_batch`` = the
    micro-batch and ``max_accumulation_steps`` = k (srift::simulate note "accumulation"), beside
    linear scaling of the 1-GPU row, v0 (the same, roofline compute) and ``per_micro_step``: the
    1-GPU row entered as a plain step of the micro-batch (its time / k) and every micro-step a
    whole DDP iteration, one allreduce each (k x the iteration): what srift could do before it
    modelled accumulation."""
    import srift
    from srift.engine import EngineConfig
    tables: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.nodes == 1 and r.micro_batch < r.batch:
            tables[(r.section, r.workload, r.precision, r.micro_batch)].append(r)
    out = []
    for members in tables.values():
        one = next((r for r in members if r.gpus == 1), None)
        if one is None:
            continue
        for r in members:
            if r.gpus == 1:
                continue
            cat, name = system_catalog(r.system, r.gpu_key, r.gpus)
            if cat is None:
                continue
            steps = -(-r.batch // r.micro_batch)
            res = {"row": r, "anchor": one, "truth": r.gpus * r.batch / r.throughput,
                   "linear": r.batch / one.throughput}
            for label, kw in (("learned", {}), ("v0", V0), ("per_micro_step", {})):
                prof = profiles.get(r)
                if label == "per_micro_step":
                    prof.add_measurement(r.gpu_key, one.micro_batch, one.micro_batch / one.throughput,
                                         source="the table's 1-GPU row, per micro-step")
                else:
                    prof.add_measurement(r.gpu_key, one.micro_batch, one.batch / one.throughput,
                                         source="the table's 1-GPU row",
                                         accumulation_steps=round(one.batch / one.micro_batch))
                config = EngineConfig(**kw, max_local_batch=r.micro_batch,
                                      max_accumulation_steps=1 if label == "per_micro_step" else steps)
                batch = r.gpus * (r.micro_batch if label == "per_micro_step" else r.batch)
                p = srift.predict(prof, f"1x {name}", batch, catalog=cat, config=config)
                scale = steps if label == "per_micro_step" else 1
                res[label] = scale * p.iteration_s if p.feasible else math.nan
                if label == "learned" and p.feasible:
                    res["band"] = (p.iteration_p10_s, p.iteration_p90_s)
                    res["steps"] = p.accumulation_steps
            out.append(res)
    return out


def report(split: str, results: list[dict], cols: tuple[str, ...], show: bool) -> None:
    if not results:
        print(json.dumps({"split": split, "n": 0}))
        return
    # A prediction srift calls infeasible (the batch does not fit the GPU's memory) is no error
    # figure: counted apart, and the row leaves every column alike.
    infeasible = [x for x in results if any(not math.isfinite(x[c]) for c in cols)]
    results = [x for x in results if all(math.isfinite(x[c]) for c in cols)]
    if infeasible:
        print(json.dumps({"split": split, "predicted_infeasible": [
            f"{x['row'].gpus}x {x['row'].gpu_key} {x['row'].model} {x['row'].precision} b{x['row'].batch}"
            for x in infeasible]}))
    truth = np.array([x["truth"] for x in results])
    if "anchor" in results[0] and "linear" not in results[0] and results[0]["row"].gpus == 1 \
            and "constant_per_sample" not in results[0]:
        # the anchored ratio's direction: an error shared by both directions is the anchor's
        # level, one that flips sign is the GPU-to-GPU ratio
        signed = np.array([x["learned"] / x["truth"] - 1 for x in results]) * 100
        for a, b in (("V100", "A100"), ("A100", "V100")):
            sel = np.array([x["anchor"].gpu_key.startswith(a) and x["row"].gpu_key.startswith(b) for x in results])
            if sel.any():
                print(json.dumps({"split": f"{split}/{a}_to_{b}", "learned_median_signed_error": round(float(np.median(signed[sel])), 1),
                                  "v0_median_signed_error": round(float(np.median(
                                      (np.array([x["v0"] / x["truth"] - 1 for x in results]) * 100)[sel])), 1),
                                  "n": int(sel.sum())}))
    if "linear" in results[0]:
        # by machine and GPU count: the median signed error (negative: srift faster than measured)
        by: dict[tuple, list[dict]] = defaultdict(list)
        for x in results:
            by[(x["row"].system, x["row"].gpus)].append(x)
        print(json.dumps({"split": f"{split}/signed_median_by_machine", **{
            f"{system} {gpus}x": {c: round(float(np.median([(x[c] / x["truth"] - 1) * 100 for x in xs])), 1)
                                  for c in ("learned", "linear")} | {"n": len(xs)}
            for (system, gpus), xs in sorted(by.items())}}))
    for subset in ("ALL", "seen", "unseen"):
        sel = [subset == "ALL" or (x.get("seen") == (subset == "seen")) for x in results]
        if "seen" not in results[0] and subset != "ALL":
            continue
        sel = np.array(sel)
        if not sel.any():
            continue
        out = {"split": f"{split}/{subset}"}
        for c in cols:
            out[c] = stats(ape(np.array([x[c] for x in results])[sel], truth[sel]))
        if "band" in results[0]:
            lo = np.array([x["band"][0] for x in results])[sel]
            hi = np.array([x["band"][1] for x in results])[sel]
            t = truth[sel]
            out["learned_p10_p90_band"] = {"inside": round(float(np.mean((t >= lo) & (t <= hi))), 2),
                                           "below_p10": round(float(np.mean(t < lo)), 2),
                                           "above_p90": round(float(np.mean(t > hi)), 2)}
        print(json.dumps(out))
    if show:
        for x in results:
            r = x["row"]
            anchor = f" from {x['anchor'].gpu_key} b{x['anchor'].micro_batch}" if "anchor" in x else ""
            errs = " ".join(f"{c}={(x[c] / x['truth'] - 1) * 100:+.0f}%" for c in cols)
            print(f"  {r.model:26s} {r.system[:14]:14s} {r.gpus:2d}x {r.gpu_key:10s} {r.precision:4s} "
                  f"b{r.micro_batch:<7d}{anchor:16s} {errs}" + (f"  [stand-in: {r.stand_in}]" if r.stand_in else ""),
                  file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--rows", action="store_true", help="print every row's errors to stderr")
    ap.add_argument("--blend", metavar="WEIGHT,SHRINK", default=None,
                    help="evaluate the anchored split at another blend weight and shrink than the shipped "
                         "ones (srift.learn.blend notes 'blend' and 'shrink'); an experiment, nothing is written")
    args = ap.parse_args(argv)
    if args.blend is not None:
        weight, shrink = (float(x) for x in args.blend.split(","))
        from srift.learn.models import default_models
        blend = default_models().ratio.doc["absolute_blend"]  # read when the core model is first built
        blend["weight"], blend["shrink"] = weight, shrink
    from srift.learn.train import git_commit
    print(json.dumps({"header": {"machine": platform.node(), "threads": os.cpu_count(), "commit": git_commit(),
                                 "data": str(args.csv), "blend": args.blend or "shipped"}}))
    rows, skipped = load_rows(args.csv)
    print(json.dumps({"rows": len(rows), "skipped": len(skipped), "skipped_why": sorted(set(skipped))}))
    profiles, seen = Profiles(), seen_in_training()
    report("one_gpu_no_measurement", one_gpu_no_measurement(rows, profiles, seen), ("learned", "v0"), args.rows)
    report("one_gpu_anchored", one_gpu_anchored(rows, profiles, seen), ("learned", "v0"), args.rows)
    report("one_gpu_other_batch", one_gpu_other_batch(rows, profiles), ("learned", "v0", "constant_per_sample"),
           args.rows)
    report("one_gpu_same_specs", one_gpu_same_specs(rows, profiles), ("learned", "v0", "constant_per_sample"),
           args.rows)
    report("multi_gpu_one_system", multi_gpu_one_system(rows, profiles), ("learned", "v0", "linear"), args.rows)
    report("multi_node_instance_anchored", multi_node_instance_anchored(rows, profiles), ("learned", "v0", "linear"),
           args.rows)
    report("multi_gpu_accumulation", multi_gpu_accumulation(rows, profiles),
           ("learned", "v0", "linear", "per_micro_step"), args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
