"""Lambda's v2 benchmark tables: the newest GPUs in the data (H200, GH200, B200).

../shared/data/measured/lambda_v2_{fp16,fp32}_hosts.csv give one throughput per benchmarked host
and model (the whole host's, in the model's unit), from lambdal/deeplearning-benchmark's
pytorch-train-throughput-v2-*.csv: the same NVIDIA DeepLearningExamples scripts as
lambda_pytorch_train.csv, on H100 SXM5 and PCIe, H200, GH200 and B200 hosts. Its H100 hosts ran
the v1 table's batches: the median of its 39 H100 SXM5 cells per model and precision is within 3%
of the v1 rows' (the one PCIe host 1-9% faster than v1's two), so the v2 rows join Lambda's rows
as repeats and as new GPUs of one lab (note "v2 rows").

The tables carry no batch. Lambda's benchmark sets one per GPU type, model and precision, and
records it in pytorch/csv_v1_v2/pytorch-train-bs-{fp16,fp32}.csv (global batch per host) and in
each run's benchmark.para (GLOBAL_BATCH): PER_GPU_BATCH below is read from those files at the
commits it names. A host whose GPU or batch is not known here is left out, never guessed.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["V2_FILES", "PER_GPU_BATCH", "V2Host", "parse_host", "v2_rows", "NEWEST_CHIPS", "NEWEST_GROUP"]

# precision as srift names it (Lambda's fp32 runs in NGC containers with TF32 on) -> table
V2_FILES = {"amp": "lambda_v2_fp16_hosts.csv", "tf32": "lambda_v2_fp32_hosts.csv"}

# (GPU model in the host name, memory GB in the host name, form factor or "") -> TRAINING_GPUS key.
# "GH200_80GB" hosts (no such product on NVIDIA's datasheets: a GH200 of unstated memory and
# bandwidth) and anything else not listed are left out.
_GPU_OF_HOST = {
    ("H100", "80", "SXM5"): "H100-80GB",
    ("H100", "80", "PCIe"): "H100-PCIe",
    ("H200", "140", "SXM"): "H200-141GB",
    ("GH200", "96", ""): "GH200-96GB",
    ("B200", "192", ""): "B200",
}

_HOST = re.compile(r"(?<![0-9A-Za-z])(\d+)x(GH200|H200|H100|B200)_(\d+)GB(?:_(SXM5|SXM|PCIe))?")

# Note "past the edge": the GPUs no other table has, newer and faster than any GPU srift trained
# on before them. bench/accuracy.py holds them out together (train.py generation_of) to ask what
# srift predicts for a GPU generation past its data, the question every new EC2 family asks.
NEWEST_CHIPS = frozenset({"H200-141GB", "GH200-96GB", "B200"})
NEWEST_GROUP = "H200+GH200+B200"

# Note "v2 batches": Lambda's per-GPU batch for each (TRAINING_GPUS key, precision), by model (the
# models srift's zoo builds; GNMT, Tacotron 2 and WaveGlow are not among them). Each host config
# sources one base file of lambdal/deeplearning-benchmark pytorch/scripts/config_v2/:
#   config_pytorch_80GB.sh @ bec5f14c (H100 SXM5 and PCIe: the v1 table's H100 batches),
#   config_pytorch_140GB.sh @ 93929353 (H200), config_pytorch_96GB.sh @ 342c3028 (GH200 96 GB),
#   config_pytorch_192GB.sh @ aa5addb6 (B200);
# checked against the runs' benchmark.para / logs where the index has them (results_v2 @ 6ff92514:
# H200 bert_base/bert_large AMP, ssd FP32; GH200 ssd, bert_large, resnet50 AMP, ssd FP32). The
# bs table's GH200 FP32 ssd (480) disagrees with that run's log (272), which is used.
_H100 = {"amp": {"ssd": 448, "bert_base_squad": 320, "bert_large_squad": 112, "resnet50": 1280},
         "tf32": {"ssd": 256, "bert_base_squad": 172, "bert_large_squad": 64, "resnet50": 640}}
PER_GPU_BATCH: dict[tuple[str, str], dict[str, int]] = {
    ("H100-80GB", "amp"): _H100["amp"], ("H100-80GB", "tf32"): _H100["tf32"],
    ("H100-PCIe", "amp"): _H100["amp"], ("H100-PCIe", "tf32"): _H100["tf32"],
    ("H200-141GB", "amp"): {"ssd": 896, "bert_base_squad": 592, "bert_large_squad": 192, "resnet50": 2560},
    ("H200-141GB", "tf32"): {"ssd": 512, "bert_base_squad": 296, "bert_large_squad": 96, "resnet50": 1280},
    ("GH200-96GB", "amp"): {"ssd": 480, "bert_base_squad": 384, "bert_large_squad": 152, "resnet50": 1360},
    ("GH200-96GB", "tf32"): {"ssd": 272, "bert_base_squad": 208, "bert_large_squad": 80, "resnet50": 720},
    ("B200", "amp"): {"ssd": 1152, "bert_base_squad": 768, "bert_large_squad": 256, "resnet50": 3328},
    ("B200", "tf32"): {"ssd": 640, "bert_base_squad": 384, "bert_large_squad": 128, "resnet50": 1664},
}
# Hosts whose batch is not their GPU's: the "Test" GH200 96 GB host's config sources the 80 GB
# base file (H100 batches) where its sibling ran the 96 GB one; no run file of it confirms which
# it ran, so it is left out rather than guessed.
_HOSTS_LEFT_OUT = frozenset({"LambdaOD_1x_Test_1xGH200_96GB_192-222-56-184_v2"})


@dataclass(frozen=True)
class V2Host:
    name: str
    gpu: str      # TRAINING_GPUS key
    gpus: int     # GPUs the benchmark ran on


def parse_host(name: str) -> V2Host | None:
    """The GPU and GPU count of a v2 host name ("LambdaOD_2x_Texas_1xH100_80GB_SXM5_<ip>_v2": one
    H100 SXM5 of a 2-GPU machine); None for a host srift has no GPU for, and for Lambda's "_bk"
    copies of another host's results."""
    if name.endswith("_bk") or name in _HOSTS_LEFT_OUT:
        return None
    m = _HOST.search(name)
    if m is None:
        return None
    count, model, mem, form = m.groups()
    gpu = _GPU_OF_HOST.get((model, mem, form or ""))
    return None if gpu is None else V2Host(name, gpu, int(count))


# Note "v2 rows": v2's 1-GPU cells join Lambda's compute rows (srift.learn.datasets): a (GPU,
# model, precision, batch) v1 also ran (the H100s) becomes one more repeat of that row, the
# median of all; H200, GH200 and B200 are new rows of the same groups, so they anchor and are
# anchored by every v1 GPU. Anchored on the H100 SXM5 row, the models shipped before these rows
# (35ae413) put B200 23% and H200 9% too fast (signed median of 8 rows each; held out together,
# bench/accuracy.py compute_newest_gpus_out/generation): a newer GPU gains less of its
# datasheet's lead than the older GPUs' trend says. Multi-GPU hosts stay out of training, as
# v1's do.
def v2_rows(d: Path, gpus: int | None = 1) -> list[tuple[V2Host, str, str, float, float]]:
    """(host, precision, Lambda model name, per-GPU batch, throughput of the host in the model's
    unit) for every v2 cell with a known GPU and batch and a positive throughput, on hosts of
    `gpus` GPUs (None: all). Missing files give no rows: an older data folder has none."""
    out = []
    for precision, fname in V2_FILES.items():
        path = d / fname
        if not path.is_file():
            continue
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            for cells in reader:
                host = parse_host(cells[0])
                if host is None or (gpus is not None and host.gpus != gpus):
                    continue
                batches = PER_GPU_BATCH.get((host.gpu, precision), {})
                for model, value in zip(header[1:], cells[1:]):
                    try:
                        thr = float(value) if value.strip() else 0.0
                    except ValueError:
                        raise ValueError(f"{fname}: host {cells[0]!r}, column {model!r}: expected a throughput, "
                                         f"got {value!r}") from None
                    if not math.isfinite(thr):
                        raise ValueError(f"{fname}: host {cells[0]!r}, column {model!r}: expected a finite "
                                         f"throughput, got {value!r}")
                    if thr > 0 and model in batches:
                        out.append((host, precision, model, float(batches[model]), thr))
    return out
