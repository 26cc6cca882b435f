#!/usr/bin/env python3
"""Cross-GPU predictions for models unlike the training zoo, with plausibility flags.

Five small models built with torch alone (no downloads), each profiled on the CPU as a user
would profile their own nn.Module (srift.profile on the CPU: FLOPs, bytes and buckets; the
learned models never read a CPU's timings), then predicted one GPU at a time at fp32, tf32
and amp, as the engine predicts (srift.Engine.compute_model at the GPU's memory limit):

- no measurement (the absolute learned model);
- anchored on one GPU's run (predict_anchored): the anchor's time set to its own
  no-measurement prediction at the batch, so the two tables differ only by what the ratio
  model says across GPUs.

The models: an LSTM and a GRU language model (PyTorch's word_language_model as Gavel trains
it: Wikitext-2's 33,278 words, 200-wide embedding, 2 layers of 200, 35 tokens), a
depthwise-separable conv net (MobileNet-like, 32 px), an MLP-mixer (CIFAR-sized), a tiny
transformer encoder (4 layers, d=256, 128 tokens) and an embedding-heavy recommender
(DLRM-like: 8 tables of 100k x 64, bottom and top MLPs).

One JSON line per (model, precision, batch, anchor), with each GPU's predicted iteration
seconds, then one line per flag:
- "spec_ratio": a pair's predicted time ratio outside what its specs allow, by more than
  SPEC_SLACK either way: more than the largest of the faster GPU's peak ratios (matmul peak
  at the precision, FP32 peak, memory bandwidth), or less than the least of them (1 is always
  allowed: a launch-bound model may run alike anywhere);
- "anchored_vs_absolute": a pair whose anchored time ratio (anchor -> target) and
  no-measurement time ratio differ by more than DISAGREE x either way;
- "dominance": a GPU that beats another on every spec (srift.learn.dominance.dominates)
  predicted more than 1% slower.

    python bench/unlike_models.py [--batches 1,32] [--anchor T4]   (~1-2 minutes)

Last, one line per batch of Gavel's measured LSTM language model (K80, P100, V100 at FP32; no
row of it trained any model): the measured time ratios beside srift's, anchored on the measured
run and with no measurement, the evidence for how far an LSTM's ratio follows the specs.

Not a test: it prints what srift predicts and flags; it asserts nothing.
"""
from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import warnings

import torch
from torch import nn
import torch.nn.functional as F

GPUS = ("T4", "V100-16GB", "A10G", "L4", "A100-40GB", "A100-80GB", "L40S", "H100-80GB", "H200-141GB", "B200")
PRECISIONS = ("fp32", "tf32", "amp")
SPEC_SLACK = 1.25    # a ratio this far past the specs' largest ratio is flagged
DISAGREE = 1.5       # anchored vs no-measurement ratio
DOMINANCE_TOLERANCE = 1.01


# ---- the models ---------------------------------------------------------------------------------
class RNNLM(nn.Module):
    """PyTorch's word_language_model (Gavel's LM): embedding, 2-layer LSTM/GRU, decoder."""

    def __init__(self, cell: str = "LSTM", vocab: int = 33_278, emsize: int = 200, nhid: int = 200,
                 nlayers: int = 2) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, emsize)
        self.rnn = getattr(nn, cell)(emsize, nhid, nlayers, dropout=0.2, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


def rnn_lm(cell: str, batch: int, seq: int = 35):
    model = RNNLM(cell)
    x = torch.randint(0, 33_278, (batch, seq))
    y = torch.randint(0, 33_278, (batch, seq))
    return model, (x, y), lambda out, t: F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))


class DepthwiseNet(nn.Module):
    """MobileNet-like: depthwise 3x3 + pointwise 1x1 blocks with BatchNorm and ReLU6."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2),
               (512, 512, 1), (512, 512, 1), (512, 1024, 2)]
        for cin, cout, stride in cfg:
            layers += [nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU6(),
                       nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(1024, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def depthwise_net(batch: int):
    return DepthwiseNet(), (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), F.cross_entropy


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.channel_mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    """MLP-Mixer on 32 px images, 4 px patches (64 tokens), 8 blocks of width 256."""

    def __init__(self, dim: int = 256, depth: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.blocks = nn.Sequential(*[MixerBlock(64, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


def mixer(batch: int):
    return Mixer(), (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), F.cross_entropy


class TinyTransformer(nn.Module):
    """A 4-layer encoder, d=256, 4 heads, 128 tokens, classification head."""

    def __init__(self, vocab: int = 8000, dim: int = 256, layers: int = 4, seq: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(x) + self.pos).mean(1))


def tiny_transformer(batch: int):
    return TinyTransformer(), (torch.randint(0, 8000, (batch, 128)), torch.randint(0, 2, (batch,))), F.cross_entropy


class Recommender(nn.Module):
    """DLRM-like: 13 dense features through a bottom MLP, 8 sparse features of 100k rows x 64,
    concatenated into a top MLP (the embedding tables hold 97% of the parameters)."""

    def __init__(self, tables: int = 8, rows: int = 100_000, dim: int = 64) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 256), nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.tables = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        self.top = nn.Sequential(nn.Linear(dim * (tables + 1), 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                 nn.Linear(256, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        parts = [self.bottom(dense)] + [t(sparse[:, i]) for i, t in enumerate(self.tables)]
        return self.top(torch.cat(parts, 1)).squeeze(1)


def recommender(batch: int):
    x = (torch.randn(batch, 13), torch.randint(0, 100_000, (batch, 8)))
    return Recommender(), (x, torch.rand(batch)), F.binary_cross_entropy_with_logits


MODELS = {
    "lstm_lm": lambda b: rnn_lm("LSTM", b),
    "gru_lm": lambda b: rnn_lm("GRU", b),
    "depthwise_net": depthwise_net,
    "mlp_mixer": mixer,
    "tiny_transformer": tiny_transformer,
    "recommender": recommender,
}


def profile_of(name: str, batch: int = 8):
    """The model's profile, as a user would take it on a machine without a GPU (on the CPU:
    its timings are the CPU's, which no GPU prediction reads)."""
    import srift

    torch.manual_seed(0)
    model, data, loss_fn = MODELS[name](batch)
    return srift.profile(model, data, loss_fn=loss_fn, device="cpu", warmup=1, repeats=2, name=name)


# ---- the table ----------------------------------------------------------------------------------
def spec_bounds(a, b, precision: str) -> tuple[float, float]:
    """(least, largest) of b's peak ratios over a's (srift.learn.gpus.GpuPeaks) that bound a's
    time over b's: the matmul peak at the precision, the FP32 peak, the TF32 peak at fp32
    (PyTorch's convolutions and cuDNN RNNs run on it) and the memory bandwidth."""
    ratios = [b.peak_tflops(precision) / a.peak_tflops(precision), b.fp32_tflops / a.fp32_tflops,
              b.memory_gbytes_s / a.memory_gbytes_s]
    if precision == "fp32":
        ratios.append(b.peak_tflops("tf32") / a.peak_tflops("tf32"))
    return min(ratios), max(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,32", help="local batches, comma-separated (default 1,32)")
    ap.add_argument("--anchors", default="T4,H100-80GB", help="anchor GPUs, comma-separated")
    ap.add_argument("--models", default=",".join(MODELS), help="models, comma-separated")
    args = ap.parse_args()

    import srift
    from srift.catalog import Catalog
    from srift.engine import Engine, EngineConfig
    from srift.learn.dominance import dominates
    from srift.learn.gpus import peaks_from_catalog

    cat = Catalog.default()
    peaks = {g: peaks_from_catalog(cat, g) for g in GPUS}
    batches = [float(b) for b in args.batches.split(",")]
    anchors = args.anchors.split(",")
    out = sys.stdout

    def emit(row: dict) -> None:
        out.write(json.dumps(row) + "\n")
        out.flush()

    def total(m, b: float) -> float:
        return m.compute_s(b) + m.optimizer_s

    for name in args.models.split(","):
        prof = profile_of(name)
        for precision in PRECISIONS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eng = Engine(prof, cat, EngineConfig(precision=precision))
                absolute = {g: eng.compute_model(g)[0] for g in GPUS}
            for b in batches:
                t_abs = {g: total(m, b) for g, m in absolute.items()}
                emit({"model": name, "precision": precision, "batch": b, "anchor": None,
                      "iteration_s": {g: round(t, 6) for g, t in t_abs.items()}})
                tables = {None: t_abs}
                for anchor in anchors:
                    p = copy.deepcopy(prof)
                    p.add_measurement(anchor, local_batch=int(b), iteration_s=t_abs[anchor], precision=precision)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        e2 = Engine(p, cat, EngineConfig(precision=precision))
                        t_anc = {g: total(e2.compute_model(g)[0], b) for g in GPUS}
                    tables[anchor] = t_anc
                    emit({"model": name, "precision": precision, "batch": b, "anchor": anchor,
                          "iteration_s": {g: round(t, 6) for g, t in t_anc.items()}})
                flags = []
                for x, y in itertools.combinations(GPUS, 2):
                    lo, hi = spec_bounds(peaks[x], peaks[y], precision)  # y's specs over x's
                    for which, t in tables.items():
                        r = t[x] / t[y]  # x's time over y's
                        # launch-bound models may run alike on any GPU: 1 is always allowed
                        if r > SPEC_SLACK * max(hi, 1.0) or r < min(lo, 1.0) / SPEC_SLACK:
                            flags.append({"flag": "spec_ratio", "pair": [x, y], "table": which,
                                          "time_ratio": round(r, 3), "spec_range": [round(lo, 3), round(hi, 3)]})
                        for fast, slow in ((x, y), (y, x)):
                            if dominates(peaks[fast], peaks[slow], precision) and \
                                    t[fast] > DOMINANCE_TOLERANCE * t[slow]:
                                flags.append({"flag": "dominance", "table": which, "faster_on_paper": fast,
                                              "slower_on_paper": slow, "time_ratio": round(t[fast] / t[slow], 3)})
                for anchor in anchors:
                    for g in GPUS:
                        if g == anchor:
                            continue
                        ra = tables[anchor][anchor] / tables[anchor][g]
                        rn = tables[None][anchor] / tables[None][g]
                        if max(ra / rn, rn / ra) > DISAGREE:
                            flags.append({"flag": "anchored_vs_absolute", "anchor": anchor, "target": g,
                                          "anchored_ratio": round(ra, 3), "absolute_ratio": round(rn, 3)})
                for f in flags:
                    emit({"model": name, "precision": precision, "batch": b, **f})
    gavel_lm(emit)


def gavel_lm(emit) -> None:
    """Gavel's LSTM LM, one GPU, consolidated: measured ratios beside srift's (FP32)."""
    import csv
    import os

    from srift import _core
    from srift.learn.datasets import device_peaks
    from srift.learn.features import core_workload_stats, gpu_spec
    from srift.learn.models import default_models
    from srift.learn.workloads import workload_from_profile

    path = os.path.join(os.environ.get("SRIFT_DATA_DIR", "../shared/data/measured"), "gavel_isolated.csv")
    if not os.path.exists(path):
        emit({"check": "gavel_lm", "skipped": f"no {path}"})
        return
    seconds = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["model"] == "LM" and r["num_gpus"] == "1" and r["consolidated"] == "1":
                seconds[(r["gpu"].upper(), float(r["batch_size_per_gpu"]))] = 1.0 / float(r["steps_per_sec"])
    peaks, lc = device_peaks(), default_models().learned_compute
    keys = {"K80": "K80", "P100": "P100", "V100": "V100-16GB"}
    w = core_workload_stats(workload_from_profile(profile_of("lstm_lm")))
    fp32 = _core.Precision.fp32

    def total(m, b: float) -> float:
        return m.compute_s(b) + m.optimizer_s

    for b in sorted({b for _, b in seconds}):
        absolute = {g: total(lc.predict_absolute(w, gpu_spec(peaks[k]), fp32, 1024.0).model, b) for g, k in keys.items()}
        row = {"check": "gavel_lm", "batch": b}
        for a, t in (("K80", "V100"), ("P100", "V100")):
            run = [_core.Measurement(b, seconds[(a, b)])]
            anchored = total(lc.predict_anchored(w, gpu_spec(peaks[keys[a]]), run, gpu_spec(peaks[keys[t]]), fp32).model, b)
            row[f"{a}/{t}"] = {"measured": round(seconds[(a, b)] / seconds[(t, b)], 3),
                               "anchored": round(seconds[(a, b)] / anchored, 3),
                               "absolute": round(absolute[a] / absolute[t], 3)}
        emit(row)


if __name__ == "__main__":
    main()
