"""Models users bring (torch-only reproductions of the structures in Hugging Face models and of
common training tricks): srift.profile's FLOPs equal FlopCounterMode's on the same forward and
backward, and what srift cannot do fails with a ValueError (or warns) naming what and why.
bench/hf_models.py runs the Hugging Face models themselves."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from srift.flops import FusedAttention
from srift.profiler import profile


@pytest.fixture(scope="module", autouse=True)
def _threads():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _counted(model, x, y, loss_fn) -> int:
    """FlopCounterMode's forward+backward FLOPs with srift's CPU attention formulas, SDPA run
    as the fused kernel (what srift counts)."""
    aten = torch.ops.aten
    extra = {
        aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *a, out_shape=None, **kw: sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda g, q, k, v, *a, out_shape=None, **kw: sdpa_backward_flop_count(g, q, k, v),
    }
    counter = FlopCounterMode(display=False, custom_mapping=extra)
    with counter:
        with FusedAttention():
            loss = loss_fn(model(x), y)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _rotate(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-b, a], dim=-1) * sin


class LlamaBlock(nn.Module):
    """RMSNorm, rotary embeddings, grouped-query SDPA (optionally a sliding-window mask, as
    Mistral's SDPA path passes it), SwiGLU."""

    def __init__(self, d=64, heads=4, kv_heads=2, window=None):
        super().__init__()
        self.h, self.kv, self.hd, self.window = heads, kv_heads, d // heads, window
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, 3 * d, bias=False), nn.Linear(3 * d, d, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        pos = torch.arange(s, device=x.device, dtype=x.dtype)
        freq = pos[:, None] / (10000 ** (torch.arange(0, self.hd, 2, device=x.device, dtype=x.dtype) / self.hd))
        cos, sin = torch.cat([freq.cos()] * 2, -1), torch.cat([freq.sin()] * 2, -1)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if self.window is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            i = torch.arange(s, device=x.device)
            mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)
            k, v = k.repeat_interleave(self.h // self.kv, 1), v.repeat_interleave(self.h // self.kv, 1)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyLM(nn.Module):
    def __init__(self, window=None, ckpt=None, vocab=300, d=64):
        super().__init__()
        self.ckpt = ckpt
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, window=window) for _ in range(2))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=self.ckpt == "reentrant") if self.ckpt else blk(x)
        return self.head(self.norm(x))


class MHA(nn.Module):
    def __init__(self, need_weights):
        super().__init__()
        self.need_weights = need_weights
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True, dropout=0.1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.attn(x, x, x, need_weights=self.need_weights)[0])


class Spectral(nn.Module):
    """A complex buffer (DFT matrix) and complex math between two linears."""

    def __init__(self, n=32):
        super().__init__()
        k = torch.arange(n)
        self.register_buffer("dft", torch.exp(-2j * math.pi * k[:, None] * k[None, :] / n).to(torch.complex64))
        self.fc1, self.fc2 = nn.Linear(n, n), nn.Linear(n, 10)

    def forward(self, x):
        return self.fc2((self.fc1(x).to(torch.complex64) @ self.dft).abs())


def _lm_loss(out, y):
    return F.cross_entropy(out.flatten(0, -2), y.flatten())


def _cases():
    ids = torch.randint(0, 300, (2, 24))
    cls = torch.randint(0, 10, (4,))
    convnet = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                            nn.Flatten(), nn.Linear(8, 10)).to(memory_format=torch.channels_last)
    return {
        "llama_gqa_tied": (lambda: TinyLM(), ids, ids, _lm_loss),
        "mistral_sliding_window": (lambda: TinyLM(window=8), ids, ids, _lm_loss),
        # non-reentrant checkpointing stops its recompute early: a block's last matmul is not re-run
        "checkpoint": (lambda: TinyLM(ckpt="non_reentrant"), ids, ids, _lm_loss),
        "checkpoint_reentrant": (lambda: TinyLM(ckpt="reentrant"), ids, ids, _lm_loss),
        "mha": (lambda: MHA(False), torch.randn(4, 8, 32), torch.randint(0, 10, (4, 8)), _lm_loss),
        "mha_weights": (lambda: MHA(True), torch.randn(4, 8, 32), torch.randint(0, 10, (4, 8)), _lm_loss),
        "complex_buffer": (lambda: Spectral(), torch.randn(4, 32), cls, F.cross_entropy),
        "channels_last": (lambda: convnet, torch.randn(4, 3, 8, 8).to(memory_format=torch.channels_last), cls,
                          F.cross_entropy),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_flops_equal_flop_counter_on_the_same_iteration(case):
    """Every FLOP of the forward and backward (recompute included) lands in one layer, once,
    on cpu and on meta alike."""
    make, x, y, loss_fn = _cases()[case]
    torch.manual_seed(0)
    model = make()
    counted = _counted(model, x, y, loss_fn)
    for device in ("meta", "cpu"):
        prof = profile(model, (x, y), loss_fn, device=device, warmup=0, repeats=1, batch_sizes=[x.shape[0]])
        total = (prof.total_forward_flops() + prof.total_backward_flops()) * x.shape[0]
        assert total == pytest.approx(counted, rel=1e-9), device
    assert counted > 0


def test_a_model_output_without_its_loss_names_the_missing_labels():
    """A Hugging Face model called without labels returns an output whose .loss is None: the
    error says so instead of claiming the output has no .loss."""

    @dataclasses.dataclass
    class Output:
        loss: torch.Tensor | None
        logits: torch.Tensor

    class HFLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, x, labels=None):
            logits = self.fc(x)
            return Output(F.cross_entropy(logits, labels) if labels is not None else None, logits)

    x, labels = torch.randn(4, 16), torch.randint(0, 4, (4,))
    with pytest.raises(ValueError, match=r"model output's loss \(Output.loss\) is None.*include labels"):
        profile(HFLike(), ({"x": x}, None), device="meta")

    class DictOut(HFLike):
        def forward(self, x, labels=None):
            return {"loss": None, "logits": self.fc(x)}

    with pytest.raises(ValueError, match=r"output's loss \(dict.loss\) is None"):
        profile(DictOut(), ({"x": x}, None), device="meta")
    assert profile(HFLike(), ({"x": x, "labels": labels}, None), device="meta").layers


def test_a_model_that_reads_tensor_values_on_meta_is_told_to_use_cpu():
    """Hugging Face BERT and wav2vec2 call .item() on their masks: on meta that fails, and the
    ValueError says why and what works (the CPU)."""

    class ReadsValues(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            if (x != 0).all().item():  # a mask check, as HF's _ignore_causal_mask_sdpa does
                x = x * 1
            return self.fc(x)

    batch = (torch.randn(4, 16), torch.randint(0, 4, (4,)))
    with pytest.raises(ValueError, match=r"(?s)forward failed in module '<root>'.*meta tensors.*profile it on cpu"):
        profile(ReadsValues(), batch, F.cross_entropy, device="meta")
    assert profile(ReadsValues(), batch, F.cross_entropy, device="cpu", warmup=0, repeats=1).layers
