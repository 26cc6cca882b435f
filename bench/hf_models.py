#!/usr/bin/env python3
"""Does srift profile the models users bring? Hugging Face models built from configs (no weight
downloads) and torch-only edge cases, each checked against torch itself.

Per model, one JSON line:

- ``profile``: ``srift.profile`` ran (on the CPU at small sizes; ``--meta`` also profiles real
  sizes on the meta device); ``error`` when it raised (a ValueError is how srift refuses).
- ``flops_vs_counter``: srift's forward+backward FLOPs over ``torch.utils.flop_counter.FlopCounterMode``'s
  count of the same forward+backward, with srift's CPU attention formulas and its routing of
  SDPA to the fused kernel a GPU runs (:class:`srift.flops.FusedAttention`): 1.0 means every FLOP
  was attributed to a layer, none twice. ``flops_vs_raw_counter``: the same over a plain
  FlopCounterMode (which counts CPU attention as 0 and the math path's 4-bmm backward).
- ``flops_vs_6nt``: for decoders, srift's FLOPs over 6 x non-embedding parameters x tokens
  (attention's FLOPs make it > 1, more so at long sequences).
- ``buckets_match_ddp``: the profile's buckets (names, bytes, order) equal those a real
  1-process gloo ``DistributedDataParallel`` reduces in steady state (after its rebuild).
- ``trainable_bytes_ok``: the profile's trainable parameter bytes equal the unique
  requires-grad parameters' bytes (tied counted once, frozen left out), and its buckets hold
  exactly those bytes.
- ``predict``: ``srift.predict`` at AMP on one p4d.24xlarge (8 A100, 8 samples per GPU) with no
  measurement: feasibility, memory, iteration time and (models with a token count) the compute
  time over 6 x N x tokens / (312 TFLOP/s x 0.4); meaningful for the real sizes (``--meta``),
  tiny CPU models are launch-bound.

Not a test: it asserts nothing. Needs ``transformers`` (optional; the torch-only cases run
without it). ~3-5 minutes on 2 CPU cores::

    python bench/hf_models.py [--meta] [--only gpt2,llama]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

import srift
from srift.buckets import torch_ddp_buckets
from srift.flops import FusedAttention, flop_formulas
from srift.profiler import _call  # how the profiler calls a model on its inputs

A100_PEAK = {"fp32": 19.5e12, "tf32": 156e12, "amp": 312e12}


# ---- the models ------------------------------------------------------------------------------------
# A case: build() -> dict(model, inputs, targets, loss_fn, tokens, decoder, optimizer)


def _hf(kind: str, real: bool) -> dict[str, Any]:
    import transformers as tf

    B = 2
    V = 1000 if not real else None

    def lm(cfg_cls, model_cls, small: dict, big: dict, seq: int, **extra):
        cfg = cfg_cls(**(big if real else small), **extra)
        model = model_cls(cfg)
        vocab = cfg.vocab_size
        ids = torch.randint(0, vocab, (B, seq))
        return dict(model=model, inputs={"input_ids": ids, "labels": ids}, tokens=B * seq, decoder=True)

    if kind == "gpt2":
        return lm(tf.GPT2Config, tf.GPT2LMHeadModel,
                  dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128),
                  dict(), 64 if not real else 1024)
    if kind == "llama":
        return lm(tf.LlamaConfig, tf.LlamaForCausalLM,
                  dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256),
                  dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                       num_key_value_heads=4, vocab_size=32000),  # TinyLlama-1.1B
                  64 if not real else 2048, attn_implementation="sdpa")
    if kind == "llama_gc":  # Hugging Face's activation checkpointing (torch.utils.checkpoint)
        case = _hf("llama", real)
        case["model"].gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return case
    if kind == "mistral":
        return lm(tf.MistralConfig, tf.MistralForCausalLM,
                  dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=1000, sliding_window=16, max_position_embeddings=256),
                  dict(sliding_window=4096),  # Mistral-7B
                  64 if not real else 4096, attn_implementation="sdpa")
    if kind == "qwen2":
        return lm(tf.Qwen2Config, tf.Qwen2ForCausalLM,
                  dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256,
                       tie_word_embeddings=True),
                  dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),  # Qwen2-0.5B
                  64 if not real else 2048, attn_implementation="sdpa")
    if kind == "bert":
        cfg = tf.BertConfig(**(dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                    vocab_size=1000) if not real else {}))
        model = tf.BertForMaskedLM(cfg)
        seq = 64 if not real else 512
        ids = torch.randint(0, cfg.vocab_size, (B, seq))
        labels = torch.full_like(ids, -100)
        labels[:, ::7] = ids[:, ::7]
        return dict(model=model, inputs={"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels},
                    tokens=B * seq, decoder=False)
    if kind == "t5":
        cfg = tf.T5Config(decoder_start_token_id=0, pad_token_id=0, **(dict(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4, vocab_size=1000)
                             if not real else dict(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8)))
        model = tf.T5ForConditionalGeneration(cfg)
        src, tgt = (64, 16) if not real else (512, 128)
        return dict(model=model, inputs={"input_ids": torch.randint(0, cfg.vocab_size, (B, src)),
                                         "labels": torch.randint(0, cfg.vocab_size, (B, tgt))},
                    tokens=B * (src + tgt), decoder=False)
    if kind == "vit":
        cfg = tf.ViTConfig(**(dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=128, num_labels=10)
                              if not real else dict(num_labels=1000)))
        model = tf.ViTForImageClassification(cfg)
        s = cfg.image_size
        return dict(model=model, inputs={"pixel_values": torch.randn(B, 3, s, s),
                                         "labels": torch.randint(0, cfg.num_labels, (B,))},
                    tokens=B * ((s // cfg.patch_size) ** 2 + 1), decoder=False)
    if kind == "whisper":
        cfg = tf.WhisperConfig(**(dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                       decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                       vocab_size=1000, num_mel_bins=80, max_source_positions=32,
                                       max_target_positions=64, decoder_start_token_id=1, pad_token_id=0)
                                  if not real else dict(d_model=768, encoder_layers=12, decoder_layers=12,
                                                        encoder_attention_heads=12, decoder_attention_heads=12,
                                                        encoder_ffn_dim=3072, decoder_ffn_dim=3072)))  # small
        model = tf.WhisperForConditionalGeneration(cfg)
        frames = 2 * cfg.max_source_positions
        tgt = 16 if not real else 128
        return dict(model=model, inputs={"input_features": torch.randn(B, cfg.num_mel_bins, frames),
                                         "labels": torch.randint(2, cfg.vocab_size, (B, tgt))},
                    tokens=B * (cfg.max_source_positions + tgt), decoder=False)
    if kind == "wav2vec2":
        cfg = tf.Wav2Vec2Config(**(dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=128, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                                        conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                        num_conv_pos_embedding_groups=4, vocab_size=32, mask_time_prob=0.0, layerdrop=0.0)
                                   if not real else dict(vocab_size=32, mask_time_prob=0.0, layerdrop=0.0)))
        model = tf.Wav2Vec2ForCTC(cfg)
        samples = 4000 if not real else 16000 * 10
        return dict(model=model, inputs={"input_values": torch.randn(B, samples),
                                         "labels": torch.randint(1, cfg.vocab_size, (B, 8))},
                    tokens=None, decoder=False)
    if kind == "clip":
        if real:
            cfg = tf.CLIPConfig()  # ViT-B/32
        else:
            cfg = tf.CLIPConfig(text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                 num_attention_heads=4, vocab_size=1000, max_position_embeddings=32),
                                vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                   num_attention_heads=4, image_size=32, patch_size=8),
                                projection_dim=32)
        model = tf.CLIPModel(cfg)
        s = cfg.vision_config.image_size
        return dict(model=model, inputs={"input_ids": torch.randint(0, cfg.text_config.vocab_size, (B, 16)),
                                         "pixel_values": torch.randn(B, 3, s, s), "return_loss": True},
                    tokens=None, decoder=False)
    raise KeyError(kind)


HF = ("gpt2", "bert", "t5", "vit", "llama", "llama_gc", "mistral", "qwen2", "whisper", "wav2vec2", "clip")


# torch-only edge cases
class TiedLM(nn.Module):
    def __init__(self, vocab=500, d=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.body = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.body(self.emb(x)))


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64))
        self.backbone.requires_grad_(False)
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        self.head[0].bias.requires_grad_(False)

    def forward(self, x):
        return self.head(self.backbone(x))


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 32)
        self.unused = nn.Linear(32, 32)
        self.b = nn.Linear(32, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class SparseEmb(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 32, sparse=True)
        self.bag = nn.EmbeddingBag(1000, 32, sparse=True, mode="sum")
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.cat([self.emb(x).mean(1), self.bag(x)], dim=1))


class ComplexBuffer(nn.Module):
    """A spectral layer: a complex buffer (FFT twiddles) and complex parameter-free math."""

    def __init__(self, n=32):
        super().__init__()
        k = torch.arange(n)
        self.register_buffer("twiddle", torch.exp(-2j * math.pi * k[:, None] * k[None, :] / n).to(torch.complex64))
        self.fc1 = nn.Linear(n, n)
        self.fc2 = nn.Linear(n, 10)

    def forward(self, x):
        h = self.fc1(x).to(torch.complex64) @ self.twiddle
        return self.fc2(h.abs())


class ChannelsLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool, d=64, n=3):
        super().__init__()
        self.reentrant = reentrant
        self.stem = nn.Linear(d, d)  # the blocks' input requires grad, as reentrant checkpointing needs
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=self.reentrant)
        return self.head(x)


class MHA(nn.Module):
    def __init__(self, need_weights: bool, d=64):
        super().__init__()
        self.need_weights = need_weights
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True, dropout=0.1)
        self.fc = nn.Linear(d, 10)

    def forward(self, x):
        h, _ = self.attn(x, x, x, need_weights=self.need_weights)
        return self.fc(h)


class DictLoss(nn.Module):
    def __init__(self, as_tuple=False):
        super().__init__()
        self.as_tuple = as_tuple
        self.fc = nn.Linear(32, 10)

    def forward(self, x, y):
        logits = self.fc(x)
        loss = nn.functional.cross_entropy(logits, y)
        return (loss, logits) if self.as_tuple else {"loss": loss, "logits": logits}


def _ce(out, y):
    return nn.functional.cross_entropy(out.flatten(0, -2) if out.dim() > 2 else out, y.flatten())


def _torch_case(kind: str) -> dict[str, Any]:
    B = 4
    if kind == "tied":
        x = torch.randint(0, 500, (B, 16))
        return dict(model=TiedLM(), inputs=x, targets=x, loss_fn=_ce)
    if kind == "frozen":
        return dict(model=Frozen(), inputs=torch.randn(B, 32), targets=torch.randint(0, 10, (B,)), loss_fn=_ce)
    if kind == "unused":
        return dict(model=Unused(), inputs=torch.randn(B, 32), targets=torch.randint(0, 10, (B,)), loss_fn=_ce,
                    find_unused=True)
    if kind == "sparse_embedding":
        return dict(model=SparseEmb(), inputs=torch.randint(0, 1000, (B, 8)), targets=torch.randint(0, 10, (B,)),
                    loss_fn=_ce, optimizer="sgd")
    if kind == "complex_buffer":
        return dict(model=ComplexBuffer(), inputs=torch.randn(B, 32), targets=torch.randint(0, 10, (B,)), loss_fn=_ce)
    if kind == "channels_last":
        return dict(model=ChannelsLast().to(memory_format=torch.channels_last),
                    inputs=torch.randn(B, 3, 16, 16).to(memory_format=torch.channels_last),
                    targets=torch.randint(0, 10, (B,)), loss_fn=_ce)
    if kind in ("checkpoint", "checkpoint_reentrant"):
        return dict(model=Checkpointed(kind.endswith("reentrant")), inputs=torch.randn(B, 64),
                    targets=torch.randint(0, 10, (B,)), loss_fn=_ce)
    if kind in ("mha", "mha_weights"):
        return dict(model=MHA(kind == "mha_weights"), inputs=torch.randn(B, 16, 64),
                    targets=torch.randint(0, 10, (B, 16)), loss_fn=_ce)
    if kind in ("dict_loss", "tuple_loss"):
        return dict(model=DictLoss(kind == "tuple_loss"),
                    inputs=(torch.randn(B, 32), torch.randint(0, 10, (B,))), targets=None,
                    loss_fn=(lambda out, _t: out[0]) if kind == "tuple_loss" else None)
    raise KeyError(kind)


TORCH = ("tied", "frozen", "unused", "sparse_embedding", "complex_buffer", "channels_last", "checkpoint",
         "checkpoint_reentrant", "mha", "mha_weights", "dict_loss", "tuple_loss")


# ---- the checks ------------------------------------------------------------------------------------
def _loss(case, out):
    if case.get("loss_fn") is not None:
        return case["loss_fn"](out, case.get("targets"))
    if isinstance(out, dict) or hasattr(out, "loss"):
        return out["loss"] if isinstance(out, dict) else out.loss
    return out


def _extra_formulas() -> dict[Any, Any]:
    """srift's additions to torch's formula table (the CPU fused attention kernels), in the
    shapes-only form FlopCounterMode's custom_mapping passes."""
    from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten

    def fwd(q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(q, k, v)

    def bwd(g, q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_backward_flop_count(g, q, k, v)

    table = {aten._scaled_dot_product_flash_attention_for_cpu: fwd,
             aten._scaled_dot_product_flash_attention_for_cpu_backward: bwd}
    assert set(table) == set(flop_formulas()) - set(flop_registry)
    return table


_EXTRA = _extra_formulas()


def _counter_flops(case, fused: bool) -> int:
    """FlopCounterMode's forward+backward FLOPs (``fused``: with srift's CPU attention formulas
    and SDPA routed to the fused kernel, what srift counts)."""
    model = case["model"]
    counter = FlopCounterMode(display=False, custom_mapping=_EXTRA if fused else None)
    with counter:
        with FusedAttention() if fused else contextlib.nullcontext():
            out = _call(model, case["inputs"])
            loss = _loss(case, out)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def _ddp_buckets(case, prof) -> bool:
    # DDP's defaults (bucket_cap_mb=None: a 1 MiB first bucket), as the profile models them
    theirs, _ = torch_ddp_buckets(case["model"], lambda ddp: _loss(case, _call(ddp, case["inputs"])),
                                  find_unused_parameters=prof.find_unused_parameters)
    ours = [(b.param_names, b.bytes) for b in prof.buckets]
    if ours != theirs and os.environ.get("HF_MODELS_DEBUG"):
        for (a, x), (b, y) in zip(ours, theirs):
            d = [i for i, (u, v) in enumerate(zip(a, b)) if u != v][:3]
            print("bucket differs:", x, y, len(a), len(b), [(a[i], b[i]) for i in d], file=sys.stderr)
    return ours == theirs


def _non_embedding_params(model) -> int:
    """Trainable parameters outside nn.Embedding modules, each once (a head tied to the
    embedding is counted: it runs a matmul)."""
    seen, n = set(), 0
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            continue
        for p in m.parameters(recurse=False):
            if id(p) not in seen and p.requires_grad:
                seen.add(id(p))
                n += p.numel()
    return n


def _predict(prof, tokens_per_sample, n_params, precision="amp", local_batch=8) -> dict[str, Any]:
    """One p4d.24xlarge (8 A100) at ``local_batch`` samples per GPU, no measurement; the
    compute time over 6 x N x tokens per GPU at 40% of the A100's peak."""
    try:
        pred = srift.predict(prof, "1x p4d.24xlarge", global_batch=8 * local_batch, precision=precision)
    except Exception as e:  # noqa: BLE001
        return {"predict_error": f"{type(e).__name__}: {e}"}
    out = {"predict_feasible": pred.feasible, "predict_iteration_s": pred.iteration_s,
           "predict_memory_gib": max((g.memory_gib for g in pred.groups), default=None)}
    if not pred.feasible:
        out["why_infeasible"] = pred.why_infeasible[:160]
    elif tokens_per_sample:
        ideal = 6 * n_params * tokens_per_sample * local_batch / (A100_PEAK[precision] * 0.4)
        out["predict_vs_6nt_at_40pct"] = pred.compute_s / ideal
    return out


def run_case(name: str, case: dict[str, Any], device: str, ddp: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"model": name, "device": device}
    model = case["model"]
    batch = (case["inputs"], case.get("targets"))
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prof = srift.profile(model, batch, loss_fn=case.get("loss_fn"), device=device, warmup=1, repeats=2,
                                 optimizer=case.get("optimizer", "adam"),
                                 find_unused_parameters=case.get("find_unused", False))
        row["warnings"] = list(dict.fromkeys(str(w.message)[:160] for w in caught))[:3]
    except Exception as e:  # noqa: BLE001
        row["profile"] = "error"
        row["error"] = f"{type(e).__name__}: {e}"[:400]
        if not isinstance(e, ValueError):
            row["traceback"] = traceback.format_exc().splitlines()[-4:]
        return row
    row["profile"] = "ok"
    row["profile_s"] = round(time.perf_counter() - t0, 2)
    B = prof.example_batch_size
    total = (prof.total_forward_flops() + prof.total_backward_flops()) * B
    row["flops"] = total
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    tb = sum(p.numel() * p.element_size() for p in trainable)
    row["trainable_bytes_ok"] = (prof.trainable_param_bytes == tb and sum(b.bytes for b in prof.buckets) == tb
                                 and prof.param_bytes == sum(p.numel() * p.element_size() for p in params))
    row["activation_mib_per_sample"] = round(prof.activation_bytes_per_sample / 2**20, 3)
    if device != "meta":
        try:
            fused = _counter_flops(case, True)
            raw = _counter_flops(case, False)
            row["flops_vs_counter"] = total / fused if fused else None
            row["flops_vs_raw_counter"] = total / raw if raw else None
        except Exception as e:  # noqa: BLE001
            row["counter_error"] = f"{type(e).__name__}: {e}"[:200]
        if ddp:
            try:
                row["buckets_match_ddp"] = _ddp_buckets(case, prof)
            except Exception as e:  # noqa: BLE001
                row["ddp_error"] = f"{type(e).__name__}: {e}"[:300]
    n = _non_embedding_params(model)
    tokens = case.get("tokens")
    if case.get("decoder") and tokens:
        row["flops_vs_6nt"] = total / (6 * n * tokens)
    row.update(_predict(prof, tokens / B if tokens else None, n))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--meta", action="store_true", help="also profile the HF models at real sizes on meta")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--no-ddp", action="store_true", help="skip the gloo DDP bucket check")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    torch.manual_seed(0)
    ddp = not args.no_ddp and dist.is_available()
    store = None
    if ddp:
        store = tempfile.mkdtemp()
        dist.init_process_group("gloo", init_method=f"file://{store}/pg", rank=0, world_size=1)
    try:
        import transformers  # noqa: F401
        have_hf = True
    except ImportError:
        have_hf = False
        print(json.dumps({"note": "transformers is not installed: Hugging Face models skipped"}))
    try:
        for name in TORCH:
            if not only or name in only:
                print(json.dumps(run_case(name, _torch_case(name), "cpu", ddp)), flush=True)
        for name in HF if have_hf else ():
            if only and name not in only:
                continue
            try:
                case = _hf(name, real=False)
            except Exception as e:  # noqa: BLE001
                print(json.dumps({"model": name, "build_error": f"{type(e).__name__}: {e}"[:300]}), flush=True)
                continue
            print(json.dumps(run_case(name, case, "cpu", ddp)), flush=True)
            if args.meta:
                try:
                    with torch.device("meta"):
                        big = _hf(name, real=True)
                except Exception as e:  # noqa: BLE001
                    print(json.dumps({"model": name + "_real", "build_error": f"{type(e).__name__}: {e}"[:300]}))
                    continue
                print(json.dumps(run_case(name + "_real", big, "meta", False)), flush=True)
    finally:
        if ddp:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
