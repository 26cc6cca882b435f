"""srift.profile: FLOPs (1 MAC = 2 FLOPs), layers, bytes, timings, meta analysis, errors."""
from __future__ import annotations

import dataclasses
import math
import threading
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from srift.profile_data import LAYER_KINDS, Profile
from srift.profiler import profile


@pytest.fixture(scope="module", autouse=True)
def _threads():
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # shared 2-core machine: one thread is faster and steadier
    yield
    torch.set_num_threads(old)


# ---- models ------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity  # the block's own op: a pseudo-layer
        return self.relu(out)


class ResNet50(nn.Module):
    """torchvision's ResNet-50 (v1.5) layout, 25,557,032 parameters."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, stages = 64, []
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers = []
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=512, d=64, layers=2, heads=4, ctx=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def _lm_loss(out, targets):
    return F.cross_entropy(out.flatten(0, 1), targets.flatten())


def _gpt_batch(b=4, t=32, vocab=512):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (b, t), generator=g), torch.randint(0, vocab, (b, t), generator=g)


# ---- FLOPs ---------------------------------------------------------------------------------

RESNET50_MACS = 4.11e9  # published: ~4.1 GMACs per 224x224 image (torchvision reports 4.09 GFLOPS=GMACs)


def test_resnet50_forward_flops_match_published_macs():
    """1 MAC = 2 FLOPs (FlopCounterMode's convention): 4.11 GMACs = 8.22 GFLOPs per image."""
    with torch.device("meta"):
        model = ResNet50()
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    x = torch.empty(2, 3, 224, 224, device="meta")
    y = torch.empty(2, dtype=torch.long, device="meta")
    prof = profile(model, (x, y), F.cross_entropy, device="meta")
    fwd = prof.total_forward_flops()
    assert fwd == pytest.approx(2 * RESNET50_MACS, rel=0.03)
    # backward: 2x forward except the first conv, which needs no input gradient
    assert 1.9 < prof.total_backward_flops() / fwd <= 2.0
    assert prof.timings is None and all(layer.forward_s is None for layer in prof.layers)
    # hierarchical attribution sums exactly to torch's own total (no double counting)
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        model(x)
    assert fwd * 2 == pytest.approx(counter.get_total_flops(), rel=1e-12)
    kinds = {layer.name: layer.kind for layer in prof.layers}
    assert kinds["conv1"] == "conv" and kinds["bn1"] == "norm" and kinds["maxpool"] == "pool"
    assert kinds["fc"] == "matmul" and kinds["layer1.0.relu"] == "elementwise"
    assert kinds["layer1.0"] == "elementwise"  # the residual add pseudo-layer
    names = [layer.name for layer in prof.layers]
    assert names.index("conv1") < names.index("layer1.0.conv1") < names.index("layer1.0") < names.index("fc")


def test_zoo_resnet50_flops():
    try:
        from srift.zoo import build
    except Exception as e:
        pytest.skip(f"srift.zoo not importable yet: {type(e).__name__}: {e}")
    model, batch, loss_fn = build("resnet50", batch_size=2, device="meta")
    prof = profile(model, batch, loss_fn, device="meta")
    assert prof.total_forward_flops() == pytest.approx(2 * RESNET50_MACS, rel=0.03)


def test_meta_and_cpu_profiles_agree_on_flops_bytes_and_structure():
    torch.manual_seed(0)
    model = TinyGPT()
    batch = _gpt_batch()
    cpu = profile(model, batch, _lm_loss, repeats=2, warmup=1)
    meta = profile(model, batch, _lm_loss, device="meta")
    assert meta.device == "meta" and cpu.device == "cpu"
    assert [(x.name, x.kind, x.pseudo) for x in meta.layers] == [(x.name, x.kind, x.pseudo) for x in cpu.layers]
    assert [(x.forward_flops, x.backward_flops, x.forward_bytes, x.param_bytes) for x in meta.layers] == [
        (x.forward_flops, x.backward_flops, x.forward_bytes, x.param_bytes) for x in cpu.layers
    ]
    assert meta.total_forward_flops() == cpu.total_forward_flops() > 0
    assert meta.activation_bytes_per_sample == cpu.activation_bytes_per_sample > 0
    assert [(b.param_names, b.bytes) for b in meta.buckets] == [(b.param_names, b.bytes) for b in cpu.buckets]
    # attention lives in the block's own pseudo-layer and is counted on CPU (torch counts 0 there)
    blk = next(x for x in cpu.layers if x.name == "blocks.0")
    t, d = 32, 64
    assert blk.pseudo and blk.kind == "attention"
    assert blk.forward_flops == 2 * (2 * t * t * d)  # QK^T and PV, 2 FLOPs per MAC, per sample
    assert blk.backward_flops == 2.5 * blk.forward_flops  # torch's fused-kernel convention (recompute)
    # tied head weight: counted once, by the embedding that registered it
    head = next(x for x in cpu.layers if x.name == "head")
    assert head.param_bytes == 0 and sum(x.param_bytes for x in cpu.layers) == cpu.param_bytes


def test_cpu_profile_timings_layers_and_buckets(tmp_path):
    torch.manual_seed(0)
    model = TinyGPT()
    x, y = _gpt_batch(b=4)
    before = {n: p.detach().clone() for n, p in model.state_dict().items()}
    model.eval()
    prof = profile(model, (x, y), _lm_loss, repeats=3, warmup=1, name="tiny-gpt", bucket_cap_mb=0.1,
                   first_bucket_mb=0.05)
    # the model is left as it was
    assert not model.training
    assert all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())

    assert prof.model == "tiny-gpt" and prof.example_batch_size == 4
    t = prof.timings
    assert t is not None and t.batch_sizes == [4, 2] and t.repeats == 3 and t.warmup == 1
    for i in range(2):
        assert 0 < t.forward_p10[i] <= t.forward_s[i] <= t.forward_p90[i]
        assert 0 < t.backward_p10[i] <= t.backward_s[i] <= t.backward_p90[i]
        assert t.iteration_s[i] >= t.forward_s[i]
    assert t.optimizer_s > 0
    assert all(layer.forward_s is not None and layer.forward_s >= 0 for layer in prof.layers)
    assert all(layer.backward_s is not None and layer.backward_s >= 0 for layer in prof.layers)
    assert sum(layer.backward_s for layer in prof.layers) > 0
    assert {layer.kind for layer in prof.layers} <= set(LAYER_KINDS)
    # several buckets, DDP order (last layers first), ready fractions non-decreasing in [0, 1]
    assert len(prof.buckets) >= 3
    assert prof.buckets[0].param_names[0].startswith("ln_f")
    assert prof.buckets[-1].param_names[-1] == "wte.weight"
    fr = [b.ready_fraction for b in prof.buckets]
    assert fr == sorted(fr) and 0 <= fr[0] and fr[-1] <= 1
    last = [b.last_layer for b in prof.buckets]
    assert last == sorted(last, reverse=True)
    assert sum(b.bytes for b in prof.buckets) == prof.trainable_param_bytes
    assert prof.optimizer_state_bytes == 2 * prof.trainable_param_bytes + 4 * len(list(model.parameters()))
    # it is a valid file
    assert Profile.load(prof.save(tmp_path / "p.json")) == prof


def test_loss_conventions_without_loss_fn():
    class Scalar(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, x, y):
            return F.cross_entropy(self.fc(x), y)

    class WithLoss(Scalar):
        def forward(self, x, y):
            out = type("Out", (), {})()
            out.loss = super().forward(x, y)
            return out

    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    for model in (Scalar(), WithLoss()):
        prof = profile(model, ((x, y), y), device="meta")  # tuple inputs: model(*inputs)
        assert prof.total_forward_flops() == 2 * 8 * 3
    prof = profile(nn.Linear(8, 3), (x, y), device="meta")  # tensor output: .sum()
    assert prof.total_forward_flops() == 2 * 8 * 3
    class DictOut(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, inp):
            return {"logits": self.fc(inp)}

    with pytest.raises(ValueError, match="loss_fn is None"):
        profile(DictOut(), ({"inp": x}, y), device="meta")  # dict inputs: model(**inputs)


def test_forward_failure_names_the_module():
    class Broken(nn.Module):
        def forward(self, x):
            return x @ torch.ones(3, 3)  # shape mismatch

    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), Broken()))
    with pytest.raises(ValueError, match=r"module '1\.1' \(Broken\).*RuntimeError") as err:
        profile(model, (torch.randn(2, 8), torch.zeros(2)), lambda o, t: o.sum(), device="meta")
    assert isinstance(err.value.__cause__, RuntimeError)
    # the model's hooks are gone: it still runs normally
    assert model[0](torch.randn(2, 8)).shape == (2, 8)
    assert not model[0]._forward_hooks and not model[0]._forward_pre_hooks


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"precision": "fp8"}, "precision"),
        ({"optimizer": "lion"}, "optimizer"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"batch_sizes": [4, 0]}, r"batch_sizes\[1\]"),
        ({"bucket_cap_mb": -1}, "bucket_cap_mb"),
        ({"name": 123}, "name: expected a non-empty string"),  # the profile could not be saved
        ({"name": " "}, "name: expected a non-empty string"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        profile(nn.Linear(4, 4), (torch.randn(2, 4), torch.zeros(2)), device="meta", **kwargs)


def test_bad_batches():
    with pytest.raises(ValueError, match="batch"):
        profile(nn.Linear(4, 4), torch.randn(2, 4), device="meta")
    with pytest.raises(ValueError, match="dimension 0 differs"):
        profile(nn.Linear(4, 4), (torch.randn(2, 4), torch.zeros(3)), device="meta")


@pytest.mark.parametrize("device", ["tpu", "mps", "cuda:99", 3.5] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_unavailable_device_says_which_are_available(device):
    """torch's own errors (RuntimeError for "tpu", AssertionError for CUDA on a CPU-only
    build) name nothing that would work; the check lists the devices there are."""
    batch = (torch.randn(2, 4), torch.zeros(2))
    with pytest.raises(ValueError, match=r"^device: .* is not available here; available: cpu, meta") as err:
        profile(nn.Linear(4, 4), batch, lambda o, t: o.sum(), device=device)
    assert str(device) in str(err.value)
    assert ("cuda" in str(err.value).split("available:")[1]) == torch.cuda.is_available()


def test_batch_sizes_slice_and_repeat_and_activation_slope():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(4, 16), torch.zeros(4)
    prof = profile(model, (x, y), lambda o, t: o.sum(), batch_sizes=[4, 8, 2], repeats=2, warmup=0)
    assert prof.timings.batch_sizes == [4, 8, 2]
    # saved activations per sample: ReLU output/mask and Linear inputs, fp32 — no weights
    assert 0 < prof.activation_bytes_per_sample < 4 * (16 + 32 + 32 + 32) * 2
    meta = profile(model, (x, y), lambda o, t: o.sum(), device="meta")
    assert meta.activation_bytes_per_sample == prof.activation_bytes_per_sample
    assert meta.layers[0].forward_bytes == 4 * (16 + 32)  # input + output per sample


def test_default_half_batch_the_model_cannot_train_at_is_dropped():
    # BatchNorm on a 1x1 map refuses a batch of 1: half of the batch of 2 the user passed
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(8), nn.Flatten(),
                          nn.Linear(8, 2))
    x, y = torch.randn(2, 3, 8, 8), torch.zeros(2, dtype=torch.long)
    with pytest.warns(UserWarning, match=r"batch_sizes: the model does not train at local batch 1 .*BatchNorm2d"):
        prof = profile(model, (x, y), nn.CrossEntropyLoss(), repeats=2, warmup=0)
    assert prof.timings.batch_sizes == [2]
    assert prof.activation_bytes_per_sample > 0
    with pytest.warns(UserWarning):
        meta = profile(model, (x, y), nn.CrossEntropyLoss(), device="meta")
    assert meta.activation_bytes_per_sample == prof.activation_bytes_per_sample
    # a batch the caller asked for is not dropped: the error names the module
    with pytest.raises(ValueError, match=r"module '2' \(BatchNorm2d\)"):
        profile(model, (x, y), nn.CrossEntropyLoss(), batch_sizes=[2, 1], repeats=2, warmup=0)


def test_mid_size_meta_analysis_of_zoo_model_is_fast():
    try:
        from srift.zoo import build
    except Exception as e:
        pytest.skip(f"srift.zoo not importable yet: {type(e).__name__}: {e}")
    model, batch, loss_fn = build("bert_base", batch_size=2, device="meta", seq_len=128)
    prof = profile(model, batch, loss_fn)  # model on meta -> meta analysis
    assert prof.device == "meta" and prof.timings is None
    assert prof.param_count == sum(p.numel() for p in model.parameters())
    kinds = {layer.kind for layer in prof.layers}
    assert {"attention", "matmul", "embedding", "norm"} <= kinds
    # roughly 2 * params * tokens forward FLOPs (+ attention), per sample of 128 tokens
    approx = 2 * 85e6 * 128
    assert 0.8 * approx < prof.total_forward_flops() < 1.5 * approx
    assert math.isclose(sum(b.bytes for b in prof.buckets), prof.trainable_param_bytes)


def test_recurrent_flops_agree_between_cpu_and_meta():
    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 32)
            self.lstm = nn.LSTM(32, 64, batch_first=True)
            self.fc = nn.Linear(64, 5)

        def forward(self, x):
            return self.fc(self.lstm(self.emb(x))[0][:, -1])

    torch.manual_seed(0)
    model = Rnn()
    batch = (torch.randint(0, 100, (4, 10)), torch.randint(0, 5, (4,)))
    cpu = profile(model, batch, F.cross_entropy, repeats=2, warmup=0)
    meta = profile(model, batch, F.cross_entropy, device="meta")
    lstm = next(x for x in cpu.layers if x.name == "lstm")
    assert lstm.kind == "recurrent"
    assert lstm.forward_flops == 10 * 2 * 4 * 64 * (32 + 64)  # steps x gates x (input + hidden) matmuls
    assert [(x.forward_flops, x.backward_flops) for x in cpu.layers] == [
        (x.forward_flops, x.backward_flops) for x in meta.layers
    ]


def test_progress_bar_counts_every_timed_iteration(monkeypatch):
    import srift.profiler as profiler_module

    seen: dict[str, int] = {}

    class Recorder:
        def __init__(self, total: int, name: str, enabled: bool) -> None:
            seen.update(total=total, done=0, enabled=int(enabled))

        def update(self, n: int) -> None:
            seen["done"] += n

        def close(self) -> None:
            seen["closed"] = 1

    monkeypatch.setattr(profiler_module, "_progress_bar", Recorder)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    batch = (torch.randn(4, 8), torch.randint(0, 2, (4,)))
    profile(model, batch, loss_fn=F.cross_entropy, warmup=1, repeats=2, progress=True, name="tiny")
    # two batch sizes x (1 warm-up + 2 timed) + 2 per-layer iterations
    assert seen == {"total": 8, "done": 8, "enabled": 1, "closed": 1}


def test_allreduce_dtype_scales_what_each_bucket_sends_and_round_trips():
    """Profile note "allreduce dtype": a comm hook's dtype halves the bytes of FP32 gradients
    (bf16 as fp16), leaves the buckets as DDP groups them, survives JSON, and a profile written
    before the field existed loads as sending gradients as they are."""
    from srift.profile_data import Profile

    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
    batch = (torch.randn(4, 64), torch.zeros(4, dtype=torch.long))
    plain = profile(model, batch, F.cross_entropy, device="meta")
    bf16 = profile(model, batch, F.cross_entropy, device="meta", allreduce_dtype="bf16")
    fp32 = profile(model, batch, F.cross_entropy, device="meta", allreduce_dtype="fp32")
    assert plain.allreduce_dtype is None and plain.gradient_bytes() == (64 * 256 + 256 + 256 * 8 + 8) * 4
    assert [b.bytes for b in bf16.buckets] == [b.bytes for b in plain.buckets]
    assert bf16.allreduce_bucket_bytes() == [b.bytes / 2 for b in plain.buckets]
    assert fp32.allreduce_bucket_bytes() == [float(b.bytes) for b in plain.buckets]
    back = Profile.from_json(bf16.to_json())
    assert back.allreduce_dtype == "bf16" and back.gradient_bytes() == plain.gradient_bytes() // 2
    old = plain.to_dict()
    del old["allreduce_dtype"]
    assert Profile.from_dict(old).allreduce_dtype is None
    bad = bf16.to_dict() | {"allreduce_dtype": "int8"}
    with pytest.raises(ValueError, match=r"\$\.allreduce_dtype"):
        Profile.from_dict(bad)
    with pytest.raises(ValueError, match="allreduce_dtype"):
        profile(model, batch, F.cross_entropy, device="meta", allreduce_dtype="fp8")
    bf16.allreduce_dtype = "fp8"  # set by hand after profiling: refused where it is used
    with pytest.raises(ValueError, match="allreduce_dtype: expected one of fp32, fp16, bf16 or None, got 'fp8'"):
        bf16.allreduce_bucket_bytes()


# ---- a user's own model: what the review of a new user's models found --------------------

class _Encoder(nn.Module):
    """nn.TransformerEncoderLayer with dropout: its self-attention reaches SDPA through
    F.multi_head_attention_forward (need_weights=False), with dropout_p > 0 in training."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=dropout, batch_first=True)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(1))


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_attention_is_profiled_as_the_fused_kernel_a_gpu_runs_on_cpu_and_meta(dropout):
    """The CPU flash kernel has no dropout, so SDPA with dropout_p > 0 took the math path on
    cpu (2.9x the activations of GPT-2's meta profile), and on meta the SDPA inside
    nn.MultiheadAttention was never rerouted. cpu and meta now agree, with or without dropout,
    on FLOPs, bytes and activation memory, and the score matrix is not stored."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 256, 64), torch.randint(0, 10, (4,))
    profiles = {dev: profile(_Encoder(dropout), (x, y), F.cross_entropy, device=dev, warmup=0, repeats=1)
                for dev in ("cpu", "meta")}
    cpu, meta = profiles["cpu"], profiles["meta"]
    assert cpu.total_forward_flops() == pytest.approx(meta.total_forward_flops(), rel=1e-9)
    assert cpu.total_backward_flops() == pytest.approx(meta.total_backward_flops(), rel=1e-9)
    assert cpu.total_forward_bytes() == pytest.approx(meta.total_forward_bytes(), rel=1e-9)
    assert cpu.activation_bytes_per_sample == pytest.approx(meta.activation_bytes_per_sample, rel=1e-9)
    # a stored 4-head 256x256 score matrix alone would be 1 MiB per sample
    assert meta.activation_bytes_per_sample < 1.2 * 2**20


def test_attention_rerouting_is_undone_after_threads_profile_at_once():
    """The SDPA inside nn.MultiheadAttention is rerouted by swapping a module global; two
    threads swapping it by hand could leave it swapped for the rest of the process."""
    import threading

    from srift.flops import _REAL_SDPA

    x, y = torch.randn(2, 64, 64), torch.randint(0, 10, (2,))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(3):
                profile(_Encoder(0.1), (x, y), F.cross_entropy, device="meta")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert F.scaled_dot_product_attention is _REAL_SDPA


def test_amp_bytes_are_in_the_models_dtype_on_every_device():
    """An AMP profile taken on a real device recorded autocast's half-size activations, which
    the engine halves again for AMP: twice the local batch was said to fit. The analysis pass
    now runs without autocast everywhere, as on meta."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    x, y = torch.randn(8, 256), torch.randint(0, 10, (8,))
    cpu = profile(model, (x, y), F.cross_entropy, device="cpu", precision="amp", warmup=0, repeats=1)
    meta = profile(model, (x, y), F.cross_entropy, device="meta", precision="amp")
    assert cpu.activation_bytes_per_sample == pytest.approx(meta.activation_bytes_per_sample, rel=1e-9)
    assert cpu.total_forward_bytes() == pytest.approx(meta.total_forward_bytes(), rel=1e-9)


class _WithUnused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(64, 32)
        self.unused = nn.Linear(2048, 2048)
        self.b = nn.Linear(32, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_parameters_unused_in_the_forward_are_named_and_find_unused_parameters_is_modelled():
    """DDP's default fails at the second iteration on parameters that get no gradient; srift
    warns, naming them. With find_unused_parameters=True DDP keeps registration order: the
    small first bucket holds the first-registered parameters (a.weight, a.bias, and by size the
    unused layer) and is reduced last, as torch 2.13's reducer does (6696 + ... bytes checked
    against a real gloo DDP in the review)."""
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    with pytest.warns(UserWarning, match=r"2 parameter\(s\) got no gradient.*unused\.weight, unused\.bias"):
        default = profile(_WithUnused(), (x, y), F.cross_entropy, device="meta")
    assert not default.find_unused_parameters
    found = profile(_WithUnused(), (x, y), F.cross_entropy, device="meta", find_unused_parameters=True)
    assert found.find_unused_parameters
    assert Profile.from_dict(found.to_dict()).find_unused_parameters
    sizes = [b.bytes for b in found.buckets]
    params = 64 * 32 + 32 + 2048 * 2048 + 2048 + 32 * 10 + 10
    assert sum(sizes) == params * 4
    # registration order, reversed: the last bucket is the first bucket DDP filled (a.*)
    assert found.buckets[-1].param_names[:2] == ["a.weight", "a.bias"]
    # DDP marks an unused parameter ready at the backward's first hook: it holds no bucket back,
    # so the buckets are ready as the used parameters' gradients arrive (not all at the end)
    fractions = [b.ready_flops_fraction for b in found.buckets]
    assert fractions == sorted(fractions) and fractions[0] < 1.0
    with pytest.raises(ValueError, match="find_unused_parameters: expected True or False"):
        profile(_WithUnused(), (x, y), F.cross_entropy, device="meta", find_unused_parameters="yes")


def test_bucket_ready_times_follow_the_order_the_backward_ran():
    """A parameter of the root module (no layer of its own) used at the start of the forward
    gets its gradient at the end of the backward. The engine read ready times from the layers'
    order, where the root sits after its children (and DeepSpeech2's LSTM directions pair up);
    the profile now records the backward-FLOP share in the order the backward ran, and the
    engine uses it."""
    from srift.catalog import Catalog
    from srift.engine import Engine

    class RootFirst(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(512, 512))
            self.body = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])

        def forward(self, x):
            return self.body(x @ self.scale)

    prof = profile(RootFirst(), (torch.randn(4, 512), torch.randn(4, 512)), F.mse_loss, device="meta",
                   bucket_cap_mb=1, first_bucket_mb=1)
    # backward matmuls: two per Linear (input and weight gradients), one for `scale` (x needs
    # none): 9 units, body.3 first, `scale` last; layer order charged the root's matmul to
    # the end of the list and put every body bucket a ninth late ([3/9, 5/9, 7/9, 1, 1])
    assert [b.param_names[-1] for b in prof.buckets] == [f"body.{i}.weight" for i in (3, 2, 1, 0)] + ["scale"]
    expected = [2 / 9, 4 / 9, 6 / 9, 8 / 9, 1.0]
    assert [b.ready_flops_fraction for b in prof.buckets] == pytest.approx(expected)
    assert Engine(prof, Catalog.default())._ready_fractions() == pytest.approx(expected)


def test_empty_huge_and_sparse_batches_are_refused_naming_the_field():
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    model = nn.Linear(64, 10)
    with pytest.raises(ValueError, match="dimension 0 is 0, an empty batch"):
        profile(model, (x[:0], y[:0]), F.cross_entropy, device="meta")
    with pytest.raises(ValueError, match=r"batch_sizes\[0\]: expected an integer in 1..16777216"):
        profile(model, (x, y), F.cross_entropy, device="meta", batch_sizes=[10**12])

    ids, labels = torch.randint(0, 1000, (8,)), torch.randint(0, 2, (8,))
    with pytest.raises(ValueError, match="optimizer: 'adam' cannot train the sparse gradients of e.weight"):
        profile(SparseEmbedding(), (ids, labels), F.cross_entropy, device="meta")


class SparseEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Embedding(1000, 16, sparse=True)
        self.fc = nn.Linear(16, 2)

    def forward(self, i):
        return self.fc(self.e(i))


def test_sparse_gradients_warn_that_nccl_cannot_allreduce_them():
    """DDP on NCCL (every GPU cluster predicted) fails on sparse gradients; with an optimizer
    that trains them the profile says so, naming the parameter, and models them as dense
    buckets."""
    ids, labels = torch.randint(0, 1000, (8,)), torch.randint(0, 2, (8,))
    with pytest.warns(UserWarning, match=r"e.weight: sparse gradients .* cannot be all-reduced by DDP on NCCL"):
        prof = profile(SparseEmbedding(), (ids, labels), F.cross_entropy, device="meta", optimizer="sgd")
    assert [b.bytes for b in prof.buckets if b.param_names == ["e.weight"]] == [1000 * 16 * 4]


def test_an_old_amp_profile_from_a_real_device_warns_on_load(tmp_path):
    """Profiles written before bytes_dtype counted autocast's bytes on cpu and cuda, which the
    engine halved again; such a file still loads, with a warning to profile again."""
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    prof = profile(model, (torch.randn(4, 64), torch.randint(0, 10, (4,))), F.cross_entropy, device="meta",
                   precision="amp")
    assert prof.bytes_dtype == "model"
    assert Profile.from_dict(prof.to_dict()).bytes_dtype == "model"
    old = prof.to_dict()
    del old["bytes_dtype"]
    old["device"] = "cpu"
    with pytest.warns(UserWarning, match="AMP profile taken on cpu before srift recorded bytes"):
        assert Profile.from_dict(old).bytes_dtype is None


# ---- inputs in a dataclass ------------------------------------------------------------------


@dataclasses.dataclass
class _Batch:
    tokens: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor = dataclasses.field(init=False)  # recomputed by __post_init__

    def __post_init__(self):
        self.lengths = self.mask.sum(1)


class _BatchNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.l1 = nn.Linear(32, 128)
        self.l2 = nn.Linear(128, 10)

    def forward(self, b: _Batch):
        h = (self.emb(b.tokens) * b.mask.unsqueeze(-1)).sum(1) / b.lengths.unsqueeze(-1)
        return self.l2(torch.relu(self.l1(h)))


class _TupleNet(_BatchNet):
    def forward(self, tokens, mask):
        return super().forward(_Batch(tokens, mask))


def _batch_parts(b=16):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 100, (b, 12), generator=g), torch.ones(b, 12), torch.randint(0, 10, (b,), generator=g)


def test_inputs_in_a_dataclass_are_sliced_for_the_half_batch():
    """The batch size was read from inside a dataclass, but the dataclass was not sliced: the
    "batch 8" pass ran all 16 samples again, so activations came out as 0 bytes per sample and
    batch 8's timings were batch 16's. Dataclasses (also nested in a tuple, and with a field
    __post_init__ computes) are now rebuilt with their tensors resized, as tuples are."""
    tokens, mask, y = _batch_parts()
    seen: list[int] = []

    class Recording(_BatchNet):
        def forward(self, b):
            seen.append(b.tokens.shape[0])
            assert b.mask.shape[0] == b.lengths.shape[0] == b.tokens.shape[0]
            return super().forward(b)

    as_tuple = profile(_TupleNet(), ((tokens, mask), y), F.cross_entropy, device="meta")
    assert as_tuple.activation_bytes_per_sample > 0
    for inputs, make in ((_Batch(tokens, mask), Recording), ((_Batch(tokens, mask),), Recording)):
        seen.clear()
        prof = profile(make(), (inputs, y), F.cross_entropy, device="meta")
        assert seen == [16, 8]
        assert prof.activation_bytes_per_sample == as_tuple.activation_bytes_per_sample
        assert prof.total_forward_flops() == as_tuple.total_forward_flops()
    seen.clear()
    timed = profile(Recording(), (_Batch(tokens, mask), y), F.cross_entropy, warmup=0, repeats=1)
    assert timed.timings.batch_sizes == [16, 8] and set(seen) == {16, 8} and seen.count(8) == 2
    assert timed.activation_bytes_per_sample == as_tuple.activation_bytes_per_sample
    # larger batches repeat the dataclass's tensors too
    seen.clear()
    profile(Recording(), (_Batch(tokens, mask), y), F.cross_entropy, device="meta", batch_sizes=[16, 40])
    assert seen == [16, 40]


def test_inputs_srift_cannot_resize_are_refused_naming_the_type():
    """Tensors held as attributes of a plain object are found (the batch size is read from
    them) but cannot be rebuilt: resizing them is refused, never timed as the full batch."""
    tokens, mask, y = _batch_parts()

    class Holder:
        def __init__(self, tokens, mask):
            self.tokens, self.mask = tokens, mask
            self.lengths = mask.sum(1)

    with pytest.raises(ValueError, match=r"batch: cannot resize inputs of type Holder from batch 16 to 8: tensors "
                                         r"of shape \(16, 12\).*batch_sizes=\[16\]"):
        profile(_BatchNet(), (Holder(tokens, mask), y), F.cross_entropy, warmup=0, repeats=1)
    prof = profile(_BatchNet(), (Holder(tokens, mask), y), F.cross_entropy, batch_sizes=[16], warmup=0, repeats=1)
    assert prof.timings.batch_sizes == [16] and prof.activation_bytes_per_sample > 0
    # nor can they be moved to another device
    with pytest.raises(ValueError, match=r"batch: cannot move a tensor of shape \(16, 12\) on cpu to meta"):
        profile(_BatchNet(), (Holder(tokens, mask), y), F.cross_entropy, device="meta", batch_sizes=[16])


# ---- modules srift cannot hook or copy ------------------------------------------------------


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(32, 64)
        self.l2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_scripted_model_is_refused_saying_to_pass_the_eager_one(device):
    """torch.jit.script'ed modules take no hooks: register_forward_pre_hook raised a RuntimeError
    (a traceback from `srift profile`)."""
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    with pytest.raises(ValueError, match=r"^model: it is a TorchScript module \(torch.jit.script\).*profile the "
                                         "eager nn.Module"):
        profile(torch.jit.script(_Mlp()), (x, y), F.cross_entropy, device=device)

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.jit.script(_Mlp())

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(ValueError, match=r"^model: submodule 'inner' is a TorchScript module"):
        profile(Outer(), (x, y), F.cross_entropy, device=device)
    traced = torch.jit.trace(_Mlp(), x)
    if device == "cpu":
        assert profile(traced, (x, y), F.cross_entropy, warmup=0, repeats=1).param_count == 32 * 64 + 64 + 64 * 10 + 10
    else:  # a deepcopy of it is a scripted module, its weights in TorchScript
        with pytest.raises(ValueError, match=r"^device: a traced TorchScript module \(torch.jit.trace\) cannot be "
                                             "copied to meta; profile it on cpu"):
            profile(traced, (x, y), F.cross_entropy, device=device)


class _Locked(_Mlp):
    def __init__(self) -> None:
        super().__init__()
        self._stats_lock = threading.Lock()  # deepcopy cannot pickle it
        self.cache = {"scale": torch.ones(1), "lock": threading.Lock()}

    def forward(self, x):
        return super().forward(x) * self.cache["scale"]


def _old_weight_norm() -> nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, still common (WaveNet, TCN, wav2vec)
        model = nn.Sequential(nn.utils.weight_norm(nn.Linear(32, 64)), nn.ReLU(),
                              nn.utils.spectral_norm(nn.Linear(64, 10)))
    model(torch.randn(2, 32))  # leaves its computed (non-leaf) weights behind, as training does
    return model


@pytest.mark.parametrize("make", [_old_weight_norm, _Locked])
def test_models_deepcopy_refuses_profile_on_meta_as_on_cpu(make):
    """--device meta deep-copied the model: the weight old-style weight_norm/spectral_norm
    computes (not a graph leaf) and a threading.Lock made it a traceback. Every tensor a
    module holds now becomes meta and what cannot be copied is shared; the model is untouched."""
    torch.manual_seed(0)
    model = make()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
    meta = profile(model, (x, y), F.cross_entropy, device="meta")
    cpu = profile(model, (x, y), F.cross_entropy, device="cpu", warmup=0, repeats=1)
    assert meta.total_forward_flops() == cpu.total_forward_flops() > 0
    assert meta.total_backward_flops() == cpu.total_backward_flops()
    assert meta.activation_bytes_per_sample == cpu.activation_bytes_per_sample
    assert [b.param_names for b in meta.buckets] == [b.param_names for b in cpu.buckets]
    assert all(t.device.type == "cpu" for t in model.state_dict().values())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_model_that_cannot_be_copied_to_meta_says_what_to_do(monkeypatch):
    import copy

    real = copy.deepcopy

    def refusing(obj, memo=None):
        if isinstance(obj, nn.Module):
            raise TypeError("cannot pickle 'Handle' object")
        return real(obj, memo)

    monkeypatch.setattr(copy, "deepcopy", refusing)
    with pytest.raises(ValueError, match=r"^device: the model \(_Mlp\) cannot be copied to meta for analysis "
                                         r"\(TypeError: cannot pickle 'Handle' object\); build it on the meta device"):
        profile(_Mlp(), (torch.randn(4, 32), torch.randint(0, 10, (4,))), F.cross_entropy, device="meta")


# ---- precision="amp": a model that runs only under autocast -------------------------------


class _Codebook(nn.Module):
    """proj(x) @ codebook.t() with a half-precision codebook: it trains under torch.autocast
    (autocast casts both operands), not without."""

    def __init__(self, codebook_dtype: torch.dtype) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 64)
        self.register_buffer("codebook", torch.randn(100, 64).to(codebook_dtype))

    def forward(self, x):
        return self.proj(x) @ self.codebook.t()


def test_a_model_that_runs_only_under_autocast_profiles_with_amp():
    """The analysis pass runs without autocast so bytes are the model dtype's; it refused
    such a model ("expected m1 and m2 to have the same dtype"). It is now analysed under
    autocast, its bf16 tensors counted at fp32 size: the same FLOPs and bytes as the same
    model with an fp32 codebook, which runs either way."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 32), torch.randint(0, 100, (8,))

    def loss(out, t):
        return F.cross_entropy(out.float(), t)

    with pytest.raises(ValueError, match="forward failed in module '<root>'"):
        profile(_Codebook(torch.bfloat16), (x, y), loss, warmup=0, repeats=1)  # fp32 does not run it
    amp = profile(_Codebook(torch.bfloat16), (x, y), loss, precision="amp", warmup=0, repeats=1)
    reference = profile(_Codebook(torch.float32), (x, y), loss, precision="amp", warmup=0, repeats=1)
    assert amp.timings is not None and amp.bytes_dtype == "model"
    assert amp.total_forward_flops() == reference.total_forward_flops() > 0
    assert amp.total_backward_flops() == reference.total_backward_flops()
    assert amp.activation_bytes_per_sample == reference.activation_bytes_per_sample > 0
    assert amp.total_forward_bytes() == reference.total_forward_bytes()


# ---- smaller findings -----------------------------------------------------------------------


class _Gqa(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(64, 64)
        self.kv = nn.Linear(64, 16)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 8, 8).transpose(1, 2)
        kv = self.kv(x).view(b, t, 2, 8).transpose(1, 2)
        return F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True).transpose(1, 2).flatten(2)


def test_grouped_query_attention_counts_the_same_on_cpu_and_meta():
    """SDPA with enable_gqa ran the fused kernel on cpu and the math path on meta (6% fewer
    backward FLOPs, 11% more activations); both now run the fused kernel's formulas."""
    x = torch.randn(4, 32, 64)
    cpu, meta = (profile(_Gqa(), (x, None), lambda o, _t: o.pow(2).mean(), device=d, warmup=0, repeats=1)
                 for d in ("cpu", "meta"))
    assert cpu.total_forward_flops() == meta.total_forward_flops()
    assert cpu.total_backward_flops() == meta.total_backward_flops()
    assert cpu.activation_bytes_per_sample == meta.activation_bytes_per_sample
    # the attention itself: 2 bmms forward, 5 backward (fused recompute), 8 query heads
    attention = 2 * 2 * 8 * 32 * 32 * 8
    linears = 2 * 32 * (64 * 64 + 64 * 16)
    assert meta.total_forward_flops() == linears + attention
    assert meta.total_backward_flops() == linears + 2.5 * attention  # x needs no gradient


def test_parametrized_weights_count_in_their_layers_param_bytes():
    """torch.nn.utils.parametrizations keep a weight under l1.parametrizations.weight.original*:
    a module that is no layer, so the roofline's weight reads left those bytes out."""
    from torch.nn.utils import parametrizations

    model = nn.Sequential(parametrizations.weight_norm(nn.Linear(32, 64)), nn.ReLU(),
                          parametrizations.spectral_norm(nn.Linear(64, 10)))
    prof = profile(model, (torch.randn(8, 32), torch.randint(0, 10, (8,))), F.cross_entropy, device="meta")
    by_name = {layer.name: layer.param_bytes for layer in prof.layers}
    assert by_name["0"] == (64 * 32 + 64 + 64) * 4 and by_name["2"] == (10 * 64 + 10) * 4
    assert sum(by_name.values()) == prof.param_bytes


def test_bucket_caps_outside_the_profile_schemas_bounds_are_refused():
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    for label, value in (("bucket_cap_mb", 1e12), ("first_bucket_mb", 1e-9), ("bucket_cap_mb", math.inf)):
        with pytest.raises(ValueError, match=rf"^{label}: expected a number of MiB in \[1e-06, 1e\+09\]"):
            profile(_Mlp(), (x, y), F.cross_entropy, device="meta", **{label: value})
